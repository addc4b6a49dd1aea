"""The scenarios of the fault and abuse suite, and the registry benchmarks/abuse.py and
tests/test_abuse.py both run (see abuse_support.py for the frame and what a scenario returns).

The abuses issue 16 found the appliance already withstands (RESP and datagram fuzz, 1,000 idle
clients beside redis-benchmark, a 500 MB bulk header, a million pipelined GETs never read, path
traversal over REST, corrupt state and bulk files) and the ones it found it did not (reloads
racing REST and RESP writes, 500 MB bodies to the admin service, a backtracking CONFIG GET glob,
clients holding commands of 900,000 arguments, more clients than descriptors, multi-get
reflection over memcached/UDP, a denied UDP source). Each returns `inputs` and, under
`violations`, anything it saw go wrong besides the frame's targets. A scenario with parameters
is a factory (`big_body(...)`, `client_memory(...)`, `fd_exhaustion(...)`) that the focused
tests also call at their own scale.
"""

from __future__ import annotations

import csv
import hashlib
import http.client
import io
import json
import random
import select
import shutil
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional

import hiredis

import udp_abuse_support as udp
from abuse_support import (
    HOST,
    Context,
    Scenario,
    Served,
    child_env,
    http_request,
    ping,
    pynq_kv_command,
)
from pynq_kv.net import codec
from resp_fuzz_inputs import may_write, mutate, random_input
from resp_helpers import RawClient, encode_command, exchange_all


# -- RESP fuzz ----------------------------------------------------------------------------------
def well_formed(output: bytes) -> bool:
    """The output is a sequence of whole RESP replies."""
    reader = hiredis.Reader(notEnoughData=Ellipsis)
    reader.feed(output)
    try:
        while reader.gets() is not Ellipsis:
            pass
    except hiredis.ProtocolError:
        return False
    return not reader.has_data()


def run_resp_fuzz(ctx: Context) -> dict[str, Any]:
    """Mutated read-only requests (tests/resp_fuzz_inputs.py), 40 connections at a time."""
    rng = random.Random(16_001)
    total = ctx.n(16_500, 1_200)
    inputs: list[bytes] = []
    while len(inputs) < total:
        data = random_input(rng)
        if not may_write(data):  # the known keys must only change through a real defect
            inputs.append(data)
    ends: dict[str, int] = {"closed": 0, "reset": 0, "timeout": 0}
    malformed = answered = 0
    for start in range(0, total, 40):
        for output, end in exchange_all(ctx.resp_port, inputs[start:start + 40], timeout=10.0):
            ends[end] += 1
            answered += bool(output)
            malformed += not well_formed(output)
    violations = []
    if ends["timeout"]:
        violations.append(f"{ends['timeout']} connections neither answered nor closed in 10 s")
    if malformed:
        violations.append(f"{malformed} outputs were not whole RESP replies")
    return {"inputs": total, "answered": answered, "ends": ends, "violations": violations}


# -- datagram fuzz ------------------------------------------------------------------------------
SETX = struct.pack(">II", 0, 0)


def fuzz_datagram(rng: random.Random) -> bytes:
    """A malformed (or occasionally well-formed) memcached UDP datagram on fz:* keys."""
    keys = [b"fz:%d" % i for i in range(32)] + [b"", b"z" * 36, b"z" * 300]
    pick = rng.random()
    if pick < 0.05:  # shorter than the frame header
        return bytes(rng.randrange(256) for _ in range(rng.randrange(8)))
    frame = struct.pack(">HHHH", rng.randrange(1 << 16), rng.choice([0, 0, 0, 1, 7]),
                        rng.choice([1, 1, 1, 0, 2, 65535]), rng.choice([0, 0, 1]))
    if pick < 0.15:  # random bytes
        return frame + bytes(rng.randrange(256) for _ in range(rng.randrange(200)))
    if pick < 0.35:  # text subset, mutated
        key = rng.choice(keys[:32])
        text = rng.choice([b"get %s %s\r\n" % (key, rng.choice(keys[:32])), b"delete %s\r\n" % key,
                           b"set %s 0 0 3\r\nabc\r\n" % key, b"set %s 0 0 99\r\nab\r\n" % key,
                           b"gets %s\r\n" % key, b"version\r\n", b"stats\r\n", b"\r\n",
                           b"get " + b" ".join(keys[:32]) + b"\r\n"])
        return frame + mutate(text, _ops(rng))
    Op = codec.Opcode
    parts = []
    for i in range(rng.randint(1, 6)):
        key = rng.choice(keys)
        op = rng.choice([Op.GET, Op.GETK, Op.GETQ, Op.GETKQ, Op.SET, Op.SETQ, Op.DELETE, Op.NOOP,
                         Op.VERSION, Op.MATCH, 0x42, 0x08])
        extras = SETX if op in (Op.SET, Op.SETQ) else b""
        value = b"v" * rng.choice([0, 3, 31, 32]) if op in (Op.SET, Op.SETQ) else b""
        head = bytearray(codec.Request(op, key if op not in (Op.NOOP, Op.VERSION) else b"",
                                       extras=extras, value=value, opaque=i).encode())
        if rng.random() < 0.3:  # lying lengths: key, extras, total body
            field_at, width = rng.choice([(2, 2), (4, 1), (8, 4)])
            head[field_at:field_at + width] = rng.randrange(1 << (8 * width)).to_bytes(width, "big")
        parts.append(bytes(head))
    return frame + mutate(b"".join(parts), _ops(rng))


