"""``pynq-kv serve``: the appliance (Redis, memcached-UDP and admin front-ends over one engine)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import click

from ..serve.config import DEFAULT_STORE
from ..serve.eventloop import EVENT_LOOPS
from .common import CLIError, config_of, describe

# -- serve -----------------------------------------------------------------------------------


@click.command()
@click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
              envvar="PYNQ_KV_CONFIG", metavar="FILE",
              help="TOML file with the same settings as the flags (flags win) [env PYNQ_KV_CONFIG].")
@click.option("--bind", default=None, metavar="ADDR",
              help="Address every front-end listens on [default 127.0.0.1].")
@click.option("--resp-port", type=int, default=None, help="Redis (RESP) TCP port [default 6380].")
@click.option("--udp-port", type=int, default=None,
              help="memcached UDP port (binary and text protocol) [default 11211].")
@click.option("--admin-port", type=int, default=None, help="Admin REST/dashboard port [default 8080].")
@click.option("--udp-allow", multiple=True, metavar="CIDR",
              help="memcached/UDP: answer sources in this IPv4 network, replies bounded by "
                   "--udp-budget (repeatable). Off loopback, UDP stays off without "
                   "--udp-allow or --udp-trust; with either, other sources are denied.")
@click.option("--udp-deny", multiple=True, metavar="CIDR",
              help="memcached/UDP: drop datagrams from this IPv4 network (repeatable; checked "
                   "first, then --udp-trust, then --udp-allow: first match wins).")
@click.option("--udp-trust", multiple=True, metavar="CIDR",
              help="memcached/UDP: answer this IPv4 network with no reply budget (repeatable). "
                   "On loopback with no lists: 127.0.0.0/8 is trusted, others allowed.")
@click.option("--udp-budget", type=int, default=None, metavar="M",
              help="memcached/UDP: an allowed source's replies total at most M x its request's "
                   "bytes, then one 'use TCP' error; 0..255, 0 = no budget [default 2] "
                   "(docs/frontend.md §10).")
@click.option("--disable", multiple=True, type=click.Choice(["resp", "udp", "admin"]),
              help="Do not start this front-end (repeatable).")
@click.option("--store", type=click.Choice(["private", "url", "none"]), default=None,
              help="Where the data lives: a private redis-server (AOF in --data-dir), the Redis "
                   f"of --redis-url, or none: the engine only [default {DEFAULT_STORE}; "
                   "--data-dir/--appendfsync/--redis-server imply private, --redis-url url] "
                   "(docs/hosttier.md).")
@click.option("--no-store", is_flag=True, default=False,
              help="Memory-only mode: no Redis behind the engine (the global --state may keep "
                   "a snapshot file); the same as --store none.")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              metavar="DIR",
              help="The host tier's folder: the private redis-server's AOF, config, log and "
                   "socket, and the wildcard rules file [default ./pynq-kv-data].")
@click.option("--appendfsync", type=click.Choice(["always", "everysec", "no"]), default=None,
              help="The private redis-server's AOF fsync policy [default everysec].")
@click.option("--redis-url", default=None, metavar="URL", envvar="PYNQ_KV_REDIS_URL",
              help="Use this Redis (redis://, rediss://, unix://) instead of a private "
                   "redis-server [env PYNQ_KV_REDIS_URL].")
@click.option("--redis-server", default=None, metavar="PATH",
              help="The redis-server binary of the private host tier [default redis-server].")
@click.option("--replace-settings", is_flag=True, default=False,
              help="Store the value kind, geometry, layout and store given now in DATA_DIR/"
                   "settings.json, replacing those of earlier starts (else a contradiction is "
                   "refused); the stored rules must load with them.")
@click.option("--save-interval", type=float, default=None, metavar="SECONDS",
              help="With a state file: save it this often, 0 = only at shutdown [default 60].")
@click.option("--requirepass", default=None, metavar="PASSWORD",
              help="Password for RESP AUTH [env PYNQ_KV_REQUIREPASS]; required off loopback.")
@click.option("--admin-token", default=None, metavar="TOKEN",
              help="Bearer token for mutating admin routes [env PYNQ_KV_ADMIN_TOKEN]; "
                   "required off loopback.")
@click.option("--layout", default=None, envvar="PYNQ_KV_LAYOUT", metavar="SPEC",
              help="Field layout for rules and lookups by field, e.g. 'src_ip:ipv4,dst_port:port'.")
@click.option("--maxclients", "max_clients", type=int, default=None, metavar="N",
              help="RESP: most clients at once, then '-ERR max number of clients reached' "
                   "[default 10000; other limits: the config file's [resp] table].")
@click.option("--maxmemory-clients", "maxmemory_clients", type=int, default=None, metavar="BYTES",
              help="RESP: memory all clients' pending input may hold together; past it the "
                   "client holding most is disconnected, 0 = no limit [default 268435456].")
@click.option("--timeout", "idle_timeout", type=float, default=None, metavar="SECONDS",
              help="RESP: close a client idle this long, 0 = never (Redis' timeout) [default 0].")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]),
              default=None, help="Log level [default info].")
@click.option("--event-loop", type=click.Choice(EVENT_LOOPS), default=None,
              help="The front-ends' event loop: uvloop (less CPU per request), asyncio's own, "
                   "or auto: uvloop when installed [default auto].")
@click.pass_context
def serve(ctx: click.Context, config_file: Optional[Path], bind: Optional[str],
          resp_port: Optional[int], udp_port: Optional[int], admin_port: Optional[int],
          udp_allow: tuple[str, ...], udp_deny: tuple[str, ...], udp_trust: tuple[str, ...],
          udp_budget: Optional[int], disable: tuple[str, ...], store: Optional[str],
          no_store: bool, data_dir: Optional[Path], appendfsync: Optional[str],
          redis_url: Optional[str], redis_server: Optional[str],
          replace_settings: bool, save_interval: Optional[float],
          requirepass: Optional[str],
          admin_token: Optional[str], layout: Optional[str], max_clients: Optional[int],
          maxmemory_clients: Optional[int], idle_timeout: Optional[float], log_level: Optional[str],
          event_loop: Optional[str]) -> None:
    """Run the appliance: Redis, memcached-UDP and admin front-ends over one engine.

    \b
    The engine is opened through pynq_kv.load(): backend, board and geometry come from the
    global options (pynq-kv --backend rtl --rows 1024 serve) or the config file. With a host
    tier (--store private, --data-dir, --redis-url) a Redis keeps the data and the engine starts
    filled from it, most recently used keys first; its wildcard rules are kept in
    DATA_DIR/rules.json, and the settings that say how the data and rules are read (value
    kind, geometry, layout, store) in DATA_DIR/settings.json from the first start on: a later
    start takes those not given from it and refuses ones that differ (--replace-settings
    replaces them). Without one (--no-store) the tables live in memory
    unless a state file is given with the global --state option or `state = "..."` in the config
    file: then serve loads it at start and saves it periodically and at shutdown. Stop with
    Ctrl-C or SIGTERM (graceful: nothing is lost).
    """
    import logging

    from ..serve import eventloop
    from ..serve.runner import serve as run_appliance
    from ..serve.config import build_config, load_config_file

    cfg = config_of(ctx)
    parent = ctx.parent
    assert parent is not None
    flags: dict[str, Any] = {}

    def explicit(name: str) -> bool:
        return parent.get_parameter_source(name) not in (
            click.core.ParameterSource.DEFAULT, None)

    if explicit("backend"):
        flags["backend"] = cfg.backend
    if cfg.board:
        flags["board"] = cfg.board
    if explicit("state"):
        flags["state"] = cfg.state
    if cfg.value_kind:
        flags["value_kind"] = cfg.value_kind
    if cfg.geometry:
        flags["geometry"] = dict(cfg.geometry)
    if no_store:
        if store not in (None, "none"):
            raise CLIError(f"--no-store contradicts --store {store}")
        store = "none"
    given = {"store": store, "data_dir": data_dir, "appendfsync": appendfsync,
             "redis_url": redis_url, "redis_server": redis_server,
             "bind": bind, "resp_port": resp_port, "udp_port": udp_port, "admin_port": admin_port,
             "save_interval": save_interval, "requirepass": requirepass,
             "admin_token": admin_token, "layout": layout, "log_level": log_level,
             "udp_budget": udp_budget, "replace_settings": replace_settings or None,
             "event_loop": event_loop}
    flags.update({k: v for k, v in given.items() if v is not None})
    networks = {"udp_allow": udp_allow, "udp_deny": udp_deny, "udp_trust": udp_trust}
    flags.update({k: list(v) for k, v in networks.items() if v})
    resp_limits = {"max_clients": max_clients, "maxmemory_clients": maxmemory_clients,
                   "idle_timeout": idle_timeout}
    if any(v is not None for v in resp_limits.values()):
        flags["resp"] = {k: v for k, v in resp_limits.items() if v is not None}
    if disable:
        flags["disable"] = list(disable)
    file_settings = load_config_file(config_file) if config_file else {}
    config = build_config(file_settings, flags)
    logging.basicConfig(level=config.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        eventloop.run(run_appliance(config), config.event_loop)
    except OSError as exc:
        raise CLIError(f"cannot start: {describe(exc)}") from exc
