"""The model's vectorized batch paths against one-at-a-time execution (docs/engine.md §7).

`ModelBackend.set_batch` of one key takes `_set_one`, a literal step-by-step §5.4; batches of
two or more take the vectorized path (copies found for all ways and the stash at once, updates
resolved per slot, new keys placed way by way), which is what front-ends hand it. These tests
run random batches — repeated keys, keys that already have copies, duplicate and misplaced
copies written with WRITE_SLOT, full candidate rows, stash use and exhaustion — through one
model as batches and through another one key per call, and compare every status, value,
counter and slot, and with `ContractOracle` as the third opinion. Batch sizes reach past the
hash's gather and per-position paths (`hashing.SMALL_BATCH`) too.

Where `pynq_kv._slots` (C) was built, GET and LOOKUP find each key's first copy with it and
SET updates the keys already in the table with it; the random runs take both that and the numpy
code (`ModelBackend._first_copy`, `_all_copies`) it stands in for, and the tests at the end
compare the two directly.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from contextlib import nullcontext
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oracle import ContractOracle
from pynq_kv.backend import SetStatus
from pynq_kv.geometry import DEFAULT_HASH_SEED, Geometry
from pynq_kv.engine import KVEngine
from pynq_kv.hashing import SMALL_BATCH, row_tables
from pynq_kv import model as model_module
from pynq_kv.model import ModelBackend

try:
    from pynq_kv._slots import (first_copies as first_copies_c, set_tagged as set_tagged_c,
                                update_copies as update_copies_c)
except ImportError:
    first_copies_c = update_copies_c = set_tagged_c = None

needs_c = pytest.mark.skipif(first_copies_c is None, reason="pynq_kv._slots was not built")
SEARCHES = ["c", "numpy"]


def search(kind: str):
    """The model's table search for this test: C (as built) or the numpy code."""
    if kind == "c":
        return nullcontext()
    return mock.patch.multiple(model_module, _first_copies_c=None, _update_copies_c=None)


class Trio:
    """A batch model, a one-key-per-call model and the oracle, driven alike and compared."""

    def __init__(self, g: Geometry) -> None:
        self.g = g
        self.batch = ModelBackend(g)
        self.single = ModelBackend(g)
        self.oracle = ContractOracle(g)
        self.reached: Counter[str] = Counter()

    def keys(self, keys: list[int]) -> np.ndarray:
        kb = self.g.key_bytes
        return np.frombuffer(b"".join(k.to_bytes(kb, "big") for k in keys), dtype=np.uint8).reshape(-1, kb)

    def values(self, values: list[bytes]) -> np.ndarray:
        return np.frombuffer(b"".join(values), dtype=np.uint8).reshape(-1, self.g.value_bytes)

    def set(self, keys: list[int], values: list[bytes]) -> None:
        k, v = self.keys(keys), self.values(values)
        got = self.batch.set_batch(k, v).tolist()
        one = [int(self.single.set_batch(k[i:i + 1], v[i:i + 1])[0]) for i in range(len(keys))]
        expected = []
        for key, value in zip(keys, values):
            if len(self.oracle.copies(key)) > 1:
                self.reached["SET of a key with several copies"] += 1
            expected.append(int(self.oracle.set(key, value)))
        assert got == one == expected
        self.reached.update(SetStatus(s).name for s in expected)
        if len(set(keys)) < len(keys):
            self.reached["SET batch with repeats"] += 1

    def get(self, keys: list[int]) -> None:
        k = self.keys(keys)
        got = self.batch.get_batch(k)
        parts = [self.single.get_batch(k[i:i + 1]) for i in range(len(keys))]
        expected = [self.oracle.get(key) for key in keys]
        vb = self.g.value_bytes
        assert got.hit.tolist() == [bool(p.hit[0]) for p in parts] == [e is not None for e in expected]
        assert [row.tobytes() for row in got.values] == [p.values[0].tobytes() for p in parts] == [
            e if e is not None else bytes(vb) for e in expected]

    def lookup(self, keys: list[int]) -> None:
        k = self.keys(keys)
        got = self.batch.lookup_batch(k)
        parts = [self.single.lookup_batch(k[i:i + 1]) for i in range(len(keys))]
        expected = [self.oracle.lookup(key) for key in keys]
        assert got.kind.tolist() == [int(p.kind[0]) for p in parts] == [int(e[0]) for e in expected]
        assert [row.tobytes() for row in got.values] == [p.values[0].tobytes() for p in parts]

    def delete(self, keys: list[int]) -> None:
        k = self.keys(keys)
        got = self.batch.delete_batch(k).tolist()
        one = [int(self.single.delete_batch(k[i:i + 1])[0]) for i in range(len(keys))]
        assert got == one == [int(self.oracle.delete(key)) for key in keys]

    def write_slot(self, bank: int, index: int, key: int, value: bytes) -> None:
        raw = key.to_bytes(self.g.key_bytes, "big")
        self.batch.write_slot(bank, index, True, raw, value)
        self.single.write_slot(bank, index, True, raw, value)
        self.oracle.write_slot(bank, index, True, key, value)

    def check(self) -> None:
        expected = self.oracle.counter_values()
        assert self.batch.counters() == self.single.counters() == expected
        slots = []
        for model in (self.batch, self.single):
            numbers, batch = model.valid_slots()
            slots.append([(int(n), int.from_bytes(k.tobytes(), "big"), v.tobytes())
                          for n, k, v in zip(numbers, batch.keys, batch.values)])
        assert slots[0] == slots[1] == self.oracle.valid_slots()


