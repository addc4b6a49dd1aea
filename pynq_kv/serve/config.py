"""Settings of `pynq-kv serve`: defaults < config file (TOML) < command-line flags.

The config file uses the flags' names with underscores (``resp_port = 6390``), so anything a flag
can say a file can say, and one validation covers both.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import sys
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Optional

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from ..engine import KVEngine
from ..errors import KeyFormatError, KVError
from ..geometry import Geometry
from ..hosttier import (
    APPENDFSYNC,
    HostTierSettings,
    load_rules,
    mask_url,
    read_settings,
    save_settings,
)
from ..keys import VALUE_KINDS
from ..layout import FieldLayout, parse_layout_spec
from ..net.addr import is_loopback
from ..options import GEOMETRY_KEYS, EngineOptions
from ..overlay import AUTO, unavailable_here
from ..admission import DEFAULT_BUDGET, Admission, AdmissionError, admission_from_options
from .eventloop import unavailable as unavailable_loop

FRONTENDS = ("resp", "udp", "admin")
# Where the data lives (docs/hosttier.md): "none" in the engine only (a --state snapshot file at
# most), "private" in a redis-server serve starts, "url" in the Redis at redis_url.
STORES = ("none", "private", "url")
# Memory-only until the RESP front-end writes through to Redis (issue 15); then "private".
DEFAULT_STORE = "private"
# Settings that only mean something with a host tier: given without a store, they ask for the
# private redis-server (redis_url: for that Redis).
_PRIVATE_SETTINGS = ("data_dir", "appendfsync", "redis_server")
# The settings that define the appliance's tables, kept in the data dir's settings file from the
# first start on (docs/hosttier.md, "Stored settings"): what the stored data and rules mean.
STORED_SETTINGS = ("store", "value_kind", "layout", "geometry")
_STORED_SCALARS = ("store", "value_kind", "layout")  # all but geometry, a dict of fields
# Where the store is "given": its own setting or a Redis URL (build_config infers the rest).
_STORE_GIVEN_BY = ("store", "redis_url")
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
    event_loop: str = "auto"  # eventloop.EVENT_LOOPS: auto is uvloop when installed
    # Settings given that contradict the data dir's stored ones replace them (else: refused).
    replace_settings: bool = False
    # Which settings the file or the flags gave (build_config): the others may come from the
    # data dir's stored settings. None (a config made in code): every one of them. Not a
    # setting itself.
    given: Optional[frozenset[str]] = field(default=None, init=False, repr=False, compare=False)

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
        reason = unavailable_loop(self.event_loop)
        if reason is not None:
            raise ConfigError(reason)
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
        if not isinstance(self.replace_settings, bool):
            raise ConfigError(f"replace_settings must be true or false, got "
                              f"{self.replace_settings!r}")
        if self.replace_settings and self.store == "none":
            raise ConfigError("--replace-settings replaces the settings stored in --data-dir: "
                              "it needs a host tier, not --no-store")
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
        del out["given"]
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
    known = {f.name for f in fields(ServeConfig) if f.init}
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
    given = frozenset(merged)
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
    config.given = given
    config.validate()
    return config


# -- the settings stored in the data dir ---------------------------------------------------------


@dataclass
class StoredSettings:
    """A data dir's settings file and what this start does with it.

    action: "created" (no file yet: written once serve started), "used" (read; what was given
    agrees with it), "replaced" (--replace-settings changed it: written once serve started).
    """

    path: Path
    action: str
    taken: list[str] = field(default_factory=list)  # not given: taken from the file
    changes: list[str] = field(default_factory=list)  # "value_kind int -> bytes" (replaced)

    def save(self, config: ServeConfig, engine: KVEngine) -> bool:
        """Write the settings the appliance runs with, unless they came from the file unchanged;
        the engine's geometry and value kind are stored (on a board: the bitstream's)."""
        if self.action == "used":
            return False
        save_settings(self.path, {"store": config.store, "value_kind": engine.value_kind,
                                  "layout": config.layout or None,
                                  "geometry": asdict(engine.geometry)})
        return True

    def describe(self, config: ServeConfig) -> str:
        """One line for serve's banner: where the settings came from."""
        if self.action == "replaced":
            return (f"settings replaced in {self.path} (--replace-settings): "
                    f"{'; '.join(self.changes)}")
        summary = (f"store={config.store} value_kind={config.value_kind} "
                   f"layout={config.layout or '(none)'} and the geometry above")
        if self.action == "created":
            return f"settings stored in {self.path} (none were stored yet): {summary}"
        source = (f"not given, taken from it: {', '.join(self.taken)}" if self.taken
                  else "all given, equal to the stored ones")
        return f"settings from {self.path}: {summary} ({source})"


def _option(name: str) -> str:
    """How a stored setting is given on the command line (hash_seed: the config file only)."""
    if name == "store":
        return "--store or --redis-url"
    if name == "hash_seed":
        return "hash_seed in the config file"
    return "--" + name.replace("_", "-")


def _layout_fields(spec: Optional[str]) -> Any:
    """A layout spec in a form two equal layouts share (spacing aside); None for no layout."""
    return parse_layout_spec(spec) if spec else None


