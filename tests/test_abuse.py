"""The fault and abuse suite at small scale (issue 16): every registered scenario against a real
`pynq-kv serve` subprocess must meet the targets — no crash, no known key lost or resurrected,
no control client (PING, /healthz) stalled over 100 ms by the server, peak RSS within 2 x idle + the client
memory limit, no amplification past the bound, nothing the scenario itself saw go wrong.

benchmarks/abuse.py runs the same scenarios at full scale and prints the figures. The first two
tests show that the frame sees what it is meant to: lost and resurrected keys, a stalled server,
a dead one.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from abuse_scenarios import SCENARIOS
from abuse_support import Context, Scenario, run_scenario
from resp_helpers import RawClient

pytestmark = pytest.mark.timeout(300)


def _damage(ctx: Context) -> dict:
    """Lose one known key, bring back a deleted one, and freeze the server for 0.3 s."""
    client = RawClient(ctx.resp_port)
    try:
        lost = next(iter(ctx.known.live))
        assert client.call("SET", lost, b"changed") == b"OK"
        assert client.call("SET", ctx.known.deleted[0], b"back") == b"OK"
    finally:
        client.close()
    time.sleep(0.1)
    os.kill(ctx.pid, signal.SIGSTOP)
    time.sleep(0.3)
    os.kill(ctx.pid, signal.SIGCONT)
    time.sleep(0.1)
    return {"inputs": 2}


def _kill(ctx: Context) -> dict:
    os.kill(ctx.pid, signal.SIGKILL)
    time.sleep(0.2)
    return {"inputs": 1}


def test_the_frame_sees_lost_keys_and_stalls(tmp_path: Path) -> None:
    record = run_scenario(Scenario("damage", _damage), small=True, workdir=tmp_path)
    assert record["keys_lost"] == 1 and record["keys_resurrected"] == 1
    assert record["crashes"] == 0 and record["exit_code"] == 0
    assert record["max_control_stall_ms"] >= 250 and record["max_server_stall_ms"] >= 250
    assert len(record["failures"]) == 3, record["failures"]


def test_the_frame_sees_a_crash(tmp_path: Path) -> None:
    scenario = Scenario("kill", _kill)
    record = run_scenario(scenario, small=True, workdir=tmp_path)
    assert record["crashes"] == 2  # it stopped answering, and it exited by a signal
    assert record["exit_code"] == -signal.SIGKILL
    assert record["keys_lost"] == scenario.known_keys[1]  # without a state file, all of them
    assert record["control"]["ping_failures"] > 0


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_scenario_meets_the_targets(scenario: Scenario, tmp_path: Path) -> None:
    record = run_scenario(scenario, small=True, workdir=tmp_path)
    assert record["inputs"] > 0
    assert record["failures"] == [], json.dumps(record, indent=1)