def run(trio: Trio, rng: random.Random, pool: list[int], steps: int, max_batch: int) -> None:
    """Random batches over a small key pool: repeats within and across batches, a crowded
    table (FULL, stash), and now and then a duplicate or misplaced copy from WRITE_SLOT."""
    g = trio.g
    value = lambda: rng.getrandbits(8 * g.value_bytes).to_bytes(g.value_bytes, "big")  # noqa: E731
    for _ in range(steps):
        keys = [rng.choice(pool) for _ in range(rng.randint(2, max_batch))]
        op = rng.random()
        if op < 0.45:
            trio.set(keys, [value() for _ in keys])
        elif op < 0.6:
            trio.get(keys)
        elif op < 0.7:
            trio.lookup(keys)
        elif op < 0.85:
            trio.delete(keys[:max(2, len(keys) // 4)])
        else:  # a copy at one of the key's candidate slots or in the stash, often a duplicate
            key = rng.choice(pool)
            bank = rng.randrange(g.ways + 1)
            if bank < g.ways:
                trio.write_slot(bank, trio.oracle.rows_of(key)[bank], key, value())
            elif g.stash:
                trio.write_slot(bank, rng.randrange(g.stash), key, value())
            if rng.random() < 0.3:  # misplaced: invisible to the data plane
                trio.write_slot(rng.randrange(g.ways), rng.randrange(g.rows), key, value())
        trio.check()


geometries = st.builds(
    Geometry,
    key_width=st.sampled_from([144, 288]),
    value_width=st.sampled_from([32, 64]),
    ways=st.integers(2, 5),
    rows=st.sampled_from([2, 4, 8, 16]),
    stash=st.integers(0, 4),
    rules=st.just(0),
    hash_seed=st.one_of(st.just(DEFAULT_HASH_SEED), st.integers(0, (1 << 64) - 1)),
)


@pytest.mark.parametrize("kind", SEARCHES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(geometries, st.integers(0, 2**32 - 1), st.integers(2, 60))
def test_small_batches_equal_one_at_a_time(kind: str, g: Geometry, seed: int, pool_size: int) -> None:
    rng = random.Random(seed)
    pool = [rng.getrandbits(g.key_width) if rng.random() < 0.8 else rng.getrandbits(12)
            for _ in range(pool_size)]
    with search(kind):
        run(Trio(g), rng, pool, steps=25, max_batch=40)


@pytest.mark.parametrize("kind", SEARCHES)
@pytest.mark.parametrize("key_width, ways", [(288, 4), (144, 3)])
def test_batches_across_hash_paths_equal_one_at_a_time(kind: str, key_width: int, ways: int) -> None:
    """Batches of a few hundred to a few thousand keys (both hash paths, several gathers) into
    a table that overflows, with repeats."""
    g = Geometry(key_width=key_width, value_width=32, ways=ways, rows=256, stash=8, rules=0)
    rng = random.Random(key_width + ways)
    kb = g.key_bytes
    # length-tagged strings (zero tails) and random keys
    pool = [int.from_bytes(bytes([12]) + b"key:%08d" % i + bytes(kb - 13), "big") for i in range(900)]
    pool += [rng.getrandbits(key_width) for _ in range(900)]
    trio = Trio(g)
    with search(kind):
        for n in (300, SMALL_BATCH, SMALL_BATCH + 1, 2500):
            keys = [rng.choice(pool) for _ in range(n)]
            trio.set(keys, [rng.getrandbits(32).to_bytes(4, "big") for _ in keys])
            trio.check()
            trio.get(keys[::-1])
            trio.delete(keys[: n // 5])
            trio.check()
    assert trio.reached["FULL"] and trio.reached["INSERTED_STASH"]


def test_paths_reached() -> None:
    """The random runs above do reach what they are meant to (counted on fixed seeds)."""
    reached: Counter[str] = Counter()
    for seed in range(6):
        rng = random.Random(seed)
        g = Geometry(key_width=144, value_width=32, ways=2 + seed % 3, rows=4, stash=seed % 3, rules=0)
        trio = Trio(g)
        run(trio, rng, [rng.getrandbits(144) for _ in range(30)], steps=25, max_batch=40)
        reached += trio.reached
    for path in ("INSERTED", "INSERTED_STASH", "UPDATED", "FULL", "SET batch with repeats",
                 "SET of a key with several copies"):
        assert reached[path], path


def test_the_model_uses_the_c_search_when_it_was_built() -> None:
    assert (model_module._first_copies_c is None) == (first_copies_c is None)
    assert (model_module._update_copies_c is None) == (update_copies_c is None)
    assert (model_module._set_tagged_c is None) == (set_tagged_c is None)
    if os.environ.get("CI"):  # make test installs a compiler and Python's headers: it is built
        assert first_copies_c is not None


@needs_c
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(geometries, st.integers(0, 2**32 - 1), st.integers(2, 60))
def test_the_c_search_finds_the_numpy_searchs_slots(g: Geometry, seed: int, pool_size: int) -> None:
    """After random batches and WRITE_SLOT copies (duplicates, misplaced copies, the stash),
    every pool key and some unknown ones: the same first copy, or none, both ways."""
    rng = random.Random(seed)
    pool = [rng.getrandbits(g.key_width) for _ in range(pool_size)]
    trio = Trio(g)
    run(trio, rng, pool, steps=10, max_batch=20)
    model = trio.batch
    keys = trio.keys(pool + [rng.getrandbits(g.key_width) for _ in range(5)])
    expected = model._first_copy(model._key_items_of(keys), model._candidates(keys))
    got = model._first_copies(keys)
    assert got.dtype == np.int64 and got.tolist() == expected.tolist()
    for key, slot in zip(keys, got.tolist()):
        assert slot < 0 or (model._valid[slot] and model._key_bytes[slot].tobytes() == key.tobytes())


def assert_refused(function, cases: list) -> None:
    """Each (arguments, reason) of cases makes function raise ValueError matching reason."""
    for args, why in cases:
        with pytest.raises(ValueError, match=why):
            function(*args)


def read_only(array: np.ndarray) -> np.ndarray:
    frozen = array.copy()
    frozen.setflags(write=False)
    return frozen


@needs_c
def test_the_c_search_refuses_arrays_it_cannot_read() -> None:
    g = Geometry(key_width=144, value_width=32, ways=2, rows=4, stash=2, rules=0)
    model = ModelBackend(g)
    keys = np.zeros((3, g.key_bytes), np.uint8)
    hashes = np.zeros((3, 2), np.uint32)
    out = np.zeros(3, np.int64)
    first_copies_c(keys, hashes, model._valid, model._key_bytes, g.rows, out)  # the right shapes
    assert out.tolist() == [-1, -1, -1]
    assert_refused(first_copies_c, [
        ((keys[:2], hashes, model._valid, model._key_bytes, 4, out), "a row per key"),
        ((keys, hashes, model._valid, model._key_bytes, 3, out), "power of two"),
        ((keys, np.zeros((3, 3), np.uint32), model._valid, model._key_bytes, 4, out), "ways do not fit"),
        ((keys, hashes, model._valid[:-1], model._key_bytes, 4, out), "a row of KEY_BYTES"),
        ((np.zeros((3, 8), np.uint8), hashes, model._valid, model._key_bytes, 4, out), "a row of KEY_BYTES"),
        ((keys, hashes.astype(np.int64), model._valid, model._key_bytes, 4, out), "4-byte items"),
        ((keys.ravel(), hashes, model._valid, model._key_bytes, 4, out), "2-D"),
        ((keys, hashes, model._valid, model._key_bytes, 4, read_only(out)), "read-only"),
        ((np.zeros((3, 2 * g.key_bytes), np.uint8)[:, ::2], hashes, model._valid, model._key_bytes,
          4, out), "contiguous"),
    ])


@needs_c
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(geometries, st.integers(0, 2**32 - 1), st.integers(2, 40))
def test_the_c_update_leaves_the_table_as_the_numpy_one(g: Geometry, seed: int, pool_size: int) -> None:
    """Two models through the same random runs, one updating in C and one in numpy: the same
    table, slot for slot, and the same counters, after SET batches with repeats, duplicate and
    misplaced copies."""
    pool = [random.Random(seed).getrandbits(g.key_width) for _ in range(pool_size)]
    trios = []
    for kind in SEARCHES:
        trio = Trio(g)
        with search(kind):
            run(trio, random.Random(seed), pool, steps=15, max_batch=30)
        trios.append(trio)
    c, numpy = (t.batch for t in trios)
    assert c.counters() == numpy.counters()
    for name in ("_valid", "_keys", "_values"):
        assert np.array_equal(getattr(c, name), getattr(numpy, name)), name


@needs_c
def test_the_c_update_refuses_arrays_it_cannot_read() -> None:
    g = Geometry(key_width=144, value_width=32, ways=2, rows=4, stash=2, rules=0)
    model = ModelBackend(g)
    keys = np.zeros((3, g.key_bytes), np.uint8)
    hashes = np.zeros((3, 2), np.uint32)
    new_values = np.ones((3, g.value_bytes), np.uint8)
    existed = np.ones(3, bool)
    table = (model._valid, model._key_bytes, model._value_bytes)
    update_copies_c(keys, hashes, *table, new_values, g.rows, existed)  # the right shapes
    assert existed.tolist() == [False] * 3 and not model._value_bytes.any()
    assert_refused(update_copies_c, [
        ((keys, hashes, *table, new_values[:2], 4, existed), "new_values one of the same width"),
        ((keys, hashes, *table, np.ones((3, 5), np.uint8), 4, existed), "same width"),
        ((keys, hashes, model._valid, model._key_bytes, model._value_bytes[:-1], new_values, 4, existed),
         "a row per slot"),
        ((keys, hashes, *table, new_values, 4, existed[:2]), "existed must have a row per key"),
        ((keys, hashes, *table, new_values, 6, existed), "power of two"),
        ((keys, hashes[:1], *table, new_values, 4, existed), "a row per key"),
        ((keys, hashes, model._valid, model._key_bytes, read_only(model._value_bytes), new_values, 4,
          existed), "read-only"),
    ])


# -- set_leading: the host tier's fill (pynq_kv._slots.set_tagged) ----------------------------

def fill_both(fast: KVEngine, plain: KVEngine, keys: list[bytes], values: list[bytes]) -> int:
    """A fill as Tier._fill makes it (set_leading, then set_batch of the rest) on `fast`, and
    the same SETs as one set_batch on `plain`: the same statuses. Returns how many keys
    set_leading took."""
    done = fast.set_leading(keys, values)
    status = plain.set_batch(keys, values).tolist()
    simple = (SetStatus.UPDATED, SetStatus.INSERTED)
    assert all(s in simple for s in status[:done])  # it took only updates and way inserts
    if done < len(keys):
        if not plain.relocation:  # (relocation can make a FULL key INSERTED after all)
            assert status[done] not in simple  # it stopped at the first stash insert or FULL
        assert fast.set_batch(keys[done:], values[done:]).tolist() == status[done:]
    return done


@needs_c
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(geometries, st.integers(0, 2**32 - 1), st.integers(2, 60), st.booleans())
def test_set_leading_leaves_the_table_as_set_batch(g: Geometry, seed: int, pool_size: int,
                                                   relocation: bool) -> None:
    """Two engines through the same random fills of byte-string keys (repeats in a batch, keys
    new and old, a crowded table reaching the stash and FULL, deletes, duplicate copies from
    WRITE_SLOT in the ways and the stash, relocation on or off), one filled as the host tier
    fills, one with set_batch alone: slot for slot the same table, the same counters."""
    rng = random.Random(seed)
    fast, plain = (KVEngine(ModelBackend(g), value_kind="bytes", relocation=relocation)
                   for _ in range(2))
    max_key, max_value = fast.key_format.max_bytes, fast.value_format.max_bytes
    pool = [rng.randbytes(rng.randint(0, max_key)) for _ in range(pool_size)]
    for _ in range(15):
        keys = [rng.choice(pool) for _ in range(rng.randint(1, 20))]
        values = [rng.randbytes(rng.randint(0, max_value)) for _ in keys]
        fill_both(fast, plain, keys, values)
        if rng.random() < 0.2:
            gone = rng.sample(pool, min(3, len(pool)))
            assert fast.delete_batch(gone).tolist() == plain.delete_batch(gone).tolist()
        if rng.random() < 0.3:  # another copy of a pool key, at a candidate slot or in the stash
            raw_key = fast.encode_keys([rng.choice(pool)])
            raw_value = fast.encode_values([rng.randbytes(rng.randint(0, max_value))])[0].tobytes()
            bank = rng.randrange(g.ways + (1 if g.stash else 0))
            index = (int(fast.backend._hashes(raw_key)[0, bank]) & (g.rows - 1) if bank < g.ways
                     else rng.randrange(g.stash))
            for engine in (fast, plain):
                engine.backend.write_slot(bank, index, True, raw_key[0].tobytes(), raw_value)
    assert fast.backend.counters() == plain.backend.counters()
    for name in ("_valid", "_keys", "_values"):
        assert np.array_equal(getattr(fast.backend, name), getattr(plain.backend, name)), name
    assert fast.mget(pool) == plain.mget(pool)


@needs_c
def test_set_leading_takes_updates_and_way_inserts_and_stops_at_the_stash() -> None:
    g = Geometry(key_width=288, value_width=64, ways=2, rows=4, stash=4, rules=0)
    fast, plain = (KVEngine(ModelBackend(g), value_kind="bytes", relocation=False) for _ in range(2))
    keys = [b"key:%06d" % i for i in range(12)]
    done = fill_both(fast, plain, keys, [b"v%d" % i for i in range(12)])  # 8 way slots, then the stash
    assert 0 < done < 12 and plain.backend.counters()["occupancy"] > done
    assert fill_both(fast, plain, keys[:done][::-1], [b"w"] * done) == done  # all updates now
    assert fill_both(fast, plain, keys[:2] * 3, [b"x", b"y", b"z", b"u", b"last0", b"last1"]) == 6
    for engine in (fast, plain):
        assert engine.mget(keys[:2]) == [b"last0", b"last1"]
    assert fast.backend.counters() == plain.backend.counters()
    assert fast.set_leading([], []) == 0


def test_set_leading_is_for_the_host_port_of_byte_string_engines() -> None:
    """An integer engine's values are not length-tagged, and the data-plane port's SETs go to
    the change log: both leave every key to set_batch."""
    g = Geometry(key_width=144, value_width=32, ways=2, rows=8, stash=2, rules=0)
    ints = KVEngine(ModelBackend(g), value_kind="int")
    ints.set_batch([b"a"], [7])
    assert ints.set_leading([b"a"], [b"8"]) == 0 and ints.mget([b"a"]) == [7]
    engine = KVEngine(ModelBackend(g), value_kind="bytes")
    engine.set_batch([b"a"], [b"1"])
    port = engine.data_plane()
    assert port.set_leading([b"a", b"b"], [b"2", b"3"]) == 0 and engine.mget([b"a", b"b"]) == [b"1", None]
    assert not engine.drain_changes()


@needs_c
def test_set_tagged_refuses_what_it_cannot_read_and_changes_nothing() -> None:
    g = Geometry(key_width=144, value_width=32, ways=2, rows=4, stash=2, rules=0)
    engine = KVEngine(ModelBackend(g), value_kind="bytes")
    engine.set_batch([b"a", b"b"], [b"1", b"2"])
    model = engine.backend
    rows = row_tables(g.hash_seed, g.ways, g.key_width)
    table = (model._valid, model._key_bytes, model._value_bytes)
    assert set_tagged_c([b"a", b"b"], [b"x", b"y"], rows, *table, g.rows, g.ways) == (2, 0)
    assert engine.mget([b"a", b"b"]) == [b"x", b"y"]
    before = [array.copy() for array in table]
    long_key, long_value = bytes(g.key_bytes), bytes(g.value_bytes)
    for args, error, why in [
        (([b"a", "b"], [b"9", b"8"], rows, *table, g.rows, g.ways), TypeError, "key must be bytes"),
        (([b"new", b"b"], [b"9", 2], rows, *table, g.rows, g.ways), TypeError, "value must be bytes"),
        (([b"a", long_key], [b"9", b"8"], rows, *table, g.rows, g.ways), ValueError, "does not fit"),
        (([b"new", b"b"], [b"9", long_value], rows, *table, g.rows, g.ways), ValueError, "does not fit"),
        (([b"a", b"b"], [b"9"], rows, *table, g.rows, g.ways), ValueError, "as many"),
        (((b"a",), [b"9"], rows, *table, g.rows, g.ways), TypeError, "list"),
        (([b"a"], [b"9"], rows[:-1], *table, g.rows, g.ways), ValueError, "KEY_BYTES \\* 256"),
        (([b"a"], [b"9"], rows, *table, 3, g.ways), ValueError, "power of two"),
        (([b"a"], [b"9"], rows, *table, g.rows, 9), ValueError, "ways do not fit"),
        (([b"a"], [b"9"], rows, model._valid, model._key_bytes, model._value_bytes[:-1], g.rows, g.ways),
         ValueError, "a row per slot"),
        (([b"a"], [b"9"], rows, model._valid, model._key_bytes, read_only(model._value_bytes), g.rows,
          g.ways), ValueError, "read-only"),
        (([b"new"], [b"9"], rows, read_only(model._valid), model._key_bytes, model._value_bytes, g.rows,
          g.ways), ValueError, "read-only"),
    ]:
        with pytest.raises(error, match=why):
            set_tagged_c(*args)
        for array, old in zip(table, before):  # the good first item was not written
            assert np.array_equal(array, old)
