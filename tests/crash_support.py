"""Crash harness: `pynq-kv serve` with a private redis-server under write load, killed and
restarted on the same data dir; afterwards every acknowledged write must be there and the engine
must equal Redis. Used by tests/test_crash.py (small) and benchmarks/crash.py (at scale).

The model of a write. Every key (or hash field) is written by one load thread only, and each write
makes it a new *version* 1, 2, 3 ... that can be read back: SET, HSET and MSET store the version
number itself (MSET writes a pair of keys, both with the pair's version), INCR counts up to it,
LPUSH pushes it (the list is [n, ..., 2, 1]). A thread is sequential and stops at its first
failed write, so each key has its acknowledged versions 1..n and at most one write in flight
when the kill came (version n + 1, attempted, never acknowledged). After the restart the version
read from Redis must be n or, if a write was in flight, n + 1; anything else is corruption, and
less than n is a lost acknowledged write, whose age (kill time minus its acknowledgement time) is
the loss window.

Two kinds of crash (docs/hosttier.md, "Crash safety"):
- "serve": SIGKILL of the serve process. Its redis-server child must die with it (the kernel's
  parent-death signal makes it shut down cleanly); one still running after CHILD_EXIT_TIMEOUT is
  recorded as an orphan, with its /proc state, and fails the run.
- "group": SIGKILL of the redis-server child, then of serve, at once: Redis gets no chance to
  flush anything, the case where `appendfsync everysec` may lose acknowledged writes.

Writers are pluggable (WRITERS): a writer is a function that sends one write of a Key through
one client and returns when it was acknowledged: RESP commands through redis-py, memcached
binary SETs over UDP, and PUTs on the admin API, all under the same version model.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from pynq_kv.net import MemcacheUDPClient
from pynq_kv.net.client import MemcacheError

HOST = "127.0.0.1"
STARTUP_TIMEOUT = 60.0  # seconds for serve to print its banner (restores included)
CHILD_EXIT_TIMEOUT = 10.0  # seconds the redis-server child may take to die after serve's kill
REPLY_TIMEOUT = 10.0  # seconds a load thread waits for a reply before calling it lost
SLOTS = 16  # SET keys, HSET fields and MSET pairs per thread and cycle
KILLS = ("serve", "group")
# serve's banner lines naming its front-ends' ports: RESP (tcp), memcached (udp), admin (http)
BANNER = re.compile(r" on (tcp|udp|http)://127\.0\.0\.1:(\d+)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


# -- the versions of one key ------------------------------------------------------------------


@dataclass
class History:
    """One key's (or hash field's) writes: acknowledgement times of versions 1..n, and whether
    version n + 1 was in flight when the thread stopped."""

    kind: str
    acked: list[float] = field(default_factory=list)
    pending: bool = False

    @property
    def version(self) -> int:
        return len(self.acked)


@dataclass
class Verdict:
    """What the check of the stored data found."""

    checked: int = 0  # keys and fields read back
    lost: int = 0  # acknowledged versions missing
    # per kill cycle: how long before its kill the oldest lost acknowledged write was acknowledged
    loss_window_s: dict[int, float] = field(default_factory=dict)
    pending_applied: int = 0  # in-flight writes found done (allowed)
    pending_dropped: int = 0  # in-flight writes not done (allowed)
    wrong: list[str] = field(default_factory=list)  # corruption: versions never written, ...
    engine_entries: int = 0  # entries the engine held
    engine_mismatches: list[str] = field(default_factory=list)
    served_mismatches: list[str] = field(default_factory=list)  # GET through pynq-kv != Redis

    @property
    def max_loss_window_s(self) -> float:
        return max(self.loss_window_s.values(), default=0.0)


# -- writers ----------------------------------------------------------------------------------


class Load:
    """One cycle's load: its keys' histories, acknowledged counts and error replies."""

    def __init__(self, cycle: int, threads: int) -> None:
        self.prefix = f"crash:{cycle}"
        self.histories: dict[tuple[str, ...], History] = {}
        self.counts = [0] * threads  # acknowledged writes by thread, while they run
        self.by_writer: dict[str, int] = {}  # acknowledged writes by writer (front-end)
        self.pairs: list[tuple[str, str]] = []  # MSET's key pairs: always equal
        self.errors: list[tuple[float, str]] = []  # error replies: when received, what said
        self.lock = threading.Lock()

    def history(self, kind: str, *name: str) -> History:
        # each thread creates and touches only its own keys; the dict insert is atomic
        key = (kind, *name)
        found = self.histories.get(key)
        if found is None:
            found = self.histories[key] = History(kind)
        return found

    def refused(self, writer: str, exc: Exception) -> None:
        """Record an error reply (or a wrong answer) with the moment it came."""
        with self.lock:
            self.errors.append((time.monotonic(), f"{writer}: {_refusal(exc)}"))

    def acknowledged(self) -> int:
        return sum(h.version for h in list(self.histories.values()))


def _set(client: redis.Redis, load: Load, tid: int, n: int) -> list[History]:
    key = f"{load.prefix}:{tid}:s{n % SLOTS}"
    h = load.history("string", key)
    h.pending = True
    client.set(key, str(h.version + 1))
    return [h]


def _incr(client: redis.Redis, load: Load, tid: int, n: int) -> list[History]:
    key = f"{load.prefix}:{tid}:n"
    h = load.history("string", key)
    h.pending = True
    if client.incr(key) != h.version + 1:
        raise AssertionError(f"INCR {key} did not answer {h.version + 1}")
    return [h]


def _lpush(client: redis.Redis, load: Load, tid: int, n: int) -> list[History]:
    key = f"{load.prefix}:{tid}:l"
    h = load.history("list", key)
    h.pending = True
    if client.lpush(key, str(h.version + 1)) != h.version + 1:
        raise AssertionError(f"LPUSH {key} did not answer {h.version + 1}")
    return [h]


def _mset(client: redis.Redis, load: Load, tid: int, n: int) -> list[History]:
    pair = [f"{load.prefix}:{tid}:m{n % SLOTS}a", f"{load.prefix}:{tid}:m{n % SLOTS}b"]
    if ("string", pair[0]) not in load.histories:
        load.pairs.append((pair[0], pair[1]))
    a, b = load.history("string", pair[0]), load.history("string", pair[1])
    a.pending = b.pending = True
    value = str(a.version + 1)
    client.mset({pair[0]: value, pair[1]: value})
    return [a, b]


def _hset(client: redis.Redis, load: Load, tid: int, n: int) -> list[History]:
    key, name = f"{load.prefix}:{tid}:h", f"f{n % SLOTS}"
    h = load.history("hash", key, name)
    h.pending = True
    client.hset(key, name, str(h.version + 1))
    return [h]


def _udp_set(client: MemcacheUDPClient, load: Load, tid: int, n: int) -> list[History]:
    """A memcached binary SET over UDP (acknowledged: the server answered it stored)."""
    key = f"{load.prefix}:{tid}:u{n % SLOTS}"
    h = load.history("string", key)
    h.pending = True
    client.set(key.encode(), str(h.version + 1).encode())  # (a retry resends the same version)
    return [h]


def _rest_put(client: "RestClient", load: Load, tid: int, n: int) -> list[History]:
    """PUT /v1/entries/{key} on the admin API (acknowledged: 200 or 201)."""
    key = f"{load.prefix}:{tid}:r{n % SLOTS}"
    h = load.history("string", key)
    h.pending = True
    client.put(key, str(h.version + 1))
    return [h]


# A writer: (client, load, thread id, how many times this thread called it before) -> the
# histories of the keys it wrote, once its write was acknowledged. Each thread calls them in
# turn. Another front-end's writer is such a function over its own client, whose factory
# WRITER_CLIENTS names (one client per factory and thread).
Writer = Callable[[Any, Load, int, int], list[History]]
WRITERS: dict[str, Writer] = {"SET": _set, "INCR": _incr, "LPUSH": _lpush, "MSET": _mset,
                              "HSET": _hset, "UDP SET": _udp_set, "REST PUT": _rest_put}


def resp_client(served: "Served") -> redis.Redis:
    """A redis-py client of serve's RESP port that never retries (a retried INCR or LPUSH
    would be a second write the ledger does not know)."""
    return redis.Redis(host=HOST, port=served.resp_port, socket_timeout=REPLY_TIMEOUT,
                       socket_connect_timeout=REPLY_TIMEOUT, retry=Retry(NoBackoff(), 0))


class RestClient:
    """The admin API's entry writes, with no retries."""

    def __init__(self, served: "Served") -> None:
        self.base = f"http://{HOST}:{served.admin_port}/v1/entries/"

    def put(self, key: str, value: str) -> None:
        request = urllib.request.Request(self.base + key, method="PUT",
                                         data=json.dumps({"value": value}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=REPLY_TIMEOUT) as response:
            if response.status not in (200, 201):
                raise AssertionError(f"PUT {key} answered {response.status}")

    def close(self) -> None:
        pass


def udp_client(served: "Served") -> MemcacheUDPClient:
    return MemcacheUDPClient(HOST, served.udp_port, timeout=1.0, retries=2)


WRITER_CLIENTS: dict[str, Callable[["Served"], Any]] = {
    name: {"UDP SET": udp_client, "REST PUT": RestClient}.get(name, resp_client)
    for name in WRITERS}
# The virtual board (docs/hosttier.md): its memcached SETs change the table on the wire, and
# reach Redis through the change log's drain — at the geometry tests/test_changelog.py builds.
VIRTUAL_BOARD = ("--backend", "rtl", "--rows", "1024", "--rules", "16")
CONNECTION_LOST = (redis.ConnectionError, redis.TimeoutError, ConnectionError, OSError)
# What every front-end answers a write the host tier's loss interrupted (RESP, memcached and the
# admin API say it alike): only a group kill, which kills Redis a moment before serve, may cause it.
TIER_LOST = re.compile(r"host tier (unavailable|connection lost)")


def _refusal(exc: Exception) -> str:
    if isinstance(exc, urllib.error.HTTPError):  # its body says why
        return f"HTTP {exc.code}: {exc.read().decode('utf-8', 'replace')[:200]}"
    return f"{type(exc).__name__}: {exc}"


def _run_thread(served: "Served", load: Load, tid: int, stop: threading.Event,
                names: tuple[str, ...]) -> None:
    made = {factory: factory(served) for factory in {WRITER_CLIENTS[name] for name in names}}
    clients = {name: made[WRITER_CLIENTS[name]] for name in names}
    writers = [(name, WRITERS[name]) for name in names]
    n = tid  # threads start at different writers
    try:
        while not stop.is_set():
            name, write = writers[n % len(writers)]
            try:
                touched = write(clients[name], load, tid, n // len(writers))
            except urllib.error.HTTPError as exc:  # an error reply (an OSError, not a lost link)
                load.refused(name, exc)
                return  # this thread's one write in flight stays pending
            except CONNECTION_LOST:
                return  # serve is gone: this thread's one write in flight stays pending
            except (redis.RedisError, MemcacheError, AssertionError) as exc:
                load.refused(name, exc)
                return
            now = time.monotonic()
            for h in touched:
                h.acked.append(now)
                h.pending = False
            load.counts[tid] += 1
            with load.lock:
                load.by_writer[name] = load.by_writer.get(name, 0) + 1
            n += 1
    finally:
        for client in made.values():
            client.close()


# -- serve ------------------------------------------------------------------------------------


class Served:
    """A `pynq-kv serve --store private` on loopback free ports, its banner read."""

    def __init__(self, data_dir: Path, appendfsync: str, extra: tuple[str, ...] = (),
                 global_args: tuple[str, ...] = ("--backend", "model")) -> None:
        self.data_dir = data_dir
        cmd = [sys.executable, "-m", "pynq_kv", *global_args, "serve", "--store", "private",
               "--appendfsync", appendfsync, "--data-dir", str(data_dir), "--bind", HOST,
               "--resp-port", "0", "--udp-port", "0", "--admin-port", "0",
               "--log-level", "info", *extra]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        ports: dict[str, int] = {}
        # (the virtual board's first start may build the Verilated kv_top: minutes)
        deadline = time.monotonic() + STARTUP_TIMEOUT * (5 if "rtl" in global_args else 1)
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            match = BANNER.search(line)
            if match:
                ports[match[1]] = int(match[2])
            if "host tier:" in line:
                break
        if len(ports) != 3:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("serve did not start:\n" + "".join(self.lines))
        # the memcached UDP port is for its writer, once that front-end writes through
        self.resp_port, self.udp_port, self.admin_port = ports["tcp"], ports["udp"], ports["http"]
        # the rest of the log is drained so serve never blocks on a full pipe
        self._drain = threading.Thread(target=self._read_rest, daemon=True)
        self._drain.start()
        self.redis_pid = self._redis_pid()
        self.child_exit_s = 0.0  # after kill(): how long redis-server outlived the kill

    def _read_rest(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def unix_socket(self) -> str:
        """The private redis-server's socket, as serve wrote it into DATA_DIR/redis.conf."""
        for line in (self.data_dir / "redis.conf").read_text().splitlines():
            if line.startswith("unixsocket "):
                return json.loads(line.split(" ", 1)[1])  # _conf_string quotes it like JSON
        raise RuntimeError("no unixsocket line in redis.conf")

    def redis(self) -> redis.Redis:
        """A client of the private redis-server itself (not through pynq-kv)."""
        return redis.Redis(unix_socket_path=self.unix_socket(), socket_timeout=REPLY_TIMEOUT)

    def _redis_pid(self) -> int:
        client = self.redis()
        try:
            pid = int(client.info("server")["process_id"])
        finally:
            client.close()
        if _ppid(pid) != self.proc.pid:
            raise RuntimeError(f"redis-server {pid} is not serve's ({self.proc.pid}) child")
        return pid

    def engine_entries(self) -> list[tuple[bytes, bytes]]:
        """Every entry the engine holds, from the admin API's NDJSON export."""
        url = f"http://{HOST}:{self.admin_port}/v1/entries?format=ndjson"
        with urllib.request.urlopen(url, timeout=30) as reply:
            records = [json.loads(line) for line in reply.read().decode().splitlines() if line]
        return [(_item(r["key"]), _item(r["value"])) for r in records]

    def kill(self, how: str) -> tuple[float, Optional[str]]:
        """SIGKILL serve ("serve") or redis-server and serve ("group"); wait until both are gone.
        Returns the kill's time and, when the child outlived serve, what /proc said of it."""
        killed_at = time.monotonic()  # the kill begins (with Redis', in a group kill)
        if how == "group":
            os.kill(self.redis_pid, signal.SIGKILL)
        self.proc.kill()
        self.proc.wait()
        orphan = None
        deadline = time.monotonic() + CHILD_EXIT_TIMEOUT
        while _alive(self.redis_pid):
            if time.monotonic() > deadline:
                orphan = (f"redis-server pid {self.redis_pid} still running "
                          f"{CHILD_EXIT_TIMEOUT:g} s after serve's SIGKILL: {_proc_status(self.redis_pid)}")
                os.kill(self.redis_pid, signal.SIGKILL)  # the next cycle needs the data dir
                while _alive(self.redis_pid):
                    time.sleep(0.01)
                break
            time.sleep(0.01)
        self.child_exit_s = time.monotonic() - killed_at
        return killed_at, orphan

    def stop(self) -> None:
        """SIGTERM, serve's clean stop (it shuts its redis-server down)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _item(item: Any) -> bytes:
    if isinstance(item, dict):
        return bytes.fromhex(item["hex"])
    return str(item).encode()


def _ppid(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as handle:
        return int(handle.read().rsplit(")", 1)[1].split()[1])


def _alive(pid: int) -> bool:
    """Running, not a zombie (a dead child that no one reaped yet has released everything)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def _proc_status(pid: int) -> str:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError as exc:
        return f"(no /proc entry: {exc})"
    wanted = ("Name", "State", "PPid", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")
    return "; ".join(line for line in text.splitlines() if line.split(":")[0] in wanted)


# -- checks -----------------------------------------------------------------------------------


def _observed(client: redis.Redis, kind: str, name: tuple[str, ...]) -> tuple[int, str]:
    """The version Redis holds of a key or field (0: absent), and '' or why it is malformed."""
    if kind == "list":
        items = client.lrange(name[0], 0, -1)
        n = len(items)
        if items != [str(v).encode() for v in range(n, 0, -1)]:
            return n, f"list {name[0]} is not [{n}..1]: {items[:5]}..."
        return n, ""
    raw = client.hget(name[0], name[1]) if kind == "hash" else client.get(name[0])
    if raw is None:
        return 0, ""
    try:
        return int(raw), ""
    except ValueError:
        return -1, f"{name} holds {raw!r}"


def check(served: Served, loads: list[Load], kill_times: dict[int, float]) -> Verdict:
    """After a restart: every load's acknowledged versions against Redis (read directly), GET
    through pynq-kv against Redis for every string key, and every engine entry against Redis."""
    verdict = Verdict()
    direct = served.redis()
    front = resp_client(served)
    try:
        for cycle, load in enumerate(loads):
            for (kind, *name), h in load.histories.items():
                got, malformed = _observed(direct, kind, tuple(name))
                verdict.checked += 1
                if malformed:
                    verdict.wrong.append(malformed)
                elif got == h.version + 1 and h.pending:
                    verdict.pending_applied += 1
                elif got == h.version:
                    verdict.pending_dropped += h.pending
                elif 0 <= got < h.version:
                    verdict.lost += h.version - got
                    window = kill_times[cycle] - h.acked[got]
                    verdict.loss_window_s[cycle] = max(verdict.loss_window_s.get(cycle, 0.0),
                                                       window)
                else:
                    verdict.wrong.append(f"{name} holds version {got}; {h.version} acknowledged"
                                         f"{', one more in flight' if h.pending else ''}")
                if kind == "string":
                    want = direct.get(name[0])
                    if front.get(name[0]) != want:
                        verdict.served_mismatches.append(f"GET {name[0]} through pynq-kv differs "
                                                         f"from Redis' {want!r}")
            for a, b in load.pairs:  # MSET is atomic: a kill never splits one
                values = direct.mget([a, b])
                if values[0] != values[1]:
                    verdict.wrong.append(f"MSET pair {a}, {b} holds {values}")
        entries = served.engine_entries()
        verdict.engine_entries = len(entries)
        verdict.engine_mismatches = compare_engine(entries, direct)
    finally:
        direct.close()
        front.close()
    return verdict


def compare_engine(entries: list[tuple[bytes, bytes]], direct: redis.Redis) -> list[str]:
    """Each engine entry Redis does not hold with that very value."""
    if not entries:
        return []
    values = direct.mget([key for key, _ in entries])
    return [f"engine {key!r} = {value!r}, Redis {want!r}"
            for (key, value), want in zip(entries, values) if value != want]


# -- the cycle --------------------------------------------------------------------------------


@dataclass
class CrashReport:
    """Everything a crash run saw."""

    appendfsync: str
    kills: dict[str, int] = field(default_factory=lambda: {k: 0 for k in KILLS})
    acknowledged: int = 0
    by_writer: dict[str, int] = field(default_factory=dict)  # acknowledged writes by writer
    lost: dict[str, int] = field(default_factory=lambda: {k: 0 for k in KILLS})
    max_loss_window_s: dict[str, float] = field(default_factory=lambda: {k: 0.0 for k in KILLS})
    pending_applied: int = 0
    pending_dropped: int = 0
    orphans: list[str] = field(default_factory=list)
    max_child_exit_s: float = 0.0  # serve kills: how long redis-server took to be gone
    max_engine_entries: int = 0  # the most engine entries one check compared with Redis
    errors: list[str] = field(default_factory=list)  # error replies, corruption, incoherence
    tier_lost_replies: int = 0  # group kills: writes in flight that serve, outliving Redis for a
    # moment, answered with the host tier's loss (not acknowledged: they stay in flight)
    seconds: float = 0.0  # the whole run: starts, loads, checks
    load_seconds: float = 0.0  # under load only (from the threads' start to the kill)

    def failures(self) -> list[str]:
        """What makes the run fail whatever the fsync policy."""
        return self.orphans + self.errors


def sort_refusals(errors: list[tuple[float, str]], how: str,
                  killed_at: float) -> tuple[int, list[str]]:
    """Error replies of one cycle: how many the kill itself caused (a group kill's Redis went
    first and serve answered the writes in flight with the host tier's loss), and the rest,
    which are faults."""
    caused, faults = 0, []
    for at, text in errors:
        if how == "group" and at >= killed_at and TIER_LOST.search(text):
            caused += 1
        else:
            faults.append(text)
    return caused, faults


def run_crashes(data_dir: Path, *, appendfsync: str, kills: int, min_acknowledged: int,
                threads: int = 6, kinds: tuple[str, ...] = KILLS, seed: int = 0,
                extra: tuple[str, ...] = (), log: Callable[[str], None] = lambda _: None,
                writers: tuple[str, ...] = tuple(WRITERS),
                global_args: tuple[str, ...] = ("--backend", "model")) -> CrashReport:
    """kills cycles of: serve up (on the same data dir), load from `threads` threads, SIGKILL at
    a random moment (after a random share of the acknowledged writes still wanted), check.
    The kind of kill alternates over `kinds`. Every check covers all cycles so far. writers
    names the WRITERS the threads use; global_args choose the backend (VIRTUAL_BOARD: the
    Verilated kv_top, whose UDP port is its Ethernet port)."""
    rng = random.Random(seed)
    report = CrashReport(appendfsync)
    loads: list[Load] = []
    kill_times: dict[int, float] = {}
    started = time.monotonic()
    served = Served(data_dir, appendfsync, extra, global_args)
    try:
        for cycle in range(kills):
            load = Load(cycle, threads)
            loads.append(load)
            wanted = max(0, min_acknowledged - report.acknowledged)
            left = kills - cycle
            target = wanted if left == 1 else int(wanted / left * rng.uniform(0.5, 1.5))
            target = max(target, 50)  # every cycle is under load when the kill comes
            stop = threading.Event()
            workers = [threading.Thread(target=_run_thread, args=(served, load, t, stop, writers),
                                        daemon=True) for t in range(threads)]
            load_started = time.monotonic()
            for worker in workers:
                worker.start()
            while sum(load.counts) < target and any(w.is_alive() for w in workers):
                time.sleep(0.002)
            time.sleep(rng.uniform(0, 0.05))  # not at a poll's edge
            how = kinds[cycle % len(kinds)]
            kill_times[cycle], orphan = served.kill(how)
            report.load_seconds += kill_times[cycle] - load_started
            stop.set()
            for worker in workers:
                worker.join(REPLY_TIMEOUT + 5)
                if worker.is_alive():
                    raise RuntimeError("a load thread did not stop after the kill")
            report.kills[how] += 1
            report.acknowledged += load.acknowledged()
            for name, count in load.by_writer.items():
                report.by_writer[name] = report.by_writer.get(name, 0) + count
            interrupted, refused = sort_refusals(load.errors, how, kill_times[cycle])
            report.tier_lost_replies += interrupted
            report.errors += refused
            if orphan:
                report.orphans.append(orphan)
            elif how == "serve":
                report.max_child_exit_s = max(report.max_child_exit_s, served.child_exit_s)
            served = Served(data_dir, appendfsync, extra, global_args)
            verdict = check(served, loads, kill_times)
            account_check(report, verdict, how, cycle)
            log(f"kill {cycle + 1}/{kills} ({how}): {load.acknowledged()} acknowledged, "
                f"{verdict.lost} lost, engine {verdict.engine_entries} entries, "
                f"{len(report.failures())} failures so far")
    finally:
        served.stop()
    report.seconds = time.monotonic() - started
    return report


def account_check(report: CrashReport, verdict: Verdict, how: str, cycle: int) -> None:
    """Add a check's findings to the report. Losses are charged to the kill just made (cycle):
    every earlier cycle was checked already, and a loss found again later is not counted twice;
    so is the loss window, that cycle's (the largest of all only if its losses were older)."""
    report.errors += verdict.wrong + verdict.engine_mismatches + verdict.served_mismatches
    new_lost = verdict.lost - sum(report.lost.values())
    if new_lost > 0:
        report.lost[how] += new_lost
        report.max_loss_window_s[how] = max(
            report.max_loss_window_s[how],
            verdict.loss_window_s.get(cycle, verdict.max_loss_window_s))
    report.max_engine_entries = max(report.max_engine_entries, verdict.engine_entries)
    report.pending_applied = verdict.pending_applied  # every cycle's, counted by each check
    report.pending_dropped = verdict.pending_dropped
