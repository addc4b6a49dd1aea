"""Settings of `pynq-kv serve`: defaults < config file (TOML) < command-line flags.

The config file uses the flags' names with underscores (``resp_port = 6390``), so anything a flag
can say a file can say, and one validation covers both.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Optional

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from ..errors import KeyFormatError, KVError
from ..geometry import Geometry
from ..hosttier import APPENDFSYNC, HostTierSettings, mask_url
from ..keys import VALUE_KINDS
from ..layout import FieldLayout
from ..net.addr import is_loopback
from ..options import GEOMETRY_KEYS, EngineOptions
from ..overlay import AUTO, unavailable_here
from ..admission import DEFAULT_BUDGET, Admission, AdmissionError, admission_from_options

FRONTENDS = ("resp", "udp", "admin")
# Where the data lives (docs/hosttier.md): "none" in the engine only (a --state snapshot file at
# most), "private" in a redis-server serve starts, "url" in the Redis at redis_url.
STORES = ("none", "private", "url")
# Memory-only until the RESP front-end writes through to Redis (issue 15); then "private".
DEFAULT_STORE = "none"
# Settings that only mean something with a host tier: given without a store, they ask for the
# private redis-server (redis_url: for that Redis).
_PRIVATE_SETTINGS = ("data_dir", "appendfsync", "redis_server")
# The RESP front-end's limits a config file may set in its [resp] table (RespConfig's fields):
# name -> (type, smallest allowed value). Timeouts of 0 mean "never".
RESP_LIMITS: dict[str, tuple[type, float]] = {
    "max_clients": (int, 1),
    "max_bulk_len": (int, 1),
    "max_query_buffer": (int, 1024),
    "maxmemory_clients": (int, 0),  # all clients' buffers together (0 = no limit)
    "output_high_water": (int, 1024),
    "idle_timeout": (float, 0),
    "command_timeout": (float, 0),
    "tick_commands": (int, 1),  # one client's commands run per tick
    "tick_bytes": (int, 1024),  # input parsed per tick, all clients together
}


class ConfigError(KVError, ValueError):
    """A config file or flag combination serve cannot start with."""


@dataclass
class ServeConfig:
    """Everything serve needs to start; ports of 0 pick a free port (tests)."""

    backend: str = AUTO  # what pynq_kv.load() accepts: auto, pynq, xrt, model, rtl
    board: Optional[str] = None  # overlays/<board>; None: load() finds it
    bind: str = "127.0.0.1"
    resp_port: int = 6380
    udp_port: int = 11211
    admin_port: int = 8080
    disable: list[str] = field(default_factory=list)
    store: str = DEFAULT_STORE  # one of STORES
    data_dir: Path = Path("pynq-kv-data")  # the host tier's data, lock and rules file
    appendfsync: str = "everysec"  # the private redis-server's AOF fsync policy
    redis_url: Optional[str] = None  # store "url": redis://, rediss:// or unix:// URL
    redis_server: str = "redis-server"  # store "private": the binary
    state: Optional[Path] = None  # store "none" only: the snapshot file
    save_interval: float = 60.0
    requirepass: Optional[str] = None
    admin_token: Optional[str] = None
    value_kind: str = "bytes"
    layout: Optional[str] = None
    geometry: dict[str, int] = field(default_factory=dict)
    resp: dict[str, float] = field(default_factory=dict)  # RESP limits, see RESP_LIMITS
    # The admin service's body limits in bytes: any request, a bulk import (POST /v1/entries);
    # a larger body is 413 before it is read. None: the service's defaults (pynq_kv_api.limits).
    admin_max_body: Optional[int] = None
    admin_max_import: Optional[int] = None
    # memcached/UDP admission (frontend.md §10): networks denied, trusted (no reply budget) and
    # allowed (budget udp_budget x the request's bytes); see guard.admission_from_options.
    udp_allow: list[str] = field(default_factory=list)
    udp_deny: list[str] = field(default_factory=list)
    udp_trust: list[str] = field(default_factory=list)
    udp_budget: int = DEFAULT_BUDGET
    log_level: str = "info"

    def enabled(self, frontend: str) -> bool:
        return frontend not in self.disable

    def udp_admission(self) -> Optional[Admission]:
        """The UDP admission table, or None when UDP stays off (off loopback, no allow-list)."""
        try:
            return admission_from_options(loopback_bind=is_loopback(self.bind),
                                          allow=self.udp_allow, deny=self.udp_deny,
                                          trust=self.udp_trust, budget=self.udp_budget)
        except AdmissionError as exc:
            raise ConfigError(str(exc)) from None

    def udp_on(self) -> bool:
        """UDP is enabled and some source may use it."""
        return self.enabled("udp") and self.udp_admission() is not None

    def host_tier_settings(self) -> Optional[HostTierSettings]:
        """The host tier to open, or None when the data lives in the engine only."""
        if self.store == "none":
            return None
        return HostTierSettings(Path(self.data_dir), self.appendfsync,
                                self.redis_url if self.store == "url" else None,
                                self.redis_server)

    def engine_options(self) -> EngineOptions:
        """Backend, geometry, value kind and layout: the engine these settings describe."""
        return EngineOptions(self.backend, self.geometry, self.value_kind, self.layout)

    def make_geometry(self) -> Geometry:
        return self.engine_options().make_geometry()

    def make_layout(self, key_width: int) -> Optional[FieldLayout]:
        """The FieldLayout of "name:type,name:type" (rules and lookups by field), or None."""
        try:
            return self.engine_options().make_layout(key_width)
        except KeyFormatError as exc:
            raise ConfigError(str(exc)) from None

    def validate(self) -> None:
        """Refuse what would start a broken or unsafe appliance, with the reason."""
        reason = unavailable_here(self.backend)
        if reason is not None:
            raise ConfigError(reason)
        unknown = [f for f in self.disable if f not in FRONTENDS]
        if unknown:
            raise ConfigError(f"cannot disable {', '.join(unknown)}: front-ends are "
                              f"{', '.join(FRONTENDS)}")
        if set(FRONTENDS) <= set(self.disable):
            raise ConfigError("every front-end is disabled: nothing to serve")
        self._validate_udp()
        self._validate_store()
        for name in ("resp_port", "udp_port", "admin_port"):
            port = getattr(self, name)
            if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
                raise ConfigError(f"{name} must be 0..65535, got {port!r}")
        if self.save_interval < 0:
            raise ConfigError("save_interval must be >= 0 seconds (0 = only at shutdown)")
        if self.value_kind not in VALUE_KINDS:
            raise ConfigError(f"value_kind must be one of {', '.join(VALUE_KINDS)}, "
                              f"got {self.value_kind!r}")
        self._validate_resp_limits()
        for name in ("admin_max_body", "admin_max_import"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise ConfigError(f"{name} must be a whole number of bytes >= 1, got {value!r}")
        geometry = self.make_geometry()  # GeometryError names the bad or unknown field
        self.make_layout(geometry.key_width)
        if not is_loopback(self.bind):
            if self.enabled("admin") and not self.admin_token:
                raise ConfigError(f"refusing to serve the admin API on {self.bind} (not loopback) "
                                  "without a token: set --admin-token or PYNQ_KV_ADMIN_TOKEN")
            if self.enabled("resp") and not self.requirepass:
                raise ConfigError(f"refusing to serve RESP on {self.bind} (not loopback) without "
                                  "a password: set --requirepass or PYNQ_KV_REQUIREPASS")

    def _validate_udp(self) -> None:
        for name in ("udp_allow", "udp_deny", "udp_trust"):
            networks = getattr(self, name)
            if not isinstance(networks, list) or not all(isinstance(n, str) for n in networks):
                raise ConfigError(f"{name} must be a list of IPv4 networks (a.b.c.d/len), "
                                  f"got {networks!r}")
        admission = self.udp_admission()  # ConfigError names a bad network or budget
        if admission is None and self.enabled("udp") and set(self.disable) >= {"resp", "admin"}:
            raise ConfigError(f"nothing to serve: resp and admin are disabled and memcached/UDP "
                              f"stays off on {self.bind} (not loopback) without --udp-allow or "
                              "--udp-trust")

    def _validate_store(self) -> None:
        if self.store not in STORES:
            raise ConfigError(f"store must be one of {', '.join(STORES)}, got {self.store!r}")
        if self.appendfsync not in APPENDFSYNC:
            raise ConfigError(f"appendfsync must be one of {', '.join(APPENDFSYNC)}, "
                              f"got {self.appendfsync!r}")
        if self.store == "url" and not self.redis_url:
            raise ConfigError("store url needs the Redis to use: --redis-url URL")
        if self.redis_url and self.store != "url":
            raise ConfigError(f"--redis-url names the Redis of the host tier; it cannot go with "
                              f"{'--no-store' if self.store == 'none' else 'store ' + self.store}")
        if self.state is not None and self.store != "none":
            raise ConfigError(
                "--state is a snapshot file for memory-only mode (--no-store); with a host "
                f"tier ({self.store}) Redis keeps the data (the private one's AOF is in "
                "--data-dir) and the rules file is in --data-dir")

    def _validate_resp_limits(self) -> None:
        for name, value in self.resp.items():
            if name not in RESP_LIMITS:
                raise ConfigError(f"unknown RESP limit {name!r} (known: {', '.join(RESP_LIMITS)})")
            kind, least = RESP_LIMITS[name]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                    kind is int and not isinstance(value, int)):
                raise ConfigError(f"resp.{name} must be {'an integer' if kind is int else 'a number'}"
                                  f", got {value!r}")
            if value < least:
                raise ConfigError(f"resp.{name} must be >= {least:g}, got {value!r}")

    def public(self) -> dict[str, Any]:
        """The settings without secrets, for logs and /v1/overlay."""
        out = asdict(self)
        for secret in ("requirepass", "admin_token"):
            out[secret] = "(set)" if out[secret] else None
        out["state"] = str(self.state) if self.state else None
        out["data_dir"] = str(self.data_dir)
        out["redis_url"] = mask_url(self.redis_url) if self.redis_url else None
        return out


def load_config_file(path: Path) -> dict[str, Any]:
    """The settings of a TOML file, checked against ServeConfig's fields.

    Geometry may be given flat (``rows = 1024``) or in a ``[geometry]`` table; the RESP limits
    live in a ``[resp]`` table (``max_clients = 500``).
    """
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path}: {exc}") from exc
    known = {f.name for f in fields(ServeConfig)}
    out: dict[str, Any] = {}
    geometry = dict(data.pop("geometry", {}) or {})
    resp = data.pop("resp", {})
    if not isinstance(resp, dict):
        raise ConfigError(f"config file {path}: 'resp' must be a table ([resp])")
    if resp:
        out["resp"] = {key.replace("-", "_"): value for key, value in resp.items()}
    for key, value in data.items():
        name = key.replace("-", "_")
        if name in GEOMETRY_KEYS:
            geometry[name] = value
        elif name in known:
            out[name] = value
        else:
            raise ConfigError(f"config file {path}: unknown setting {key!r}")
    if geometry:
        out["geometry"] = geometry
    for name in ("state", "data_dir"):
        if out.get(name) is not None:
            out[name] = Path(os.path.expanduser(str(out[name])))
    for name in ("disable", "udp_allow", "udp_deny", "udp_trust"):
        if isinstance(out.get(name), str):
            out[name] = [out[name]]
    return out


def build_config(file_settings: dict[str, Any], flag_settings: dict[str, Any]) -> ServeConfig:
    """Defaults, overridden by the file, overridden by flags given explicitly; validated.

    With no store named, a redis_url asks for store "url", a host tier setting (data_dir,
    appendfsync, redis_server) for "private", and a state file for "none" (memory-only mode)."""
    merged: dict[str, Any] = {}
    for source in (file_settings, flag_settings):
        for key, value in source.items():
            if key in ("geometry", "resp"):
                merged.setdefault(key, {}).update(value)
            else:
                merged[key] = value
    if "store" not in merged:
        if merged.get("redis_url"):
            merged["store"] = "url"
        elif any(name in merged for name in _PRIVATE_SETTINGS):
            merged["store"] = "private"
        elif merged.get("state"):
            merged["store"] = "none"
    env_secrets = {"requirepass": "PYNQ_KV_REQUIREPASS", "admin_token": "PYNQ_KV_ADMIN_TOKEN"}
    for key, env in env_secrets.items():
        if not merged.get(key) and os.environ.get(env):
            merged[key] = os.environ[env]
    try:
        config = ServeConfig(**merged)
    except TypeError as exc:
        raise ConfigError(str(exc)) from exc
    config.validate()
    return config
