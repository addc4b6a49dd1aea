"""The RESP server: asyncio over TCP, per-connection state, and batched dispatch to the engine.

Commands are not run as they are parsed. Every connection parses what it received into a
shared queue and the first one schedules a *tick* (loop.call_soon); the tick runs what was
queued during that event-loop iteration, from all clients, in arrival order, with the batching
both servers share (serve/batch.py: plan, run, render). Consecutive GETs, MGETs and EXISTS
(from any clients) are planned into one run and become one engine.get_batch, consecutive plain
SETs one engine.set_batch: the engine contract (docs/engine.md §7) says a batch means the same
as its operations one after another, so this is exactly sequential execution, at batch cost —
the way hardware wants work (one request per clock), and what lets a Python server keep up.
Any other command first flushes the pipeline, so each client's replies stay in order. Each
client's replies of a tick go out in one transport.write.

No client can make a tick long (docs/resp.md, "What bounds a tick"): a tick runs at most
tick_commands of one client (the rest stay queued, in order, for the next tick, and the client
is not read from meanwhile), and at most tick_bytes of input are parsed per tick, all clients
together (a longer read is held and parsed in later ticks, clients in turn; reads of up to
SMALL_READ bytes are parsed at once).

Latency (server.latency, /metrics' pynq_kv_frontend_request_duration_seconds{frontend="resp"}):
each received chunk is stamped once when data_received queues its commands (the time.monotonic()
it reads anyway for the idle timeout); once the tick's replies have all been handed to the
kernel (transport.write returned), one more clock read, and each chunk's commands are observed
together, weight = how many of them ran. So it is the server side
of a request: from the loop reading it off the socket to its reply leaving in a write — not the
kernel's or the network's share of a client's round trip.

Limits that keep the server alive: max_clients (then "-ERR max number of clients reached"),
max_bulk_len (a longer declared bulk is Redis' "invalid bulk length" protocol error),
max_query_buffer (a client holding more unparsed input is disconnected, as Redis does at
client-query-buffer-limit), output_high_water (a client that does not read its replies is not
read from until it does), idle_timeout (Redis' `timeout`) and command_timeout (a command begun
but not completed in that time closes the connection: half-written requests cannot pin
buffers forever). Before AUTH, when requirepass is set, Redis' unauthenticated limits apply
(at most 10 arguments, bulks of at most 16 KiB) and commands are parsed one at a time.

All engine calls happen on the event-loop thread; the engine is always taken from
appliance.engine at the start of a tick (the admin service may reload it between ticks).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np

from ...errors import KVError
from . import errors as E
from ...keys import int_rows, tagged_rows
from ...latency import LatencyRecorder
from ..accept import Listener, LogLimiter
from ...limits import Limits
from ...redislink import EARLY_WRITE
from ..batch import Pipeline
from .commands.base import (BATCH_GET, BATCH_MGET, BATCH_MSET, BATCH_SET, GET_BLOCK, MSET_BLOCK,
                            SET_BLOCK, key_error, lookup, value_in)
from .commands.table import build_table
from .forward import Forwarder, Slot
from .protocol import BULK_HEADERS, PONG, ErrorReply, Raw, RequestParser, bulk, encode, fast_tables

log = logging.getLogger("pynq_kv.serve.resp")

_FULL = 3  # SetStatus.FULL as a plain int
# The kinds of run: get_batch (GET, MGET, EXISTS), set_batch (SET), and with a host tier MSETs
# (their keys leave the engine, the MSETs go to Redis together: forward.py)
_READ, _WRITE, _MSETS = 1, 2, 3
_OK = b"+OK\r\n"
# A read this short is parsed at once even past the tick's parse budget (RespConfig.tick_bytes):
# it costs little, and a client sending a command now and then (a health check's PING) never
# waits behind the input held from clients that send a lot.
SMALL_READ = 4096
# Arguments of closed clients' partial commands freed per tick: a client gone with a command of
# 900,000 arguments pending would otherwise cost ~10 ms to free at once, 20 of them 200 ms.
FREE_PER_TICK = 100_000
_CRLF = b"\r\n"


@dataclass
class RespConfig:
    """Settings of the RESP front-end (`pynq-kv serve` fills them from its options)."""

    requirepass: Optional[Union[str, bytes]] = None
    max_clients: int = 10000
    max_bulk_len: int = 1024 * 1024  # keys/values are tens of bytes; 1 MiB leaves room for tools
    max_query_buffer: int = 16 * 1024 * 1024  # unparsed input + a partial command, per client
    maxmemory_clients: int = 256 * 1024 * 1024  # the same, summed over all clients; 0 = no limit
    output_high_water: int = 1024 * 1024  # unsent replies above which a client is not read
    idle_timeout: float = 0.0  # seconds without input before a client is closed; 0 = never
    command_timeout: float = 60.0  # seconds a command may stay half-received; 0 = forever
    batching: bool = True  # fold runs of GET/MGET/EXISTS and SET into engine batches
    tick_commands: int = 1024  # commands of one client run per tick; the rest wait a tick
    tick_bytes: int = 128 * 1024  # input parsed per tick, all clients together; the rest waits
    backlog: int = 511
    redis_version: str = "7.0.0"  # what HELLO and INFO report: the Redis protocol level served


class _Failed:
    """What an engine batch raised: every command of its run answers an engine error."""

    __slots__ = ("exc",)

    def __init__(self, exc: Exception) -> None:
        self.exc = exc


class Connection(asyncio.Protocol):
    """One client: its parser, authentication, protocol version, name and pending replies."""

    def __init__(self, server: "RespServer") -> None:
        self.srv = server
        self.transport: Any = None
        self.id = 0
        self.parser = RequestParser(server.config.max_bulk_len, server.fast_tables)
        self.out: list[bytes] = []
        self.resp3 = False
        self.nil = b"$-1\r\n"
        self.authenticated = server.requirepass is None
        self.throttled = not self.authenticated  # before AUTH: one command at a time
        self.parser.unauth = self.throttled
        self.awaiting = False  # a throttled client's command is queued, not yet run
        self.name: Optional[bytes] = None
        self.lib_name = self.lib_ver = b""
        self.created = self.last_active = time.monotonic()
        self.partial_since = 0.0
        self.last_cmd = "NULL"
        self.touched = False
        self.closing = False  # close once this tick's replies are written
        self.eof = False
        self.lost = False
        self.rejected = False
        self.error_queued = False
        self.mem = 0  # what this client counts in server.client_memory (buffered + held)
        self.held = b""  # input received but not parsed yet: the tick's parse budget was spent
        self.held_since = 0.0
        self.deferred = False  # commands of this client wait in the queue for the next tick
        self.share_left = 0  # commands of its tick_commands share it may still run this tick
        self.write_paused = False  # its unsent replies are over output_high_water
        # With a host tier (forward.py): replies Redis has not given yet wait in `out` as Slots.
        self.waiting = 0  # Slots in out not answered yet
        self.has_slots = False  # out may hold Slots (answered or not)
        self.ready_queued = False  # in server._ready: replies came between ticks
        self.finish = False  # close once every reply is written (EOF, QUIT, its Redis link lost)
        self.link: Any = None  # its own connection to Redis, once it needs one
        # Its requests to Redis not answered yet, all on one connection (inflight_link); a
        # request for another connection waits in held_sends until they are (forward.py).
        self.inflight = 0
        self.inflight_link: Any = None
        self.held_sends: deque = deque()
        self.raw = False  # subscribed or monitoring: Redis' bytes are relayed unframed
        self.multi = False
        self.multi_written: Any = None  # what the queued commands of its MULTI may change
        self.reply_off = self.reply_skip = False  # CLIENT REPLY OFF / SKIP

    # -- asyncio.Protocol ----------------------------------------------------------------------
    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        srv = self.srv
        srv.total_connections += 1
        if len(srv.conns) >= srv.config.max_clients:
            srv.rejected_connections += 1
            self.rejected = self.closing = True
            transport.write(E.error_reply(E.MAX_CLIENTS))
            transport.write_eof()  # the reply, then FIN; unread input would turn close into RST
            srv.loop.call_later(1.0, transport.abort)
            return
        srv.last_id += 1
        self.id = srv.last_id
        srv.conns[self.id] = self
        transport.set_write_buffer_limits(high=srv.config.output_high_water)

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        self.lost = self.closing = True
        self.srv.conns.pop(self.id, None)
        if self.link is not None:
            self.link.close()
        self.release()
        self.held = b""
        self.srv.free_later(self.parser.discard())

    def pause_writing(self) -> None:
        self.write_paused = True
        self.update_reading()

    def resume_writing(self) -> None:
        self.write_paused = False
        self.update_reading()

    def update_reading(self) -> None:
        """Read from this client only while it reads its replies, has no input held for want of
        parse budget and no commands waiting for a later tick: what one client has sent but not
        been served stays bounded, whatever it sends."""
        if self.closing or self.error_queued:
            return
        if self.write_paused or self.held or self.deferred:
            self.transport.pause_reading()
        else:
            self.transport.resume_reading()

    def eof_received(self) -> bool:
        """Answer what was received, then close (like a client that half-closes after sending)."""
        if self.rejected:
            return False
        self.eof = True
        srv = self.srv
        srv.queue.append((self, [], None, 0.0))
        if not srv.scheduled:
            srv.scheduled = True
            srv.loop.call_soon(srv.tick)
        return True

    def data_received(self, data: bytes) -> None:
        srv = self.srv
        size = len(data)
        srv.net_input_bytes += size
        if self.closing:
            return
        now = self.last_active = time.monotonic()
        if self.throttled:  # (it parses one command at a time: no parse budget)
            self.parse(data, now)
            return
        budget = srv.parse_budget
        if budget < size > SMALL_READ:  # this tick's parse budget cannot take it all
            if budget > 0:
                srv.parse_budget = 0
                self.parse(data[:budget], now)
                if self.closing or self.error_queued:
                    return
            self.hold(data[max(budget, 0):], now)
            return
        srv.parse_budget = budget - size
        cmds: list[list[bytes]] = []
        # The common read: whole commands, and this client counted nothing in client memory
        # before (so it held no input either: hold and parse_held account for what they keep).
        # Then it holds nothing now: no limit to check, no memory to account, no timeout clock.
        if self.parser.take(data, cmds) and not self.mem:
            self.partial_since = 0.0
            if cmds:
                srv.queue.append((self, cmds, None, now))
                if not srv.scheduled:
                    srv.scheduled = True
                    srv.loop.call_soon(srv.tick)
            return
        self.parsed(cmds, now)

    def hold(self, data: bytes, now: float) -> None:
        """Keep input for a later tick (RespServer.parse_held) and stop reading until then."""
        srv = self.srv
        if not self.held:
            self.held_since = now
            srv.backlog.append(self)
        self.held += data
        self.account()
        if self.closing:  # evicted
            return
        self.update_reading()
        if not srv.scheduled:
            srv.scheduled = True
            srv.loop.call_soon(srv.tick)

    def parse(self, data: bytes, now: float) -> None:
        """Parse input that arrived at `now` and queue its commands (or its protocol error)."""
        parser = self.parser
        cmds: list[list[bytes]] = []
        if not self.throttled:
            parser.feed(data, cmds)
        elif self.awaiting:
            parser.hold(data)
        else:
            parser.feed(data, cmds, 1)
        self.parsed(cmds, now)

    def parsed(self, cmds: list[list[bytes]], now: float) -> None:
        """After a parse: the query-buffer limit, client memory, the commands (or the protocol
        error) queued for the tick, the command timeout's clock."""
        srv = self.srv
        parser = self.parser
        error = parser.error
        pending = parser.pending()  # nothing pending means nothing buffered
        if pending and parser.buffered() + len(self.held) > srv.config.max_query_buffer:
            srv.closed_query_buffer += 1
            srv.client_log.warning("closing client id=%d: query buffer over %d bytes", self.id,
                                   srv.config.max_query_buffer)
            self.closing = True
            self.transport.abort()
            self.release()
            return
        if pending or self.mem or self.held:  # else it holds nothing, and held nothing before
            self.account()
            if self.closing:  # evicted: it held the most memory of all clients
                return
        if cmds or (error is not None and not self.error_queued):
            if error is not None:
                self.error_queued = True
                self.transport.pause_reading()
            if self.throttled and cmds:
                self.awaiting = True
            srv.queue.append((self, cmds, error, now))
            if not srv.scheduled:
                srv.scheduled = True
                srv.loop.call_soon(srv.tick)
        if not pending:
            self.partial_since = 0.0
        elif cmds or not self.partial_since:
            self.partial_since = now

    # -- client memory (Redis' maxmemory-clients) ---------------------------------------------
    def account(self) -> None:
        """Bring server.client_memory up to date with this client's buffers; past the total
        limit, evict clients biggest first (possibly this one)."""
        mem = self.parser.buffered() + len(self.held)
        srv = self.srv
        srv.client_memory += mem - self.mem
        self.mem = mem
        if mem and srv.client_memory > srv.config.maxmemory_clients > 0:
            srv.evict_clients()

    def release(self) -> None:
        """This client no longer counts in server.client_memory (closed or evicted)."""
        self.srv.client_memory -= self.mem
        self.mem = 0

    # -- state used by the commands ------------------------------------------------------------
    def set_authenticated(self) -> None:
        self.authenticated = True
        self.throttled = False
        self.parser.unauth = False

    def set_protocol(self, version: int) -> None:
        self.resp3 = version == 3
        self.nil = b"_\r\n" if self.resp3 else b"$-1\r\n"

    def describe(self) -> str:
        """This client as a CLIENT LIST / CLIENT INFO line (Redis' field names)."""
        def address(name: str) -> str:
            info = self.transport.get_extra_info(name) if self.transport else None
            return f"{info[0]}:{info[1]}" if isinstance(info, tuple) and len(info) >= 2 else ""

        sock = self.transport.get_extra_info("socket") if self.transport else None
        now = time.monotonic()
        fields = {
            "id": self.id, "addr": address("peername"), "laddr": address("sockname"),
            "fd": sock.fileno() if sock is not None else -1,
            "name": (self.name or b"").decode("latin-1"),
            "age": int(now - self.created), "idle": int(now - self.last_active),
            "flags": "N", "db": 0, "sub": 0, "psub": 0, "ssub": 0, "multi": -1,
            "qbuf": self.parser.buffered() + len(self.held),
            "obl": 0, "oll": 0,
            "omem": self.transport.get_write_buffer_size() if self.transport else 0,
            "events": "r", "cmd": self.last_cmd, "user": "default", "redir": -1,
            "resp": 3 if self.resp3 else 2,
            "lib-name": self.lib_name.decode("latin-1"), "lib-ver": self.lib_ver.decode("latin-1"),
        }
        return " ".join(f"{k}={v}" for k, v in fields.items())


