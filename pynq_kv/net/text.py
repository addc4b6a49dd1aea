"""The memcached text subset over UDP: get / set / delete / version (docs/frontend.md §6).

Parsing here is syntax only (lines, tokens, numbers, data blocks); the limits that depend on the
engine (key and value lengths) and the engine results are applied by the server, so the reply
for each case is decided in one place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Union

END = b"END\r\n"
STORED = b"STORED\r\n"
DELETED = b"DELETED\r\n"
NOT_FOUND = b"NOT_FOUND\r\n"
R_ERROR = b"ERROR\r\n"
R_BADFMT = b"CLIENT_ERROR bad command line format\r\n"
R_DELUSAGE = b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n"
R_FLAGS = b"CLIENT_ERROR nonzero flags or exptime not supported\r\n"
R_BADCHUNK = b"CLIENT_ERROR bad data chunk\r\n"
R_TOOLARGE = b"SERVER_ERROR object too large for cache\r\n"
R_NOMEM = b"SERVER_ERROR out of memory storing object\r\n"
R_BUDGET = b"SERVER_ERROR reply exceeds UDP budget; use TCP\r\n"  # frontend.md §10
ERROR_PREFIXES = (b"ERROR\r\n", b"CLIENT_ERROR ", b"SERVER_ERROR ")

_UNSIGNED = re.compile(rb"[0-9]{1,10}")
_SIGNED = re.compile(rb"-?[0-9]{1,10}")


@dataclass(frozen=True)
class TextGet:
    keys: tuple[bytes, ...]


@dataclass(frozen=True)
class TextSet:
    """A set line with its data block; chunk_ok is False when the block lacks its \\r\\n."""

    key: bytes
    flags: int
    exptime: int
    data: bytes
    chunk_ok: bool
    noreply: bool


@dataclass(frozen=True)
class TextDelete:
    key: bytes
    noreply: bool


@dataclass(frozen=True)
class TextVersion:
    pass


@dataclass(frozen=True)
class TextReply:
    """A line answered by its syntax alone (ERROR, bad command line format, delete usage)."""

    reply: bytes


TextCommand = Union[TextGet, TextSet, TextDelete, TextVersion, TextReply]


def _set_command(tokens: list[bytes], body: bytes, at: int) -> tuple[TextCommand, int] | None:
    """The set command whose line ended just before at, and where the next line starts.

    None when its data block is not complete in body (the datagram is cut there).
    """
    key, flags, exptime, nbytes = tokens[1:5]
    if not (_UNSIGNED.fullmatch(flags) and _SIGNED.fullmatch(exptime)
            and _UNSIGNED.fullmatch(nbytes)):
        return TextReply(R_BADFMT), at
    size = int(nbytes)
    if len(body) - at < size + 2:
        return None
    block = body[at:at + size + 2]
    noreply = len(tokens) == 6 and tokens[5] == b"noreply"
    return TextSet(key, int(flags), int(exptime), block[:size], block[size:] == b"\r\n",
                   noreply), at + size + 2


def _delete_command(tokens: list[bytes]) -> TextCommand:
    extra = tokens[2:]
    if (not extra or extra == [b"0"] or extra == [b"noreply"]
            or extra == [b"0", b"noreply"]):
        return TextDelete(tokens[1], extra[-1:] == [b"noreply"])
    return TextReply(R_DELUSAGE)


def parse_text(body: bytes) -> tuple[list[TextCommand], bool]:
    """The commands of a text body in order, and whether the body was cut at an incomplete one."""
    commands: list[TextCommand] = []
    at = 0
    while at < len(body):
        newline = body.find(b"\n", at)
        if newline < 0:
            return commands, True
        line = body[at:newline]
        if line.endswith(b"\r"):
            line = line[:-1]
        at = newline + 1
        tokens = [token for token in line.split(b" ") if token]
        name = tokens[0] if tokens else b""
        if name == b"get" and len(tokens) >= 2:
            commands.append(TextGet(tuple(tokens[1:])))
        elif name == b"set" and len(tokens) in (5, 6):
            parsed = _set_command(tokens, body, at)
            if parsed is None:
                return commands, True
            command, at = parsed
            commands.append(command)
        elif name == b"delete" and 2 <= len(tokens) <= 4:
            commands.append(_delete_command(tokens))
        elif name == b"version" and len(tokens) == 1:
            commands.append(TextVersion())
        else:
            commands.append(TextReply(R_ERROR))
    return commands, False


def value_unit(key: bytes, data: bytes) -> bytes:
    """One get hit: the VALUE line (flags always 0) and its data block."""
    return b"VALUE %s 0 %d\r\n%s\r\n" % (key, len(data), data)


def version_reply(version: bytes) -> bytes:
    return b"VERSION " + version + b"\r\n"


def is_error(reply: bytes) -> bool:
    return reply.startswith(ERROR_PREFIXES)
