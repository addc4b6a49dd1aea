"""The engine as the hot tier of a Redis: coherence, fills, and the shared connection to Redis.

Redis holds every key; the engine holds a copy of some string keys and answers them at one
lookup per clock. The rule this module keeps (docs/hosttier.md, "Coherence"): **the engine never
serves a value Redis would not.**

- A write that goes through pynq-kv (a front-end's SET, a forwarded command that may write)
  takes its keys out of the engine when it is sent, and — unless it went on the shared
  connection, where fills and writes are in Redis' own order — again when Redis' reply comes,
  before the client sees that reply: a client never reads its own write's old value from the
  engine. A RESP client's plain SET on the shared connection instead keeps its key's entry and
  updates it once Redis acknowledged it, before the reply (begin_writes); meanwhile the key is
  in `writing` and reads of it go to Redis.
- Every change Redis makes that pynq-kv did not send — another client's write, an expiry, an
  eviction, FLUSHALL — reaches the engine through Redis' client-side caching: the shared
  connection tracks every key in broadcast mode (`CLIENT TRACKING on BCAST NOLOOP`, the
  invalidations redirected to a second connection subscribed to `__redis__:invalidate`).
- A value enters the engine (a *fill*: after a GET that missed, or after a SET Redis
  acknowledged) only if nothing invalidated its key after the request was sent. A fill waits for
  a barrier, a PING on the invalidation connection sent after Redis answered the request: any
  change Redis made before answering it reached us before that PING's reply, so a fill whose key
  no invalidation touched in between is what Redis holds at that moment. Invalidations that come
  later remove it again, in order. (An acknowledged SET's value needs no barrier: it is what
  Redis held when it ran the SET, and a later change comes as an invalidation.)
- Keys with a TTL are kept out of the engine (a fill asks PTTL too; only -1 is filled), so the
  engine never needs to know about expiry; their changes still invalidate, so a key that gains
  a TTL leaves the engine.
- Losing a connection to Redis empties the engine (Redis may have lost what it acknowledged:
  with `appendfsync everysec`, up to a second of writes): it refills as keys are read.

Everything runs on the event loop that serves the engine; nothing here blocks.
"""

from __future__ import annotations

import asyncio
import logging
import time
from itertools import repeat
from typing import Any, Callable, Optional, Sequence

import hiredis

from .limits import Limits
from .rediscommands import ALL, CommandSpecs, Written
from .redislink import Link, bulk_value, encode_command, integer_value

log = logging.getLogger("pynq_kv.tier")

INVALIDATE_CHANNEL = b"__redis__:invalidate"
_PING = encode_command([b"PING"])
_SET_STATUS_FULL = 3  # SetStatus.FULL as set_batch reports it
START_TIMEOUT = 10.0  # seconds to connect and start tracking
# Reconnect delays after losing Redis (seconds): first try at once, then back off to this.
RECONNECT_MAX_DELAY = 2.0
# Keys known to be missing from Redis (Tier.absent) at most; past this the set starts afresh.
ABSENT_MAX = 100_000
ABSENT = object()  # a fill's value meaning "Redis has no such key" (Tier.settle)
NOT_HELD_MAX = 100_000  # keys known to be out of the engine (Tier.not_held) at most


class HostTierUnavailable(Exception):
    """Redis cannot be reached: the request was not run."""


class _InvalidationLink(asyncio.Protocol):
    """The connection subscribed to Redis' invalidation messages; also answers barriers."""

    def __init__(self, tier: "Tier") -> None:
        self.tier = tier
        self.transport: Any = None
        self.reader = hiredis.Reader()
        self.replies: asyncio.Queue = asyncio.Queue()  # replies before SUBSCRIBE (CLIENT ID, ...)
        self.subscribed = False
        self.closed = False

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def command(self, *args: bytes) -> None:
        self.transport.write(encode_command(args))

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while True:
            item = self.reader.gets()
            if item is False:
                return
            if not self.subscribed:
                self.replies.put_nowait(item)
                continue
            kind = item[0] if isinstance(item, list) and item else b""
            if kind == b"message" and item[1] == INVALIDATE_CHANNEL:
                self.tier.on_invalidation(item[2])
            elif kind == b"pong":
                self.tier.on_barrier()

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        if not self.closed:
            self.closed = True
            if self.tier._inval is self:  # (not one of a failed start's)
                self.tier.link_lost("invalidation link", exc)


