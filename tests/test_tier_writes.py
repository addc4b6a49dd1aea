"""The engine update of answered SETs (Tier._apply_writes): runs of SETs sent together are
applied as a whole where every SET was stored and fits, key by key otherwise. Whatever the runs,
the result must be the per-key definition's: each SET ends its write; a refused one (None) or
one answered while the host tier is down changes nothing; one older than a flush or than a later
invalidation of its key is discarded (and counted); a value or key the engine cannot hold takes
the key out of the engine; the rest are stored, in order."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from pynq_kv import Geometry, KVEngine
from pynq_kv.appliance import Appliance
from pynq_kv.tier import Tier

GEOMETRY = Geometry(key_width=144, value_width=64, ways=2, rows=64, stash=2, rules=4)
KEYS = [b"k%d" % i for i in range(12)] + [b"long-key-" * 4]  # the last one no engine key holds
FITTING = [b"v", b"42", b"1234567"]  # values both engines hold (as text or as a number)
# mostly values that fit, so that whole runs of them are common: the path that skips the per-key
# steps; then a refused SET (None), a text an integer engine cannot hold, a value too long
VALUES = FITTING * 4 + [None, b"not-a-number", b"a value too long"]

Run = tuple[int, list[bytes], list[Any]]


def per_key(tier: Tier, runs: list[Run]) -> None:
    """The definition, one SET at a time (what _apply_writes did before it took runs whole)."""
    limits = tier.limits()
    keys: list[bytes] = []
    values: list[Any] = []
    for ticket, run_keys, run_values in runs:
        for key, value in zip(run_keys, run_values):
            tier.end_write(key)
            if value is None or not tier.up:
                continue
            if ticket < tier.flushed_at or tier.dirty.get(key, -1) > ticket:
                tier.stats.fills_discarded += 1
                continue
            number = limits.value(value)
            if number is None or len(key) > limits.max_key:
                tier._doomed.append(key)
                continue
            keys.append(key)
            values.append(number)
    if keys:
        tier._fill(limits, keys, values)
    if tier._doomed:
        tier._delete_doomed()
    tier._untick(sum(len(k) for _, k, _ in runs))


def state(tier: Tier) -> tuple:
    s = tier.stats
    return (sorted(tier.appliance.engine.items()), dict(tier.writing), tier.tickets, dict(tier.dirty),
            s.fills_discarded, s.fills_applied, s.fills_refused)


runs_strategy = st.lists(
    st.tuples(st.integers(0, 6), st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(VALUES)),
                                          min_size=1, max_size=6)),
    min_size=1, max_size=5)


@settings(max_examples=300, deadline=None)
@given(runs=runs_strategy, kind=st.sampled_from(["bytes", "int"]), up=st.booleans(),
       flushed=st.integers(0, 4), dirty=st.dictionaries(st.sampled_from(KEYS), st.integers(0, 8), max_size=4),
       before=st.lists(st.tuples(st.sampled_from(KEYS[:-1]), st.sampled_from([b"7", b"42"])), max_size=6))
@example(runs=[(0, [(b"k0", b"v")])], kind="bytes", up=True, flushed=0, dirty={b"k0": 5},
         before=[(b"k0", b"7")])  # invalidated after the SET was sent: discarded, k0 stays 7
@example(runs=[(2, [(b"k0", b"v"), (b"k1", b"42")])], kind="bytes", up=True, flushed=0,
         dirty={b"k0": 3, b"k1": 2}, before=[])  # k0 invalidated one epoch later; k1 only by its SET
@example(runs=[(3, [(KEYS[-1], b"v"), (b"k1", b"42")])], kind="bytes", up=True, flushed=0, dirty={},
         before=[])  # a key no engine entry holds, in a run of values that fit
def test_runs_applied_whole_give_what_the_per_key_definition_gives(runs, kind, up, flushed, dirty, before):
    async def scenario() -> tuple[tuple, tuple]:
        results = []
        for apply in (None, per_key):
            engine = KVEngine("model", GEOMETRY, value_kind=kind)
            tier = Tier(Appliance(lambda: engine), host=None)
            tier.up = up
            limits = tier.limits()
            for key, text in before:
                engine.set_batch(limits.key_rows([key]), limits.value_rows([limits.value(text)]))
            answered: list[Run] = []
            for ticket, sets in runs:
                keys = [k for k, _ in sets]
                tier.begin_writes(keys)
                tier.tickets_for(len(keys))
                answered.append((ticket, keys, [v for _, v in sets]))
            tier.flushed_at, tier.dirty = flushed, dict(dirty)
            if apply is None:
                for ticket, keys, values in answered:
                    tier.writes_answered(ticket, keys, values)
                tier.apply_invalidations()
            else:
                apply(tier, answered)
            results.append(state(tier))
        return results[0], results[1]

    whole, definition = asyncio.run(scenario())
    assert whole == definition
    assert whole[1] == {}, "every SET's write ended"


def test_a_run_stored_whole_updates_the_engine_and_counts_nothing_discarded():
    async def scenario() -> None:
        engine = KVEngine("model", GEOMETRY)
        tier = Tier(Appliance(lambda: engine), host=None)
        tier.up = True
        keys = [b"a", b"b", b"a"]
        tier.begin_writes(keys)
        ticket = tier.tickets_for(3)
        tier.writes_answered(ticket, keys, [b"1", b"2", b"3"])
        tier.apply_invalidations()
        assert dict(engine.items()) == {b"a": b"3", b"b": b"2"}
        assert tier.writing == {} and tier.tickets == 0 and tier.stats.fills_discarded == 0

    asyncio.run(scenario())
