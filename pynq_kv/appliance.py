"""The appliance: one KVEngine and the front-ends that serve it.

Every front-end (Redis/RESP, memcached/UDP, the admin REST service) holds the `Appliance`, never
a backend, and reaches the engine through `appliance.engine`. They all run on one asyncio event
loop, so engine calls never interleave: no locks, and a REST write is ordered with RESP writes
exactly as the loop runs them.

A reload swaps `appliance.engine`. Code that takes the engine and uses it with no `await` in
between (a RESP or UDP tick, one import chunk) always sees a live engine. Code that may await
while it holds one (an admin request: FastAPI resolves dependencies, then runs the route) takes
it with `async with appliance.lease()`; `reload_when_idle()` holds new leases back, waits for the
lent ones to be returned, then reloads, so no request acknowledges a write to an engine a
reload has already copied. With a host tier (a Redis behind the engine, pynq_kv/hosttier.py) the
engine is refilled from Redis instead of copied, and the rules are kept in the tier's rules
file: `rules_changed()` saves them after every change. Front-ends register a stats callable so INFO, /v1/stats and
/metrics can show every front-end's counters side by side, and may register the
`LatencyRecorder` they time their requests with (/metrics shows them as one histogram).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Optional, Union

from .engine import KVEngine
from .hosttier import (
    REPLY_TIMEOUT,
    HostTier,
    RestoreReport,
    load_rules,
    restore_engine,
    save_rules,
)
from .latency import LatencyRecorder
from .layout import FieldLayout
from .overlay import KVOverlay

StatsFn = Callable[[], dict[str, Any]]
# What an appliance is built from: an engine, or an overlay opened by pynq_kv.load().
EngineFactory = Callable[[], Union[KVEngine, KVOverlay]]


class Appliance:
    """The engine being served, how to rebuild it, and the front-ends' counters.

    engine_factory makes the engine: a KVEngine, or a KVOverlay from pynq_kv.load(), whose
    engine is served and which `overlay` keeps (kind, source, board, manifest, front-end);
    `overlay` is None for an engine made directly.

    host_tier: the Redis behind the engine; the engine starts with its rules file and its hot
    keys (`restored` says what was loaded), reloads refill from it, and the appliance closes it.
    state_path (a snapshot file) is for an appliance without one.
    """

    def __init__(self, engine_factory: EngineFactory, *,
                 layout: Optional[FieldLayout] = None,
                 state_path: Optional[Path] = None,
                 host_tier: Optional[HostTier] = None, refill: bool = True) -> None:
        if state_path is not None and host_tier is not None:
            raise ValueError("an appliance keeps its data in a state file or in a host tier, "
                             "not both")
        self._factory = engine_factory
        self.engine, self.overlay = self._make()
        self.layout = layout
        self.state_path = state_path
        self.host_tier = host_tier
        self.restored: Optional[RestoreReport] = None
        # The engine's coherence with the host tier (pynq_kv.tier.Tier), once serve starts it.
        self.tier: Optional[Any] = None
        self.started = time.time()
        self.reloads = 0
        self._frontends: dict[str, StatsFn] = {}
        self._latencies: dict[str, LatencyRecorder] = {}
        self._leases = 0
        self._reloading: Optional[asyncio.Future] = None  # done when the running reload ends
        self._returned: Optional[asyncio.Future] = None  # done when the last lease comes back
        try:
            if host_tier is not None and refill:
                self.refill()
            elif state_path is not None and Path(state_path).exists():
                self.engine.restore(state_path)
        except BaseException:  # a state file or rules file the engine refuses: close it
            self.engine.close()
            raise

    def _make(self) -> tuple[KVEngine, Optional[KVOverlay]]:
        made = self._factory()
        return (made.engine, made) if isinstance(made, KVOverlay) else (made, None)

    @property
    def backend(self) -> str:
        return self.engine.backend.name

    @property
    def uptime(self) -> float:
        return time.time() - self.started

    def register_frontend(self, name: str, stats: StatsFn,
                          latency: Optional[LatencyRecorder] = None) -> None:
        """Make a front-end's counters (and the recorder it times requests with, if it has one)
        part of the appliance's stats; name is e.g. "resp", "udp", "admin"."""
        self._frontends[name] = stats
        if latency is not None:
            self._latencies[name] = latency
        else:
            self._latencies.pop(name, None)

    def unregister_frontend(self, name: str) -> None:
        self._frontends.pop(name, None)
        self._latencies.pop(name, None)

    def frontend_stats(self) -> dict[str, dict[str, Any]]:
        return {name: stats() for name, stats in self._frontends.items()}

    def frontend_latencies(self) -> dict[str, LatencyRecorder]:
        """The registered front-ends' latency recorders, by front-end name."""
        return dict(self._latencies)

    def _refill(self, engine: KVEngine) -> RestoreReport:
        """The host tier's rules file, then its hot keys, into engine."""
        assert self.host_tier is not None
        load_rules(self.host_tier.rules_path, engine)
        # Bounded replies and no retries: a reload runs on the event loop.
        client = self.host_tier.client(timeout=REPLY_TIMEOUT)
        try:
            return restore_engine(engine, client)
        finally:
            client.close()
            if self.tier is not None:  # entries came in other than as the tier's fills
                self.tier.entries_loaded()

    def refill(self) -> RestoreReport:
        """Fill the engine from the host tier (serve calls it once the tier tracks changes, so
        nothing Redis changes during the restore is missed: refill=False at construction)."""
        self.restored = self._refill(self.engine)
        return self.restored

    def rules_changed(self) -> None:
        """Save the rules to the host tier's rules file (durably) after a rule was added or
        removed; nothing to do without a host tier (a state file saves them with the entries)."""
        if self.host_tier is not None:
            save_rules(self.host_tier.rules_path, self.engine)

    def reload(self) -> int:
        """Rebuild the engine (through the factory: pynq_kv.load() reloads the overlay) and put
        every entry and rule back: from the host tier when there is one (its rules file and its
        hot keys), else from a copy of the old engine.

        The copy is taken before the old engine closes; if the new engine cannot be made or
        refuses the copy, the old one stays in service. Returns the entries restored.
        """
        snap = self.engine.snapshot() if self.host_tier is None else None
        fresh, overlay = self._make()
        try:
            if snap is not None:
                restored = fresh.load_snapshot(snap)
            else:
                self.restored = self._refill(fresh)
                restored = self.restored.loaded
        except BaseException:
            fresh.close()
            raise
        old, self.engine, self.overlay = self.engine, fresh, overlay
        old.close()
        self.reloads += 1
        return restored

    @contextlib.asynccontextmanager
    async def lease(self) -> AsyncIterator[KVEngine]:
        """The engine, for work that may await while holding it: no reload starts until it is
        returned, and none is running while it is out."""
        while self._reloading is not None:
            await asyncio.shield(self._reloading)
        self._leases += 1
        try:
            yield self.engine
        finally:
            self._leases -= 1
            if not self._leases and self._returned is not None and not self._returned.done():
                self._returned.set_result(None)

    async def reload_when_idle(self) -> int:
        """reload() on the loop once every lease is back; new leases wait until it is done.

        One reload at a time. The reload itself runs on the loop without yielding (RESP and UDP
        ticks must see the old engine or the new one, never the copy in between): for the model
        a few ms per 10,000 entries.
        """
        while self._reloading is not None:
            await asyncio.shield(self._reloading)
        loop = asyncio.get_running_loop()
        self._reloading = loop.create_future()
        try:
            if self._leases:
                self._returned = loop.create_future()
                await asyncio.shield(self._returned)
            return self.reload()
        finally:
            self._returned = None
            done, self._reloading = self._reloading, None
            done.set_result(None)

    def save(self) -> Optional[int]:
        """Write the tables to the state file (atomically), if serve was given one."""
        if self.state_path is None:
            return None
        return self.engine.dump(self.state_path)

    def close(self) -> None:
        """Close the engine, then the host tier (the private redis-server flushes its AOF)."""
        try:
            self.engine.close()
        finally:
            if self.host_tier is not None:
                self.host_tier.close()
