"""The RESP server with a host tier: the engine answers what it holds, Redis everything else.

With a Redis behind the engine (pynq_kv.tier), the dispatcher keeps its batching (server.py) but
a run ends differently:

- GET, MGET, EXISTS: one engine batch, as without a host tier; a key the engine does not hold is
  asked of Redis (a GET also fills the engine, tier.fill_get), in the client's reply order.
- SET (plain): the SETs go to Redis, their keys reading as misses meanwhile; the reply is
  Redis' and the value enters the engine, in place, after Redis acknowledged it
  (Tier.begin_writes).
- MSET: its keys leave the engine, and the run's MSETs go to Redis together, each as its client
  sent it (so atomic there); the reply is Redis'.
- Every other command goes to Redis as the client sent it, and Redis' reply goes back byte for
  byte. A command that may write takes its keys out of the engine when it is sent and when its
  reply comes (rediscommands.py says which keys); MULTI ... EXEC does so at EXEC for every
  write it queued.

Requests of all clients share one connection to Redis (they go out together, one pipeline per
loop turn; a run's plain SETs, or its MSETs, as one block with one reply handler, whichever
clients sent them). A client moves to a connection of its own — for the rest of its life — when it
changes what Redis keeps per connection (MULTI, WATCH, SELECT, HELLO 3, CLIENT TRACKING,
SUBSCRIBE, MONITOR, ...) or may block (BLPOP, XREAD BLOCK, WAIT): Redis then sees that client as
one client. Its commands wait until its requests on the shared connection are answered, so each
client's commands take effect in the order it sent them. After SUBSCRIBE or MONITOR, Redis'
bytes are relayed unframed (messages come unasked).

Handled by pynq-kv itself: AUTH (pynq-kv's requirepass), QUIT, HELLO (then forwarded for RESP3),
the KV.* commands, CLIENT ID/GETNAME/SETNAME/SETINFO/INFO/LIST/HELP, and PING and ECHO of a
client on the shared connection. INFO is Redis' reply with pynq-kv's sections appended, COMMAND
Redis' with the KV.* commands added.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from ...redislink import Link, RunHandler, bulk_value, encode_block, encode_command, frame_replies
from ...rediscommands import ALL
from . import errors as E
from .commands.base import BATCH_GET, BATCH_MGET, BATCH_SET, GET_BLOCK, MSET_BLOCK
from .commands.info import OWN_SECTIONS, info_text
from .commands.server import command_docs, command_info, own_commands
from .protocol import encode

# Run by pynq-kv for every client.
_LOCAL = frozenset({b"auth", b"quit", b"hello", b"kv.match", b"kv.rule.add", b"kv.rule.del",
                    b"kv.rule.list", b"kv.stats"})
# Run by pynq-kv for a client on the shared connection (inside its own, Redis may queue them).
_LOCAL_SHARED = frozenset({b"ping", b"echo"})
_CLIENT_LOCAL = frozenset({b"id", b"getname", b"setname", b"setinfo", b"info", b"list", b"help"})
# Commands that change what Redis keeps for a connection: the client needs a connection of its own.
_OWN_LINK = frozenset({b"multi", b"watch", b"select", b"subscribe", b"psubscribe", b"ssubscribe",
                       b"monitor", b"reset", b"readonly", b"readwrite", b"asking", b"wait",
                       b"waitaof", b"sync", b"psync", b"replconf", b"swapdb"})
_CLIENT_OWN_LINK = frozenset({b"tracking", b"caching", b"reply", b"no-evict", b"no-touch",
                              b"getredir", b"trackinginfo", b"unpause", b"pause"})
# After these, Redis sends what it likes when it likes: its bytes are relayed unframed.
_RAW_AFTER = frozenset({b"subscribe", b"psubscribe", b"ssubscribe", b"monitor"})
_NOAUTH_OK = frozenset({b"auth", b"hello", b"quit"})
# Commands call() looks at more closely; every other one is forwarded at once.
_SPECIAL = (_LOCAL | _LOCAL_SHARED | _OWN_LINK | _RAW_AFTER
            | {b"client", b"info", b"config", b"shutdown", b"reset", b"command"})
_TIER_DOWN = E.error_reply(E.TIER_DOWN)
# Refused: they would act on pynq-kv's own connections to Redis (or stop that Redis).
_REFUSED = {b"shutdown": E.TIER_SHUTDOWN, b"client|kill": E.TIER_CLIENT_KILL}
_NIL2 = b"$-1\r\n"  # the shared connection's nil (RESP2); a RESP3 client gets "_"
_OK = b"+OK\r\n"


class Slot:
    """A reply that Redis has not given yet, in its place among a client's replies."""

    __slots__ = ("data",)

    def __init__(self) -> None:
        self.data: Optional[bytes] = None


