"""Unit tests of the KVEngine API (docs/engine.md §2, §8, §9) on the model backend.

Encodings, the "errors change nothing" rule, numpy batch forms, snapshots, reports and
introspection. Expected encodings come from `oracle.tagged`, written from §2's text.
"""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

from oracle import raw_key_of, tagged
from pynq_kv import (
    CommandError,
    GeometryError,
    InvalidRule,
    KeyFormatError,
    KeyTooLong,
    KVEngine,
    KVError,
    LookupResult,
    MatchKind,
    Rule,
    RuleTableFull,
    SnapshotError,
    TableFull,
    Ternary,
    UnknownRule,
    ValueFormatError,
    ValueTooLarge,
)
from pynq_kv.backend import RuleEntry

MAX_KEY_BYTES = {144: 17, 288: 35, 576: 71, 1152: 143}


def small(**kw) -> KVEngine:
    args = dict(key_width=144, value_width=64, ways=4, rows=16, stash=4, rules=8, prio_width=8)
    args.update(kw)
    value_kind = args.pop("value_kind", "bytes")
    relocation = args.pop("relocation", True)
    return KVEngine("model", value_kind=value_kind, relocation=relocation, **args)


def state(engine: KVEngine) -> tuple:
    """Everything an error must not change: slots, counters, rule entries and hits, rule ids."""
    numbers, slots = engine.backend.valid_slots()
    g = engine.geometry
    return (
        numbers.tolist(), slots.keys.tobytes(), slots.values.tobytes(),
        engine.backend.counters(),
        [tuple(engine.backend.read_rule(e)) for e in range(g.rules)],
        engine.backend.rule_hits().tolist(),
        {i: r for i, r in engine.rules().items()},
        {i: engine.rule_entries(i) for i in engine.rules()},
    )


def populated(**kw) -> KVEngine:
    engine = small(**kw)
    for i in range(30):
        engine.set(f"key{i}", f"v{i}" if engine.value_kind == "bytes" else i)
    engine.add_rule(Rule.ternary(0, 0, 1, b"any" if engine.value_kind == "bytes" else 7))
    engine.lookup("nope")
    return engine