class TierStats:
    """Counters of the host tier (INFO hosttier, /v1/stats)."""

    def __init__(self) -> None:
        self.forwarded = 0
        self.fills_requested = 0
        self.fills_applied = 0
        self.fills_discarded = 0
        self.fills_refused = 0  # the table had no room
        self.invalidated_keys = 0
        self.written_in_place = 0  # RESP SETs whose keys kept their entries (Tier.begin_writes)
        self.invalidation_messages = 0
        self.flushes = 0
        self.barriers = 0
        self.max_barrier_ms = 0.0
        self.absent_hits = 0  # GETs answered nil because Redis has no such key (Tier.absent)
        self.links_lost = 0
        self.reconnects = 0


class Tier:
    """The shared connections to the host tier's Redis and the engine's coherence with it.

    host is what connects to Redis (hosttier.HostTier: handshake(), open_link(factory)).
    Front-ends send on `main` (requests of all clients go out together, one pipeline), or open
    a connection of a client's own with `dedicated()` for commands that change a connection's
    state (MULTI, SELECT, SUBSCRIBE, blocking commands, RESP3).
    """

    def __init__(self, appliance: Any, host: Any) -> None:
        self.appliance = appliance
        self.host = host
        self.stats = TierStats()
        self.specs: Optional[CommandSpecs] = None
        self.main: Optional[Link] = None  # RESP2, tracking: fills and the clients' SETs go here
        self.main3: Optional[Link] = None  # RESP3: RESP3 clients' other commands
        # Keys Redis had not, learnt like a fill (fill_get) and forgotten like an engine entry
        # (invalidate): a GET of one that the engine misses is answered nil with no round trip.
        self.absent: set[bytes] = set()
        # Keys the engine does not hold: taken out by an invalidation and not filled since, so
        # invalidating one again needs no engine delete (at one delete batch per event-loop turn
        # the deletes were most of a forwarded write's cost). Kept only while nothing else can
        # have put entries in: no restore since (entries_loaded, also on a reload's new engine)
        # and a data plane that logged nothing the drain has not shielded (_data_plane_seen).
        self.not_held: set[bytes] = set()
        self._dropped_seen = 0
        self._inval: Optional[_InvalidationLink] = None
        self.up = False
        self._closing = False
        self._reconnecting: Optional[asyncio.Task] = None
        self._dedicated: set[Link] = set()
        # Coherence: every invalidation advances the epoch; a fill remembers the epoch its request
        # was sent at (its ticket) and is applied only if no invalidation of its key came since.
        self.epoch = 0
        self.flushed_at = 0  # epoch of the last whole-engine invalidation
        self.tickets = 0  # fills requested and not settled: dirty is kept while there are any
        self.dirty: dict[bytes, int] = {}
        self._fills: list[tuple[int, bytes, bytes]] = []  # answered, waiting for a barrier
        self._barrier: Optional[list[tuple[int, bytes, bytes]]] = None  # behind the PING sent
        self._barrier_sent = 0.0
        self._limits: Optional[Limits] = None
        self._doomed: list[bytes] = []  # invalidated keys not deleted from the engine yet
        # pynq-kv's own plain SETs (begin_writes): sent and not applied yet, by key (how many),
        # and those Redis answered, waiting for the loop turn's update of the engine.
        self.writing: dict[bytes, int] = {}
        self._answered_writes: list[tuple[int, list[bytes], list[Any]]] = []  # by run of SETs
        self._apply_soon = False  # apply_invalidations is scheduled for this loop turn
        self.drain: Any = None  # the change log's drain (writeback.ChangeDrain), with a data plane

    # -- life cycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Connect the links, start tracking, and learn Redis' command table (bounded: a Redis
        that does not answer is HostTierUnavailable, not a hang)."""
        opened: list[Any] = []
        try:
            await asyncio.wait_for(self._start(opened), START_TIMEOUT)
        except BaseException as exc:
            for transport in opened:  # what this attempt connected goes with it
                transport.abort()
            if isinstance(exc, asyncio.TimeoutError):
                raise HostTierUnavailable(
                    f"Redis did not answer within {START_TIMEOUT:g} s") from None
            raise

    async def _start(self, opened: list[Any]) -> None:
        inval = _InvalidationLink(self)
        opened.append((await self.host.open_link(lambda: inval))[0])
        for args in self.host.handshake():
            inval.command(*args)
            await self._expect(inval, args)
        inval.command(b"CLIENT", b"ID")
        client_id = await inval.replies.get()
        if not isinstance(client_id, int):
            raise HostTierUnavailable(f"CLIENT ID answered {client_id!r}")
        inval.command(b"SUBSCRIBE", INVALIDATE_CHANNEL)
        await self._expect(inval, [b"SUBSCRIBE"])
        inval.subscribed = True
        handshake = list(self.host.handshake()) + [
            [b"CLIENT", b"TRACKING", b"on", b"REDIRECT", str(client_id).encode(), b"BCAST",
             b"NOLOOP"]]
        main = Link("shared link", self._main_lost, handshake)
        opened.append((await self.host.open_link(lambda: main))[0])
        main3 = Link("shared RESP3 link", self._main_lost,
                     list(self.host.handshake()) + [[b"HELLO", b"3"]])
        opened.append((await self.host.open_link(lambda: main3))[0])
        reply: asyncio.Future = asyncio.get_running_loop().create_future()
        main.send(encode_command([b"COMMAND"]), reply.set_result)
        raw = await reply
        if raw[:1] == b"-":
            raise HostTierUnavailable(f"COMMAND failed: {raw.strip().decode('latin-1')}")
        reader = hiredis.Reader()
        reader.feed(raw)
        self.specs = CommandSpecs(reader.gets())
        self._inval, self.main, self.main3 = inval, main, main3
        self.up = True
        self.invalidate_all()  # whatever the engine held may be older than Redis

    @staticmethod
    async def _expect(inval: _InvalidationLink, args: Sequence[bytes]) -> None:
        reply = await inval.replies.get()
        if isinstance(reply, hiredis.ReplyError):
            raise HostTierUnavailable(f"Redis refused {args[0]!r}: {reply}")

    async def close(self) -> None:
        self._closing = True
        if self._reconnecting is not None and not self._reconnecting.done():
            self._reconnecting.cancel()  # and let it end, so no pending task outlives the loop
            await asyncio.gather(self._reconnecting, return_exceptions=True)
        for link in list(self._dedicated):
            link.close()
        for link in (self.main, self.main3):
            if link is not None:
                link.close()
        if self._inval is not None and self._inval.transport is not None:
            self._inval.closed = True
            self._inval.transport.close()
        self.up = False

    def dedicated(self, label: str, on_lost: Callable[[Link, Optional[BaseException]], None],
                  on_push: Optional[Callable[[bytes], None]] = None, resp3: bool = False) -> Link:
        """A connection of one client's own; requests wait until it is up."""
        def lost(link: Link, exc: Optional[BaseException]) -> None:
            self._dedicated.discard(link)
            on_lost(link, exc)

        handshake = list(self.host.handshake()) + ([[b"HELLO", b"3"]] if resp3 else [])
        link = Link(label, lost, handshake, on_push)
        self._dedicated.add(link)

        async def connect() -> None:
            try:
                await self.host.open_link(lambda: link)
            except Exception as exc:  # Redis gone: the client's requests fail, it is closed
                link.connection_lost(exc)

        asyncio.get_running_loop().create_task(connect())
        return link

    # -- losing Redis -------------------------------------------------------------------------
    def _main_lost(self, link: Link, exc: Optional[BaseException]) -> None:
        if link is self.main or link is self.main3:  # (not one of a failed start's)
            self.link_lost("shared link", exc)

    def link_lost(self, what: str, exc: Optional[BaseException]) -> None:
        """A shared link is gone: empty the engine and reconnect (invalidations may be lost,
        and Redis may have lost writes it acknowledged)."""
        if self._closing:
            return
        self.stats.links_lost += 1
        was_up, self.up = self.up, False
        if was_up:
            log.error("lost the host tier's %s (%s): the engine is emptied until Redis is back",
                      what, exc or "closed by Redis")
        self.invalidate_all()
        for other in (self.main, self.main3, self._inval):
            if other is not None and other.transport is not None and not other.closed:
                other.transport.abort()
        self._untick(len(self._fills))  # fills that will never come: their tickets go too
        self._fills.clear()
        if self._barrier is not None:
            self._untick(len(self._barrier))
            self._barrier = None
        if self._reconnecting is None or self._reconnecting.done():
            self._reconnecting = asyncio.get_event_loop().create_task(self._reconnect())

    async def _reconnect(self) -> None:
        delay = 0.0
        while not self._closing:
            await asyncio.sleep(delay)
            try:
                await self.start()
            except Exception as exc:  # still down: try again later
                delay = min(RECONNECT_MAX_DELAY, max(0.05, delay * 2))
                log.debug("host tier reconnect failed: %s", exc)
                continue
            self.stats.reconnects += 1
            log.warning("host tier connection restored")
            return

    # -- coherence ----------------------------------------------------------------------------
    def limits(self) -> Limits:
        engine = self.appliance.engine
        if self._limits is None or self._limits.engine is not engine:
            self._limits = Limits(engine)
        return self._limits

    def invalidate(self, keys: Sequence[bytes]) -> None:
        """These keys leave the engine — in one batch for all invalidations of this loop turn,
        before the engine is next read (apply_invalidations) — and fills requested before now
        will not bring them back."""
        if not keys:
            return
        self._outdate_fills(keys)
        self._doomed.extend(keys)
        self._schedule_apply()
        self.stats.invalidated_keys += len(keys)

    def begin_writes(self, keys: Sequence[bytes]) -> None:
        """A run of plain SETs (keys and values the engine can hold) is about to go to Redis.
        Unlike invalidate, their keys keep their engine entries: each is updated in place once
        Redis acknowledged it (write_answered), before the client sees the reply, which saves a
        delete and an insert per SET. Until then the keys are in `writing`: a RESP client's read
        of one goes to Redis (after the SET, in that client's order) and KV.MATCH waits for it
        (hide_writes). Fills asked for before now will not bring an older value back."""
        self._outdate_fills(keys)
        writing = self.writing
        for key in keys:
            writing[key] = writing.get(key, 0) + 1
        self.stats.written_in_place += len(keys)

    def write_answered(self, ticket: int, key: bytes, value: Any) -> None:
        """Redis answered one of begin_writes' SETs (value: what it stored; None if it refused
        it or never answered): the engine takes the value at the end of this loop turn, or
        before it is next read, in one batch with the turn's other answered SETs."""
        self.writes_answered(ticket, [key], [value])

    def writes_answered(self, ticket: int, keys: list[bytes], values: list[Any]) -> None:
        """write_answered for a run of SETs sent together (one ticket), kept as one run: the
        engine update takes a run whose SETs were all stored and fit without a step per key."""
        if keys:
            self._answered_writes.append((ticket, keys, values))
            self._schedule_apply()

    def end_write(self, key: bytes) -> None:
        """One of begin_writes' SETs is over: answered, or not sent after all (Redis down)."""
        left = self.writing.get(key, 0) - 1
        if left > 0:
            self.writing[key] = left
        else:
            self.writing.pop(key, None)

    def hide_writes(self) -> None:
        """Take the keys of SETs still in flight out of the engine now (their answers insert
        them again): for a reader that cannot treat them as misses (KV.MATCH)."""
        if self.writing:
            self._doomed.extend(self.writing)
            self.apply_invalidations()

    def _outdate_fills(self, keys: Sequence[bytes]) -> None:
        """Fills (and absences) asked for before now will not be applied for these keys: they
        may be older than what is being done to them now."""
        self.epoch += 1
        if self.tickets:
            epoch = self.epoch
            for key in keys:
                self.dirty[key] = epoch
        if self.absent:
            self.absent.difference_update(keys)

    def _schedule_apply(self) -> None:
        if not self._apply_soon:
            self._apply_soon = True
            asyncio.get_event_loop().call_soon(self.apply_invalidations)

    def shield(self, keys: Sequence[bytes]) -> None:
        """These keys' values in the engine are being written to Redis by pynq-kv itself (the
        change log's drain): fills asked for before now are discarded, the engine keeps them."""
        self._outdate_fills(keys)
        if self.not_held:
            self.not_held.difference_update(keys)

    def apply_invalidations(self) -> None:
        """Delete from the engine the keys invalidated since the last call, then store the
        values of answered SETs (readers of the engine call this first, and so does the RESP
        server before it writes replies; it also runs at the end of the loop turn that
        invalidated or was answered)."""
        self._apply_soon = False
        if self._doomed:
            self._delete_doomed()
        if self._answered_writes:
            self._apply_writes()

    def _delete_doomed(self) -> None:
        doomed = self._doomed
        limits = self.limits()
        not_held = self.not_held
        if not_held and not self._data_plane_seen(limits.engine):
            not_held.clear()
        # (set operations and one max() in C: an MSET of 10 keys from 50 clients a loop turn
        # is 500 keys here, whose filtering a Python step each cost a tenth of MSET's time; the
        # usual case, every key known out already, builds no set at all)
        if not_held.issuperset(doomed):
            doomed.clear()
            return
        fit = set(doomed).difference(not_held)
        doomed.clear()
        max_key = limits.max_key
        if fit and max(map(len, fit)) > max_key:
            fit = {k for k in fit if len(k) <= max_key}
        if fit:
            limits.engine.delete_batch(limits.key_rows(list(fit)))
            if len(not_held) + len(fit) > NOT_HELD_MAX:
                not_held.clear()
            not_held.update(fit)

    def _apply_writes(self) -> None:
        """write_answered's values into the engine: as a fill would be, except that no barrier
        is awaited (the value is what Redis held when it ran the SET; a later change by another
        client reaches the engine as an invalidation, like any entry's: before now, it made the
        key dirty and the value is not stored; after, it deletes it)."""
        runs, self._answered_writes = self._answered_writes, []
        dirty, flushed, up = self.dirty, self.flushed_at, self.up
        limits = self.limits()
        writing = self.writing
        keys: list[bytes] = []
        values: list[Any] = []
        answered = 0
        for ticket, run_keys, run_values in runs:
            answered += len(run_keys)
            for key in run_keys:  # end_write of each
                left = writing.get(key, 0) - 1
                if left > 0:
                    writing[key] = left
                else:
                    writing.pop(key, None)
            if not up:  # refused: the engine still holds what Redis does
                continue
            if ticket < flushed:
                self.stats.fills_discarded += len(run_values) - run_values.count(None)
                continue
            # the usual run: every SET stored, no key invalidated since it was sent (its own
            # SET made it dirty at the ticket's epoch, no later), every key and value fits as is
            if (None not in run_values and not limits.ints
                    and (not dirty or max(map(dirty.get, run_keys, repeat(-1, len(run_keys)))) <= ticket)
                    and max(map(len, run_keys)) <= limits.max_key and limits.values_fit(run_values)):
                keys += run_keys
                values += run_values
                continue
            for key, value in zip(run_keys, run_values):
                if value is None:
                    continue
                if dirty.get(key, -1) > ticket:
                    self.stats.fills_discarded += 1
                    continue
                number = limits.value(value)
                if number is None or len(key) > limits.max_key:  # (an engine reloaded meanwhile)
                    self._doomed.append(key)
                    continue
                keys.append(key)
                values.append(number)
        if keys:
            self._fill(limits, keys, values)
        if self._doomed:
            self._delete_doomed()
        self._untick(answered)

    def _data_plane_seen(self, engine: Any) -> bool:
        """Whether not_held can still be trusted: the engine's data plane has logged nothing
        that is not drained yet (a drained SET's key was shielded, which forgets it) and dropped
        nothing since the last look."""
        stats = engine.changelog_stats()
        if not stats.depth:
            return True
        dropped, self._dropped_seen = self._dropped_seen, stats.dropped
        return not stats.level and stats.dropped == dropped

    def entries_loaded(self) -> None:
        """Entries entered the engine other than as fills (a restore): forget which keys it
        did not hold."""
        self.not_held.clear()

    def invalidate_all(self) -> None:
        """The engine's whole table leaves (the rules stay: they are configuration)."""
        self.epoch += 1
        self.flushed_at = self.epoch
        self.dirty.clear()
        self._doomed.clear()
        self.absent.clear()
        self.not_held.clear()
        self.appliance.engine.clear(rules=False)
        self.stats.flushes += 1

    def invalidate_written(self, written: Written) -> None:
        """Apply what rediscommands.CommandSpecs.written said a command may change."""
        if written is None:
            return
        if written == ALL:
            self.invalidate_all()
        else:
            self.invalidate(written)  # type: ignore[arg-type]

    def on_invalidation(self, payload: Any) -> None:
        """A message on __redis__:invalidate: a list of keys, or nil for "everything"."""
        self.stats.invalidation_messages += 1
        if payload is None:
            self.invalidate_all()
        else:
            self.invalidate(payload)

    def ticket(self) -> int:
        """Before sending a request whose answer may fill the engine: its ticket."""
        return self.tickets_for(1)

    def tickets_for(self, count: int) -> int:
        """ticket() for count requests sent together (each is settled on its own)."""
        self.tickets += count
        self.stats.fills_requested += count
        return self.epoch

    def settle(self, ticket: int, key: Optional[bytes] = None, value: Any = None) -> None:
        """The answer to a ticketed request: a value to fill (after the next barrier), ABSENT
        (Redis has no such key: into `absent` after the barrier), or none."""
        if key is None or value is None or not self.up:
            self._untick(1)
            return
        self._fills.append((ticket, key, value))
        if self._barrier is None:
            self._send_barrier()

    def _untick(self, n: int) -> None:
        self.tickets -= n
        if not self.tickets:
            self.dirty.clear()

    def _send_barrier(self) -> None:
        inval = self._inval
        if inval is None or inval.closed:
            self._untick(len(self._fills))
            self._fills = []
            return
        self._barrier, self._fills = self._fills, []
        self._barrier_sent = time.monotonic()
        inval.transport.write(_PING)

    def on_barrier(self) -> None:
        """The barrier's PING came back: every change Redis made before it has reached us."""
        waiting, self._barrier = self._barrier or [], None
        self.stats.barriers += 1
        ms = (time.monotonic() - self._barrier_sent) * 1000
        if ms > self.stats.max_barrier_ms:
            self.stats.max_barrier_ms = ms
        self.apply_invalidations()
        dirty, flushed = self.dirty, self.flushed_at
        keys: list[bytes] = []
        values: list[Any] = []
        limits = self.limits()
        for ticket, key, value in waiting:
            if ticket < flushed or dirty.get(key, -1) > ticket:
                self.stats.fills_discarded += 1
                continue
            if value is ABSENT:
                if len(self.absent) >= ABSENT_MAX:
                    self.absent.clear()
                self.absent.add(key)
                continue
            number = limits.value(value)
            if number is None or len(key) > limits.max_key:
                continue
            keys.append(key)
            values.append(number)
        if keys:
            self._fill(limits, keys, values)
        self._untick(len(waiting))
        if self._fills:
            self._send_barrier()

    def _fill(self, limits: Limits, keys: list[bytes], values: list[Any]) -> None:
        if self.not_held:
            self.not_held.difference_update(keys)
        engine = limits.engine
        # Most fills update a key the engine holds or insert into a free way: one call for
        # those, and a full SET batch only from the first key for the stash (or FULL) on.
        done = engine.set_leading(keys, values)  # (0 for an integer engine)
        refused = 0
        if done < len(keys):
            rest_keys, rest_values = keys[done:], values[done:]
            status = engine.set_batch(limits.key_rows(rest_keys), limits.value_rows(rest_values))
            refused = int((status == _SET_STATUS_FULL).sum())
        self.stats.fills_refused += refused
        self.stats.fills_applied += len(keys) - refused

    def fill_get(self, key: bytes, handler: Callable[[bytes], None]) -> list[tuple[bytes, Callable[[bytes], None]]]:
        """The requests (payload, reply handler) that GET key for a client (handler gets the
        reply) and fill the engine with it if it is a string with no TTL; the caller sends them,
        in this order, on the shared connection `main` (fills are ordered with its writes)."""
        ticket = self.ticket()
        box: list = []

        def pttl(reply: bytes) -> None:
            ttl = integer_value(reply)
            self.settle(ticket, key, box[0] if box and ttl == -1 else ABSENT if ttl == -2 else None)

        return [(encode_command([b"GET", key]), handler_with_value(handler, box)),
                (encode_command([b"PTTL", key]), pttl)]

    def info(self) -> dict[str, Any]:
        s = self.stats
        return {
            "hosttier_up": int(self.up),
            "hosttier_forwarded_commands": s.forwarded,
            "hosttier_fills_requested": s.fills_requested,
            "hosttier_fills_applied": s.fills_applied,
            "hosttier_fills_discarded": s.fills_discarded,
            "hosttier_fills_refused": s.fills_refused,
            "hosttier_invalidated_keys": s.invalidated_keys,
            "hosttier_written_in_place": s.written_in_place,
            "hosttier_writes_in_flight": len(self.writing),
            "hosttier_invalidation_messages": s.invalidation_messages,
            "hosttier_engine_flushes": s.flushes,
            "hosttier_barriers": s.barriers,
            "hosttier_max_barrier_ms": round(s.max_barrier_ms, 3),
            "hosttier_absent_keys": len(self.absent),
            "hosttier_absent_hits": s.absent_hits,
            "hosttier_links_lost": s.links_lost,
            "hosttier_reconnects": s.reconnects,
            "hosttier_dedicated_links": len(self._dedicated),
            **(self.drain.stats() if self.drain is not None else {}),
        }

    # -- awaitable reads and writes for the front-ends that are not RESP (memcached, admin API) --
    # Everything goes on the shared connection `main`, like the RESP server's GETs and SETs, so
    # these writes and fills are in Redis' order with theirs. Keys the engine cannot hold (too
    # long) and values it cannot hold still go to Redis; they are just never filled.
    def _main_up(self) -> Link:
        """The shared connection, or HostTierUnavailable while Redis is down."""
        main = self.main
        if not self.up or main is None or main.closed:
            raise HostTierUnavailable("host tier unavailable: Redis cannot be reached")
        return main

    async def get_many(self, keys: list[bytes]) -> list[Optional[bytes]]:
        """Each key's string value: from the engine if it holds the key, else from Redis (which
        fills the engine, fill_get); None for a missing key or one holding another type."""
        answers: list[Optional[bytes]] = [None] * len(keys)
        if not keys:
            return answers
        self.apply_invalidations()
        limits = self.limits()
        fit = [i for i, key in enumerate(keys) if len(key) <= limits.max_key]
        if fit:
            hit, values = limits.engine.get_batch(limits.key_rows([keys[i] for i in fit]))
            found = [j for j, h in enumerate(hit.tolist()) if h]
            if found:
                for j, text in zip(found, limits.strings(values[found])):
                    answers[fit[j]] = text
        absent = self.absent
        missing = [i for i, answer in enumerate(answers) if answer is None and keys[i] not in absent]
        self.stats.absent_hits += answers.count(None) - len(missing)
        if missing:
            for i, answer in zip(missing, await self.fetch_many([keys[i] for i in missing])):
                answers[i] = answer
        return answers

    async def fetch_many(self, keys: list[bytes]) -> list[Optional[bytes]]:
        """Each key's string value from Redis, filling the engine (for a caller that read the
        engine itself and missed); None for a missing key or one holding another type."""
        if not keys:
            return []
        main = self._main_up()
        loop = asyncio.get_running_loop()
        futures = []
        for key in keys:
            future: asyncio.Future = loop.create_future()
            for payload, handler in self.fill_get(key, _resolver(future)):
                main.send(payload, handler)
            futures.append(future)
        self.stats.forwarded += len(keys)
        replies = await asyncio.gather(*futures)
        _check(main, [r for r in replies if not r.startswith(b"-WRONGTYPE")])
        return [bulk_value(reply) for reply in replies]

    async def set_many(self, items: list[tuple[bytes, bytes]]) -> None:
        """SET each (key, value) in Redis; each enters the engine once Redis acknowledged it
        (a fill). Returns when Redis acknowledged every SET; HostTierUnavailable if Redis is
        down (nothing was sent) or went away meanwhile, RedisRefused if Redis refused one."""
        await self._set(items, new=False)

    async def put_many(self, items: list[tuple[bytes, bytes]]) -> list[bool]:
        """set_many, and for each item whether Redis held no such key before (an EXISTS sent
        just before its SET on the same connection: another client may write in between)."""
        return await self._set(items, new=True)

    async def _set(self, items: list[tuple[bytes, bytes]], new: bool) -> list[bool]:
        if not items:
            return []
        main = self._main_up()
        self.invalidate([key for key, _ in items])
        loop = asyncio.get_running_loop()
        existed: list[asyncio.Future] = []
        stored: list[asyncio.Future] = []
        for key, value in items:
            if new:
                future: asyncio.Future = loop.create_future()
                main.send(encode_command([b"EXISTS", key]), _resolver(future))
                existed.append(future)
            ticket = self.ticket()
            done: asyncio.Future = loop.create_future()

            def settle(reply: bytes, ticket: int = ticket, key: bytes = key, value: bytes = value,
                       done: asyncio.Future = done) -> None:
                self.settle(ticket, key, value if reply == _OK else None)
                if not done.done():  # its awaiter may have been cancelled
                    done.set_result(reply)

            main.send(encode_command([b"SET", key, value]), settle)
            stored.append(done)
        self.stats.forwarded += len(items)
        _check(main, await asyncio.gather(*stored))
        return [reply == b":0\r\n" for reply in await asyncio.gather(*existed)]

    async def delete_many(self, keys: list[bytes]) -> int:
        """DEL keys in Redis (they leave the engine when sent); how many existed."""
        return sum(await self.delete_each(keys))

    async def delete_each(self, keys: list[bytes]) -> list[bool]:
        """DEL each key in Redis, one command each (they leave the engine when sent): whether
        each existed."""
        if not keys:
            return []
        main = self._main_up()
        self.invalidate(keys)
        loop = asyncio.get_running_loop()
        futures = []
        for key in keys:
            future: asyncio.Future = loop.create_future()
            main.send(encode_command([b"DEL", key]), _resolver(future))
            futures.append(future)
        self.stats.forwarded += len(keys)
        replies = await asyncio.gather(*futures)
        _check(main, replies)
        return [reply == b":1\r\n" for reply in replies]