class Forwarder:
    """What the RESP server does differently with a host tier (server.RespServer.forwarder)."""

    def __init__(self, server: Any, tier: Any) -> None:
        self.srv = server
        self.tier = tier

    # -- replies that come later ----------------------------------------------------------------
    def slot(self, conn: Any) -> Slot:
        slot = Slot()
        conn.out.append(slot)
        conn.waiting += 1
        conn.has_slots = True
        return slot

    def answer(self, conn: Any, slot: Slot, reply: bytes, errors: int = -1) -> None:
        """Redis' reply (or a block's replies, errors of them errors) in its slot."""
        self.srv.error_replies += (reply[:1] == b"-") if errors < 0 else errors
        slot.data = reply
        conn.waiting -= 1
        self.srv.ready(conn)

    def _link(self, conn: Any, fast: bool = False) -> Optional[Link]:
        """Where conn's next request goes: its own connection if it has one; else the shared
        one (fast: GET and SET, whose RESP2 replies pynq-kv converts for RESP3 clients), or for
        a RESP3 client's other commands the shared RESP3 connection. None: Redis is down."""
        if conn.link is not None:
            return conn.link
        tier = self.tier
        if not tier.up:
            return None
        return tier.main3 if conn.resp3 and not fast else tier.main

    @staticmethod
    def _may_send_now(conn: Any, link: Link) -> bool:
        """Whether a request of conn may go out on link now: conn holds nothing back and
        waits for no reply on another connection (so Redis runs conn's commands in order)."""
        return not conn.held_sends and (not conn.inflight or conn.inflight_link is link)

    def _send(self, conn: Any, link: Link, payload: Optional[bytes],
              handler: Optional[Callable[[bytes], None]]) -> None:
        """Send in conn's order: a request for another connection than the one conn waits on
        waits until those replies are in, so Redis runs conn's commands in the order it sent
        them. handler None: Redis will not answer (subscribed, CLIENT REPLY OFF)."""
        if not self._may_send_now(conn, link):
            conn.held_sends.append((link, payload, handler))
        else:
            self._send_now(conn, link, payload, handler)

    def _send_now(self, conn: Any, link: Link, payload: Optional[bytes],
                  handler: Optional[Callable[[bytes], None]]) -> None:
        if payload is None:  # not a request: something to do in its turn (_after)
            handler(b"")  # type: ignore[misc]
        elif handler is None:
            link.send_raw(payload)
        else:
            conn.inflight += 1
            conn.inflight_link = link
            link.send(payload, lambda reply: self._answered(conn, handler, reply))

    def _answered(self, conn: Any, handler: Callable[[bytes], None], reply: bytes) -> None:
        conn.inflight -= 1
        handler(reply)
        self._release(conn)

    def _release(self, conn: Any) -> None:
        """Send what conn held back for its replies on another connection, now they are in."""
        held = conn.held_sends
        while held and (not conn.inflight or held[0][0] is conn.inflight_link):
            self._send_now(conn, *held.popleft())

    def _answered_run(self, conn: Any, count: int, handler: RunHandler, replies: bytes,
                      errors: int) -> None:
        """_answered for the count replies of a run sent as one (Link.send_many)."""
        conn.inflight -= count - 1
        self._answered(conn, lambda joined: handler(joined, errors), replies)

    # -- unbatched commands ---------------------------------------------------------------------
    def call(self, conn: Any, args: list[bytes]) -> None:
        """One command: pynq-kv's own, or forwarded to Redis."""
        name = args[0].lower()
        if (name not in _SPECIAL and not conn.raw and conn.authenticated
                and not conn.reply_off and not conn.reply_skip):  # most commands: straight on
            conn.last_cmd = name.decode("latin-1")
            if conn.link is None and self.tier.specs is not None and self.tier.specs.blocking(args):
                self.own_link(conn)
            self.forward(conn, args)
            return
        sub = args[1].lower() if len(args) > 1 else b""
        if conn.raw:
            if name == b"quit":
                conn.closing = True
            elif conn.link is not None:
                self._send(conn, conn.link, encode_command(args), None)
            return
        if (name in _LOCAL or name in _LOCAL_SHARED and conn.link is None
                or name == b"client" and sub in _CLIENT_LOCAL):
            self.tier.apply_invalidations()  # KV.MATCH reads the engine
            if name == b"kv.match" and conn.inflight:  # not what a SET of its own in flight
                self.tier.hide_writes()                 # replaces
            self.srv.call_local(conn, args)
            if name == b"hello" and conn.link is not None and conn.authenticated:
                # its own connection speaks the protocol it now speaks
                self._send(conn, conn.link, encode_command([b"HELLO", b"3" if conn.resp3 else b"2"]),
                           _ignore)
            return
        if not conn.authenticated and name not in _NOAUTH_OK:
            conn.out.append(E.error_reply(E.NOAUTH))
            self.srv.error_replies += 1
            return
        conn.last_cmd = name.decode("latin-1")
        refused = _REFUSED.get(name) or _REFUSED.get(name + b"|" + sub)
        if refused is not None:
            conn.out.append(E.error_reply(refused))
            self.srv.error_replies += 1
            return
        if name == b"reset":  # Redis forgets the connection's state: so does pynq-kv
            conn.set_protocol(2)
            conn.multi, conn.multi_written = False, None
        if conn.link is None and (name in _OWN_LINK or name == b"client" and sub in _CLIENT_OWN_LINK
                                  or self.tier.specs is not None and self.tier.specs.blocking(args)):
            self.own_link(conn)
        if name == b"client" and sub == b"reply" and len(args) == 3:
            self._client_reply(conn, args)
            return
        if conn.reply_off or conn.reply_skip:
            conn.reply_skip = False
            self.forward(conn, args, quiet=True)
            return
        if name in _RAW_AFTER and conn.link is not None:
            self.forward(conn, args, quiet=True)
            conn.raw = True
            link = conn.link
            self._after(conn, link, lambda: link.go_raw(lambda data: self._relay(conn, data)))
            return
        if name == b"info":
            self.forward(conn, args, transform=self._info(conn, args))
            return
        if name == b"command":
            self.forward(conn, args, transform=self._command(conn, args))
            return
        if name == b"config" and sub == b"resetstat":
            self.srv.reset_stats()
        self.forward(conn, args)

    def can_forward_block(self, conn: Any, block: tuple) -> bool:
        """Whether a block of pipelined commands (one column per argument) can go to Redis as
        one: the same plain command throughout (no local one, none that changes connection
        state or blocks, no container such as CLIENT or XGROUP), from a client on the shared
        connection."""
        names = block[0]
        specs = self.tier.specs
        if (conn.link is not None or not self.tier.up or conn.raw or not conn.authenticated
                or specs is None or names.count(names[0]) != len(names)):
            return False
        name = names[0].lower()
        if (name in _SPECIAL or name in (b"exec", b"discard") or not specs.fixed(name)
                or specs.blocking([name])):
            return False
        key = specs.plain_key(name)
        return key is None or key < len(block)

    def forward_block(self, conn: Any, block: tuple) -> None:
        """A block that can_forward_block accepted: its keys leave the engine, its commands go
        to Redis in one piece, and its replies come back as one (in the block's place)."""
        tier = self.tier
        count = len(block[0])
        key = tier.specs.plain_key(block[0][0])
        if key is None:  # each row writes several keys (MSET): its own
            for row in zip(*block):
                tier.invalidate_written(tier.specs.written(row))
        elif key:  # the one key each row writes, at the same place in every row
            tier.invalidate(block[key])
        tier.stats.forwarded += count
        conn.last_cmd = block[0][0].lower().decode("latin-1")
        slot = self.slot(conn)
        link = self._link(conn)
        if not self._may_send_now(conn, link):
            replies: list[bytes] = []

            def each(reply: bytes) -> None:
                replies.append(reply)
                if len(replies) == count:
                    self.answer(conn, slot, b"".join(replies), _errors(replies))

            for row in zip(*block):
                self._send(conn, link, encode_command(row), each)
            return
        conn.inflight += count
        conn.inflight_link = link
        link.send_many(encode_block(block), count,
                       lambda replies, errors: self._answered_run(
                           conn, count, lambda joined, n: self.answer(conn, slot, joined, n),
                           replies, errors))

    def _client_reply(self, conn: Any, args: list[bytes]) -> None:
        """CLIENT REPLY ON|OFF|SKIP: Redis answers only ON, so no reply is waited for after the
        others (and pynq-kv's own replies are dropped the same way)."""
        mode = args[2].lower()
        if mode == b"on":
            conn.reply_off = False
            self.forward(conn, args)
        elif mode in (b"off", b"skip"):
            self.forward(conn, args, quiet=True)
            conn.reply_off = mode == b"off"
            conn.reply_skip = mode == b"skip"
        else:
            self.forward(conn, args)

    def forward(self, conn: Any, args: list[bytes], *, quiet: bool = False,
                transform: Optional[Callable[[bytes], bytes]] = None) -> None:
        """Send args to Redis; its reply takes this command's place among the client's replies
        (none when quiet: Redis will not answer). Keys it may write leave the engine now and
        again when the reply comes."""
        tier = self.tier
        link = self._link(conn)
        if link is None:
            if not quiet:
                conn.out.append(_TIER_DOWN)
                self.srv.error_replies += 1
            return
        tier.stats.forwarded += 1
        written = self._written(conn, args)
        tier.invalidate_written(written)
        payload = encode_command(args)
        if quiet:
            self._send(conn, link, payload, None)
            return
        slot = self.slot(conn)
        # On the shared connection fills and writes are in Redis' order, and a fill asked before
        # this write was sent is discarded: its send-time invalidation is enough. On any other,
        # a fill may read the old value after this write was sent: invalidate again at the reply.
        again = written if link is not tier.main else None

        def done(reply: bytes) -> None:
            if again is not None:
                tier.invalidate_written(again)
            self.answer(conn, slot, transform(reply) if transform is not None else reply)

        self._send(conn, link, payload, done)

    def _written(self, conn: Any, args: list[bytes]) -> Any:
        """What args may change now: inside MULTI nothing runs before EXEC, which changes what
        the transaction queued."""
        specs = self.tier.specs
        name = args[0].lower()
        if conn.multi:
            if name == b"exec":
                written, conn.multi, conn.multi_written = conn.multi_written, False, None
                return written
            if name == b"discard":
                conn.multi, conn.multi_written = False, None
                return None
            if name == b"multi":
                return None
            queued = specs.written(args) if specs is not None else ALL
            if queued == ALL or conn.multi_written == ALL:
                conn.multi_written = ALL
            elif queued:
                conn.multi_written = (conn.multi_written or []) + queued
            return None
        if name == b"multi":
            conn.multi, conn.multi_written = True, None
            return None
        return specs.written(args) if specs is not None else ALL

    def own_link(self, conn: Any) -> Link:
        """Give conn a connection to Redis of its own (speaking its protocol)."""
        def lost(link: Link, exc: Optional[BaseException]) -> None:
            conn.finish = True  # its Redis connection (and so its state there) is gone
            self.srv.ready(conn)

        link = self.tier.dedicated(f"client id={conn.id}", lost,
                                   on_push=lambda reply, conn=conn: self._relay(conn, reply),
                                   resp3=conn.resp3)
        conn.link = link
        return link

    def _after(self, conn: Any, link: Link, action: Callable[[], None]) -> None:
        """Run action once every request conn sent so far on link is sent (not answered)."""
        self._send(conn, link, None, lambda reply: action())

    def _relay(self, conn: Any, data: bytes) -> None:
        """Bytes Redis sent unasked (pushes, subscribed messages): to the client, in turn."""
        conn.out.append(data)
        self.srv.ready(conn)

    def _info(self, conn: Any, args: list[bytes]) -> Callable[[bytes], bytes]:
        """INFO's reply transform: Redis' sections, then pynq-kv's own (a blank line between,
        as between Redis' sections), as a bulk string, or RESP3's verbatim "txt:" string."""
        wanted = [a.decode("latin-1").lower() for a in args[1:]]

        def add_own(reply: bytes) -> bytes:
            verbatim = reply[:1] == b"="
            text = bulk_value(b"$" + reply[1:] if verbatim else reply)
            if text is None:
                return reply
            own = info_text(self.srv, wanted, OWN_SECTIONS).encode()
            prefix = b"txt:" if verbatim else b""
            body = text[len(prefix):]
            if own:
                body = body + b"\r\n" + own if body else own
            text = prefix + body
            return b"%s%d\r\n%s\r\n" % (b"=" if verbatim else b"$", len(text), text)
        return add_own

    def _command(self, conn: Any, args: list[bytes]) -> Optional[Callable[[bytes], bytes]]:
        """COMMAND's reply transform: Redis' commands and pynq-kv's own (KV.*) — in the full
        list, COUNT, LIST (unfiltered), INFO and DOCS; None for the other subcommands."""
        own = own_commands(self.srv)
        resp3 = conn.resp3
        sub = args[1].lower() if len(args) > 1 else b""
        asked = {name.lower() for name in args[2:]}
        if not sub or sub == b"info" and not asked:
            return lambda reply: _append(reply, [encode(command_info(c), resp3) for c in own], 1)
        if sub == b"count" and len(args) == 2:
            return lambda reply: b":%d\r\n" % (int(reply[1:-2]) + len(own)) \
                if reply[:1] == b":" else reply
        if sub == b"list" and len(args) == 2:
            return lambda reply: _append(reply, [encode(c.name.encode(), resp3) for c in own], 1)
        if sub == b"info":
            mine = {c.name.encode(): c for c in own}
            return lambda reply: _fill_nils(reply, [mine.get(name.lower()) for name in args[2:]],
                                            resp3)
        if sub == b"docs":
            chosen = [c for c in own if not asked or c.name.encode() in asked]
            items = [encode(c.name.encode(), resp3) + encode(command_docs(c), resp3) for c in chosen]
            return lambda reply: _append(reply, items, 1 if reply[:1] == b"%" else 2)
        return None

    # -- the end of a batched run ---------------------------------------------------------------
    def run_writes(self, keys: list[bytes]) -> None:
        """A run of plain SETs is about to go to Redis: their keys are being written
        (Tier.begin_writes: updated in place once Redis answers, misses for readers until)."""
        self.tier.begin_writes(keys)

    def render_writes(self, items: list, keys: list[bytes], values: list[Any]) -> None:
        """Each SET of the run to Redis; the engine takes the value once Redis acknowledged it.

        The SETs of every client that can send on the shared connection now (no earlier
        request of its own waiting on another connection) go as one block: one write, one
        reply handler, whichever clients sent them. A client's SETs keep their order, as
        its replies keep their places (a reply slot each, taken here in the run's order)."""
        link = self.tier.main if self.tier.up else None
        shared: list[tuple[Any, Slot, int, int]] = []  # (client, its reply slot, first, count)
        j = 0
        for conn, kind, n in items:
            if kind == 0:
                conn.out.append(n)
                self.srv.error_replies += 1
                continue
            count = 1 if kind == BATCH_SET else n
            if link is not None and conn.link is None and self._may_send_now(conn, link):
                shared.append((conn, self.slot(conn), j, count))
            elif count == 1:
                self._set(conn, keys[j], values[j])
            else:
                self._set_block(conn, keys[j:j + count], values[j:j + count])
            j += count
        if shared:
            self._set_shared(link, shared, keys, values)

    def _set_shared(self, link: Link, shared: list, keys: list[bytes], values: list[Any]) -> None:
        """render_writes' block of SETs on the shared connection, and its replies."""
        tier = self.tier
        sent: list[bytes] = []
        texts: list[bytes] = []
        for conn, _, first, count in shared:
            conn.inflight += count
            conn.inflight_link = link
            sent += keys[first:first + count]
            texts += map(_text, values[first:first + count])
        total = len(sent)
        tier.stats.forwarded += total
        ticket = tier.tickets_for(total)

        def done(replies: bytes, errors: int) -> None:
            every_ok = replies == _OK * total
            own = None if every_ok else _split(replies, total)
            tier.writes_answered(ticket, sent, texts if every_ok else
                                 [text if got == _OK else None for text, got in zip(texts, own)])
            self._answer_shared([(conn, slot, count) for conn, slot, _, count in shared], own)

        link.send_many(encode_block(([b"SET"] * total, sent, texts)), total, done)

    def _set_block(self, conn: Any, keys: list[bytes], values: list[Any]) -> None:
        """A block of pipelined SETs: to Redis in one piece, one reply slot, a fill for each."""
        tier = self.tier
        link = self._link(conn, fast=True)
        if link is None or not self._may_send_now(conn, link):
            for key, value in zip(keys, values):
                self._set(conn, key, value)
            return
        texts = [_text(v) for v in values]
        count = len(keys)
        tier.stats.forwarded += count
        ticket = tier.tickets_for(count)
        slot = self.slot(conn)

        def done(replies: bytes, errors: int) -> None:
            if replies == _OK * count:
                tier.writes_answered(ticket, keys, texts)
            else:  # some SET failed: only those acknowledged change the engine
                tier.writes_answered(ticket, keys, [text if got == _OK else None
                                                    for text, got in zip(texts, _split(replies, count))])
            self.answer(conn, slot, replies, errors)

        conn.inflight += count
        conn.inflight_link = link
        link.send_many(encode_block(([b"SET"] * count, keys, texts)), count,
                       lambda replies, errors: self._answered_run(conn, count, done, replies, errors))

    def _set(self, conn: Any, key: bytes, value: Any) -> None:
        tier = self.tier
        text = _text(value)
        link = self._link(conn, fast=True)
        if link is None:
            tier.end_write(key)
            conn.out.append(_TIER_DOWN)
            self.srv.error_replies += 1
            return
        tier.stats.forwarded += 1
        slot = self.slot(conn)
        ticket = tier.ticket()

        def done(reply: bytes) -> None:
            tier.write_answered(ticket, key, text if reply == _OK else None)
            self.answer(conn, slot, reply)

        self._send(conn, link, encode_command([b"SET", key, text]), done)

    def run_msets(self, keys: list[bytes]) -> None:
        """A run of MSETs is about to go to Redis: their keys leave the engine. (Updating them
        in place, as a run of SETs does, costs Python steps per key; invalidating keys the
        engine does not hold, the usual case, costs none.)"""
        self.tier.invalidate(keys)

    def render_msets(self, items: list, commands: list) -> None:
        """Each MSET of the run to Redis as its client sent it (commands: the arguments of
        each item, a block's columns for a block of them): those of every client that can send
        on the shared connection now as one piece with one reply handler, the others in their
        clients' order."""
        link = self.tier.main if self.tier.up else None
        shared: list[tuple[Any, Slot, int]] = []  # (client, its reply slot, its MSETs)
        payloads: list[bytes] = []
        for (conn, kind, count), command in zip(items, commands):  # (count: 1 or the block's)
            if link is None:
                conn.out.append(_TIER_DOWN * count)
                self.srv.error_replies += count
                continue
            self.tier.stats.forwarded += count
            if self._may_send_now(conn, link):
                conn.inflight += count
                conn.inflight_link = link
                shared.append((conn, self.slot(conn), count))
                payloads.append(encode_block(command) if kind == MSET_BLOCK
                                else encode_command(command))
                continue
            for args in (map(list, zip(*command)) if kind == MSET_BLOCK else [command]):
                slot = self.slot(conn)
                self._send(conn, link, encode_command(args),
                           lambda reply, conn=conn, slot=slot: self.answer(conn, slot, reply))
        if not shared:
            return
        total = sum(count for _, _, count in shared)

        def done(replies: bytes, errors: int) -> None:
            self._answer_shared(shared, None if replies == _OK * total else _split(replies, total))

        link.send_many(b"".join(payloads), total, done)

    def _answer_shared(self, shared: list[tuple[Any, Slot, int]],
                       own: Optional[list[bytes]]) -> None:
        """The replies to a piece sent on the shared connection for several clients, each
        client's into its slot (shared: client, slot, how many of the replies are its, in
        order); own: the replies one by one, or None when every one was +OK."""
        pos = 0
        for conn, slot, count in shared:
            conn.inflight -= count
            if own is None:
                self.answer(conn, slot, _OK * count, 0)
            else:
                mine = own[pos:pos + count]
                self.answer(conn, slot, b"".join(mine), _errors(mine))
            pos += count
            self._release(conn)

    def render_reads(self, items: list, keys: list[bytes], replies: list[Optional[bytes]]) -> None:
        """Replies of a run of GET/MGET/EXISTS: the engine's where it had every key, Redis' for
        the rest (replies holds each key's bulk reply, None where the engine missed). A key
        Redis is known not to have (tier.absent) needs no round trip: nil, or not counted."""
        absent = self.tier.absent
        stats = self.tier.stats
        j = 0
        for conn, kind, n in items:
            if kind == 0:
                conn.out.append(n)
                self.srv.error_replies += 1
                continue
            if kind == BATCH_GET or kind == GET_BLOCK:
                count = 1 if kind == BATCH_GET else n
                for k in range(j, j + count):
                    if replies[k] is not None:
                        conn.out.append(replies[k])
                    elif keys[k] in absent:
                        conn.out.append(conn.nil)
                        stats.absent_hits += 1
                    else:
                        self._get(conn, keys[k])
                j += count
                continue
            mine = replies[j:j + n]
            absent_here = 0  # misses of keys Redis does not have either
            if None in mine:
                missed = [key for key, reply in zip(keys[j:j + n], mine) if reply is None]
                if all(key in absent for key in missed):
                    absent_here = len(missed)
                    stats.absent_hits += absent_here
                    mine = [conn.nil if reply is None else reply for reply in mine]
            if None not in mine:
                if kind == BATCH_MGET:
                    conn.out.append(b"*%d\r\n" % n + b"".join(mine))  # type: ignore[arg-type]
                else:
                    conn.out.append(b":%d\r\n" % (n - absent_here))
            else:  # MGET or EXISTS: Redis answers the whole command
                self.forward(conn, [b"MGET" if kind == BATCH_MGET else b"EXISTS", *keys[j:j + n]])
            j += n

    def _get(self, conn: Any, key: bytes) -> None:
        """GET from Redis on the shared connection, filling the engine (tier.fill_get)."""
        link = self._link(conn, fast=True)
        if link is None:
            conn.out.append(_TIER_DOWN)
            self.srv.error_replies += 1
            return
        self.tier.stats.forwarded += 1
        slot = self.slot(conn)
        requests = self.tier.fill_get(key, lambda reply: self.answer(
            conn, slot, conn.nil if reply == _NIL2 else reply))
        for payload, handler in requests:
            self._send(conn, link, payload, handler)