def _check_stored(path: Path, stored: dict[str, Any]) -> None:
    """The stored settings have the shape save() writes; ConfigError naming the file if not.
    (Their values are checked by validate(), on the config they go into.)"""
    problem = None
    if set(stored) != set(STORED_SETTINGS):
        problem = f"it holds {sorted(stored)}, not {sorted(STORED_SETTINGS)}"
    elif stored["store"] not in ("private", "url"):
        problem = f"store must be private or url, not {stored['store']!r}"
    elif not isinstance(stored["value_kind"], str):
        problem = f"value_kind must be text, not {stored['value_kind']!r}"
    elif stored["layout"] is not None and not isinstance(stored["layout"], str):
        problem = f"layout must be text or null, not {stored['layout']!r}"
    elif not isinstance(stored["geometry"], dict) or set(stored["geometry"]) != set(GEOMETRY_KEYS):
        problem = f"geometry must hold {', '.join(GEOMETRY_KEYS)}"
    else:
        try:
            _layout_fields(stored["layout"])
        except KeyFormatError as exc:
            problem = str(exc)
    if problem is not None:
        raise ConfigError(f"{path}: not a usable settings file ({problem}); it is not changed. "
                          "Restore it from a backup, or move it aside to store the settings of "
                          "this start")


def _given(config: ServeConfig) -> set[str]:
    """Which of STORED_SETTINGS but geometry the config was given (its geometry dict holds
    only the fields given)."""
    names = set(_STORED_SCALARS)
    if config.given is None:
        return names
    found = {name for name in names if name in config.given}
    if config.given & set(_STORE_GIVEN_BY):
        found.add("store")
    return found


def with_stored_settings(config: ServeConfig) -> tuple[ServeConfig, Optional[StoredSettings]]:
    """config completed from its data dir's settings file, and what to do with that file; the
    config itself and None without a host tier.

    Each of STORED_SETTINGS (each geometry field) not given comes from the file. One given that
    contradicts the file is a ConfigError naming the setting, both values and the way on, unless
    replace_settings: then the given values win and the stored rules must load with them. A file
    that cannot be read or used is an error naming it. Nothing is written here (the runner saves
    the file once the appliance runs), so a refused start changes nothing in the data dir.
    """
    tier = config.host_tier_settings()
    if tier is None:
        return config, None
    path = tier.settings_path
    stored = read_settings(path)
    if stored is None:
        return config, StoredSettings(path, "created")
    _check_stored(path, stored)
    given = _given(config)
    conflicts: list[tuple[str, Any, Any]] = []  # (name, stored, given)
    for name in _STORED_SCALARS:
        mine, theirs = getattr(config, name), stored[name]
        equal = (_layout_fields(mine) == _layout_fields(theirs) if name == "layout"
                 else mine == theirs)
        if name in given and not equal:
            conflicts.append((name, theirs, mine))
    for name, theirs in stored["geometry"].items():
        if name in config.geometry and config.geometry[name] != theirs:
            conflicts.append((name, theirs, config.geometry[name]))
    if conflicts and not config.replace_settings:
        listed = "; ".join(f"{name}: stored {theirs!r}, given {mine!r} ({_option(name)})"
                           for name, theirs, mine in conflicts)
        raise ConfigError(
            f"the settings given contradict those stored in {path} ({listed}). They define how "
            f"the data and the wildcard rules in {tier.folder} are read. Drop those options to "
            "use the stored values, add --replace-settings to store the given ones instead (the "
            "stored rules must load with them), or use another --data-dir. Nothing was changed")
    out = copy.copy(config)
    out.geometry = dict(config.geometry)
    taken = []
    for name in _STORED_SCALARS:
        if name not in given:
            setattr(out, name, stored[name])
            taken.append(name)
    missing = [name for name in GEOMETRY_KEYS if name not in config.geometry]
    out.geometry.update({name: stored["geometry"][name] for name in missing})
    if missing:
        taken.append("geometry" if len(missing) == len(GEOMETRY_KEYS) else
                     "geometry " + ", ".join(missing))
    if out.store == "url" and not out.redis_url:
        raise ConfigError(
            f"the data dir {tier.folder} belongs to a Redis named by --redis-url (store url in "
            f"{path}; the URL is not stored: it may hold a password): give --redis-url URL (or "
            "PYNQ_KV_REDIS_URL) again, or use another --data-dir")
    try:
        out.validate()
    except KVError as exc:
        raise ConfigError(f"the settings stored in {path}, with those given, cannot be used: "
                          f"{exc}") from exc
    changes = [f"{name} {theirs!r} -> {mine!r}" for name, theirs, mine in conflicts]
    if changes:
        _check_rules_load(out, tier.rules_path)
    return out, StoredSettings(path, "replaced" if changes else "used", taken, changes)


def _check_rules_load(config: ServeConfig, rules_path: Path) -> None:
    """The rules file loads into an engine of config's settings; else a ConfigError saying so.

    The probe is a model engine of the smallest table: the rules' checks read the key and
    value widths, the rule entries and the priority width, never the exact table's size."""
    if not rules_path.exists():
        return
    probe = dataclasses.replace(config.make_geometry(), ways=2, rows=2, stash=0)
    engine = KVEngine("model", probe, value_kind=config.value_kind)
    try:
        load_rules(rules_path, engine)
    except KVError as exc:  # a HostTierError, or the engine refusing a rule
        raise ConfigError(
            f"--replace-settings: the wildcard rules in {rules_path} do not load with the new "
            f"settings ({exc}); nothing was changed. Keep the stored settings (drop the options "
            f"that differ), or move {rules_path} aside to start without those rules") from exc
    finally:
        engine.close()