class RedisRefused(Exception):
    """Redis answered a request with an error (its text is the message)."""


_OK = b"+OK\r\n"


def _resolver(future: asyncio.Future) -> Callable[[bytes], None]:
    """A reply handler that resolves future (unless its awaiter was cancelled meanwhile)."""
    def resolve(reply: bytes) -> None:
        if not future.done():
            future.set_result(reply)
    return resolve


def _check(link: Link, replies: Sequence[bytes]) -> None:
    """Raise for the first error reply: HostTierUnavailable when link went away before Redis
    answered (the link's own error stands for the reply), else RedisRefused with Redis' text."""
    for reply in replies:
        if reply[:1] == b"-":
            text = reply[1:].strip().decode("latin-1")
            if link.closed:
                raise HostTierUnavailable(f"host tier unavailable: Redis cannot be reached ({text})")
            raise RedisRefused(f"Redis refused the request: {text}")


def handler_with_value(handler: Callable[[bytes], None], box: list) -> Callable[[bytes], None]:
    """A GET reply handler that also keeps the string it returned (None for anything else)."""
    def got(reply: bytes) -> None:
        box.append(bulk_value(reply))
        handler(reply)
    return got


__all__ = ["HostTierUnavailable", "INVALIDATE_CHANNEL", "RedisRefused", "Tier", "TierStats"]