def _append(reply: bytes, items: list[bytes], weight: int) -> bytes:
    """An aggregate reply (array, set or map) with items added at its end; each item counts
    weight in the length line (2 for a key and its value in a RESP2 array)."""
    if reply[:1] not in (b"*", b"~", b"%") or not items:
        return reply
    eol = reply.index(b"\r\n")
    count = int(reply[1:eol]) + weight * len(items)
    return reply[:1] + b"%d" % count + reply[eol:] + b"".join(items)


def _fill_nils(reply: bytes, mine: list[Any], resp3: bool) -> bytes:
    """COMMAND INFO's array with each nil that stands for one of pynq-kv's commands (mine: the
    Command asked at each place, None for Redis') replaced by its entry."""
    if reply[:1] != b"*" or not any(mine):
        return reply
    pos = reply.index(b"\r\n") + 2
    parts = [reply[:pos]]
    for cmd in mine:
        end = frame_replies(reply, pos, 1)[0]
        element = reply[pos:end]
        nil = element in (b"$-1\r\n", b"*-1\r\n", b"_\r\n")
        parts.append(encode(command_info(cmd), resp3) if cmd is not None and nil else element)
        pos = end
    return b"".join(parts) + reply[pos:]


def _text(value: Any) -> bytes:
    """A SET's value as sent to Redis (an integer engine's planner hands on integers)."""
    return value if isinstance(value, bytes) else str(value).encode()


def _split(replies: bytes, count: int) -> list[bytes]:
    """The count replies of a run, one by one."""
    out = []
    pos = 0
    for _ in range(count):
        end = frame_replies(replies, pos, 1)[0]
        out.append(replies[pos:end])
        pos = end
    return out


def _errors(replies: list[bytes]) -> int:
    return sum(1 for reply in replies if reply[:1] == b"-")


def _ignore(reply: bytes) -> None:
    """A reply nobody waits for (the HELLO 3 that follows pynq-kv's own HELLO reply)."""


__all__ = ["Forwarder", "Slot"]