# --------------------------------------------------------------------------------------------
# §2 encodings
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("width", [144, 288, 576, 1152])
def test_byte_string_keys_all_widths(width: int) -> None:
    engine = small(key_width=width, rows=4)
    nbytes = width // 8
    assert engine.info()["max_key_bytes"] == MAX_KEY_BYTES[width] == nbytes - 1
    longest = bytes(range(1, MAX_KEY_BYTES[width] + 1))
    for key in (b"", b"a", b"abc\x00", longest, "é€", bytearray(b"xy"), memoryview(b"mv")):
        raw = engine.encode_keys([key])
        data = key.encode("utf-8") if isinstance(key, str) else bytes(key)
        assert raw.shape == (1, nbytes) and raw.dtype == np.uint8
        assert raw[0].tobytes() == tagged(data, nbytes)
        engine.set(key, b"v")
        assert engine.get(key) == b"v" and engine.get(data) == b"v"  # str is its UTF-8 bytes
    before = state(engine)
    with pytest.raises(KeyTooLong):
        engine.set(longest + b"x", b"v")
    with pytest.raises(KeyTooLong):
        engine.get("é" * ((MAX_KEY_BYTES[width] + 2) // 2))  # fits in characters, not in bytes
    assert state(engine) == before
    assert issubclass(KeyTooLong, KeyFormatError) and issubclass(KeyTooLong, ValueError)


def test_section2_example_encodings() -> None:
    engine = small()
    # [L] ‖ key ‖ zero padding, big-endian: byte 0 holds the length
    assert engine.encode_keys([b"abc"])[0].tobytes() == b"\x03abc" + bytes(14)
    # the length byte makes "a" and "a\0" different keys
    engine.set(b"a", b"1")
    engine.set(b"a\x00", b"2")
    assert (engine.get(b"a"), engine.get(b"a\x00"), len(engine)) == (b"1", b"2", 2)
    # integer keys are the raw key itself
    assert engine.encode_keys([1])[0].tobytes() == bytes(17) + b"\x01"
    assert engine.encode_keys([(1 << 144) - 1])[0].tobytes() == b"\xff" * 18
    # byte-string values: the same tagged form
    raw = engine.encode_values([b"xyz"])
    assert raw[0].tobytes() == b"\x03xyz" + bytes(4)


def test_integer_keys_and_values_range() -> None:
    engine = small(value_kind="int", value_width=32)
    top = (1 << 144) - 1
    for key in (0, 1, top, np.uint64(5), np.int64(6)):
        engine.set(key, 0xFFFFFFFF)
        assert engine.get(key) == 0xFFFFFFFF
        assert engine.get(raw_key_of(int(key), 144)) == 0xFFFFFFFF
    before = state(engine)
    for bad in (-1, 1 << 144, 1.0, None, [1], True, object()):
        with pytest.raises(KeyFormatError):
            engine.set(bad, 1)
        with pytest.raises(KeyFormatError):
            engine.get(bad)
        with pytest.raises(KeyFormatError):
            engine.delete(bad)
        with pytest.raises(KeyFormatError):
            engine.lookup(bad)
    for bad in (-1, 1 << 32, b"bytes", "str", 1.5, None, True):
        with pytest.raises(ValueFormatError):
            engine.set(7, bad)
    assert state(engine) == before
    assert engine.get(7) is None


def test_byte_values_limits() -> None:
    engine = small(value_width=64)
    engine.set(b"k", b"1234567")  # VALUE_BYTES - 1
    assert engine.get(b"k") == b"1234567"
    engine.set(b"s", "é")
    assert engine.get(b"s") == "é".encode()
    before = state(engine)
    with pytest.raises(ValueTooLarge):
        engine.set(b"k", b"12345678")
    with pytest.raises(ValueTooLarge):
        engine.set(b"new", "éééé")  # 8 bytes
    for bad in (None, 1.5, [b"x"]):
        with pytest.raises(ValueFormatError):
            engine.set(b"k", bad)
    assert state(engine) == before
    assert issubclass(ValueTooLarge, ValueFormatError) and issubclass(ValueFormatError, ValueError)


def test_wide_values() -> None:
    engine = small(value_width=512, value_kind="int")
    engine.set(b"k", (1 << 512) - 1)
    assert engine.get(b"k") == (1 << 512) - 1
    engine = small(value_width=512)
    engine.set(b"k", bytes(range(63)))
    assert engine.get(b"k") == bytes(range(63))


# --------------------------------------------------------------------------------------------
# §9: errors change nothing
# --------------------------------------------------------------------------------------------
def test_errors_change_nothing() -> None:
    engine = populated()
    rule_id = next(iter(engine.rules()))
    before = state(engine)
    attempts = [
        (KeyTooLong, lambda: engine.set(b"x" * 18, b"v")),
        (ValueTooLarge, lambda: engine.set(b"key1", b"x" * 8)),
        (KeyFormatError, lambda: engine.mset([b"ok1", b"ok2", 3.5], [b"a", b"b", b"c"])),
        (ValueFormatError, lambda: engine.mset([b"ok1", b"ok2"], [b"a", b"b" * 9])),
        (ValueFormatError, lambda: engine.set_batch([b"ok1", b"ok2"], [b"a"])),
        (KeyFormatError, lambda: engine.mget([b"key1", None])),
        (KeyFormatError, lambda: engine.delete_batch([b"key1", b"x" * 40])),
        (KeyFormatError, lambda: engine.lookup_batch([b"key1", -1])),
        (InvalidRule, lambda: engine.add_rule(Rule.ternary(1, 0, 1, b"x"))),  # match outside mask
        (InvalidRule, lambda: engine.add_rule(Rule.ternary(0, 1 << 144, 1, b"x"))),  # mask too wide
        (InvalidRule, lambda: engine.add_rule(Rule.ternary(0, 0, 256, b"x"))),  # priority ≥ 2^8
        (InvalidRule, lambda: engine.add_rule(Rule.ternary(0, 0, -1, b"x"))),
        (InvalidRule, lambda: engine.add_rule(Rule.ternary(0, 0, 1, b"x" * 8))),  # value too long
        (InvalidRule, lambda: engine.add_rule(Rule.ternary(0, 0, 1, 5))),  # int value, bytes engine
        (InvalidRule, lambda: engine.add_rule(Rule((), 1, b"x"))),
        (InvalidRule, lambda: engine.add_rule("not a rule")),
        (RuleTableFull, lambda: engine.add_rule(Rule(tuple(Ternary(i, 0xFF) for i in range(8)), 1, b"x"))),
        (UnknownRule, lambda: engine.remove_rule(rule_id + 100)),
        (UnknownRule, lambda: engine.rule_entries(rule_id + 100)),
    ]
    for error, call in attempts:
        with pytest.raises(error):
            call()
        assert state(engine) == before, error
    assert issubclass(UnknownRule, KeyError)
    for error, _ in attempts:
        assert issubclass(error, KVError)


def test_table_full_changes_nothing() -> None:
    for relocation in (False, True):
        engine = small(ways=2, rows=2, stash=1, relocation=relocation, value_width=32)
        stored = {}
        failures = 0
        for i in range(40):
            before = state(engine)
            try:
                engine.set(i, b"v%d" % (i % 10))
                stored[i] = b"v%d" % (i % 10)
            except TableFull:
                failures += 1
                after = state(engine)
                # only the insert_failures counter may move
                assert after[0:3] == before[0:3] and after[4:] == before[4:]
                assert after[3]["insert_failures"] == before[3]["insert_failures"] + 1
                assert engine.get(i) is None
        assert failures and len(stored) == 5 and engine.mget(list(stored)) == list(stored.values())


# --------------------------------------------------------------------------------------------
# Batch forms
# --------------------------------------------------------------------------------------------
def test_batch_forms_match_scalar_calls() -> None:
    rng = np.random.default_rng(5)
    ints = rng.integers(0, 1 << 40, size=64, dtype=np.uint64)
    ints[5] = ints[9]  # a repeat in the batch
    scalar = small(value_kind="int", value_width=64, rows=32, relocation=False)
    batch = small(value_kind="int", value_width=64, rows=32, relocation=False)
    values = rng.integers(0, 1 << 63, size=64, dtype=np.uint64)
    for k, v in zip(ints.tolist(), values.tolist()):
        try:
            scalar.set(k, v)
        except TableFull:
            pass
    batch.set_batch(ints, values)
    assert batch.backend.valid_slots()[0].tolist() == scalar.backend.valid_slots()[0].tolist()
    assert dict(batch.items()) == dict(scalar.items())
    probe = np.concatenate([ints, rng.integers(0, 1 << 40, size=16, dtype=np.uint64)])
    hit, got = batch.get_batch(probe)
    assert got.dtype == np.uint64  # integer engine of ≤ 64-bit values: values come back as ints
    expected = [scalar.get(int(k)) for k in probe]
    assert hit.tolist() == [e is not None for e in expected]
    assert [int(v) if h else None for h, v in zip(hit, got)] == expected
    # the same keys as raw uint8 rows, as an object array, as a list: same answers
    raw = batch.encode_keys(probe)
    assert raw.shape == (80, 18) and raw.dtype == np.uint8
    assert raw.tobytes() == b"".join(int(k).to_bytes(18, "big") for k in probe)
    for form in (raw, np.array([int(k) for k in probe], dtype=object), [int(k) for k in probe]):
        assert batch.mget(form) == expected
        h2, v2 = batch.get_batch(form)
        assert h2.tolist() == hit.tolist() and v2.tolist() == got.tolist()
    # deletes: True where a key was removed; a repeat is removed once (§7)
    gone = batch.delete_batch(np.array([ints[5], ints[9], ints[0]], dtype=np.uint64))
    assert gone.tolist() == [True, False, True]


def test_batch_forms_bytes_engine() -> None:
    engine = small(value_width=64)
    keys = np.array([b"a", "b", b"c", b"a"], dtype=object)
    vals = np.array([b"1", b"2", "3", b"4"], dtype=object)
    status = engine.set_batch(keys, vals)
    assert engine.mget([b"a", b"b", b"c", b"d"]) == [b"4", b"2", b"3", None]
    assert len(status) == 4
    hit, raw = engine.get_batch([b"a", b"zz"])
    assert hit.tolist() == [True, False]
    assert raw.shape == (2, 8) and raw[0].tobytes() == tagged(b"4", 8) and not raw[1].any()
    # raw uint8 value rows are stored as they are
    rows = np.frombuffer(tagged(b"r", 8) * 2, dtype=np.uint8).reshape(2, 8)
    engine.set_batch([b"r1", b"r2"], rows)
    assert engine.mget([b"r1", b"r2"]) == [b"r", b"r"]
    before = state(engine)
    for bad_keys in (np.zeros((2, 17), dtype=np.uint8), np.zeros((2,), dtype=np.float64),
                     np.array([-1, 2], dtype=np.int64), np.zeros((2, 2, 18), dtype=np.uint8)):
        with pytest.raises(KeyFormatError):
            engine.get_batch(bad_keys)
    with pytest.raises(ValueFormatError):
        engine.set_batch([b"x", b"y"], np.zeros((2, 7), dtype=np.uint8))
    with pytest.raises(ValueFormatError):
        engine.set_batch([b"x", b"y"], np.array([1, 2], dtype=np.uint64))  # ints into a bytes engine
    assert state(engine) == before


def test_int_values_batch_range_checks() -> None:
    engine = small(value_kind="int", value_width=32)
    before = state(engine)
    with pytest.raises(ValueFormatError):
        engine.set_batch(np.array([1, 2], dtype=np.uint64), np.array([1, 1 << 32], dtype=np.uint64))
    with pytest.raises(ValueFormatError):
        engine.set_batch(np.array([1, 2], dtype=np.uint64), np.array([1, -1], dtype=np.int64))
    with pytest.raises(KeyFormatError):
        engine.set_batch(np.array([1, -2], dtype=np.int64), np.array([1, 1], dtype=np.uint64))
    assert state(engine) == before
    engine.set_batch(np.array([1, 2], dtype=np.int32), np.array([3, (1 << 32) - 1], dtype=np.uint64))
    assert engine.mget([1, 2]) == [3, (1 << 32) - 1]


def test_lookup_batch_matches_lookup() -> None:
    engine = small(value_kind="int", value_width=32)
    low = engine.add_rule(Rule.ternary(0, 0, 1, 100))  # matches everything, priority 1
    odd = engine.add_rule(Rule.ternary(1, 1, 5, 200))  # odd keys, priority 5
    engine.mset({10: 1, 11: 2})
    keys = [10, 11, 12, 13]
    single = [engine.lookup(k) for k in keys]
    assert single == [LookupResult("exact", 1), LookupResult("exact", 2),
                      LookupResult("rule", 100, low, engine.rule_entries(low)[0]),
                      LookupResult("rule", 200, odd, engine.rule_entries(odd)[0])]
    assert [r.hit for r in single] == [True] * 4
    batch = engine.lookup_batch(np.array(keys, dtype=np.uint64))
    assert batch.kind.tolist() == [MatchKind.EXACT, MatchKind.EXACT, MatchKind.RULE, MatchKind.RULE]
    assert batch.values.tolist() == [1, 2, 100, 200]
    assert batch.rule_id.tolist() == [-1, -1, low, odd]
    assert batch.entry.tolist() == [-1, -1, engine.rule_entries(low)[0], engine.rule_entries(odd)[0]]
    engine.remove_rule(low)
    engine.remove_rule(odd)
    miss = engine.lookup(12)
    assert miss == LookupResult("miss") and not miss.hit and miss.value is None
    assert miss.rule_id is None and miss.entry is None


# --------------------------------------------------------------------------------------------
# Rules: ids, entries, ties, removal, hits
# --------------------------------------------------------------------------------------------
def test_rule_lifecycle() -> None:
    engine = small(rules=4, prio_width=4)
    a = engine.add_rule(Rule(tuple(Ternary(m, 0b11) for m in (0b00, 0b01)), 3, b"A"))
    b = engine.add_rule(Rule.ternary(0, 0, 3, b"B"))  # ties with a; higher entry index
    assert engine.rule_entries(a) == [0, 1] and engine.rule_entries(b) == [2]
    assert engine.lookup(4).rule_id == a  # key 0b100: a's entry 0 and b's entry 2 tie: entry 0
    assert engine.lookup(6).rule_id == b  # 0b110 matches only b
    with pytest.raises(RuleTableFull):
        engine.add_rule(Rule(tuple(Ternary(m, 0b111) for m in (1, 2)), 1, b"C"))
    engine.remove_rule(a)
    with pytest.raises(UnknownRule):
        engine.remove_rule(a)
    c = engine.add_rule(Rule(tuple(Ternary(m, 0b111) for m in (1, 2)), 3, b"C"))  # reuses 0 and 1
    assert engine.rule_entries(c) == [0, 1] and c not in (a, b)
    assert engine.lookup(1) == LookupResult("rule", b"C", c, 0)  # tie with b: lower entry wins
    engine.lookup(2)
    engine.lookup(4)
    engine.lookup(6)
    # hits: a won lookup(4) before its removal; b won 6, 4, 6; c won 1 and 2 (tie with b on 2)
    assert engine.rule_hits() == {b: 3, c: 2}
    assert engine.stats()["rule_hits"] == 6 and engine.stats()["rule_hits_by_id"] == {b: 3, c: 2}
    assert set(engine.rules()) == {b, c} and engine.rules()[c].value == b"C"
    assert engine.backend.read_rule(3).valid is False
    engine.reset_stats()
    assert engine.rule_hits() == {b: 0, c: 0} and engine.stats()["lookups"] == 0


def test_rules_zero_entries_geometry() -> None:
    engine = small(rules=0)
    with pytest.raises(RuleTableFull):
        engine.add_rule(Rule.ternary(0, 0, 0, b"x"))
    assert engine.lookup(b"k").kind == "miss"


# --------------------------------------------------------------------------------------------
# mset, items, info, clear
# --------------------------------------------------------------------------------------------
def test_mset_report_and_items() -> None:
    engine = small(ways=2, rows=2, stash=1, relocation=False, value_width=32)
    engine.set(b"old", b"o")
    report = engine.mset([b"old", b"n1", b"n1"], [b"x", b"y", b"z"])
    assert (report.inserted, report.updated, report.failed) == (1, 2, [])
    report = engine.mset({b"m%d" % i: b"%d" % i for i in range(10)})
    assert report.inserted + len(report.failed) == 10 and report.updated == 0
    assert report.failed == sorted(report.failed)
    stored = dict(engine.items())
    assert len(stored) == len(engine) == 2 + report.inserted == engine.occupancy().used
    for i in report.failed:
        assert b"m%d" % i not in stored
    assert stored[b"old"] == b"x" and stored[b"n1"] == b"z"
    with pytest.raises(TypeError):
        engine.mset([b"a"])  # neither a mapping nor keys and values


def test_items_in_slot_order_and_info() -> None:
    engine = populated(value_kind="int", value_width=32)
    numbers, _ = engine.backend.valid_slots()
    assert numbers.tolist() == sorted(numbers.tolist())
    assert dict(engine.items()) == {f"key{i}".encode(): i for i in range(30)}
    info = engine.info()
    g = engine.geometry
    assert info["backend"] == "model" and info["geometry"] == g.as_dict()
    assert info["value_kind"] == "int" and info["relocation"] is True
    assert info["max_key_bytes"] == 17 and info["max_value_bytes"] == 3
    assert info["occupancy"] == {"used": 30, "capacity": g.capacity,
                                 "load_factor": round(30 / g.capacity, 6)}
    assert info["rules"] == 1 and info["rule_entries_used"] == 1
    assert info["counters"] == engine.backend.counters()
    assert json.dumps(info)  # JSON-able (the CLI prints it)
    assert engine.occupancy().load_factor == 30 / g.capacity


def test_clear_keeps_counters() -> None:
    engine = populated()
    counters = engine.stats()
    engine.clear(rules=False)
    assert len(engine) == 0 and len(engine.rules()) == 1
    after = engine.stats()
    assert {k: v for k, v in after.items() if k != "occupancy"} == {
        k: v for k, v in counters.items() if k != "occupancy"}
    engine.clear()
    assert engine.rules() == {} and engine.lookup(b"x").kind == "miss"


# --------------------------------------------------------------------------------------------
# Snapshots
# --------------------------------------------------------------------------------------------
def test_dump_restore_same_geometry(tmp_path) -> None:
    engine = populated()
    for i in range(0, 30, 3):
        engine.delete(f"key{i}")
    r2 = engine.add_rule(Rule(tuple(Ternary(m, 0xFF) for m in (1, 2)), 9, b"two"))
    path = tmp_path / "snap.npz"
    assert engine.dump(path) == len(engine) == 20
    other = small()
    other.set(b"junk", b"j")
    assert other.restore(path) == 20
    assert other.backend.valid_slots()[0].tolist() == engine.backend.valid_slots()[0].tolist()
    assert list(other.items()) == list(engine.items())  # identical placement, slot order
    assert other.rules() == engine.rules()
    assert {i: other.rule_entries(i) for i in other.rules()} == {i: engine.rule_entries(i) for i in engine.rules()}
    assert other.lookup(b"x") == engine.lookup(b"x")
    assert other.get(b"junk") is None
    r3 = other.add_rule(Rule.ternary(0, 0, 0, b"z"))
    assert r3 > r2  # ids keep counting
    fresh = KVEngine.from_snapshot(path)
    assert fresh.geometry == engine.geometry and list(fresh.items()) == list(engine.items())


def test_dump_restore_empty_table(tmp_path) -> None:
    engine = small()
    path = tmp_path / "empty.npz"
    assert engine.dump(path) == 0
    other = small()
    other.set(b"k", b"v")
    assert other.restore(path) == 0 and len(other) == 0


def test_restore_keeps_rule_entry_order(tmp_path) -> None:
    """After a removal leaves a hole, a later rule takes a lower entry than an older one; a
    restore must keep those entries, or the §5.3 tie-break (lowest entry) changes winner."""
    engine = small(rules=4)
    first = engine.add_rule(Rule.ternary(0, 0, 1, b"first"))  # entry 0
    older = engine.add_rule(Rule.ternary(0, 0, 1, b"older"))  # entry 1
    engine.remove_rule(first)
    newer = engine.add_rule(Rule.ternary(0, 0, 1, b"newer"))  # entry 0: wins the tie
    assert engine.lookup(b"k").rule_id == newer
    engine.dump(tmp_path / "s.npz")
    other = small(rules=4)
    other.restore(tmp_path / "s.npz")
    assert {i: other.rule_entries(i) for i in other.rules()} == {older: [1], newer: [0]}
    assert other.lookup(b"k") == engine.lookup(b"k")


def test_restore_into_other_rows(tmp_path) -> None:
    engine = populated()
    path = tmp_path / "snap.npz"
    engine.dump(path)
    bigger = small(rows=64)
    assert bigger.restore(path) == 30
    assert dict(bigger.items()) == dict(engine.items())
    assert bigger.mget([f"key{i}" for i in range(30)]) == [f"v{i}".encode() for i in range(30)]
    assert bigger.rules() == engine.rules()
    smaller = small(rows=8, ways=4, stash=2)  # 34 slots, 30 entries
    smaller.restore(path)
    assert dict(smaller.items()) == dict(engine.items())


def test_restore_errors_change_nothing(tmp_path) -> None:
    engine = populated()
    good = tmp_path / "good.npz"
    engine.dump(good)
    data = good.read_bytes()
    target = populated()
    target.set(b"extra", b"e")
    before = state(target)

    def expect(error, path) -> None:
        with pytest.raises(error):
            target.restore(path)
        assert state(target) == before

    bad = tmp_path / "bad.npz"
    for cut in (0, 10, len(data) // 2, len(data) - 10):  # truncated files
        bad.write_bytes(data[:cut])
        expect(SnapshotError, bad)
    bad.write_bytes(b"this is not a snapshot at all" * 10)
    expect(SnapshotError, bad)
    expect(SnapshotError, tmp_path / "missing.npz")
    corrupt = bytearray(data)
    for i in range(len(corrupt) // 3, len(corrupt) // 3 + 64):
        corrupt[i] ^= 0x5A
    bad.write_bytes(bytes(corrupt))
    expect(SnapshotError, bad)

    def rewrite(path, meta=None, **arrays) -> None:
        with np.load(good) as npz:
            parts = {k: npz[k] for k in npz.files}
        if meta is not None:
            parts["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
        parts.update(arrays)
        np.savez(path, **parts)

    with np.load(good) as npz:
        meta = json.loads(npz["meta"].tobytes())
        numbers, keys = npz["slots"], npz["keys"]
    rewrite(bad, {**meta, "format": "something else"})
    expect(SnapshotError, bad)
    rewrite(bad, {**meta, "version": 99})
    expect(SnapshotError, bad)
    rewrite(bad, {**meta, "geometry": {**meta["geometry"], "rows": 3}})
    expect(SnapshotError, bad)
    rewrite(bad, slots=np.concatenate([numbers[:-1], numbers[:1]]))  # a repeated slot
    expect(SnapshotError, bad)
    rewrite(bad, slots=numbers + 10_000)  # out of range
    expect(SnapshotError, bad)
    rewrite(bad, keys=keys[:, :-1])  # keys of the wrong width
    expect(SnapshotError, bad)
    rewrite(bad, keys=keys[:-1])  # fewer keys than slots
    expect(SnapshotError, bad)
    rewrite(bad, {**meta, "rules": [{"id": 1}]})
    expect((SnapshotError, InvalidRule), bad)
    no_geometry = {k: v for k, v in meta.items() if k != "geometry"}
    rewrite(bad, no_geometry)
    expect(SnapshotError, bad)
    rewrite(bad, [meta])  # JSON, but not an object
    expect(SnapshotError, bad)
    for width_change in ({"key_width": 288}, {"value_width": 128}):
        wide = small(**width_change)
        wide.set(b"w", b"w")
        wide.dump(tmp_path / "wide.npz")
        expect(GeometryError, tmp_path / "wide.npz")
    ints = small(value_kind="int")
    ints.set(b"i", 5)
    ints.dump(tmp_path / "ints.npz")
    expect(SnapshotError, tmp_path / "ints.npz")  # another value kind
    tiny = small(rows=2, ways=2, stash=0)
    before_tiny = state(tiny)
    with pytest.raises(TableFull):
        tiny.restore(good)  # 30 entries, 4 slots: refused before anything changes
    assert state(tiny) == before_tiny
    assert zipfile.is_zipfile(good)  # the good file is still good
    assert target.restore(good) == 30


def test_dump_is_atomic(tmp_path) -> None:
    """A dump into an existing path replaces it whole; no temporary file is left behind."""
    engine = populated()
    path = tmp_path / "snap.npz"
    engine.dump(path)
    engine.set(b"later", b"l")
    engine.dump(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snap.npz"]
    assert KVEngine.from_snapshot(path).get(b"later") == b"l"


def test_command_error_from_backend() -> None:
    """A control operation the engine refuses raises CommandError and counts cmd_errors (§5.6)."""
    engine = small()
    with pytest.raises(CommandError):
        engine.backend.read_slot(engine.geometry.ways + 1, 0)
    with pytest.raises(CommandError):
        engine.backend.write_rule(engine.geometry.rules, RuleEntry(True, 0, 0, 0, bytes(8)))
    assert engine.stats()["cmd_errors"] == 2


def test_restore_that_cannot_fit_changes_nothing(tmp_path) -> None:
    """Into another shape, entries are re-inserted; if some would not fit, nothing is restored."""
    engine = populated()
    path = tmp_path / "snap.npz"
    engine.dump(path)
    tight = small(ways=2, rows=16, stash=0, relocation=False)  # 32 slots for 30 entries
    tight.set("keep", "me")
    before = state(tight)
    with pytest.raises(TableFull, match="nothing was restored"):
        tight.restore(path)
    assert state(tight) == before
    assert tight.get("keep") == b"me"
