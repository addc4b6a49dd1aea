"""INFO: Redis' sections that clients and dashboards read, plus the engine's own.

Sections: server, clients, memory, stats, replication, keyspace (as Redis names their fields),
engine (backend, geometry, occupancy and the engine counters of engine.stats()) and appliance
(reloads and the other front-ends' counters), and hosttier (the Redis behind the engine: fills,
invalidations, links; only when there is one). `INFO`, `INFO default`, `INFO all` and
`INFO everything` give them all; an unknown section gives nothing, as in Redis.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from typing import Any, Callable, Optional

from .... import __version__ as PYNQ_KV_VERSION
from .base import Server


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _human(n: float) -> str:
    for unit in ("B", "K", "M", "G", "T"):
        if n < 1024 or unit == "T":
            return f"{n:.2f}{unit}" if unit != "B" else f"{int(n)}B"
        n /= 1024
    return f"{n}"  # pragma: no cover


def _server(srv: Server) -> dict[str, Any]:
    uptime = int(time.time() - srv.started)
    return {
        "redis_version": srv.redis_version,
        "redis_mode": "standalone",
        "server_name": "pynq-kv",
        "pynq_kv_version": PYNQ_KV_VERSION,
        "os": f"{platform.system()} {platform.release()} {platform.machine()}",
        "arch_bits": 64 if sys.maxsize > 2 ** 32 else 32,
        "multiplexing_api": "asyncio",
        "python_version": platform.python_version(),
        "process_id": os.getpid(),
        "tcp_port": srv.port,
        "server_time_usec": int(time.time() * 1_000_000),
        "uptime_in_seconds": uptime,
        "uptime_in_days": uptime // 86400,
    }


def _clients(srv: Server) -> dict[str, Any]:
    return {
        "connected_clients": len(srv.conns),
        "maxclients": srv.config.max_clients,
        "blocked_clients": 0,
        "tracking_clients": 0,
        "client_recent_max_input_buffer": max((c.parser.buffered() for c in srv.conns.values()),
                                              default=0),
    }


def _memory(srv: Server) -> dict[str, Any]:
    rss = _rss_bytes()
    return {
        "used_memory": rss,
        "used_memory_human": _human(rss),
        "used_memory_rss": rss,
        "used_memory_rss_human": _human(rss),
        "maxmemory": 0,
        "maxmemory_human": "0B",
        "maxmemory_policy": "noeviction",
    }


def _stats(srv: Server) -> dict[str, Any]:
    return dict(srv.stats())


def _replication(srv: Server) -> dict[str, Any]:
    return {"role": "master", "connected_slaves": 0}


def _keyspace(srv: Server) -> dict[str, Any]:
    used = srv.engine.occupancy().used
    return {"db0": f"keys={used},expires=0,avg_ttl=0"} if used else {}


def _engine(srv: Server) -> dict[str, Any]:
    eng = srv.engine
    info = eng.info()
    out: dict[str, Any] = {"backend": info["backend"]}
    out.update(info["geometry"])
    out["capacity"] = eng.geometry.capacity
    out["value_kind"] = info["value_kind"]
    out["max_key_bytes"] = info["max_key_bytes"]
    out["max_value_bytes"] = info["max_value_bytes"]
    out["used"] = info["occupancy"]["used"]
    out["load_factor"] = info["occupancy"]["load_factor"]
    out["rules_installed"] = info["rules"]
    out["rule_entries_used"] = info["rule_entries_used"]
    for name, number in eng.stats().items():
        if name != "rule_hits_by_id":
            out[name] = int(number)
    return out


def _appliance(srv: Server) -> dict[str, Any]:
    app = srv.appliance
    out: dict[str, Any] = {"reloads": getattr(app, "reloads", 0),
                           "uptime_in_seconds": int(getattr(app, "uptime", 0))}
    try:
        frontends = app.frontend_stats()
    except Exception as exc:  # another front-end's failure must not break INFO
        out["frontends_error"] = type(exc).__name__
        frontends = {}
    for name, stats in frontends.items():
        if name == "resp":
            continue
        for key, value in stats.items():
            if isinstance(value, (int, float, str)) and not isinstance(value, bool):
                out[f"frontend_{name}_{key}"] = value
    return out


def _hosttier(srv: Server) -> Optional[dict[str, Any]]:
    tier = getattr(srv, "tier", None)
    return tier.info() if tier is not None else None


SECTIONS: dict[str, Callable[[Server], Optional[dict[str, Any]]]] = {
    "server": _server, "clients": _clients, "memory": _memory, "stats": _stats,
    "replication": _replication, "keyspace": _keyspace, "engine": _engine, "appliance": _appliance,
    "hosttier": _hosttier,
}
# With a host tier, INFO is Redis' own reply with these sections of pynq-kv's added.
OWN_SECTIONS = ("engine", "appliance", "hosttier")


def _line(value: Any) -> str:
    text = f"{value:.6f}".rstrip("0").rstrip(".") if isinstance(value, float) else str(value)
    return text.replace("\r", " ").replace("\n", " ")


def info_text(srv: Server, wanted: list[str], among: Any = SECTIONS) -> str:
    """The INFO reply text for the requested sections of `among` (all of them when none or
    all/default/everything are asked for); a section that does not apply (None) is left out."""
    if not wanted or any(w in ("all", "default", "everything") for w in wanted):
        names = list(among)
    else:
        names = [name for name in among if name in wanted]
    parts = []
    for name in names:
        fields = SECTIONS[name](srv)
        if fields is None:
            continue
        lines = [f"# {name.capitalize()}"] + [f"{k}:{_line(v)}" for k, v in fields.items()]
        parts.append("\r\n".join(lines) + "\r\n")
    return "\r\n".join(parts)
