"""memcached over UDP without an engine: codecs, text subset, frames, client (docs/frontend.md)."""

from .client import MatchReply, MemcacheError, MemcacheTimeout, MemcacheUDPClient
from .codec import Opcode, Request, Response, Status

__all__ = ["MatchReply", "MemcacheError", "MemcacheTimeout", "MemcacheUDPClient", "Opcode",
           "Request", "Response", "Status"]