def _ops(rng: random.Random) -> list[tuple[int, int, int]]:
    return [(rng.randrange(7), rng.randrange(1 << 16), rng.randrange(1 << 16))
            for _ in range(rng.randint(0, 4))]


def udp_get(port: int, key: bytes, timeout: float = 3.0) -> bytes | None:
    """The value of key over the binary protocol (None: not found); raises if no answer."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect((HOST, port))
        sock.settimeout(timeout)
        sock.send(struct.pack(">HHHH", 4242, 0, 1, 0) + codec.get_request(key).encode())
        reply = sock.recv(65536)
    (response,) = codec.parse_responses(reply[8:])
    return response.value if response.status == 0 else None


def run_datagram_fuzz(ctx: Context) -> dict[str, Any]:
    """Malformed memcached datagrams, 32 at a time, the replies drained between bursts."""
    rng = random.Random(16_002)
    total = ctx.n(20_000, 1_500)
    sent = replies = reply_bytes = request_bytes = 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect((HOST, ctx.udp_port))
        while sent < total:
            for _ in range(min(32, total - sent)):
                datagram = fuzz_datagram(rng)  # fz:* keys only: the known keys are not named
                sock.send(datagram)
                sent += 1
                request_bytes += len(datagram)
            sock.settimeout(0.02)
            try:
                while True:
                    reply_bytes += len(sock.recv(65536))
                    replies += 1
            except (socket.timeout, ConnectionRefusedError):
                pass
    violations = []
    probe = next(iter(ctx.known.live))
    try:
        if udp_get(ctx.udp_port, probe) != ctx.known.live[probe]:
            violations.append("after the fuzz a known key reads wrong over UDP")
    except (OSError, ValueError, codec.CodecError) as exc:
        violations.append(f"after the fuzz UDP does not answer a GET: {exc!r}")
    return {"inputs": sent, "request_bytes": request_bytes, "reply_datagrams": replies,
            "reply_bytes": reply_bytes, "violations": violations}


# -- 1,000 idle clients beside redis-benchmark --------------------------------------------------
def redis_benchmark(port: int, requests: int) -> float:
    """GET requests/s of redis-benchmark, 50 clients, unpipelined."""
    done = subprocess.run(
        ["redis-benchmark", "-h", HOST, "-p", str(port), "-t", "get", "-n", str(requests), "-c", "50",
         "-r", "10000", "-d", "3", "--csv"], capture_output=True, text=True, timeout=600)
    rows = [r for r in csv.reader(io.StringIO(done.stdout)) if len(r) >= 2 and r[0] != "test"]
    if done.returncode or not rows:
        raise RuntimeError(f"redis-benchmark failed ({done.returncode}): {done.stderr.strip()}")
    return float(rows[0][1])


def open_idle_clients(port: int, count: int) -> list[socket.socket]:
    """count connections; every other one has said PING (a client that spoke, then idles)."""
    socks = [socket.create_connection((HOST, port), timeout=10) for _ in range(count)]
    talkers = socks[::2]
    for sock in talkers:
        sock.sendall(b"PING\r\n")
    for sock in talkers:
        if sock.recv(16) != b"+PONG\r\n":
            raise RuntimeError("an idle client's PING was not answered")
    return socks


def connected_clients(port: int) -> int:
    client = RawClient(port)
    try:
        info = client.call("INFO", "clients").decode()
    finally:
        client.close()
    return int(info.split("connected_clients:")[1].split()[0])


# Idle clients cost a server nothing but memory; a loop that walks every client per event would
# show here. The bound is loose: the best of two or three runs on a shared, noisy machine.
MIN_THROUGHPUT_RATIO = 0.5


def run_idle_clients(ctx: Context) -> dict[str, Any]:
    """redis-benchmark alone and beside 1,000 idle clients, alternating; the best of each."""
    if shutil.which("redis-benchmark") is None:
        raise RuntimeError("needs redis-benchmark (Debian: redis-tools)")
    requests, rounds, idle = ctx.n(100_000, 20_000), ctx.n(3, 2), 1000
    alone = beside = 0.0
    held = idle
    baseline = connected_clients(ctx.resp_port)  # the control client, and the one asking
    for i in range(rounds):
        ctx.mark(f"benchmark_alone_{i}")
        alone = max(alone, redis_benchmark(ctx.resp_port, requests))
        ctx.mark(f"open_idle_{i}")
        socks = open_idle_clients(ctx.resp_port, idle)
        try:
            held = min(held, connected_clients(ctx.resp_port) - baseline)
            ctx.mark(f"benchmark_beside_idle_{i}")
            beside = max(beside, redis_benchmark(ctx.resp_port, requests))
            ctx.mark(f"close_idle_{i}")
        finally:
            for sock in socks:
                sock.close()
        ctx.mark(f"closed_idle_{i}")
    violations = [] if held >= idle else [f"only {held} of {idle} idle clients were held"]
    if beside < MIN_THROUGHPUT_RATIO * alone:
        violations.append(f"idle clients cut GET throughput to {beside / alone:.0%} "
                          f"(at least {MIN_THROUGHPUT_RATIO:.0%} expected)")
    return {"inputs": rounds * (2 * requests + idle), "idle_clients": idle,
            "idle_clients_held": held, "get_rps_alone": round(alone),
            "get_rps_beside_idle": round(beside), "throughput_ratio": round(beside / alone, 3),
            "violations": violations}


# -- a 500 MB bulk header -----------------------------------------------------------------------
BIG_HEADERS = [b"*3\r\n$3\r\nSET\r\n$10\r\nfake:bulky\r\n$500000000\r\n",  # as a value
               b"*2\r\n$500000000\r\n"]  # as the command name


def run_bulk_header(ctx: Context) -> dict[str, Any]:
    """Clients announce a 500 MB bulk string and then trickle 64 KiB every 10 ms: each must get
    an error and be closed, and the server must not buffer what they send."""
    clients, seconds = ctx.n(20, 4), ctx.n(5.0, 1.5)
    socks = []
    for i in range(clients):
        sock = socket.create_connection((HOST, ctx.resp_port), timeout=10)
        sock.sendall(BIG_HEADERS[i % len(BIG_HEADERS)])
        sock.setblocking(False)
        socks.append(sock)
    replies = [bytearray() for _ in socks]
    closed = [False] * clients
    trickled = 0
    chunk = b"x" * 65536
    end = time.monotonic() + seconds
    while time.monotonic() < end and not all(closed):
        for i, sock in enumerate(socks):
            if closed[i]:
                continue
            try:
                while True:
                    piece = sock.recv(65536)
                    if not piece:
                        closed[i] = True
                        break
                    replies[i] += piece
            except BlockingIOError:
                pass
            except ConnectionResetError:
                closed[i] = True
            if not closed[i]:
                try:
                    trickled += sock.send(chunk)
                except BlockingIOError:
                    pass
                except (BrokenPipeError, ConnectionResetError):
                    closed[i] = True
        time.sleep(0.01)
    for sock in socks:
        sock.close()
    refused = sum(r.startswith(b"-ERR") for r in replies)
    violations = []
    if refused < clients:
        violations.append(f"{clients - refused} of {clients} clients got no error reply")
    if sum(closed) < clients:
        violations.append(f"{clients - sum(closed)} of {clients} clients were not closed")
    return {"inputs": clients, "bytes_trickled": trickled, "refused": refused,
            "closed_by_server": sum(closed),
            "first_reply": bytes(replies[0][:80]).decode("latin-1"), "violations": violations}


# -- a million pipelined GETs, never read -------------------------------------------------------
def run_pipelined_unread(ctx: Context) -> dict[str, Any]:
    """One client pipelines GETs of known keys without reading: the server must stop reading it
    (bounded output buffer) and serve the others; once read, every reply must be right."""
    count = ctx.n(1_000_000, 400_000)
    keys = list(ctx.known.live)[:100]
    block = b"".join(encode_command("GET", k) for k in keys)
    payload = memoryview(block * (count // len(keys)))
    base = ctx.frontend_stats("resp")["total_net_input_bytes"]  # what others sent before
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):  # small kernel buffers on our side
        sock.setsockopt(socket.SOL_SOCKET, option, 64 * 1024)
    sock.connect((HOST, ctx.resp_port))
    sock.settimeout(0.2)
    ctx.mark("send")
    sent, last_progress = 0, time.monotonic()
    stall_wait = ctx.n(3.0, 1.5)
    while sent < len(payload) and time.monotonic() - last_progress < stall_wait:
        try:
            sent += sock.send(payload[sent:sent + 65536])
            last_progress = time.monotonic()
        except socket.timeout:
            pass
    # What the server itself read while nobody read its replies: its input counter, at the end
    # of the send phase and a little later. The kernel's buffers may absorb all we sent (the
    # server's receive buffer grows to tcp_rmem's maximum, 32 MB here), so "our send blocked"
    # would measure the kernel; the server's bound is its own reading, which must stop.
    read_at_stall = ctx.frontend_stats("resp")["total_net_input_bytes"]
    time.sleep(0.5)
    read_later = ctx.frontend_stats("resp")["total_net_input_bytes"]
    # (the control client's PINGs move the counter by a few hundred bytes; a server still
    # reading this client would move it by megabytes in that half second)
    stalled = read_later - read_at_stall < 65536 and read_later - base < len(payload)
    sent_before_stall = sent
    rss_while_stalled = ctx.served.rss_mb()
    ctx.mark("read")  # now read everything while the rest is sent
    sock.settimeout(60)
    rest = threading.Thread(target=sock.sendall, args=(payload[sent:],), daemon=True)
    rest.start()
    reader = hiredis.Reader(notEnoughData=Ellipsis)
    got = wrong = 0
    values = [ctx.known.live[k] for k in keys]
    while got < count:
        data = sock.recv(1 << 20)
        if not data:
            break
        reader.feed(data)
        reply = reader.gets()
        while reply is not Ellipsis:
            wrong += reply != values[got % len(values)]
            got += 1
            reply = reader.gets()
    rest.join(60)
    sock.close()
    ctx.mark("done")
    violations = []
    if not stalled:
        violations.append(f"the server went on reading GETs whose replies were not read (read "
                          f"{read_at_stall - base} then {read_later - base} of {len(payload)} "
                          "bytes): its output is not bounded")
    if got != count or wrong:
        violations.append(f"read back {got} of {count} replies, {wrong} of them wrong")
    return {"inputs": count, "request_bytes": len(payload), "stalled": stalled,
            "bytes_sent_before_stall": sent_before_stall,
            "bytes_server_read_while_unread": read_later - base,
            "rss_mb_while_stalled": round(rss_while_stalled, 1), "replies_read": got,
            "violations": violations}


# -- path traversal over REST -------------------------------------------------------------------
UP = "../" * 12


def traversal_requests(canary: Path) -> list[tuple[str, str, bool]]:
    """(method, path, with the token): file reads outside static/ and deletes that would reach a
    known key if the path were normalised."""
    target = str(canary).lstrip("/")
    reads = [
        f"/static/{UP}etc/passwd", f"/static/{UP}{target}",
        "/static/" + "%2e%2e/" * 12 + "etc/passwd", "/static/" + "..%2f" * 12 + "etc%2fpasswd",
        "/static/" + "%2e%2e%2f" * 12 + target.replace("/", "%2f"),
        "/static/" + "%252e%252e/" * 12 + "etc/passwd", "/static/" + "..%5c" * 12 + "etc%5cpasswd",
        "/static/" + "....//" * 12 + "etc/passwd", "/static/" + "%c0%ae%c0%ae/" * 12 + "etc/passwd",
        "/static/" + "..;/" * 12 + "etc/passwd", "/static/dashboard.js/../../main.py",
        "/static/..%2fmain.py", "/static/%2e%2e/main.py", "/static/swagger/../../main.py",
        "/static//etc/passwd", f"/static/{canary}", "/static/%2fetc%2fpasswd",
        f"/docs/{UP}etc/passwd", f"/v1/entries/{UP}etc/passwd", "/v1/entries/..%2f..%2fetc%2fpasswd",
        f"/v1/lookup/{UP}etc/passwd", f"/v1/rules/{UP}etc/passwd", f"/{UP}etc/passwd",
        "/%2e%2e/%2e%2e/etc/passwd",
    ]
    out = [(m, p, False) for p in reads for m in ("GET", "HEAD")]
    for key in ("known:000000", "known:000001"):
        out += [("DELETE", f"/v1/entries/x/../{key}", True),
                ("DELETE", f"/v1/entries/x%2f..%2f{key}", True),
                ("DELETE", f"/v1/entries/%2e%2e/entries/{key}", True),
                ("DELETE", f"/static/../v1/entries/{key}", False),
                ("PUT", f"/static/../v1/entries/{key}", False),
                ("DELETE", f"/v1/entries/./{key}", True)]
    return out


def run_path_traversal(ctx: Context) -> dict[str, Any]:
    """Traversal paths, plain and encoded: every answer a 4xx, no file's content in any."""
    secret = f"canary-{random.Random(16_003).getrandbits(64):016x}"
    canary = ctx.workdir / "canary.txt"
    canary.write_text(secret + "\n")
    markers = [secret.encode(), b"root:x:0:0", b"def create_app", b"[project]"]
    statuses: dict[str, int] = {}
    violations = []
    requests = traversal_requests(canary.resolve())
    for method, path, with_token in requests:
        headers = {"Authorization": f"Bearer {ctx.admin_token}"} if with_token else {}
        body = json.dumps({"value": "evil"}).encode() if method == "PUT" else b""
        if body:
            headers["Content-Type"] = "application/json"
        status, text = http_request(ctx.admin_port, method, path, body, headers)
        statuses[str(status)] = statuses.get(str(status), 0) + 1
        if not 400 <= status < 500:
            violations.append(f"{method} {path}: {status}")
        leaked = [m.decode() for m in markers if m in text]
        if leaked:
            violations.append(f"{method} {path}: the answer holds {leaked}")
    return {"inputs": len(requests), "statuses": statuses, "violations": violations}


