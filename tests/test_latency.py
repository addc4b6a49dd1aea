"""The front-ends' latency recorder (pynq_kv.latency) and that RESP and memcached/UDP feed it."""

from __future__ import annotations

import random
import socket
import struct
from typing import Iterator

import numpy as np
import pytest
import redis

from pynq_kv import KVEngine
from pynq_kv.latency import BUCKETS, LatencyRecorder
from resp_helpers import PynqServer
from test_net_memcached import ServerThread


def test_buckets_are_le_and_weights_add() -> None:
    rec = LatencyRecorder((0.001, 0.01, 0.1))
    rec.observe(0.0005)         # below the first bound
    rec.observe(0.001, 3)       # exactly a bound: that bound's bucket (Prometheus' le)
    rec.observe(0.0011, 2)
    rec.observe(7.0)            # above every bound: +Inf
    assert rec.counts == [4, 2, 0, 1]
    assert rec.count == 7
    assert rec.sum == pytest.approx(0.0005 + 3 * 0.001 + 2 * 0.0011 + 7.0)
    assert rec.cumulative() == [(0.001, 4), (0.01, 6), (0.1, 6), (float("inf"), 7)]


def test_observe_since_is_observe_of_each_stamp() -> None:
    """The RESP server's one call per tick counts exactly what one observe per chunk would."""
    now = 0.0  # so that now - stamp is each elapsed time exactly
    stamps = [(-0.0005, 1), (-0.001, 3), (-0.0011, 2), (-7.0, 1), (now, 4)]
    one, each = LatencyRecorder((0.001, 0.01, 0.1)), LatencyRecorder((0.001, 0.01, 0.1))
    one.observe_since(now, stamps)
    for stamp, n in stamps:
        each.observe(now - stamp, n)
    assert one.counts == each.counts == [8, 2, 0, 1]
    assert one.count == each.count == 11
    assert one.sum == pytest.approx(each.sum)


def test_observe_since_matches_observe_in_runs_and_at_bounds() -> None:
    """Runs of one bucket, jumps both ways, exact bounds and +Inf: observe_since counts them
    as observe does."""
    bounds = (0.001, 0.01, 0.1)
    rng = random.Random(7)
    elapsed = [rng.choice((0.0, 0.0005, 0.001, 0.0010001, 0.005, 0.01, 0.05, 0.1, 0.2, 3.0))
               for _ in range(400)]
    elapsed += sorted(elapsed) + sorted(elapsed, reverse=True)
    stamps = [(-e, 1 + i % 3) for i, e in enumerate(elapsed)]
    one, each = LatencyRecorder(bounds), LatencyRecorder(bounds)
    one.observe_since(0.0, stamps)
    for stamp, n in stamps:
        each.observe(0.0 - stamp, n)
    assert one.counts == each.counts
    assert all(one.counts)  # every bucket, +Inf included, was reached
    assert one.count == each.count and one.sum == pytest.approx(each.sum)


def test_bad_buckets_and_quantiles_are_refused() -> None:
    for bounds in ((), (0.1, 0.01), (0.1, 0.1), (0.0, 1.0)):
        with pytest.raises(ValueError):
            LatencyRecorder(bounds)
    rec = LatencyRecorder()
    assert rec.quantile(0.5) is None  # nothing observed yet
    with pytest.raises(ValueError):
        rec.quantile(1.5)


def test_quantiles_of_known_distributions() -> None:
    rng = np.random.default_rng(7)
    uniform = rng.uniform(0.0005, 0.001, 20000)  # inside one bucket: interpolation is exact-ish
    rec = LatencyRecorder()
    for v in uniform.tolist():
        rec.observe(v)
    for q in (0.5, 0.9, 0.99):
        assert rec.quantile(q) == pytest.approx(np.quantile(uniform, q), rel=0.01)

    exponential = rng.exponential(0.0002, 50000)  # spread over many buckets
    rec = LatencyRecorder()
    for v in exponential.tolist():
        rec.observe(v)
    bounds = (0.0,) + BUCKETS
    for q in (0.5, 0.9, 0.99):
        true = float(np.quantile(exponential, q))
        i = int(np.searchsorted(BUCKETS, true))  # the bucket the true quantile lies in
        estimate = rec.quantile(q)
        assert estimate is not None and bounds[i] <= estimate <= BUCKETS[i], (q, true, estimate)
    assert rec.sum == pytest.approx(float(exponential.sum()))


def test_a_quantile_in_the_inf_bucket_is_the_last_finite_bound() -> None:
    rec = LatencyRecorder((0.001, 0.01))
    rec.observe(0.005)
    rec.observe(5.0, 9)
    assert rec.quantile(0.99) == 0.01
    assert rec.quantile(0.05) == pytest.approx(0.001 + 0.009 * 0.5)


@pytest.fixture
def resp() -> Iterator[PynqServer]:
    server = PynqServer()
    yield server
    server.stop()


def test_resp_observes_every_command(resp: PynqServer) -> None:
    latency = resp.server.latency
    assert resp.appliance.frontend_latencies()["resp"] is latency
    client = redis.Redis(port=resp.port, socket_timeout=10)
    client.ping()  # connection set up (redis-py may send its own commands first)
    before = resp.on_loop(lambda: latency.count)
    pipe = client.pipeline(transaction=False)
    n = 300
    for i in range(n // 3):
        pipe.set(f"k{i}", "v")
        pipe.get(f"k{i}")
        pipe.execute_command("NOSUCHCOMMAND")  # an error reply is a command answered too
    pipe.execute(raise_on_error=False)
    client.mget([f"k{i}" for i in range(10)])
    count, total, sum_, cumulative = resp.on_loop(
        lambda: (latency.count, resp.server.total_commands, latency.sum, latency.cumulative()))
    assert count - before == n + 1
    assert count == total  # every command the server ran, and nothing else
    assert cumulative[-1] == (float("inf"), count)
    assert 0 < sum_ < count * 1.0
    client.close()


def test_resp_leaves_the_appliance_with_its_recorder(resp: PynqServer) -> None:
    resp.run(resp.server.close())
    assert "resp" not in resp.appliance.frontend_latencies()
    resp.run(resp.server.start("127.0.0.1", 0))  # so the fixture's stop has a server to close


def test_udp_observes_every_datagram() -> None:
    running = ServerThread(lambda: KVEngine("model"))
    try:
        latency = running.server.latency
        assert running.appliance.frontend_latencies()["udp"] is latency
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(5)
            for i in range(25):
                frame = struct.pack(">HHHH", i, 0, 1, 0) + b"set k%d 0 0 1\r\nv\r\n" % i
                sock.sendto(frame, ("127.0.0.1", running.server.port))
                assert sock.recvfrom(65536)[0].endswith(b"STORED\r\n")
        stats = running.stats()
        assert latency.count == 25 == stats["rx_datagrams"]
        assert latency.cumulative()[-1] == (float("inf"), 25) and latency.sum > 0
    finally:
        running.close()
