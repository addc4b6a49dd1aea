"""Fuzzing the RESP front-end with malformed and mutated requests.

- 11,000 hypothesis-driven inputs through the real parser and dispatcher (in-process, fake
  transport): nothing raises, every output is a sequence of well-formed RESP replies, a
  protocol error is the last reply and closes the connection, and the tables are unchanged.
- 3,000 more over real sockets, to a server in a thread, 40 connections at a time: each
  connection answers and closes in bounded time, a bystander client is served throughout, and
  the tables are unchanged.
- 400 inputs sent to pynq-kv and to redis-server: the replies are identical, byte for byte.
"""

from __future__ import annotations

import random

import hiredis
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pynq_kv import Geometry, KVEngine, Rule
from pynq_kv.appliance import Appliance
from pynq_kv.serve.resp import RespConfig
from resp_fuzz_inputs import (
    READ_COMMANDS,
    Harness,
    may_write,
    mutate,
    random_input,
    render,
)
from resp_helpers import HAVE_REDIS, PynqServer, RawClient, RedisServer, exchange, exchange_all

pytestmark = pytest.mark.timeout(300)

FUZZ_EXAMPLES = 10_000


def preload(engine: KVEngine) -> None:
    engine.mset({b"k1": b"one", b"k2": b"two", b"user:1": b"alice"})
    engine.add_rule(Rule.ternary(0, 0, 1, b"default"))


def snapshot(engine: KVEngine) -> tuple[dict, list]:
    return dict(engine.items()), sorted(repr(r.to_dict()) for r in engine.rules().values())


def check_replies(output: bytes, closed: bool) -> int:
    """Parse output as RESP replies; returns how many. Protocol errors come last and close."""
    reader = hiredis.Reader(notEnoughData=Ellipsis)
    reader.feed(output)
    replies = []
    while True:
        reply = reader.gets()
        if reply is Ellipsis:
            break
        replies.append(reply)
    assert not reader.has_data(), "the output ends inside a reply"
    for i, reply in enumerate(replies):
        if isinstance(reply, hiredis.ReplyError) and str(reply).startswith("ERR Protocol error"):
            assert i == len(replies) - 1 and closed
    return len(replies)


class Fixture:
    def __init__(self, password: bool = False) -> None:
        self.appliance = Appliance(lambda: KVEngine("model", Geometry(rows=256, rules=16)))
        preload(self.appliance.engine)
        self.before = snapshot(self.appliance.engine)
        self.harness = Harness(self.appliance, RespConfig(requirepass="pw" if password else None,
                                                          max_bulk_len=4096, max_query_buffer=1 << 20))
        self.checked = 0
        self.runs = 0

    def feed(self, data: bytes, cuts: list[int]) -> None:
        cuts = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
        chunks = [data[a:b] for a, b in zip(cuts, cuts[1:])] or [b""]
        output, closed = self.harness.run(chunks)
        assert closed, "every connection ends closed (EOF after the input)"
        check_replies(output, closed)
        self.runs += 1
        eng = self.appliance.engine
        if not may_write(data):
            assert snapshot(eng) == self.before, f"tables changed by {data!r}"
            self.checked += 1
        elif snapshot(eng) != self.before:  # a mutation spelled a real write: start again
            eng.clear()
            preload(eng)
            self.before = snapshot(eng)


fuzz_input = st.builds(
    lambda cmds, inline, ops: mutate(render(cmds, inline), ops),
    st.lists(st.sampled_from(READ_COMMANDS), min_size=1, max_size=5),
    st.lists(st.booleans(), min_size=5, max_size=5),
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 1 << 16), st.integers(0, 1 << 16)), max_size=6),
)


@pytest.fixture(scope="module")
def fixtures():
    made = {False: Fixture(False), True: Fixture(True)}
    yield made
    total = sum(f.runs for f in made.values())
    assert total >= FUZZ_EXAMPLES
    assert sum(f.checked for f in made.values()) >= 0.8 * total  # the table check is not vacuous


@settings(max_examples=FUZZ_EXAMPLES // 10, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(rnd=st.randoms(use_true_random=True), password=st.booleans())
def test_fuzz_parser_and_dispatcher(fixtures, rnd, password):
    """10 mutated inputs per example (hypothesis' per-example cost would dominate otherwise)."""
    for _ in range(10):
        data = random_input(rnd)
        fixtures[password].feed(data, [rnd.randrange(400) for _ in range(rnd.randrange(4))])


@settings(max_examples=1000, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(data=st.one_of(fuzz_input, st.binary(max_size=200)),
       cuts=st.lists(st.integers(0, 400), max_size=4), password=st.booleans())
def test_fuzz_structured(fixtures, data, cuts, password):
    """Inputs hypothesis builds (and would shrink) from the request grammar, or raw bytes."""
    fixtures[password].feed(data, cuts)


def test_fuzz_over_sockets():
    srv = PynqServer(RespConfig(max_bulk_len=4096, max_query_buffer=1 << 20, command_timeout=2.0))
    try:
        srv.on_loop(lambda: preload(srv.engine))
        before = srv.on_loop(lambda: snapshot(srv.engine))
        bystander = RawClient(srv.port)
        rng = random.Random(20240601)
        inputs = [d for d in (random_input(rng) for _ in range(4500)) if not may_write(d)][:3000]
        assert len(inputs) == 3000
        answered = 0
        for start in range(0, len(inputs), 40):
            for output, end in exchange_all(srv.port, inputs[start:start + 40], timeout=5.0):
                assert end != "timeout", "a connection neither answered nor closed"
                answered += check_replies(output, True) > 0
            assert bystander.call("GET", "k1") == b"one"
        assert answered > 1000
        assert srv.on_loop(lambda: snapshot(srv.engine)) == before
        stats = srv.stats()
        assert stats["protocol_errors"] > 100 and stats["connected_clients"] == 1
        bystander.close()
    finally:
        srv.stop()


@pytest.mark.skipif(not HAVE_REDIS, reason="redis-server is not installed")
def test_fuzz_differential_against_redis_server():
    """Protocol-level mutations of requests whose replies do not depend on which server runs
    them: pynq-kv must answer exactly what Redis answers."""
    # 143-byte keys, and Redis' default proto-max-bulk-len instead of ours
    ours = PynqServer(RespConfig(max_bulk_len=512 * 1024 * 1024), geometry=Geometry(key_width=1152, rows=64))
    theirs = RedisServer()
    try:
        rng = random.Random(99)
        compared = 0
        for _ in range(400):
            data = random_input(rng, portable=True)
            got = exchange(ours.port, data)
            want = exchange(theirs.port, data)
            if b"key too long" in got:  # a mutation made a key the hardware cannot hold
                continue
            assert got == want, f"input {data!r}"
            compared += 1
        assert compared > 350
    finally:
        ours.stop()
        theirs.stop()
