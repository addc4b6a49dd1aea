"""The memcached/UDP port under the abuse of issue 16, over real loopback sockets: the software
UDP server in-process, with admission tables serve cannot be given (no budget at all, as the
control). The abuse suite (tests/abuse_scenarios.py) runs the same attacks, built by
udp_abuse_support, against a real `pynq-kv serve --udp-allow 127.0.0.0/8 --udp-budget 2`."""

from __future__ import annotations

import pytest

from udp_abuse_support import amplification_bound, run_amplification, run_denied_source


def test_reflection_is_bounded_by_the_budget() -> None:
    result = run_amplification(64_000, budget=2)
    assert result["crashes"] == 0 and result["inputs"] == 2
    assert result["budget_exceeded"] == 2
    assert result["amplification_max"] <= result["amplification_bound"] < 2.01
    for detail in result["details"]:
        assert 63_900 <= detail["request_bytes"] <= 64_000
        assert detail["amplification"] > 1.9  # the budget is spent, then one "use TCP"


def test_reflection_without_a_budget_is_the_issue_s_amplification() -> None:
    """The control: with M = 0 the same datagrams draw > 20x, so the test above can fail."""
    result = run_amplification(64_000, budget=0)
    assert result["amplification_bound"] is None and result["budget_exceeded"] == 0
    assert result["amplification_max"] > 20
    assert result["crashes"] == 0


def test_small_requests_at_a_larger_budget() -> None:
    result = run_amplification(600, budget=5, rounds=2)
    assert result["inputs"] == 4 and result["crashes"] == 0
    assert result["amplification_max"] <= result["amplification_bound"]
    assert result["amplification_max"] > 4


def test_bound_formula() -> None:
    assert amplification_bound(1000, 0) is None
    assert amplification_bound(1000, 2) == (2000 + 8 + 48) / 1000
    assert amplification_bound(40, 1) == (8 + 234 + 8 + 48) / 40  # the first response's floor
    with pytest.raises(ValueError):
        run_amplification(70_000)


def test_denied_source_is_dropped_and_counted_allowed_one_answered() -> None:
    result = run_denied_source(60)
    assert result["denied_replies"] == 0 and result["denied_writes_applied"] == 0
    assert result["keys_lost"] == 0  # its deletes did not run
    assert result["drop_denied"] == result["inputs"] == 60
    assert result["rx_datagrams"] == 1 and result["allowed_answered"]
    assert result["crashes"] == 0
