"""Run the appliance: one engine, the Redis, memcached-UDP and admin front-ends, one event loop.

`serve()` opens the host tier (when there is one: a private redis-server or the user's Redis,
pynq_kv/hosttier.py) and fills the engine from it, starts everything, logs where each front-end
listens, and on SIGINT/SIGTERM stops accepting, closes every front-end, writes the state file
(when there is one) and closes the engine, then the host tier. Front-ends share the loop, so engine calls never interleave (see pynq_kv/appliance.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import socket
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterator, Optional

from .. import __version__
from ..appliance import Appliance
from ..hosttier import HostTier
from ..overlay import KVOverlay, load
from .accept import Listener, listening_socket
from .config import ServeConfig, StoredSettings, with_stored_settings
from .eventloop import running_loop_name

log = logging.getLogger("pynq_kv.serve")
# The admin service's listen backlog: uvicorn's default, which it used when it listened itself.
ADMIN_BACKLOG = 2048
# On shutdown, accepted bulk imports get this long to finish before the state file is saved.
IMPORT_DRAIN_SECONDS = 30.0


@dataclass
class Running:
    """What serve started: the appliance, the address of every listening front-end, and the
    settings it runs with (completed from the data dir's settings file, `stored`)."""

    appliance: Appliance
    addresses: dict[str, tuple[str, int]] = field(default_factory=dict)
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    config: Optional[ServeConfig] = None
    stored: Optional[StoredSettings] = None

    async def close(self) -> None:
        """Close front-ends newest first, then save and close the engine and the host tier."""
        while self.closers:
            closer = self.closers.pop()
            try:
                await closer()
            except Exception:  # one front-end failing to close must not keep the state unsaved
                log.exception("error while closing a front-end")
        saved = self.appliance.save()
        if saved is not None:
            log.info("saved %d entries and %d rules to %s", saved, len(self.appliance.engine.rules()),
                     self.appliance.state_path)
        self.appliance.close()


def uses_virtual_board(config: ServeConfig) -> bool:
    """The rtl overlay is the whole kv_top (the virtual board); with UDP on, its port is bridged."""
    return config.backend == "rtl" and config.enabled("udp")


def make_appliance(config: ServeConfig) -> Appliance:
    """The overlay the config describes, opened (and on reload re-opened) by pynq_kv.load(),
    filled from the host tier (opened here, from the main thread: the private redis-server
    stops with the thread that started it) or with the tables of the state file when it
    exists."""
    def factory() -> KVOverlay:
        return load(config.board, config.backend, geometry=config.geometry,
                    value_kind=config.value_kind)

    settings = config.host_tier_settings()
    tier = HostTier.open(settings) if settings is not None else None
    try:
        appliance = Appliance(factory, state_path=config.state, host_tier=tier, refill=False)
    except BaseException:
        if tier is not None:
            tier.close()
        raise
    try:  # a board's key width is the bitstream's: the layout is made for the loaded engine
        appliance.layout = config.make_layout(appliance.engine.geometry.key_width)
    except BaseException:
        appliance.close()
        raise
    return appliance


async def _start_admin(running: Running, config: ServeConfig) -> None:
    import uvicorn

    from pynq_kv_api.main import create_app

    class EmbeddedServer(uvicorn.Server):
        """uvicorn without its own signal handlers (serve() owns SIGINT/SIGTERM), accepting
        through pynq-kv's Listener instead of the loop's server, so that running out of
        descriptors is handled as for RESP on every event loop (pynq_kv/serve/accept.py)."""

        def __init__(self, config: uvicorn.Config) -> None:
            super().__init__(config)
            self.listeners: list[Listener] = []

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

        async def startup(self, sockets: Optional[list[socket.socket]] = None) -> None:
            """uvicorn's startup for given sockets, with lifespan off (the Config below)."""
            config = self.config

            def protocol() -> asyncio.Protocol:
                return config.http_protocol_class(  # type: ignore[call-arg]
                    config=config, server_state=self.server_state, app_state=self.lifespan.state)

            self.listeners = [Listener(protocol, sock, log, "admin") for sock in sockets or ()]
            self.servers = self.listeners  # type: ignore[assignment]  # what shutdown() closes
            self.started = True

        @property
        def accept_errors(self) -> int:
            return sum(listener.accept_errors for listener in self.listeners)

    limits = {name: value for name, value in (("max_body_bytes", config.admin_max_body),
                                              ("max_import_bytes", config.admin_max_import))
              if value is not None}
    sock = listening_socket(config.bind, config.admin_port, ADMIN_BACKLOG)
    server: Optional[EmbeddedServer] = None
    try:
        app = create_app(running.appliance, token=config.admin_token, config=config.public(),
                         accept_errors=lambda: server.accept_errors if server else 0, **limits)
    except BaseException:
        sock.close()
        raise
    server = EmbeddedServer(uvicorn.Config(app, log_level="warning", access_log=False,
                                           lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            sock.close()
            task.result()  # raises what stopped it
            raise RuntimeError("the admin service stopped during start-up")
        await asyncio.sleep(0.01)

    async def close() -> None:
        server.should_exit = True
        await task
        sock.close()
        running_imports = sum(1 for job in app.state.imports.all() if job.state == "running")
        if running_imports:
            log.info("finishing %d bulk import(s) before shutdown (at most %g s)", running_imports,
                     IMPORT_DRAIN_SECONDS)
        for job in await app.state.imports.drain(IMPORT_DRAIN_SECONDS):
            log.warning("import %d: %s", job.id, job.error)

    running.closers.append(close)
    running.addresses["admin"] = sock.getsockname()[:2]


async def _start_resp(running: Running, config: ServeConfig) -> None:
    from .resp import RespConfig, start_resp_server

    server = await start_resp_server(running.appliance, config.bind, config.resp_port,
                                     config=RespConfig(requirepass=config.requirepass,
                                                       **config.resp))
    running.closers.append(server.close)
    running.addresses["resp"] = (config.bind, server.port)


async def _start_udp(running: Running, config: ServeConfig) -> None:
    if uses_virtual_board(config):
        from .memcached.bridge import start_board_bridge as start_udp_server
    else:
        from .memcached.server import start_udp_server

    admission = config.udp_admission()
    assert admission is not None  # start() skips UDP when it is off
    server = await start_udp_server(running.appliance, config.bind, config.udp_port,
                                    admission=admission)
    running.closers.append(server.close)
    running.addresses["udp"] = (config.bind, server.port)


async def _start_tier(running: Running) -> None:
    """Track Redis' changes (pynq_kv.tier), then fill the engine from it: a change made while
    the restore reads reaches the engine after it, in order."""
    from ..tier import Tier

    appliance = running.appliance
    tier = Tier(appliance, appliance.host_tier)
    await tier.start()
    appliance.tier = tier
    running.closers.append(tier.close)  # closed after every front-end
    appliance.refill()
    engine = appliance.engine
    # a data plane that something outside can write (not the model's): its writes go to Redis
    # too, polled every 2 ms while the log is empty (the model: no one can, so no polling)
    if engine.backend.wired_data_plane and engine.changelog_stats().depth:
        from ..writeback import ChangeDrain

        tier.drain = ChangeDrain(appliance, tier)
        tier.drain.start()
        running.closers.append(tier.drain.close)  # (closers run newest first: before the tier)


STARTERS = {"resp": _start_resp, "udp": _start_udp, "admin": _start_admin}


async def start(config: ServeConfig) -> Running:
    """Complete the config from the data dir's stored settings, build the appliance and start
    every enabled front-end, then store the settings (first start, --replace-settings); on any
    failure undo it all, the settings file untouched."""
    config, stored = with_stored_settings(config)
    appliance = make_appliance(config)
    running = Running(appliance, config=config, stored=stored)
    try:
        if appliance.host_tier is not None:
            await _start_tier(running)
        for name, starter in STARTERS.items():
            if config.udp_on() if name == "udp" else config.enabled(name):
                await starter(running, config)
        if stored is not None and stored.save(config, appliance.engine):
            log.info("settings written to %s", stored.path)
    except BaseException:
        await running.close()
        raise
    return running


def describe(running: Running, config: ServeConfig) -> list[str]:
    """The start-up banner: version, backend, geometry, and what listens where."""
    engine = running.appliance.engine
    g = engine.geometry
    occ = engine.occupancy()
    tier = running.appliance.host_tier
    source = (f" from {config.state}" if config.state else " from Redis" if tier is not None
              else "")
    lines = [
        f"pynq-kv {__version__} serving backend={engine.backend.name} "
        f"key_width={g.key_width} value_width={g.value_width} ways={g.ways} rows={g.rows} "
        f"stash={g.stash} rules={g.rules} (capacity {g.capacity}, {occ.used} entries loaded"
        + source + ")",
        f"  event loop: {running_loop_name()}",
    ]
    udp_label = ("memcached (binary + text) on udp://{}:{}, bridged to the virtual board's "
                 "Ethernet port (Verilated kv_top)" if uses_virtual_board(config)
                 else "memcached (binary + text) on udp://{}:{}")
    labels = {"resp": "Redis (RESP2/RESP3) on tcp://{}:{}",
              "udp": udp_label,
              "admin": "admin API on http://{}:{}/ (OpenAPI docs at /docs, metrics at /metrics)"}
    for name, template in labels.items():
        if name in running.addresses:
            host, port = running.addresses[name]
            lines.append("  " + template.format(host, port))
            if name == "udp":
                admission = config.udp_admission()
                assert admission is not None
                lines.append(f"    UDP admission (first match): {admission.describe()}")
    if config.enabled("udp") and not config.udp_on():
        lines.append(f"  memcached/UDP is OFF: {config.bind} is not loopback and no "
                     "--udp-allow/--udp-trust network was given (UDP has no password; name "
                     "the networks that may use it)")
    if tier is not None:
        if running.appliance.restored is not None:
            lines.append(f"  {running.appliance.restored.describe()}")
        lines.append(f"  host tier: {tier.describe()}; wildcard rules in {tier.rules_path}")
        if running.stored is not None:
            lines.append(f"  {running.stored.describe(config)}")
    elif config.state and config.save_interval:
        lines.append(f"  state file {config.state}, saved every {config.save_interval:g} s "
                     "and at shutdown")
    elif config.state:
        lines.append(f"  state file {config.state}, saved at shutdown")
    else:
        lines.append("  no state file: the tables live in memory only (--state to keep them)")
    return lines


async def _save_periodically(appliance: Appliance, interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        try:
            appliance.save()
        except Exception:  # a full disk must not stop serving; the next round tries again
            log.exception("periodic save to %s failed", appliance.state_path)


async def serve(config: ServeConfig, *, ready: Optional[Callable[[Running], Any]] = None) -> None:
    """Run until SIGINT/SIGTERM; `ready` is called once everything listens."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
    running = await start(config)
    assert running.config is not None
    config = running.config  # with the data dir's stored settings
    saver = None
    try:
        for line in describe(running, config):
            log.info("%s", line)
        # Everything start-up made (FastAPI, pydantic, numpy, the engine) lives as long as the
        # server: out of the collector's sight, a full collection walks only what serving makes,
        # ~10 ms instead of ~100 ms of a stalled loop under bursts of connections (issue 16).
        gc.collect()
        gc.freeze()
        if config.state and config.save_interval:
            saver = asyncio.create_task(_save_periodically(running.appliance, config.save_interval))
        if ready is not None:
            ready(running)
        await stop.wait()
        log.info("shutting down")
    finally:
        if saver is not None:
            saver.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await saver
        await running.close()
        for sig in installed:
            loop.remove_signal_handler(sig)
    log.info("stopped")
