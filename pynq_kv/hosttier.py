"""The host tier: a real Redis behind the engine (issue 15, docs/hosttier.md).

A Redis holds the whole dataset durably and the engine is its hot cache. `HostTier.open` starts
a private `redis-server` as a child process (AOF on, unix socket only, data in the data dir) or
connects to an existing Redis (`redis_url`). `restore_engine` refills an engine from that Redis,
most recently used keys first. Wildcard rules are not Redis data: they live in a JSON file beside
the data (`save_rules` / `load_rules`), so no Redis client (FLUSHALL, KEYS *) ever sees them;
the appliance's own settings likewise (`save_settings` / `read_settings`).

redis-py is imported inside the functions that use it, so `import pynq_kv` stays light.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import fcntl
import json
import logging
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional
from urllib.parse import urlsplit, urlunsplit

from .atomic import atomic_write
from .backend import SetStatus
from .engine import KVEngine
from .errors import KVError
from .limits import Limits

if TYPE_CHECKING:
    import redis
    import redis.asyncio

APPENDFSYNC = ("always", "everysec", "no")
MIN_VERSION = (6, 0)  # RESP3 and CLIENT TRACKING, which the coherence layer needs
START_TIMEOUT = 10.0  # seconds for the private redis-server to answer PING
CONNECT_TIMEOUT = 5.0  # seconds to connect to a Redis
REPLY_TIMEOUT = 5.0  # seconds a bounded client (start-up probes, restore) waits for a reply
SHUTDOWN_TIMEOUT = 10.0  # seconds SHUTDOWN may take (flushing the AOF) before SIGTERM, SIGKILL
# sun_path holds 108 bytes with its NUL; a data dir whose socket path is longer puts the socket
# in a short temporary folder instead.
SOCKET_PATH_MAX = 100
SCAN_COUNT = 1000  # keys per SCAN step, and per MGET of the restore
LOG_TAIL_LINES = 20

RULES_FILE = "rules.json"
RULES_FORMAT = "pynq-kv-rules"
RULES_VERSION = 1
SETTINGS_FILE = "settings.json"
SETTINGS_FORMAT = "pynq-kv-settings"
SETTINGS_VERSION = 1
LOCK_FILE = "pynq-kv.lock"
CONF_FILE = "redis.conf"
LOG_FILE = "redis.log"
SOCKET_FILE = "redis.sock"

_PR_SET_PDEATHSIG = 1  # linux/prctl.h

log = logging.getLogger("pynq_kv.hosttier")


class HostTierError(KVError):
    """The host tier cannot start, cannot be reached or refuses what was asked."""


@dataclass(frozen=True)
class HostTierSettings:
    """Where the host tier keeps its data and which Redis it is.

    data_dir holds the private redis-server's AOF, config, log and unix socket, the lock that
    keeps a second serve out, and the rules file; with redis_url (redis://, rediss://, unix://)
    an existing Redis holds the data and data_dir only the lock and the rules file.
    """

    data_dir: Path
    appendfsync: str = "everysec"
    redis_url: Optional[str] = None
    redis_server: str = "redis-server"

    def __post_init__(self) -> None:
        if self.appendfsync not in APPENDFSYNC:
            raise HostTierError(f"appendfsync must be one of {', '.join(APPENDFSYNC)}, "
                                f"got {self.appendfsync!r}")

    @property
    def folder(self) -> Path:
        """data_dir as an absolute path (~ expanded)."""
        return Path(self.data_dir).expanduser().resolve()

    @property
    def rules_path(self) -> Path:
        return self.folder / RULES_FILE

    @property
    def settings_path(self) -> Path:
        """The appliance's stored settings (serve's value kind, geometry, layout, store)."""
        return self.folder / SETTINGS_FILE


def mask_url(url: str) -> str:
    """The URL with its password replaced by ***, for logs and banners."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".")[:2] if p.isdigit())


def _conf_string(text: str) -> str:
    """A redis.conf argument: double-quoted, with the escapes Redis' parser reads."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _log_tail(path: Path, since: int) -> str:
    """The last lines of the child's log written since byte offset `since`."""
    try:
        with open(path, "rb") as handle:
            handle.seek(since)
            lines = handle.read().decode("utf-8", "replace").splitlines()
    except OSError as exc:
        return f"(cannot read {path}: {exc.strerror})"
    return "\n".join(lines[-LOG_TAIL_LINES:]) or "(the log is empty)"