# -- corrupt files ------------------------------------------------------------------------------
def corrupt_variants(good: bytes, rng: random.Random, small: bool) -> dict[str, bytes]:
    """Truncated, garbled and foreign versions of a good state file."""
    garbled = bytearray(good)
    for _ in range(64):
        at = rng.randrange(len(garbled) // 4, len(garbled))
        garbled[at] ^= 1 << rng.randrange(8)
    one_bit = bytearray(good)
    one_bit[len(good) // 2] ^= 0x10  # inside the arrays: only a checksum can tell
    variants = {
        "truncated_half": good[:len(good) // 2],
        "one_bit_flipped": bytes(one_bit),
        "empty": b"",
    }
    if not small:
        variants.update({
            "garbled_64_bits": bytes(garbled),
            "truncated_100_bytes": good[:100],
            "truncated_last_byte": good[:-1],
            "random_bytes": bytes(rng.randrange(256) for _ in range(len(good))),
            "text": b"key,value\na,1\n",
        })
    return variants


def make_state_file(ctx: Context, path: Path, count: int) -> None:
    """A good state file of count keys through the CLI (`pynq-kv --state path load file.csv`)."""
    source = path.with_suffix(".csv")
    with open(source, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["key", "value"])
        writer.writerows([f"state:{i}", f"v{i}"] for i in range(count))
    done = subprocess.run(pynq_kv_command("--state", str(path), "--rows", "1024", "load", str(source)),
                          capture_output=True, text=True, timeout=120, env=child_env())
    if done.returncode:
        raise RuntimeError(f"making the state file failed: {done.stderr}")


def try_corrupt_state(ctx: Context, path: Path) -> list[str]:
    """Start serve on a corrupt state file: it must refuse, clearly, and leave the file as it
    was. What is wrong, if anything."""
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    served = Served(ctx.workdir, global_args=("--state", str(path), "--rows", "1024"),
                    expect_start=False)
    try:
        served.proc.wait(60)
    except subprocess.TimeoutExpired:
        pass
    code = served.stop()
    log = served.log_text()
    problems = []
    if "serving backend" in log:
        problems.append("started")
    if code in (0, None):
        problems.append(f"exit code {code}")
    if "Traceback" in log:
        problems.append("a traceback instead of a message")
    if path.name not in log:
        problems.append("the message does not name the file")
    if hashlib.sha256(path.read_bytes()).hexdigest() != before:
        problems.append("the file was changed")
    return problems


BAD_BULK = [  # (format, body): each must be refused whole; the first lines are good
    ("ndjson", b'{"key": "known:000000", "value": "evil"}\n{"key": "fresh:1", "value": "x"}\n'
               b'{"key": "fresh:2", "val'),  # truncated
    ("ndjson", b'{"key": "known:000001", "value": "evil"}\n{"key": "fresh:3", "value": "x"}\n'
               b'{"key": "fre\xff\xfesh:4", "value": "x"}\n'),  # invalid UTF-8
    ("ndjson", b'{"key": "known:000002", "value": "evil"}\n\x00\x01\x02garbage\n'),
    ("csv", b"key,value\nknown:000003,evil\nfresh:5,x\nfresh:6\n"),  # a short row
    ("csv", b"key,value\nknown:000004,evil\nfresh:7,x\n\"fresh:8,x\n"),  # an open quote
    ("csv", bytes(range(256)) * 4),
]


def run_corrupt_files(ctx: Context) -> dict[str, Any]:
    """Corrupt state files refused at start-up (file untouched); corrupt bulk imports refused
    whole over REST (table untouched: the frame checks the known keys they try to overwrite)."""
    rng = random.Random(16_004)
    good = ctx.workdir / "good.npz"
    make_state_file(ctx, good, ctx.n(2000, 200))
    violations = []
    outcomes: dict[str, list[str]] = {}
    for name, content in corrupt_variants(good.read_bytes(), rng, ctx.small).items():
        path = ctx.workdir / f"{name}.npz"
        path.write_bytes(content)
        outcomes[name] = try_corrupt_state(ctx, path)
        if outcomes[name]:
            violations.append(f"state file {name}: {', '.join(outcomes[name])}")
    statuses: dict[str, int] = {}
    auth = {"Authorization": f"Bearer {ctx.admin_token}"}
    for fmt, body in BAD_BULK:
        status, text = http_request(ctx.admin_port, "POST", f"/v1/entries?format={fmt}", body, auth)
        statuses[str(status)] = statuses.get(str(status), 0) + 1
        if not 400 <= status < 500:
            violations.append(f"bulk {fmt} {body[:40]!r}: {status} {text[:200]!r}")
    client = RawClient(ctx.resp_port)
    try:
        fresh = client.call("EXISTS", *[f"fresh:{i}" for i in range(1, 9)])
    finally:
        client.close()
    if fresh:
        violations.append(f"{fresh} keys of refused bulk files were written")
    return {"inputs": len(outcomes) + len(BAD_BULK), "state_files": outcomes,
            "bulk_statuses": statuses, "violations": violations}


# -- reloads racing writes ----------------------------------------------------------------------
RELOAD_RACE_ROWS = 32768  # per way: room for every write of a 30 s run (a reload copies them all)


def _json_request(conn: http.client.HTTPConnection, method: str, path: str,
                  body: Optional[dict[str, Any]], headers: dict[str, str]) -> tuple[int, bytes]:
    """(status, body) of one request on a kept-alive connection."""
    sent = dict(headers)
    data = None if body is None else json.dumps(body).encode()
    if data is not None:
        sent["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=sent)
    response = conn.getresponse()
    return response.status, response.read()


def run_reload_race(ctx: Context) -> dict[str, Any]:
    """Two REST writers PUT unique keys, a REST deleter DELETEs keys, a RESP writer SETs unique
    keys, while another thread calls POST /v1/overlay/reload in a loop (issue 16: 242 of 1,315
    acknowledged PUTs lost, 19 deleted keys back). Every acknowledged write must be there with
    its value afterwards, and no key whose DELETE was answered 204 may be back."""
    seconds, delete_keys = ctx.n(30.0, 4.0), ctx.n(3000, 2000)
    seed = RawClient(ctx.resp_port, timeout=30)
    for start in range(0, delete_keys, 500):
        pairs = [a for i in range(start, min(start + 500, delete_keys)) for a in (f"del-{i}", "x")]
        if seed.call("MSET", *pairs) != b"OK":
            raise RuntimeError("writing the keys to delete failed")
    stop = threading.Event()
    written: dict[str, str] = {}  # acknowledged key -> value
    deleted: list[str] = []
    errors: list[str] = []
    reloads = {"answered_200": 0, "answered_otherwise": 0}
    full = [0]  # PUTs refused with 507: the table is full

    def admin() -> http.client.HTTPConnection:
        return http.client.HTTPConnection(HOST, ctx.admin_port, timeout=30)

    def rest_writer(n: int) -> None:
        conn, i = admin(), 0
        while not stop.is_set():
            key, value = f"rest-{n}-{i}", f"v{n}.{i}"
            status, body = _json_request(conn, "PUT", f"/v1/entries/{key}", {"value": value},
                                         ctx.auth)
            if status in (200, 201):
                written[key] = value
            elif status == 507:
                full[0] += 1
            elif status >= 500:
                errors.append(f"PUT {key}: {status} {body[:200]!r}")
            i += 1

    def resp_writer() -> None:
        client, i = RawClient(ctx.resp_port, timeout=30), 0
        try:
            while not stop.is_set():
                key, value = f"resp-{i}", f"r{i}"
                if client.call("SET", key, value) == b"OK":
                    written[key] = value
                i += 1
        finally:
            client.close()

    def deleter() -> None:
        conn = admin()
        for i in range(delete_keys):
            if stop.is_set():
                break
            status, body = _json_request(conn, "DELETE", f"/v1/entries/del-{i}", None, ctx.auth)
            if status == 204:
                deleted.append(f"del-{i}")
            elif status >= 500:
                errors.append(f"DELETE del-{i}: {status} {body[:200]!r}")

    def reloader() -> None:
        conn = admin()
        while not stop.is_set():
            status, _ = _json_request(conn, "POST", "/v1/overlay/reload", None, ctx.auth)
            reloads["answered_200" if status == 200 else "answered_otherwise"] += 1

    def guarded(target: Callable[..., None], *args: Any) -> threading.Thread:
        def run() -> None:
            try:
                target(*args)
            except Exception as exc:  # a dead connection is a finding, not a hang
                errors.append(f"{target.__name__}: {exc!r}")
        return threading.Thread(target=run, name=target.__name__)

    workers = [guarded(rest_writer, 0), guarded(rest_writer, 1), guarded(resp_writer),
               guarded(deleter), guarded(reloader)]
    for worker in workers:
        worker.start()
    time.sleep(seconds)
    stop.set()
    for worker in workers:
        worker.join(60)
    lost = resurrected = 0
    try:
        keys = list(written)
        for start in range(0, len(keys), 1000):
            got = seed.call("MGET", *keys[start:start + 1000])
            lost += sum(g != written[k].encode() for k, g in zip(keys[start:start + 1000], got))
        for start in range(0, len(deleted), 1000):
            resurrected += seed.call("EXISTS", *deleted[start:start + 1000])
    finally:
        seed.close()
    violations = [f"{len(errors)} server errors or dead workers, first: {errors[:3]}"] if errors else []
    if reloads["answered_otherwise"]:
        violations.append(f"{reloads['answered_otherwise']} reloads were not answered 200")
    if (reloads["answered_200"] < ctx.n(100, 10) or len(written) < ctx.n(2000, 500)
            or len(deleted) < ctx.n(500, 100)):
        violations.append(f"{reloads['answered_200']} reloads, {len(written)} writes and "
                          f"{len(deleted)} deletes acknowledged: no race to speak of")
    return {"inputs": len(written) + len(deleted) + sum(reloads.values()), "race_seconds": seconds,
            "acknowledged_writes": len(written), "acknowledged_deletes": len(deleted),
            "keys_lost": lost, "keys_resurrected": resurrected, "reloads": reloads,
            "writes_refused_full": full[0], "violations": violations}


# -- huge bodies to the admin service -----------------------------------------------------------
def stream_put(port: int, path: str, size: int, *, token: Optional[str], chunked: bool,
               chunk: int = 1 << 16) -> tuple[int, int]:
    """PUT a body of `size` bytes made as it is sent; (status, bytes sent before the answer).

    The answer is looked for before every chunk, so a server that refuses early is seen at once
    and the client stops sending (as a well-behaved client would after an early 413/401).
    """
    sock = socket.create_connection((HOST, port), timeout=30)
    head = [f"PUT {path} HTTP/1.1", f"Host: {HOST}:{port}", "Content-Type: application/json",
            "Transfer-Encoding: chunked" if chunked else f"Content-Length: {size}"]
    if token is not None:
        head.append(f"Authorization: Bearer {token}")
    sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
    block = b'{"value": "' + b"a" * chunk
    sent = 0
    try:
        try:
            while sent < size:
                if select.select([sock], [], [], 0)[0]:
                    break
                piece = block[:min(chunk, size - sent)]
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                sent += len(piece)
            else:
                if chunked:
                    sock.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed: its answer may still be queued here
        try:
            status_line = sock.makefile("rb").readline()
        except ConnectionResetError:
            status_line = b""
    finally:
        sock.close()
    parts = status_line.split()
    return (int(parts[1]) if len(parts) > 1 else 0), sent


BIG_BODY_VARIANTS = [(False, False), (False, True), (True, False), (True, True)]  # token, chunked


def big_body(full_bytes: int = 500_000_000, small_bytes: int = 100_000_000,
             variants: list[tuple[bool, bool]] = BIG_BODY_VARIANTS) -> Callable[[Context], Any]:
    """A scenario: one PUT of a huge body per variant (with or without the token, declared
    Content-Length or chunked); each must be refused (401 without the token, else 413) with
    nothing stored, and the frame holds the server's peak RSS and the control stalls (issue 16:
    a 500 MB PUT with no token took RSS from 81 to 1,590 MB before the 401)."""

    def run(ctx: Context) -> dict[str, Any]:
        size = ctx.n(full_bytes, small_bytes)
        puts, violations = [], []
        for authorized, chunked in variants:
            ctx.mark(f"put_{'token' if authorized else 'no_token'}_"
                     f"{'chunked' if chunked else 'length'}")
            began = time.perf_counter()
            status, sent = stream_put(ctx.admin_port, "/v1/entries/big", size, chunked=chunked,
                                      token=ctx.admin_token if authorized else None)
            took = time.perf_counter() - began
            stored = http_request(ctx.admin_port, "GET", "/v1/entries/big")[0] == 200
            expected = 413 if authorized else 401
            puts.append({"authorized": authorized, "chunked": chunked, "status": status,
                         "bytes_sent_before_answer": sent, "seconds": round(took, 3),
                         "key_stored": stored, "rss_mb_after": round(ctx.served.rss_mb(), 1)})
            if status != expected or stored:
                violations.append(f"{puts[-1]} (expected {expected}, nothing stored)")
        return {"inputs": len(puts), "size_bytes": size, "puts": puts, "violations": violations}

    return run


# -- a CONFIG GET glob that backtracks -----------------------------------------------------------
GLOB_PATTERNS = [b"*?" * 12 + b"x", b"*?" * 40 + b"x", b"*a" * 30 + b"b", b"?" * 10_000 + b"*",
                 b"[" + b"a-" * 100_000 + b"]*", b"*[a-z]*?*[^q]*?*?*?*?*?*?x"]


def run_glob_stall(ctx: Context) -> dict[str, Any]:
    """CONFIG GET with patterns that make a backtracking glob explode (issue 16: a 24-byte glob
    held the shared loop for 13.5 s); each must be answered with an array, quickly."""
    repeats = ctx.n(5, 2)
    client = RawClient(ctx.resp_port, timeout=60)
    slowest, violations = 0.0, []
    try:
        for _ in range(repeats):
            for pattern in GLOB_PATTERNS:
                start = time.perf_counter()
                reply = client.call("CONFIG", "GET", pattern)
                slowest = max(slowest, time.perf_counter() - start)
                if not isinstance(reply, list):
                    violations.append(f"CONFIG GET {pattern[:30]!r}...: {reply!r}")
    finally:
        client.close()
    return {"inputs": repeats * len(GLOB_PATTERNS), "longest_pattern_bytes":
            max(map(len, GLOB_PATTERNS)), "slowest_config_get_ms": round(slowest * 1000, 1),
            "violations": violations}


# -- many pending arguments per client ----------------------------------------------------------
def client_memory(clients: tuple[int, int] = (20, 6),
                  args_per_command: tuple[int, int] = (900_000, 900_000),
                  hold_seconds: float = 1.0) -> Callable[[Context], Any]:
    """A scenario: (full, small) clients each send all but the last argument of one EXISTS of
    (full, small) 2-byte arguments and hold it (issue 16: ~47 MB each counted under the 16 MiB
    per-client limit, 20 took RSS to 1,019 MB). The total limit must evict; the frame holds the
    peak RSS against it."""

    def run(ctx: Context) -> dict[str, Any]:
        count, args = ctx.n(*clients), ctx.n(*args_per_command)
        lines_before = ctx.log_lines()
        partial = b"*%d\r\n$6\r\nEXISTS\r\n" % (args + 1) + b"$2\r\nab\r\n" * (args - 1)
        socks, closed = [], 0
        try:
            for i in range(count):
                ctx.mark(f"client_{i}")
                sock = socket.create_connection((HOST, ctx.resp_port), timeout=30)
                socks.append(sock)
                try:
                    sock.sendall(partial)
                except OSError:  # evicted while sending
                    closed += 1
            ctx.mark("hold")
            time.sleep(hold_seconds)
        finally:
            for sock in socks:
                sock.close()
        stats = ctx.frontend_stats("resp")
        return {"inputs": count, "args_per_command": args, "bytes_per_client": len(partial),
                "clients_closed_while_sending": closed,
                "evicted_clients": stats["evicted_clients"],
                "closed_query_buffer_limit": stats["closed_query_buffer_limit"],
                "log_lines": ctx.log_lines() - lines_before}

    return run


# -- more clients than descriptors --------------------------------------------------------------
def fd_exhaustion(clients: int = 400, hold_seconds: tuple[float, float] = (5.0, 2.0),
                  frontend: str = "resp") -> Callable[[Context], Any]:
    """A scenario: `clients` connections to a front-end ("resp" or "admin") of a server with
    fewer descriptors (Scenario.nofile), held, then closed; the server must say so in a few
    log lines and count it (issue 16: 1.7 M tracebacks in 105 s), and serve a new client
    afterwards."""

    def run(ctx: Context) -> dict[str, Any]:
        port = ctx.resp_port if frontend == "resp" else ctx.admin_port
        lines_before = ctx.log_lines()
        socks, refused = [], 0
        try:
            for _ in range(clients):
                try:
                    socks.append(socket.create_connection((HOST, port), timeout=2))
                except OSError:
                    refused += 1
            ctx.mark("hold")
            time.sleep(ctx.n(*hold_seconds))
        finally:
            for sock in socks:
                sock.close()
        ctx.mark("closed")
        deadline, served_again = time.monotonic() + 30, False
        while not served_again and time.monotonic() < deadline:
            served_again = (ping(port, timeout=2) if frontend == "resp" else
                            _healthz_ok(port))
            if not served_again:
                time.sleep(0.2)
        warnings = ctx.log_lines("cannot accept clients")
        lines = ctx.log_lines() - lines_before
        accept_errors = ctx.frontend_stats(frontend)["accept_errors"]
        violations = [] if served_again else ["no new client was served afterwards"]
        if not warnings:
            violations.append("the server never ran out of descriptors: no test")
        if lines >= 50:
            violations.append(f"{lines} log lines (fewer than 50 expected)")
        if not accept_errors:
            violations.append("accept_errors did not count the failures")
        return {"inputs": clients, "frontend": frontend, "connect_failures": refused,
                "served_again": served_again, "log_lines": lines,
                "log_accept_warnings": warnings, "accept_errors": accept_errors,
                "violations": violations}

    return run


def _healthz_ok(port: int) -> bool:
    try:
        return http_request(port, "GET", "/healthz", timeout=2)[0] == 200
    except (OSError, http.client.HTTPException):
        return False


# -- memcached/UDP: reflection and a denied source ----------------------------------------------
UDP_BUDGET = 2  # serve's --udp-budget in the UDP scenarios (issue 16's default for untrusted)
UDP_ADMISSION = ("--udp-allow", "127.0.0.0/8", "--udp-budget", str(UDP_BUDGET))  # no trust:
# loopback is budgeted like any allowed source, not trusted (serve's loopback default)


def run_udp_amplification(ctx: Context) -> dict[str, Any]:
    """Text and binary multi-gets of ~64,000 bytes of a key holding the longest value (issue 16:
    1,512,837 bytes back, 23.6x): the bytes that come back over the bytes sent, against the
    bound of the configured budget (frontend.md §10)."""
    client = RawClient(ctx.resp_port)
    try:
        if client.call("SET", udp.KEY, udp.VALUE) != b"OK":
            raise RuntimeError("setting the multi-get's key failed")
    finally:
        client.close()
    results = []
    with udp.udp_client() as sock:
        for n in range(ctx.n(3, 1)):
            for kind, build in (("text", udp.text_multi_get), ("binary", udp.binary_multi_get)):
                payload = build(0x100 + 2 * n + (kind == "binary"), 64_000)
                before = ctx.frontend_stats("udp")["tx_datagrams"]
                replies = udp.exchange(sock, ctx.udp_port, payload,
                                       lambda: ctx.frontend_stats("udp")["tx_datagrams"] - before)
                got = sum(map(len, replies))
                results.append({"kind": kind, "request_bytes": len(payload), "reply_bytes": got,
                                "reply_datagrams": len(replies),
                                "amplification": round(got / len(payload), 4),
                                "bound": round(udp.amplification_bound(len(payload), UDP_BUDGET), 4)})
    stats = ctx.frontend_stats("udp")
    return {"inputs": len(results), "budget": UDP_BUDGET,
            "amplification_max": max(r["amplification"] for r in results),
            "amplification_bound": min(r["bound"] for r in results),
            "budget_exceeded": stats["budget_exceeded"], "details": results}


DENIED_SOURCE = "127.0.0.2"


def run_udp_denied_source(ctx: Context) -> dict[str, Any]:
    """A denied source (127.0.0.2; Linux routes all of 127.0.0.0/8 to loopback) sends writes,
    deletes of a known key and reads: none may reach it or the table, each is counted in
    drop_denied, and an allowed client beside it is answered."""
    count = ctx.n(2000, 100)
    known = next(iter(ctx.known.live))
    before = ctx.frontend_stats("udp")
    with udp.udp_client(DENIED_SOURCE) as attacker:
        for n in range(count):
            header = struct.pack(">HHHH", n & 0xFFFF, 0, 1, 0)
            body = (b"set d%d 0 0 1\r\nx\r\ndelete %s\r\nget %s\r\n" % (n, known, known)
                    if n % 2 == 0 else codec.get_request(known).encode())
            attacker.sendto(header + body, (HOST, ctx.udp_port))
        # One thread answers datagrams in arrival order and sends a reply before it reads the
        # next: once the control's answer is here, any reply to the attacker is already queued.
        answered = udp_get(ctx.udp_port, known) == ctx.known.live[known]
        denied_replies = udp.pending(attacker)
    after = ctx.frontend_stats("udp")
    client = RawClient(ctx.resp_port)
    try:
        written = client.call("EXISTS", *[b"d%d" % n for n in range(0, count, 2)])
    finally:
        client.close()
    drops = after["drop_denied"] - before["drop_denied"]
    violations = []
    if denied_replies or written:
        violations.append(f"the denied source got {denied_replies} replies, wrote {written} keys")
    if drops != count:
        violations.append(f"drop_denied counted {drops} of {count} datagrams")
    if not answered:
        violations.append("the allowed client beside it was not answered")
    return {"inputs": count, "drop_denied": drops, "denied_replies": denied_replies,
            "denied_writes_applied": written, "allowed_answered": answered,
            "rx_datagrams": after["rx_datagrams"] - before["rx_datagrams"],
            "violations": violations}


# -- the registry -------------------------------------------------------------------------------
SCENARIOS: list[Scenario] = [
    Scenario("resp_fuzz", run_resp_fuzz),
    Scenario("datagram_fuzz", run_datagram_fuzz),
    Scenario("idle_clients", run_idle_clients),
    Scenario("bulk_header_500mb", run_bulk_header),
    Scenario("pipelined_gets_unread", run_pipelined_unread),
    Scenario("path_traversal", run_path_traversal),
    Scenario("corrupt_files", run_corrupt_files),
    Scenario("reload_race", run_reload_race, global_args=("--rows", str(RELOAD_RACE_ROWS))),
    Scenario("big_body_500mb", big_body()),
    Scenario("glob_stall", run_glob_stall),
    Scenario("client_memory", client_memory()),
    Scenario("fd_exhaustion", fd_exhaustion(), nofile=256, probes=("ping",)),
    Scenario("udp_amplification", run_udp_amplification, serve_args=UDP_ADMISSION),
    Scenario("udp_denied_source", run_udp_denied_source,
             serve_args=(*UDP_ADMISSION, "--udp-deny", f"{DENIED_SOURCE}/32")),
]
REGISTRY: dict[str, Scenario] = {s.name: s for s in SCENARIOS}
