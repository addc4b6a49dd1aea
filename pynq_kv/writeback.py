"""The data plane's writes into Redis: the host drains the engine's change log (engine.md §10).

On a board (and on the virtual board, `--backend rtl serve`) memcached SETs and DELETEs that
arrive on the Ethernet port change the tables with no host involved, and the engine logs each
change. With a host tier, `ChangeDrain` reads the log on the event loop — every `interval`
seconds while it is empty, at once again while records keep coming — and writes each record to
Redis on the shared connection, in the log's order: a SET as `SET key value`, a delete as `DEL
key`. So that the engine holds what Redis holds, each key's last record of a drain step is put
(back) into the engine as Redis gets it — a fill or a host write may have replaced the wire's
value since — and a fill asked for before the drain is discarded (`Tier.shield`). A host write
of a key between the wire's write and its drain is overwritten by the drain (last drained wins).

An overflow (records were dropped: the wire wrote faster than the host drained) is counted and
logged, and the host resynchronizes: every entry the engine holds is written to Redis (that
recovers every SET the log lost, because the table still holds it), then the overflow flag is
cleared. A DELETE lost in an overflow cannot be recovered — Redis may keep a key the wire
deleted; docs/hosttier.md says so.

Loss window on a power cut: the records still in the log, plus the records drained and sent but
not yet made durable by Redis (with `appendfsync always`, none once Redis has answered).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Optional

from .redislink import encode_command

log = logging.getLogger("pynq_kv.writeback")

DRAIN_BATCH = 1024  # records read per drain step
RESYNC_BATCH = 512  # keys per MSET when resynchronizing after an overflow


class ChangeDrain:
    """Drains the appliance engine's change log into the host tier (`tier.main`)."""

    def __init__(self, appliance: Any, tier: Any, interval: float = 0.002) -> None:
        self.appliance = appliance
        self.tier = tier
        self.interval = interval
        self.drained = 0  # records written to Redis
        self.acknowledged = 0  # of those, answered by Redis without an error
        self.errors = 0
        self.resyncs = 0
        self.gaps = 0  # records the log dropped, from the jumps in sequence numbers
        self.last_seq: Optional[int] = None
        self._task: Optional[asyncio.Task] = None

    def stats(self) -> dict[str, int]:
        return {"changelog_drained": self.drained, "changelog_acknowledged": self.acknowledged,
                "changelog_errors": self.errors, "changelog_resyncs": self.resyncs,
                "changelog_gaps": self.gaps}

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self.step()  # what the wire wrote until now still goes to Redis

    async def _run(self) -> None:
        while True:
            try:
                busy = self.step()
            except Exception:  # a failing step must not stop the drain for good
                log.exception("draining the change log failed")
                busy = False
            await asyncio.sleep(0 if busy else self.interval)

    def step(self) -> bool:
        """One drain step; True if it found records (drain again at once)."""
        if not self.tier.up:
            return False
        engine = self.appliance.engine
        stats = engine.changelog_stats()
        if not stats.depth:
            return False
        changes = engine.drain_changes(DRAIN_BATCH)
        main = self.tier.main
        final: dict[bytes, Any] = {}  # each key's last change of this step
        for change in changes:
            if self.last_seq is not None and change.seq != self.last_seq + 1:
                self.gaps += change.seq - self.last_seq - 1
            self.last_seq = change.seq
            key = _text(change.key)
            final[key] = change
            if change.op == "set":
                payload = encode_command([b"SET", key, _text(change.value)])
            else:
                payload = encode_command([b"DEL", key])
            self.drained += 1
            main.send(payload, self._answered)
        if final:
            self.tier.shield(list(final))
            put = [c for c in final.values() if c.op == "set"]
            gone = [c.key for c in final.values() if c.op != "set"]
            if put:
                engine.set_batch([c.key for c in put], [c.value for c in put])
            if gone:
                engine.delete_batch(gone)
        if stats.overflowed:
            self._resync(engine)
        return bool(changes)

    def _answered(self, reply: bytes) -> None:
        if reply[:1] == b"-":
            self.errors += 1
            log.error("Redis refused a change from the data plane: %s",
                      reply.strip().decode("latin-1"))
        else:
            self.acknowledged += 1

    def _resync(self, engine: Any) -> None:
        """After an overflow: every entry of the engine into Redis, then clear the flag."""
        self.resyncs += 1
        stats = engine.changelog_stats()
        log.error("the change log overflowed (%d records dropped): writing the engine's %d "
                  "entries to Redis", stats.dropped, len(engine))
        batch: list[bytes] = []
        keys: list[bytes] = []
        for key, value in engine.items():
            keys.append(_text(key))
            batch += [keys[-1], _text(value)]
            if len(keys) == RESYNC_BATCH:
                self._mset(batch, keys)
                batch, keys = [], []
        if keys:
            self._mset(batch, keys)
        engine.clear_changelog_overflow()

    def _mset(self, batch: list[bytes], keys: list[bytes]) -> None:
        self.tier.shield(keys)
        self.tier.main.send(encode_command([b"MSET", *batch]), self._answered)


def _text(item: Any) -> bytes:
    """A key or value as the bytes a RESP client would send (integers in decimal)."""
    return item if isinstance(item, bytes) else str(int(item)).encode()


__all__ = ["ChangeDrain"]