class RespServer:
    """The listening socket, the clients, the dispatcher and the counters."""

    def __init__(self, appliance: Any, config: Optional[RespConfig] = None) -> None:
        self.appliance = appliance
        self.config = config = config or RespConfig()
        password = config.requirepass
        self.requirepass: Optional[bytes] = (password.encode() if isinstance(password, str)
                                             else password)
        self.redis_version = config.redis_version
        self.commands, self.command_list = build_table()
        self.fast_tables = fast_tables(config.max_bulk_len)
        self.conns: dict[int, Connection] = {}
        # (client, its commands of one received chunk, protocol error, when the chunk arrived)
        self.queue: list[tuple[Connection, list[list[bytes]], Optional[bytes], float]] = []
        self.scheduled = False
        self.parse_budget = config.tick_bytes  # input bytes data_received may still parse now
        self.backlog: deque[Connection] = deque()  # clients with held input, in turn
        self._deferred: list[Connection] = []  # clients with commands left over from last tick
        self._garbage: list[list[bytes]] = []  # closed clients' arguments, freed a piece a tick
        self.loop: Any = None
        self.host = "127.0.0.1"
        self.port = 0
        self.started = time.time()
        self.last_id = 0
        self._listener: Optional[Listener] = None
        self.client_memory = 0  # bytes all clients' parsers hold (Connection.mem, summed)
        self.client_log = LogLimiter(log)  # per-client closes and evictions: never a flood
        self._sweeper: Any = None
        self.total_connections = 0
        self._limits = Limits(appliance.engine)
        self.latency = LatencyRecorder()  # cumulative, as Prometheus wants: RESETSTAT keeps it
        self.tier = getattr(appliance, "tier", None)  # the Redis behind the engine, if any
        self.forwarder = Forwarder(self, self.tier) if self.tier is not None else None
        self._ready: list[Connection] = []  # clients whose Redis replies came between ticks
        self.reset_stats()

    def reset_stats(self) -> None:
        """Zero the counters CONFIG RESETSTAT resets (not the connection gauges)."""
        self.rejected_connections = 0
        self.total_commands = 0
        self.protocol_errors = 0
        self.error_replies = 0
        self.keyspace_hits = 0
        self.keyspace_misses = 0
        self.net_input_bytes = 0
        self.net_output_bytes = 0
        self.engine_batches = 0
        self.batched_keys = 0
        self.max_batch = 0
        self.closed_idle = 0
        self.closed_command_timeout = 0
        self.closed_query_buffer = 0
        self.evicted_clients = 0

    @property
    def engine(self) -> Any:
        return self.appliance.engine

    def _take_engine(self) -> None:
        """Serve from the appliance's engine as it is now (the admin service may reload it)."""
        engine = self.appliance.engine
        if self._limits.engine is not engine:
            self._limits = Limits(engine)

    @property
    def limits(self) -> Limits:
        """The key/value checks of the engine now served."""
        self._take_engine()
        return self._limits

    @property
    def key_too_long(self) -> bytes:
        fmt = self.engine.key_format
        return E.key_too_long(fmt.width, fmt.max_bytes)

    @property
    def value_too_long(self) -> bytes:
        fmt = self.engine.value_format
        return E.value_too_long(fmt.width, fmt.max_bytes)

    def count_lookups(self, n: int, hits: int) -> None:
        self.keyspace_hits += int(hits)
        self.keyspace_misses += n - int(hits)

    def stats(self) -> dict[str, Any]:
        """Counters of this front-end (Appliance.frontend_stats, INFO stats)."""
        return {
            "connected_clients": len(self.conns),
            "total_connections_received": self.total_connections,
            "total_commands_processed": self.total_commands,
            "rejected_connections": self.rejected_connections,
            "protocol_errors": self.protocol_errors,
            "total_error_replies": self.error_replies,
            "keyspace_hits": self.keyspace_hits,
            "keyspace_misses": self.keyspace_misses,
            "total_net_input_bytes": self.net_input_bytes,
            "total_net_output_bytes": self.net_output_bytes,
            "engine_batches": self.engine_batches,
            "engine_batch_keys": self.batched_keys,
            "max_engine_batch": self.max_batch,
            "closed_idle_clients": self.closed_idle,
            "closed_command_timeout": self.closed_command_timeout,
            "closed_query_buffer_limit": self.closed_query_buffer,
            "evicted_clients": self.evicted_clients,
            "client_memory": self.client_memory,
            "accept_errors": self._listener.accept_errors if self._listener else 0,
            "port": self.port,
        }

    # -- life cycle ----------------------------------------------------------------------------
    async def start(self, host: str, port: int) -> None:
        self.loop = asyncio.get_running_loop()
        self._listener = Listener.bind(lambda: Connection(self), host, port, self.config.backlog,
                                       log, "RESP")
        sockname = self._listener.getsockname()
        self.host, self.port = host, sockname[1]
        self.started = time.time()
        timeouts = [t for t in (self.config.idle_timeout, self.config.command_timeout) if t > 0]
        if timeouts:
            self._sweep_every = max(0.05, min(1.0, min(timeouts) / 4))
            self._sweeper = self.loop.call_later(self._sweep_every, self._sweep)

    async def close(self) -> None:
        """Stop listening, drop every client, and leave the appliance's front-end list."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        for conn in list(self.conns.values()):
            conn.closing = True
            conn.transport.abort()
            conn.release()
        self.conns.clear()
        if hasattr(self.appliance, "unregister_frontend"):
            self.appliance.unregister_frontend("resp")

    def _sweep(self) -> None:
        """Close clients idle past idle_timeout, or stuck in a command past command_timeout."""
        now = time.monotonic()
        idle, partial = self.config.idle_timeout, self.config.command_timeout
        for conn in list(self.conns.values()):
            if idle > 0 and now - conn.last_active > idle:
                self.closed_idle += 1
            elif partial > 0 and conn.partial_since and now - conn.partial_since > partial:
                self.closed_command_timeout += 1
            else:
                continue
            conn.closing = True
            conn.transport.close()
            conn.release()
            self.conns.pop(conn.id, None)
        self._sweeper = self.loop.call_later(self._sweep_every, self._sweep)

    def evict_clients(self) -> None:
        """Disconnect the clients holding the most memory until the total is under
        maxmemory_clients (Redis 7's client eviction; O(clients), and only when over)."""
        limit = self.config.maxmemory_clients
        while self.client_memory > limit:
            victim = max(self.conns.values(), key=lambda c: c.mem, default=None)
            if victim is None or not victim.mem:
                return
            self.evicted_clients += 1
            self.client_log.warning(
                "evicting client id=%d: it holds %d bytes of %d held by all clients, over "
                "maxmemory-clients %d", victim.id, victim.mem, self.client_memory, limit)
            victim.closing = True
            victim.transport.abort()
            victim.release()

    # -- dispatch: plan, run, render (serve/batch.py) -----------------------------------------
    def tick(self) -> None:
        """Run the queued commands of every client in arrival order, batching as batch.py says,
        at most tick_commands of each client; parse held input first, within tick_bytes."""
        self.parse_budget = self.config.tick_bytes
        if self.backlog:
            self.parse_held()  # (scheduled is still set: what it queues runs in this tick)
        if self._garbage:
            self._free_some()
        if self.backlog or self._garbage:
            self.loop.call_soon(self.tick)  # (scheduled stays set)
        else:
            self.scheduled = False
        queue = self.queue
        if not queue:
            return
        self.queue = []
        self._take_engine()  # one engine for the whole tick
        for conn in self._deferred:  # their turn: only what passes its share again waits
            conn.deferred = False
        pipe: Pipeline = Pipeline(self._run_batch, self._render_batch)
        self._pipe = pipe
        touched: list[Connection] = []
        answered: list[tuple[float, int]] = []  # (a chunk's stamp, how many of its commands ran)
        deferred: list[tuple] = []  # queue entries (or their rests) left for the next tick
        self.total_commands += self._dispatch(pipe, queue, touched, answered, deferred)
        pipe.flush()
        self._write(touched)
        if answered:  # one clock read once every reply of the tick is written
            self.latency.observe_since(time.monotonic(), answered)
        if deferred or self._deferred:
            self._defer(deferred)

    def parse_held(self) -> None:
        """Parse held input, client after client in turn, within this tick's parse budget;
        a client whose input is not all parsed goes to the back of the line."""
        backlog = self.backlog
        while backlog and self.parse_budget > 0:
            conn = backlog.popleft()
            if conn.closing:
                conn.held = b""
                continue
            data = conn.held
            budget = self.parse_budget
            take = data[:budget] if len(data) > budget else data
            conn.held = data[len(take):]
            self.parse_budget = budget - len(take)
            if conn.held:
                backlog.append(conn)
            else:
                conn.update_reading()
            conn.parse(take, conn.held_since)

    def free_later(self, args: list[bytes]) -> None:
        """Free a closed client's arguments over the next ticks, FREE_PER_TICK at a time."""
        if len(args) > FREE_PER_TICK:
            self._garbage.append(args)
            if not self.scheduled:
                self.scheduled = True
                self.loop.call_soon(self.tick)

    def _free_some(self) -> None:
        left = FREE_PER_TICK
        garbage = self._garbage
        while garbage and left > 0:
            args = garbage[-1]
            n = min(left, len(args))
            del args[len(args) - n:]
            left -= n
            if not args:
                garbage.pop()

    def _defer(self, deferred: list[tuple]) -> None:
        """Leave the commands over a client's share for the next tick, ahead of anything that
        arrives meanwhile (so each client's order holds); stop reading from those clients until
        their turn comes, and read again from those that have caught up."""
        for conn in self._deferred:
            if not conn.deferred:
                conn.update_reading()
        self._deferred = waiting = []
        for conn, *_ in deferred:
            if not waiting or waiting[-1] is not conn:
                waiting.append(conn)
                conn.update_reading()
        self.queue[:0] = deferred
        if deferred and not self.scheduled:
            self.scheduled = True
            self.loop.call_soon(self.tick)

    def _dispatch(self, pipe: Pipeline, queue: list, touched: list[Connection],
                  answered: list[tuple[float, int]], deferred: list[tuple]) -> int:
        """Plan every queued command into the pipeline, or run it in its turn (which flushes the
        pipeline first); a client's commands stop at one that closes it. Returns how many ran;
        each chunk that ran commands goes into answered with its stamp. Past tick_commands of
        one client, the rest of its entries (a block split where the share ends) go into
        deferred, in order, with the protocol error that followed them.

        A GET or plain SET whose key (and value) fits, and a block of them — most of what clients
        send — is planned right here, without a call: at one command (or one block) per client
        per tick a call each is a measurable share of the server's time. Everything else, their
        errors included, goes one command at a time through _plan.
        """
        batching = self.config.batching
        plan, call = self._plan, self._call
        table_get = self.commands.get
        limits = self._limits
        max_key, max_value = limits.max_key, limits.max_value
        set_bytes = not limits.ints
        add_item, add_key, add_value = pipe.items.append, pipe.keys.append, pipe.values.append
        add_keys, add_values = pipe.keys.extend, pipe.values.extend
        share = self.config.tick_commands
        # With a host tier a run of SETs goes to Redis every EARLY_WRITE keys (redislink; a run
        # of MSETs every EARLY_WRITE MSETs, _add_msets): Redis stores one part of a large tick
        # while the rest is planned.
        write_run = EARLY_WRITE if self.forwarder is not None else 0
        count = 0
        for conn, cmds, error, arrived in queue:  # (what _resume appends as we run comes too)
            if conn.closing:
                continue
            if not conn.touched:
                conn.touched = True
                touched.append(conn)
                stop = count + share  # its share of this tick ends at this count
            elif conn.deferred:  # over its share already: everything after waits too
                deferred.append((conn, cmds, error, arrived))
                continue
            else:
                stop = count + conn.share_left
            batch = batching and conn.authenticated and conn.link is None
            before = count
            j = 0
            rest: Optional[list] = None
            for args in cmds:
                j += 1
                if type(args) is tuple:  # a block: one argument count, one column per argument
                    names = args[0]
                    n = len(names)
                    if count + n > stop:  # run the share's part of it, defer the rest
                        if count >= stop:
                            rest = cmds[j - 1:]
                            break
                        cut = stop - count
                        rest = [tuple(column[cut:] for column in args), *cmds[j:]]
                        del cmds[j:]  # this block's share is the entry's last item
                        args = tuple(column[:cut] for column in args)
                        names = args[0]
                        n = cut
                    # A block of GETs, or of plain SETs of byte strings, that all fit: one item.
                    name = names[0]
                    cmd = table_get(name)
                    if batch and cmd is not None and names.count(name) == n:
                        if (cmd.batch == BATCH_GET and len(args) == 2
                                and max(map(len, args[1])) <= max_key):
                            if pipe.kind != _READ:
                                pipe.flush()
                                pipe.kind = _READ
                            add_item((conn, GET_BLOCK, n))
                            add_keys(args[1])
                            count += n
                            continue
                        if (cmd.batch == BATCH_SET and len(args) == 3 and set_bytes
                                and max(map(len, args[1])) <= max_key
                                and max(map(len, args[2])) <= max_value):
                            if pipe.kind != _WRITE:
                                pipe.flush()
                                pipe.kind = _WRITE
                            add_item((conn, SET_BLOCK, n))
                            add_keys(args[1])
                            add_values(args[2])
                            count += n
                            if write_run and len(pipe.keys) >= write_run:
                                pipe.flush()
                            continue
                    count += self._plan_rows(pipe, conn, args, batch)
                else:
                    if count >= stop:
                        rest = cmds[j - 1:]
                        break
                    count += 1
                    if batch:
                        cmd = table_get(args[0])
                        if cmd is not None:
                            n = len(args)
                            if cmd.batch == BATCH_GET and n == 2 and len(args[1]) <= max_key:
                                if pipe.kind != _READ:
                                    pipe.flush()
                                    pipe.kind = _READ
                                add_item((conn, BATCH_GET, 1))
                                add_key(args[1])
                                continue
                            if (cmd.batch == BATCH_SET and n == 3 and set_bytes
                                    and len(args[1]) <= max_key and len(args[2]) <= max_value):
                                if pipe.kind != _WRITE:
                                    pipe.flush()
                                    pipe.kind = _WRITE
                                add_item((conn, BATCH_SET, 1))
                                add_key(args[1])
                                add_value(args[2])
                                if write_run and len(pipe.keys) >= write_run:
                                    pipe.flush()
                                continue
                        if plan(pipe, conn, args):
                            continue
                    pipe.flush()
                    call(conn, args)
                    if conn.link is not None:  # it has its own Redis connection from now on
                        batch = False
                if conn.closing:
                    break
            conn.share_left = stop - count
            if count > before:
                answered.append((arrived, count - before))
            if rest is not None and not conn.closing:
                conn.deferred = True
                deferred.append((conn, rest, error, arrived))
                continue
            if error is not None or conn.throttled or conn.awaiting:
                pipe.flush()  # its replies come before the protocol error, or the next command
                if error is not None and not conn.closing:
                    conn.out.append(E.error_reply(error))
                    self.protocol_errors += 1
                    self.error_replies += 1
                    conn.closing = True
                elif conn.awaiting and not conn.closing:
                    self._resume(conn, queue, arrived)
        return count

    def _plan_rows(self, pipe: Pipeline, conn: Connection, block: tuple, batch: bool) -> int:
        """A block the pipeline cannot take whole, one command at a time, as _dispatch runs them
        (with a host tier, a block of one command that only Redis answers goes there whole, and
        a block of MSETs joins the run of MSETs of every client as one item)."""
        names = block[0]
        if (batch and len(block) == 1 and names[0].lower() == b"ping"
                and names.count(names[0]) == len(names)):  # a pipeline of PINGs: its PONGs
            pipe.flush()
            conn.last_cmd = "ping"
            conn.out.append(PONG * len(names))
            return len(names)
        if self.forwarder is not None:
            cmd = self.commands.get(names[0])
            if (batch and cmd is not None and cmd.batch == BATCH_MSET and _pairs(len(block))
                    and names.count(names[0]) == len(names)):
                self._add_msets(pipe, (conn, MSET_BLOCK, len(names)),
                                [key for column in block[1::2] for key in column], block)
                return len(names)
            if self.forwarder.can_forward_block(conn, block):
                pipe.flush()
                self.forwarder.forward_block(conn, block)
                return len(names)
        count = 0
        for row in zip(*block):
            args = list(row)
            count += 1
            if batch and conn.link is None and self._plan(pipe, conn, args):
                continue
            pipe.flush()
            self._call(conn, args)
            if conn.closing:
                break
        return count

    @staticmethod
    def _add_msets(pipe: Pipeline, item: tuple, keys: list[bytes], command: Any) -> None:
        """An MSET (command: its arguments) or a block of them (command: the block's columns)
        joins the run of MSETs; the run goes to Redis once it holds about EARLY_WRITE MSETs of
        this one's size, so Redis stores one part of a large tick while the rest is planned."""
        keys_each = len(command) // 2  # the keys of one MSET, as args or as columns
        pipe.extend(_MSETS, item, keys, [command])
        if len(pipe.keys) >= EARLY_WRITE * keys_each:
            pipe.flush()

    def _plan(self, pipe: Pipeline, conn: Connection, args: list[bytes]) -> bool:
        """Put a GET, MGET, EXISTS or plain SET into the pipeline, and with a host tier an MSET;
        False for any other command.

        The checks are the handlers' (Limits, key_error, value_in). _dispatch has already planned
        a GET or a byte-string SET that fits, so here they are the refused ones, the integer
        SETs, MGET and EXISTS; they are planned the same whichever function sees them.
        """
        cmd = self.commands.get(args[0])
        if cmd is None or not cmd.batch:
            return False
        kind = cmd.batch
        n = len(args)
        limits = self._limits
        if kind == BATCH_MSET:
            # With a host tier, the run of MSETs (whichever clients sent them) goes to Redis as
            # one piece, each MSET as sent (atomic there), its keys out of the engine first;
            # without one, its handler (all pairs or none, in the engine alone).
            if self.forwarder is None or not _pairs(n):
                return False  # (the wrong arity: Redis' error, or the handler's)
            self._add_msets(pipe, (conn, BATCH_MSET, 1), args[1::2], args)
            return True
        if self.forwarder is not None and not self._tier_fits(kind, args):
            return False  # Redis holds what the engine cannot: the command goes there
        if kind == BATCH_GET:
            if n != 2:
                return False
            key = args[1]
            if len(key) <= limits.max_key:
                pipe.add(_READ, (conn, BATCH_GET, 1), key)
            else:
                pipe.ready((conn, 0, E.error_reply(key_error(self, key))), _READ)
            return True
        if kind == BATCH_SET:
            if n != 3:
                return False  # SET with options: its handler
            key = args[1]
            value = limits.value(args[2])
            if len(key) > limits.max_key:
                pipe.ready((conn, 0, E.error_reply(key_error(self, key))), _WRITE)
            elif value is None:
                pipe.ready((conn, 0, E.error_reply(value_in(self, args[2]))), _WRITE)
            else:
                pipe.add(_WRITE, (conn, BATCH_SET, 1), key, value)
            return True
        if n < 2:
            return False  # MGET or EXISTS without keys: the arity error
        keys = args[1:]
        longest = max(keys, key=len)
        if len(longest) <= limits.max_key:
            pipe.extend(_READ, (conn, kind, n - 1), keys)
        else:
            pipe.ready((conn, 0, E.error_reply(key_error(self, longest))), _READ)
        return True

    def _tier_fits(self, kind: int, args: list[bytes]) -> bool:
        """Whether the engine can take part in a batched command (else Redis alone answers)."""
        limits = self._limits
        n = len(args)
        if kind == BATCH_GET:
            return n != 2 or limits.key_fits(args[1])
        if kind == BATCH_SET:
            return n != 3 or limits.key_fits(args[1]) and limits.value(args[2]) is not None
        return n < 2 or limits.keys_fit(args[1:])

    def _write(self, touched: list[Connection]) -> None:
        """Each touched client's replies of this tick in one transport.write; close the closing."""
        written = 0
        for conn in touched:
            conn.touched = False
            out = conn.out
            if conn.has_slots:
                written += self._write_ready(conn)
            elif out:
                data = b"".join(out)  # (one bytes reply comes back as it is, uncopied)
                out.clear()
                if not conn.lost:
                    conn.transport.write(data)
                    written += len(data)
            if conn.closing or conn.eof and not conn.deferred:
                conn.closing = True
                if conn.waiting:  # Redis has replies of it still to give
                    conn.finish = True
                elif not conn.lost:
                    conn.transport.close()
        self.net_output_bytes += written

    def _write_ready(self, conn: Connection) -> int:
        """Write a client's replies up to the first one Redis has not given yet."""
        out = conn.out
        parts: list[bytes] = []
        i = 0
        for i, part in enumerate(out):
            if type(part) is Slot:
                if part.data is None:
                    break
                parts.append(part.data)
            else:
                parts.append(part)
        else:
            i = len(out)
        del out[:i]
        conn.has_slots = bool(out)
        if not parts or conn.lost or conn.reply_off:
            return 0
        data = b"".join(parts)
        conn.transport.write(data)
        return len(data)

    def ready(self, conn: Connection) -> None:
        """Replies of conn came from Redis (or a link closed): write them at the end of this
        loop turn, together with the others that come in it."""
        if not conn.ready_queued:
            conn.ready_queued = True
            if not self._ready:
                self.loop.call_soon(self._flush_ready)
            self._ready.append(conn)

    def _flush_ready(self) -> None:
        self.tier.apply_invalidations()  # before a client sees the reply to its write
        ready, self._ready = self._ready, []
        written = 0
        for conn in ready:
            conn.ready_queued = False
            if conn.touched:  # in a tick right now: its _write comes
                continue
            written += self._write_ready(conn)
            if conn.finish and not conn.waiting and not conn.lost:
                conn.closing = True
                conn.transport.close()
        self.net_output_bytes += written

    def _resume(self, conn: Connection, queue: list, arrived: float) -> None:
        """Parse a throttled client's next command(s) now that its previous one has run; they
        count as arrived with the chunk that held them."""
        conn.awaiting = False
        more: list[Any] = []
        parser = conn.parser
        parser.resume(more, 0 if conn.authenticated else 1)
        conn.account()
        error = parser.error if not conn.error_queued else None
        if more or error is not None:
            if error is not None:
                conn.error_queued = True
            conn.awaiting = conn.throttled and bool(more)
            queue.append((conn, more, error, arrived))

    def _call(self, conn: Connection, args: list[bytes]) -> None:
        """One command the unbatched way: pynq-kv's own, or (with a host tier) Redis'."""
        if self.forwarder is not None:
            self.forwarder.call(conn, args)
        else:
            self.call_local(conn, args)

    def call_local(self, conn: Connection, args: list[bytes]) -> None:
        """One command of pynq-kv's table: lookup, arity, AUTH, handler, encoded reply."""
        cmd = lookup(self.commands, args)
        out = conn.out
        if type(cmd) is ErrorReply:
            out.append(E.error_reply(cmd))
            self.error_replies += 1
            return
        if not conn.authenticated and not cmd.noauth:
            out.append(E.error_reply(E.NOAUTH))
            self.error_replies += 1
            return
        conn.last_cmd = cmd.name
        try:
            reply = cmd.handler(self, conn, args)
        except KVError as exc:
            reply = ErrorReply(E.engine_error(exc))
        except Exception as exc:  # a bug must cost one reply, not the server
            log.exception("command %s failed", cmd.name)
            reply = ErrorReply(b"ERR internal error in " + cmd.name.encode() + b": "
                               + type(exc).__name__.encode())
        kind = type(reply)
        if kind is Raw:
            out.append(reply)
        elif kind is ErrorReply:
            out.append(E.error_reply(reply))
            self.error_replies += 1
        else:
            out.append(encode(reply, conn.resp3))

    def _count_batch(self, n: int) -> None:
        self.engine_batches += 1
        self.batched_keys += n
        if n > self.max_batch:
            self.max_batch = n

    def _run_batch(self, kind: int, keys: list[bytes], values: list[Any]) -> Any:
        """One engine batch for a run: get_batch for reads, set_batch for writes, or what it raised."""
        limits = self._limits
        eng = limits.engine
        g = eng.geometry
        self._count_batch(len(keys))
        try:
            if kind == _READ:
                if self.tier is not None:
                    self.tier.apply_invalidations()  # a client reads after its own writes
                return eng.get_batch(tagged_rows(keys, g.key_bytes))
            if kind == _MSETS:
                self.forwarder.run_msets(keys)
                return None
            if self.forwarder is not None:  # SETs go to Redis; the engine is filled after
                self.forwarder.run_writes(keys)
                return None
            rows = int_rows(values, g.value_bytes) if limits.ints else tagged_rows(values, g.value_bytes)
            return eng.set_batch(tagged_rows(keys, g.key_bytes), rows)
        except Exception as exc:
            return _Failed(exc)

    def _render_batch(self, kind: int, items: list, answer: Any) -> None:
        """Every item of a run, in order, into its client's replies."""
        if type(answer) is _Failed:
            self._fail_run(items, answer.exc)
        elif self.forwarder is not None:
            self._render_tiered(kind, items, answer)
        elif kind == _READ:
            self._render_reads(items, answer)
        else:
            self._render_writes(items, answer)

    def _render_tiered(self, kind: int, items: list, answer: Any) -> None:
        """A run with a host tier: what the engine answered, and Redis the rest (forward.py).
        The run's keys and values are still in the pipeline (flush empties them after this)."""
        pipe = self._pipe
        if kind == _MSETS:
            self.forwarder.render_msets(items, pipe.values)
            return
        if kind != _READ:
            self.forwarder.render_writes(items, pipe.keys, pipe.values)
            return
        keys = pipe.keys
        writing = self.tier.writing
        if writing and not writing.keys().isdisjoint(keys):
            # A key with a pynq-kv SET in flight reads as a miss: Redis answers it, after that
            # SET for the client that sent it (Tier.begin_writes).
            hits, _, _, replies = self._read_replies(answer, whole=False)
            hidden = 0
            for i, key in enumerate(keys):
                if key in writing and replies[i] is not None:
                    replies[i] = None
                    hidden += 1
            self.keyspace_hits -= hidden
            self.keyspace_misses += hidden
            self.forwarder.render_reads(items, keys, replies)
            return
        hits, record, blob, replies = self._read_replies(answer, whole=True)
        if record:  # every key hit: the engine answers the whole run, as without a host tier
            self._render_read_replies(items, hits, record, blob, replies)
        else:
            self.forwarder.render_reads(items, keys, replies)

    def _read_replies(self, answer: Any, whole: bool) -> tuple[list[bool], int, bytes, list]:
        """A get_batch answer (None if every command of the run was an error) counted as
        keyspace hits and misses, and its replies: (hits, record, blob, per-key replies with
        None for misses). With whole, when every key hit with one value length, record > 0 and
        blob holds every reply back to back (and the per-key list is empty)."""
        if answer is None:
            return [], 0, b"", []
        hit, values = answer
        hits = hit.tolist()
        found = hits.count(True)
        self.keyspace_hits += found
        self.keyspace_misses += len(hits) - found
        if self._limits.ints:
            return hits, 0, b"", _int_replies(values, hits)
        record, blob, replies = _bulk_replies(values, hits, found if whole else -1)
        return hits, record, blob, replies

    def _render_reads(self, items: list, answer: Any) -> None:
        """Replies of a run of GET/MGET/EXISTS (answer: get_batch's, None if all were errors)."""
        self._render_read_replies(items, *self._read_replies(answer, whole=True))

    def _render_read_replies(self, items: list, hits: list[bool], record: int, blob: bytes,
                             replies: list) -> None:
        """_render_reads with _read_replies' answer; record > 0: every reply is one fixed-size
        record of blob."""
        nil = b""
        j = 0
        for conn, kind, n in items:
            out = conn.out
            if kind == BATCH_GET:
                if record:
                    out.append(blob[j * record:(j + 1) * record])
                else:
                    out.append(replies[j] or conn.nil)
                j += 1
            elif kind == GET_BLOCK:
                if record:
                    out.append(blob[j * record:(j + n) * record])
                else:
                    nil = conn.nil
                    out.append(b"".join([r or nil for r in replies[j:j + n]]))
                j += n
            elif kind == 0:
                out.append(n)
                self.error_replies += 1
            elif kind == BATCH_MGET:
                if record:
                    out.append(b"*%d\r\n" % n + blob[j * record:(j + n) * record])
                else:
                    nil = conn.nil
                    out.append(b"*%d\r\n" % n + b"".join([r or nil for r in replies[j:j + n]]))
                j += n
            else:  # EXISTS
                out.append(b":%d\r\n" % hits[j:j + n].count(True))
                j += n

    def _render_writes(self, items: list, status: Any) -> None:
        """Replies of a run of plain SETs: OK, or OOM where set_batch found no room."""
        full: list[bool] = []
        if status is not None:
            failed = status == _FULL
            if failed.any():
                full = failed.tolist()
        oom = E.error_reply(E.OOM)
        j = 0
        for conn, kind, n in items:
            if kind == BATCH_SET:
                if full and full[j]:
                    conn.out.append(oom)
                    self.error_replies += 1
                else:
                    conn.out.append(_OK)
                j += 1
            elif kind == SET_BLOCK:
                if full and any(full[j:j + n]):
                    conn.out.append(b"".join([oom if f else _OK for f in full[j:j + n]]))
                    self.error_replies += full[j:j + n].count(True)
                else:
                    conn.out.append(_OK * n)
                j += n
            else:
                conn.out.append(n)
                self.error_replies += 1

    def _fail_run(self, items: list, exc: Exception) -> None:
        """An engine batch raised: every command of the run gets an error, in its place."""
        log.error("engine batch failed", exc_info=exc)
        reply = E.error_reply(b"ERR engine error: " + type(exc).__name__.encode())
        for conn, kind, n in items:
            count = n if kind in (GET_BLOCK, SET_BLOCK, MSET_BLOCK) else 1
            conn.out.append(reply * count)
            self.error_replies += count


def _pairs(argc: int) -> bool:
    """Whether a command of argc arguments (its name included) has one or more key-value pairs
    after its name, as MSET must."""
    return argc >= 3 and argc % 2 == 1


def _int_replies(values: Any, hits: list[bool]) -> list[Optional[bytes]]:
    """Bulk-string replies (decimal, as Redis shows integers) for the rows of an integer
    engine's get_batch, None for misses."""
    numbers = values.tolist() if values.ndim == 1 else [
        int.from_bytes(row.tobytes(), "big") for row in values]
    return [bulk(str(v).encode()) if h else None for h, v in zip(hits, numbers)]


def _bulk_replies(values: Any, hits: list[bool], found: int) -> tuple[int, bytes, list]:
    """Bulk-string replies for the rows of a get_batch: (record size, blob, []) when every key
    hit and every value has one length (one numpy pass builds all replies back to back), else
    (0, b"", replies) with None for misses."""
    n, width = values.shape
    lengths = values[:, 0]
    if found == n and n > 4:
        size = int(lengths[0])
        if size < width and (lengths == size).all():
            header = BULK_HEADERS[size]
            h = len(header)
            out = np.empty((n, h + size + 2), dtype=np.uint8)
            out[:, :h] = np.frombuffer(header, dtype=np.uint8)
            out[:, h:h + size] = values[:, 1:1 + size]
            out[:, h + size] = 13
            out[:, h + size + 1] = 10
            return h + size + 2, out.tobytes(), []
    blob = values.tobytes()
    sizes = lengths.tolist()
    headers = BULK_HEADERS
    if max(sizes, default=0) < width:
        replies = [headers[size] + blob[start:start + size] + _CRLF if h else None
                   for h, size, start in zip(hits, sizes, range(1, n * width, width))]
    else:  # some value is not a length-tagged string (stored raw by another front-end)
        replies = [(bulk(str(int.from_bytes(blob[start - 1:start - 1 + width], "big")).encode())
                    if size >= width else headers[size] + blob[start:start + size] + _CRLF)
                   if h else None for h, size, start in zip(hits, sizes, range(1, n * width, width))]
    return 0, b"", replies


async def start_resp_server(appliance: Any, host: str = "127.0.0.1", port: int = 6380, *,
                            config: Optional[RespConfig] = None) -> RespServer:
    """Listen for Redis clients on host:port (port 0 picks a free one; see .port).

    Call it from the appliance's event loop; the server registers its counters with
    appliance.register_frontend("resp", server.stats, server.latency).
    """
    server = RespServer(appliance, config)
    await server.start(host, port)
    if hasattr(appliance, "register_frontend"):
        appliance.register_frontend("resp", server.stats, server.latency)
    return server


__all__ = ["RespConfig", "RespServer", "Connection", "start_resp_server"]