def _die_with_parent(parent: int) -> Callable[[], None]:
    """preexec_fn for the child: SIGTERM (a clean Redis shutdown) when the parent dies."""
    libc = ctypes.CDLL(None, use_errno=True)  # loaded before the fork

    def arm() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl: no signal will come
            os._exit(1)

    return arm


def _lock(data_dir: Path) -> int:
    """Hold data_dir's lock file (flock, released when the process and its redis-server are
    gone); HostTierError if another serve holds it."""
    path = data_dir / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise HostTierError(f"cannot create the lock file {path}: {exc.strerror}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
        os.close(fd)
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise HostTierError(f"cannot lock {path}: {exc.strerror}") from exc
        raise HostTierError(
            f"the data dir {data_dir} is in use by another pynq-kv serve (pid {holder}) or its "
            "redis-server, still shutting down; give each serve its own --data-dir") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


class HostTier:
    """A Redis the engine caches: a private redis-server child, or the user's (redis_url).

    Where it listens: `unix_path`, or `host` and `port` (TCP); `db` is the database number.
    `client()` / `async_client()` make redis-py clients; `open_link` a raw asyncio connection,
    which first sends `handshake()`. Open it from the main thread: the child is told to stop
    when the thread that started it ends.
    """

    def __init__(self, settings: HostTierSettings, data_dir: Path, lock_fd: int) -> None:
        self.settings = settings
        self.data_dir = data_dir
        self.rules_path = settings.rules_path
        self.settings_path = settings.settings_path
        self.unix_path: Optional[str] = None
        self.host: Optional[str] = None
        self.port: Optional[int] = None
        self.db = 0
        self.version = ""
        self._username: Optional[str] = None
        self._password: Optional[str] = None
        self._tls = False
        self._lock_fd: Optional[int] = lock_fd
        self._proc: Optional[subprocess.Popen] = None
        self._socket_dir: Optional[str] = None  # a temporary folder for a short socket path

    @classmethod
    def open(cls, settings: HostTierSettings) -> "HostTier":
        """Start the private redis-server (or connect to settings.redis_url), wait until it
        answers, and check that it is Redis 6.0 or later; HostTierError says what went wrong."""
        data_dir = settings.folder
        try:  # a new data dir is private: the AOF holds every value
            data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise HostTierError(f"cannot create the data dir {data_dir}: {exc.strerror}") from exc
        tier = cls(settings, data_dir, _lock(data_dir))
        try:
            if settings.redis_url is None:
                tier._start_child()
            else:
                tier._use_url(settings.redis_url)
        except BaseException:
            tier.close()
            raise
        return tier

    # -- opening ---------------------------------------------------------------------------
    def _start_child(self) -> None:
        settings = self.settings
        binary = shutil.which(settings.redis_server)
        if binary is None:
            raise HostTierError(
                f"{settings.redis_server!r} not found: the host tier runs a private redis-server "
                "(Debian/Ubuntu: sudo apt-get install redis-server; or --redis-server PATH); or "
                "use an existing Redis with --redis-url URL, or serve memory-only with --no-store")
        socket_path = self.data_dir / SOCKET_FILE
        if len(os.fsencode(socket_path)) > SOCKET_PATH_MAX:
            self._socket_dir = tempfile.mkdtemp(prefix="pynq-kv-")
            socket_path = Path(self._socket_dir) / SOCKET_FILE
        self.unix_path = str(socket_path)
        conf = self.data_dir / CONF_FILE
        logfile = self.data_dir / LOG_FILE
        lines = [
            "# written by pynq-kv at every start (pynq_kv/hosttier.py): edits are lost",
            "port 0",  # no TCP: only this process (and the admin's redis-cli -s) reach it
            f"unixsocket {_conf_string(self.unix_path)}",
            "unixsocketperm 700",
            f"dir {_conf_string(str(self.data_dir))}",
            "appendonly yes",
            f"appendfsync {settings.appendfsync}",
            "daemonize no",
            'save ""',
            f"logfile {_conf_string(str(logfile))}",
            "always-show-logo no",
        ]
        with atomic_write(conf, "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
        since = logfile.stat().st_size if logfile.exists() else 0
        with open(logfile, "ab") as out:  # errors before the logfile is open go to stderr
            self._proc = subprocess.Popen(
                [binary, str(conf)], stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                pass_fds=(self._lock_fd,) if self._lock_fd is not None else (),
                start_new_session=True,  # Ctrl-C reaches serve, which shuts Redis down in order
                preexec_fn=_die_with_parent(os.getpid()))
        client = self.client(timeout=REPLY_TIMEOUT)
        try:
            self._wait_ready(client, logfile, since)
            self._check_server(client, f"the private redis-server ({binary})")
        finally:
            client.close()

    def _wait_ready(self, client: "redis.Redis", logfile: Path, since: int) -> None:
        import redis

        assert self._proc is not None
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            code = self._proc.poll()
            if code is not None:
                raise HostTierError(f"redis-server exited with status {code} during start-up; "
                                    f"the end of {logfile}:\n{_log_tail(logfile, since)}")
            try:
                if client.ping():
                    return
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                pass  # not listening yet, or still loading the AOF
            if time.monotonic() > deadline:
                raise HostTierError(f"redis-server did not answer within {START_TIMEOUT:g} s; "
                                    f"the end of {logfile}:\n{_log_tail(logfile, since)}")
            time.sleep(0.02)

    def _use_url(self, url: str) -> None:
        from redis.connection import parse_url

        try:
            fields = parse_url(url)
        except ValueError as exc:
            raise HostTierError(f"bad --redis-url {mask_url(url)!r}: {exc}") from None
        self.unix_path = fields.get("path")
        if self.unix_path is None:
            self.host = fields.get("host") or "localhost"
            self.port = int(fields.get("port") or 6379)
        self.db = int(fields.get("db") or 0)
        self._username = fields.get("username")
        self._password = fields.get("password")
        self._tls = urlsplit(url).scheme == "rediss"
        client = self.client(timeout=REPLY_TIMEOUT)
        try:
            self._check_server(client, f"the Redis at {mask_url(url)}")
        finally:
            client.close()

    def _check_server(self, client: "redis.Redis", what: str) -> None:
        """PING, then INFO server: a Redis of MIN_VERSION or later, else HostTierError."""
        import redis

        try:
            client.ping()
            info = client.info("server")
        except redis.AuthenticationError as exc:
            raise HostTierError(f"{what} refused the credentials ({exc}): put the user and "
                                "password in the URL (redis://USER:PASSWORD@HOST:PORT)") from None
        except redis.ConnectionError as exc:
            raise HostTierError(f"cannot connect to {what}: {exc}") from None
        except redis.RedisError as exc:  # garbage, a timeout, an error reply to PING or INFO
            raise HostTierError(f"{what} does not answer as a Redis server "
                                f"({type(exc).__name__}: {exc}); is that a Redis port?") from None
        version = str(info.get("redis_version", "")) if isinstance(info, dict) else ""
        if not version or _version(version) < MIN_VERSION:
            raise HostTierError(f"{what} reports redis_version {version or '(none)'}; the host "
                                f"tier needs Redis {'.'.join(map(str, MIN_VERSION))} or later")
        self.version = version

    # -- reaching it -----------------------------------------------------------------------
    @property
    def pid(self) -> Optional[int]:
        """The private redis-server's process id (None with redis_url)."""
        return self._proc.pid if self._proc is not None else None

    def _client_options(self, timeout: Optional[float] = None) -> dict[str, Any]:
        """redis-py's options for this Redis; timeout bounds every reply (none: blocking
        commands may wait as long as they like)."""
        options: dict[str, Any] = {"db": self.db, "username": self._username,
                                   "password": self._password, "decode_responses": False,
                                   "socket_connect_timeout": CONNECT_TIMEOUT,
                                   "socket_timeout": timeout}
        if timeout is not None:  # a bounded probe: no retries behind its back
            from redis.backoff import NoBackoff
            from redis.retry import Retry

            options["retry"] = Retry(NoBackoff(), 0)
        if self.unix_path is not None:
            options["unix_socket_path"] = self.unix_path
        else:
            options.update(host=self.host, port=self.port, ssl=self._tls)
        return options

    def client(self, timeout: Optional[float] = None) -> "redis.Redis":
        """A new synchronous redis-py client (hiredis parser, bytes replies); close it after.
        timeout (seconds) bounds every reply; None waits as long as a command takes."""
        import redis

        return redis.Redis(**self._client_options(timeout))

    def async_client(self) -> "redis.asyncio.Redis":
        """A new asyncio redis-py client of the running loop (hiredis parser, bytes replies)."""
        import redis.asyncio

        return redis.asyncio.Redis(**self._client_options())

    def handshake(self) -> list[list[bytes]]:
        """The commands a new raw connection (open_link) sends before anything else."""
        out: list[list[bytes]] = []
        if self._password is not None:
            auth = [b"AUTH"] + ([self._username.encode()] if self._username else [])
            out.append(auth + [self._password.encode()])
        if self.db:
            out.append([b"SELECT", str(self.db).encode()])
        return out

    async def open_link(self, protocol_factory: Callable[[], asyncio.BaseProtocol]
                        ) -> tuple[Any, Any]:
        """A raw asyncio connection to this Redis: (transport, protocol); TCP with TCP_NODELAY.
        Bounded by CONNECT_TIMEOUT; TLS (rediss://) verifies the server the default way."""
        loop = asyncio.get_running_loop()
        if self.unix_path is not None:
            connect = loop.create_unix_connection(protocol_factory, self.unix_path)
        else:
            ssl_context = None
            if self._tls:
                import ssl

                ssl_context = ssl.create_default_context()
            connect = loop.create_connection(protocol_factory, self.host, self.port,
                                             ssl=ssl_context)
        transport, protocol = await asyncio.wait_for(connect, CONNECT_TIMEOUT)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return transport, protocol

    def describe(self) -> str:
        """One line for serve's banner."""
        if self.settings.redis_url is not None:
            return f"redis {self.version} at {mask_url(self.settings.redis_url)}"
        return (f"private redis-server {self.version}, AOF {self.settings.appendfsync}, "
                f"data in {self.data_dir}")

    # -- closing ---------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the private redis-server (SHUTDOWN flushes the AOF; then SIGTERM, SIGKILL if it
        hangs) and release the data dir. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None:
            self._stop_child(proc)
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _stop_child(self, proc: subprocess.Popen) -> None:
        steps: list[Optional[Callable[[], None]]] = [proc.terminate, proc.kill]
        if proc.poll() is None and self._send_shutdown():
            steps.insert(0, None)  # SHUTDOWN accepted: wait for it first
        for stop in steps:
            if stop is not None:
                stop()
            try:
                proc.wait(SHUTDOWN_TIMEOUT)
                return
            except subprocess.TimeoutExpired:
                log.warning("redis-server (pid %d) is still running after %g s", proc.pid,
                            SHUTDOWN_TIMEOUT)

    def _send_shutdown(self) -> bool:
        """SHUTDOWN, by hand (redis-py would retry the connection SHUTDOWN closes); True when
        Redis took it (it closes the connection and exits)."""
        assert self.unix_path is not None
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(SHUTDOWN_TIMEOUT)
                sock.connect(self.unix_path)
                sock.sendall(b"*1\r\n$8\r\nSHUTDOWN\r\n")
                refused = sock.recv(512)
        except OSError as exc:
            log.warning("redis-server SHUTDOWN failed (%s); sending SIGTERM", exc)
            return False
        if refused:
            log.warning("redis-server refused SHUTDOWN (%s); sending SIGTERM",
                        refused.decode("utf-8", "replace").strip())
            return False
        return True


# -- the rules file ------------------------------------------------------------------------


def save_rules(path: Path, engine: KVEngine) -> None:
    """Write the engine's rules to path durably (atomic replace, fsynced): the rule records of
    a snapshot (KVEngine.rules_state) with the key width and value kind they were made for."""
    state = {"format": RULES_FORMAT, "version": RULES_VERSION,
             "key_width": engine.geometry.key_width, "value_kind": engine.value_kind,
             **engine.rules_state()}
    with atomic_write(path, "w", encoding="utf-8", durable=True) as handle:
        json.dump(state, handle, indent=1)
        handle.write("\n")


def load_rules(path: Path, engine: KVEngine) -> int:
    """Replace the engine's rules with those of the rules file (none if it does not exist yet);
    returns the rules loaded. The engine is unchanged when the file is refused."""
    try:
        with open(path, encoding="utf-8") as handle:
            state = json.load(handle)
    except FileNotFoundError:
        return 0
    except (OSError, ValueError) as exc:
        raise HostTierError(f"{path}: not a readable rules file ({exc})") from exc
    if (not isinstance(state, dict) or state.get("format") != RULES_FORMAT
            or state.get("version") != RULES_VERSION):
        raise HostTierError(f"{path}: not a pynq-kv rules file of version {RULES_VERSION}")
    wanted = (state.get("key_width"), state.get("value_kind"))
    have = (engine.geometry.key_width, engine.value_kind)
    if wanted != have:
        raise HostTierError(f"{path}: rules for {wanted[0]}-bit keys and {wanted[1]} values; "
                            f"this engine has {have[0]}-bit keys and {have[1]} values")
    return engine.load_rules_state(state, origin=str(path))


# -- the settings file ---------------------------------------------------------------------


def save_settings(path: Path, settings: dict[str, Any]) -> None:
    """Write the appliance's settings to path durably (atomic replace, fsynced), as the rules
    file is written; what they are is serve's business (pynq_kv/serve/config.py)."""
    state = {"format": SETTINGS_FORMAT, "version": SETTINGS_VERSION, "settings": settings}
    with atomic_write(path, "w", encoding="utf-8", durable=True) as handle:
        json.dump(state, handle, indent=1, sort_keys=True)
        handle.write("\n")


def read_settings(path: Path) -> Optional[dict[str, Any]]:
    """The settings stored at path, or None when there is no file yet; a file that cannot be
    read or is not a settings file is a HostTierError naming it (never taken as absent)."""
    try:
        with open(path, encoding="utf-8") as handle:
            state = json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:  # ValueError: bad JSON or bad UTF-8
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise HostTierError(f"{path}: not a readable settings file ({reason})") from exc
    if (not isinstance(state, dict) or state.get("format") != SETTINGS_FORMAT
            or state.get("version") != SETTINGS_VERSION
            or not isinstance(state.get("settings"), dict)):
        raise HostTierError(f"{path}: not a pynq-kv settings file of version {SETTINGS_VERSION}")
    return state["settings"]


# -- restore -------------------------------------------------------------------------------


@dataclass
class RestoreReport:
    """What restore_engine did: keys scanned, loaded, and skipped by reason; seconds taken and
    keys scanned per second."""

    scanned: int = 0
    loaded: int = 0
    too_long: int = 0  # the key or the value is longer than the engine holds
    not_integer: int = 0  # an integer engine: a value that is no decimal of VALUE_W bits
    ttl: int = 0  # keys with a TTL stay in Redis only
    not_string: int = 0  # lists, hashes, sets, ...
    full: int = 0  # fitting keys left out when the table refused one (the coldest)
    gone: int = 0  # deleted (or no longer a string) between SCAN and the read
    seconds: float = 0.0
    rate: float = 0.0

    @property
    def skipped(self) -> int:
        return (self.too_long + self.not_integer + self.ttl + self.not_string + self.full
                + self.gone)

    def describe(self) -> str:
        return (f"restored {self.loaded} of {self.scanned} keys from Redis in {self.seconds:.2f} s "
                f"({self.rate:,.0f} keys/s scanned); skipped: {self.too_long} too long, "
                f"{self.not_integer} not integers, {self.ttl} with a TTL, {self.not_string} not "
                f"strings, {self.full} table full, {self.gone} gone meanwhile")


def restore_engine(engine: KVEngine, client: "redis.Redis", *, progress: bool = True,
                   log: Optional[logging.Logger] = None) -> RestoreReport:
    """Load Redis' string keys without a TTL that fit the engine into it, hottest first.

    Two passes. The scan reads OBJECT IDLETIME, PTTL and TYPE of every key (SCAN COUNT 1000, a
    script per step, or a pipeline where scripts are refused): none of them touches a key's LRU
    clock, which a GET would reset — so the order read is the clients' own. The candidates are sorted by idle time (most recently
    used first); the load then MGETs them in that order and SETs them into the engine in
    batches, stopping at the first batch the table refuses (FULL). A key is stored as RESP SET
    would store its value (pynq_kv.limits). The engine keeps what it held before, and what was
    loaded before Redis failed (HostTierError).
    """
    import redis

    try:
        return _restore(engine, client, progress, log or logging.getLogger("pynq_kv.hosttier"))
    except redis.RedisError as exc:
        raise HostTierError(f"cannot restore from Redis: {type(exc).__name__}: {exc}") from exc


def _restore(engine: KVEngine, client: "redis.Redis", progress: bool,
             logger: logging.Logger) -> RestoreReport:
    from tqdm import tqdm

    show = progress and sys.stderr.isatty()
    limits = Limits(engine)
    report = RestoreReport()
    started = time.perf_counter()
    candidates: list[tuple[float, bytes]] = []
    seen: set[bytes] = set()  # SCAN may return a key twice
    describe = _Describe(client, logger)
    with tqdm(total=client.dbsize(), desc="restore: scan", unit="key", disable=not show) as bar:
        cursor = 0
        while True:
            cursor, found = client.scan(cursor, count=SCAN_COUNT)
            keys = [k for k in found if k not in seen]
            seen.update(keys)
            if keys:
                _classify(describe(keys), keys, limits, report, candidates)
                bar.update(len(keys))
            if not cursor:
                break
    candidates.sort(key=lambda c: c[0])  # stable: equal idle times keep SCAN's order
    with tqdm(total=len(candidates), desc="restore: load", unit="key", disable=not show) as bar:
        for start in range(0, len(candidates), SCAN_COUNT):
            keys = [k for _, k in candidates[start:start + SCAN_COUNT]]
            refused = _load(engine, client, keys, limits, report)
            bar.update(len(keys))
            if refused:
                report.full += len(candidates) - start - len(keys)
                break
    report.seconds = time.perf_counter() - started
    report.rate = report.scanned / report.seconds if report.seconds else 0.0
    logger.info("%s", report.describe())
    return report


# One round trip per SCAN step instead of three commands a key (about 15x faster through
# redis-py); OBJECT IDLETIME's error (an LFU maxmemory-policy) comes back in its place.
_DESCRIBE_SCRIPT = """
local out = {}
for i, key in ipairs(KEYS) do
  out[3 * i - 2] = redis.pcall('OBJECT', 'IDLETIME', key)
  out[3 * i - 1] = redis.call('PTTL', key)
  out[3 * i] = redis.call('TYPE', key)['ok']
end
return out
"""


class _Describe:
    """[idle, pttl, type] of each key, flat: by script, or by pipeline once a script is refused
    (ACLs without @scripting, a cluster's CROSSSLOT)."""

    def __init__(self, client: "redis.Redis", logger: logging.Logger) -> None:
        self.client = client
        self.logger = logger
        self.script: Any = client.register_script(_DESCRIBE_SCRIPT)

    def __call__(self, keys: list[bytes]) -> list[Any]:
        import redis

        if self.script is not None:
            try:
                return list(self.script(keys=keys))
            except redis.ResponseError as exc:
                self.logger.info("restore: the scan script was refused (%s); using a pipeline", exc)
                self.script = None
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.object("idletime", key)
            pipe.pttl(key)
            pipe.type(key)
        return pipe.execute(raise_on_error=False)


def _classify(replies: list[Any], keys: list[bytes], limits: Limits, report: RestoreReport,
              candidates: list[tuple[float, bytes]]) -> None:
    """Count a SCAN step's keys by what they are; the loadable ones join candidates."""
    for i, key in enumerate(keys):
        idle, pttl, kind = replies[3 * i:3 * i + 3]
        report.scanned += 1
        if kind == b"none" or pttl == -2:
            report.gone += 1
        elif kind != b"string":
            report.not_string += 1
        elif pttl != -1:
            report.ttl += 1
        elif not limits.key_fits(key):
            report.too_long += 1
        else:  # an unreadable idle time (an error reply) sorts last
            candidates.append((idle if isinstance(idle, int) else math.inf, key))


def _load(engine: KVEngine, client: "redis.Redis", keys: list[bytes], limits: Limits,
          report: RestoreReport) -> bool:
    """MGET keys and SET those still fitting into the engine; True if the table refused one."""
    fit_keys, fit_values = [], []
    for key, text in zip(keys, client.mget(keys)):
        if text is None:
            report.gone += 1
            continue
        value = limits.value(text)
        if value is None:
            if limits.ints:
                report.not_integer += 1
            else:
                report.too_long += 1
            continue
        fit_keys.append(key)
        fit_values.append(value)
    if not fit_keys:
        return False
    status = engine.set_batch(limits.key_rows(fit_keys), limits.value_rows(fit_values))
    refused = int((status == SetStatus.FULL).sum())
    report.loaded += len(fit_keys) - refused
    report.full += refused
    return refused > 0
