"""Crash safety of `pynq-kv serve --store private` (issue 15, docs/hosttier.md "Crash safety").

Small and bounded: a few SIGKILLs of serve (and of serve with its redis-server) under concurrent
redis-py write load with `--appendfsync always`; after each restart on the same data dir every
acknowledged write is in Redis, GET through pynq-kv answers what Redis holds and every engine
entry equals Redis. benchmarks/crash.py runs the same harness at scale. Also: redis-benchmark's
whole default suite runs against serve with zero errors.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from crash_support import (VIRTUAL_BOARD, WRITERS, CrashReport, Load, Served, Verdict,
                           account_check, check, compare_engine, run_crashes, sort_refusals)
from redis_benchmark import DEFAULT_SUITE, run_suite

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None,
                                reason="needs redis-server (Debian: redis-server)")


def test_acknowledged_writes_survive_sigkill_with_appendfsync_always(tmp_path: Path) -> None:
    report = run_crashes(tmp_path / "data", appendfsync="always", kills=3, min_acknowledged=1500,
                         threads=5, seed=15)
    assert report.kills == {"serve": 2, "group": 1}
    assert report.acknowledged >= 1500
    assert set(report.by_writer) == set(WRITERS)  # every front-end's writes were in the load
    assert min(report.by_writer.values()) > 0
    assert report.failures() == []  # no orphaned redis-server, error reply or incoherence
    assert report.lost == {"serve": 0, "group": 0}
    assert report.max_engine_entries > 0  # the engine held keys the check compared


def test_the_check_finds_lost_and_foreign_versions(tmp_path: Path) -> None:
    """The checker itself: a version acknowledged but not in Redis is lost (with its age), a
    version never written is corruption, an engine entry Redis lacks is a mismatch."""
    served = Served(tmp_path / "data", "always")
    try:
        direct = served.redis()
        direct.set("k:lost", "1")  # versions 1 and 2 acknowledged, only 1 there
        direct.set("k:foreign", "7")  # version 7 was never written
        direct.close()
        load = Load(0, threads=1)
        lost = load.history("string", "k:lost")
        lost.acked = [10.0, 11.5]
        load.history("string", "k:foreign").acked = [10.0]
        verdict = check(served, [load], {0: 12.0})
        assert verdict.lost == 1 and verdict.max_loss_window_s == pytest.approx(0.5)
        assert len(verdict.wrong) == 1 and "k:foreign" in verdict.wrong[0]
        assert verdict.engine_entries >= 1 and verdict.engine_mismatches == []  # GETs filled it
        direct = served.redis()
        try:  # an engine entry Redis lacks, or holds otherwise
            found = compare_engine([(b"k:lost", b"1"), (b"k:foreign", b"8"), (b"k:none", b"1")],
                                   direct)
        finally:
            direct.close()
        assert len(found) == 2 and "k:foreign" in found[0] and "k:none" in found[1]
    finally:
        served.stop()


def test_each_kill_is_charged_its_own_loss_window() -> None:
    """A check reads every cycle so far, so an old loss is found again at each later check:
    a later kill with a loss of its own is charged that loss's window, not the older one."""
    report = CrashReport("everysec")
    account_check(report, Verdict(lost=1, loss_window_s={0: 0.9}), "serve", 0)
    account_check(report, Verdict(lost=1, loss_window_s={0: 0.9}), "group", 1)  # nothing new
    account_check(report, Verdict(lost=3, loss_window_s={0: 0.9, 2: 0.2}), "group", 2)
    assert report.lost == {"serve": 1, "group": 2}
    assert report.max_loss_window_s == {"serve": 0.9, "group": 0.2}


def test_only_a_group_kill_excuses_the_host_tiers_loss_after_it_began() -> None:
    """In a group kill Redis dies a moment before serve, which may answer the writes in flight
    with the host tier's loss: those are the kill's. The same reply before the kill, after a
    kill of serve alone, or any other error reply is a fault."""
    lost = "MSET: ResponseError: host tier connection lost"
    down = "INCR: ResponseError: host tier unavailable: Redis cannot be reached"
    other = "SET: ResponseError: ERR syntax error"
    errors = [(9.0, down), (10.0, lost), (10.5, down), (10.5, other),
              (11.0, "REST PUT: HTTP 503: {\"detail\":\"host tier unavailable: Redis cannot be reached\"}")]
    assert sort_refusals(errors, "group", 10.0) == (3, [down, other])
    assert sort_refusals(errors, "serve", 10.0) == (0, [text for _, text in errors])
    assert sort_refusals([], "group", 10.0) == (0, [])


def test_redis_benchmark_default_suite_has_no_errors(tmp_path: Path) -> None:
    """Every test of redis-benchmark's default suite, unpipelined and -P 16, through serve."""
    if shutil.which("redis-benchmark") is None:
        pytest.skip("needs redis-benchmark (Debian: redis-tools)")
    served = Served(tmp_path / "data", "everysec")
    try:
        started = time.monotonic()
        for pipeline in (1, 16):
            figures = run_suite(served.resp_port, requests=200, clients=10, pipeline=pipeline,
                                timeout=30)
            assert list(figures) == list(DEFAULT_SUITE) and min(figures.values()) > 0
        assert time.monotonic() - started < 30
    finally:
        served.stop()
    assert served.proc.returncode == 0


def test_the_virtual_boards_writes_reach_redis_through_the_change_log(tmp_path: Path) -> None:
    """memcached SETs on the virtual board's Ethernet port (acknowledged by the RTL, drained
    into Redis by the host): after SIGKILL, lost writes are only those the drain had not yet
    brought to Redis — the change log's loss window (docs/hosttier.md)."""
    report = run_crashes(tmp_path / "data", appendfsync="always", kills=2, min_acknowledged=300,
                         threads=3, seed=7, writers=("UDP SET",), global_args=VIRTUAL_BOARD)
    assert report.failures() == []  # no orphan, corruption, or engine entry Redis lacks
    assert report.by_writer["UDP SET"] >= 300
    assert max(report.max_loss_window_s.values()) <= 1.0
