"""The reference model against the literal contract engine (docs/engine.md §4–§7).

`ModelBackend` is vectorized numpy; `oracle.ContractOracle` is the contract read out loud in
plain Python. Both get the same random sequences of batches (GET/LOOKUP/SET/DEL with repeated
keys, §7) and control operations (WRITE_SLOT incl. duplicate and misplaced copies, MOVE valid
and refused, WRITE_RULE/READ_RULE, CLEAR_TABLE, CLEAR_COUNTERS) on small geometries, so that
the stash, FULL, rule ties and duplicate copies are all exercised; every status, value, entry,
every counter and rule hit is compared after every step, and every slot's contents too.

`test_paths_reached` proves (deterministically, by counting) that the interesting paths are
actually hit; the hypothesis machine only reports them with `hypothesis.event`.
"""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from oracle import ContractOracle
from pynq_kv.backend import DelStatus, MatchKind, RuleEntry, SetStatus
from pynq_kv.errors import CommandError
from pynq_kv.geometry import DEFAULT_HASH_SEED, Geometry
from pynq_kv.model import ModelBackend


# --------------------------------------------------------------------------------------------
# The harness: one model, one oracle, every operation applied to both and compared.
# --------------------------------------------------------------------------------------------
class Harness:
    def __init__(self, geometry: Geometry, reached: Counter | None = None) -> None:
        self.g = geometry
        self.model = ModelBackend(geometry)
        self.oracle = ContractOracle(geometry)
        self.reached = reached if reached is not None else Counter()

    def mark(self, path: str) -> None:
        self.reached[path] += 1

    # -- conversions ---------------------------------------------------------------------
    def keys_array(self, keys: list[int]) -> np.ndarray:
        kb = self.g.key_bytes
        return np.frombuffer(b"".join(k.to_bytes(kb, "big") for k in keys), dtype=np.uint8).reshape(-1, kb).copy()

    def values_array(self, values: list[bytes]) -> np.ndarray:
        vb = self.g.value_bytes
        return np.frombuffer(b"".join(values), dtype=np.uint8).reshape(-1, vb).copy()

    # -- data plane ----------------------------------------------------------------------
    def _note_batch(self, keys: list[int]) -> None:
        if len(set(keys)) < len(keys):
            self.mark("repeated key in batch")

    def _note_copies(self, key: int, op: str) -> None:
        copies = self.oracle.copies(key)
        if len(copies) > 1:
            self.mark(f"{op} with duplicate copies")
            values = {self.oracle.slot(*c)[1] for c in copies}
            if len(values) > 1:
                self.mark(f"{op} with duplicate copies of different values")
            if any(b == self.g.ways for b, _ in copies) and any(b < self.g.ways for b, _ in copies):
                self.mark(f"{op} with copies in a way and the stash")
            if all(b == self.g.ways for b, _ in copies) and len(values) > 1:
                self.mark(f"{op} with several copies only in the stash")

    def set(self, keys: list[int], values: list[bytes]) -> None:
        self._note_batch(keys)
        status = self.model.set_batch(self.keys_array(keys), self.values_array(values))
        expected = []
        for k, v in zip(keys, values):
            self._note_copies(k, "SET")
            expected.append(self.oracle.set(k, v))
            self.mark(f"SET {expected[-1].name}")
        assert status.dtype == np.uint8 and status.shape == (len(keys),)
        assert [SetStatus(int(s)) for s in status] == expected, (keys, values)
        if SetStatus.FULL in expected and SetStatus.FULL != expected[-1]:
            self.mark("SET FULL then a later SET in the same batch")
        first: dict[int, int] = {}
        for i, (k, s) in enumerate(zip(keys, expected)):
            j = first.setdefault(k, i)
            if j < i and s == SetStatus.UPDATED and expected[j] != SetStatus.UPDATED:
                self.mark("SET batch: inserted then updated by a repeat")

    def get(self, keys: list[int]) -> None:
        self._note_batch(keys)
        result = self.model.get_batch(self.keys_array(keys))
        vb = self.g.value_bytes
        assert result.hit.shape == (len(keys),) and result.values.shape == (len(keys), vb)
        for i, k in enumerate(keys):
            self._note_copies(k, "GET")
            value = self.oracle.get(k)
            assert bool(result.hit[i]) == (value is not None), (i, k)
            assert result.values[i].tobytes() == (value if value is not None else bytes(vb)), (i, k)
            self.mark("GET HIT" if value is not None else "GET MISS")

    def lookup(self, keys: list[int]) -> None:
        self._note_batch(keys)
        result = self.model.lookup_batch(self.keys_array(keys))
        vb = self.g.value_bytes
        assert result.kind.shape == (len(keys),) and result.entry.shape == (len(keys),)
        for i, k in enumerate(keys):
            self._note_copies(k, "LOOKUP")
            self._note_rules(k)
            kind, value, entry = self.oracle.lookup(k)
            got = (MatchKind(int(result.kind[i])), result.values[i].tobytes(), int(result.entry[i]))
            assert got == (kind, value if value is not None else bytes(vb), entry), (i, k)
            self.mark(f"LOOKUP {kind.name}")

    def _note_rules(self, key: int) -> None:
        if self.oracle.copies(key):
            if any(r is not None and r.valid and key & r.mask == r.match for r in self.oracle.rules):
                self.mark("LOOKUP exact beats a matching rule")
            return
        matching = [(e, r) for e, r in enumerate(self.oracle.rules)
                    if r is not None and r.valid and key & r.mask == r.match]
        if len(matching) > 1:
            top = max(r.priority for _, r in matching)
            if sum(r.priority == top for _, r in matching) > 1:
                self.mark("LOOKUP rule tie (lowest entry wins)")
            if matching[0][1].priority < top:
                self.mark("LOOKUP higher priority beats lower entry index")
        if any(r is not None and not r.valid and key & r.mask == r.match for r in self.oracle.rules):
            self.mark("LOOKUP ignores an invalid matching entry")

    def delete(self, keys: list[int]) -> None:
        self._note_batch(keys)
        status = self.model.delete_batch(self.keys_array(keys))
        expected = []
        for k in keys:
            self._note_copies(k, "DEL")
            expected.append(self.oracle.delete(k))
            self.mark(f"DEL {expected[-1].name}")
        assert status.shape == (len(keys),)
        assert [DelStatus(int(s)) for s in status] == expected, keys

    # -- control -------------------------------------------------------------------------
    def _both(self, name: str, model_call, oracle_call):
        """Run a control op on both; both must refuse (CommandError) or both succeed."""
        try:
            expected = oracle_call()
        except CommandError:
            with pytest.raises(CommandError):
                model_call()
            self.mark(f"{name} refused")
            return None, None
        got = model_call()
        self.mark(f"{name} done")
        return got, expected

    def read_slot(self, bank: int, index: int) -> None:
        got, expected = self._both("READ_SLOT", lambda: self.model.read_slot(bank, index),
                                   lambda: self.oracle.read_slot(bank, index))
        if expected is not None:
            valid, key, value = got
            assert valid == expected[0]
            if valid:
                assert (int.from_bytes(key, "big"), value) == (expected[1], expected[2])

    def write_slot(self, bank: int, index: int, valid: bool, key: int, value: bytes) -> None:
        if valid and self.oracle.good_address(bank, index):
            if self.oracle.copies(key) and (bank, index) not in self.oracle.copies(key):
                if bank == self.g.ways or self.oracle.rows_of(key)[bank] == index:
                    self.mark("WRITE_SLOT creates a duplicate copy")
            if bank < self.g.ways and self.oracle.rows_of(key)[bank] != index:
                self.mark("WRITE_SLOT misplaced entry")
        self._both("WRITE_SLOT",
                   lambda: self.model.write_slot(bank, index, valid, key.to_bytes(self.g.key_bytes, "big"), value),
                   lambda: self.oracle.write_slot(bank, index, valid, key, value))

    def move_slot(self, b1: int, i1: int, b2: int, i2: int) -> None:
        self._both("MOVE", lambda: self.model.move_slot(b1, i1, b2, i2),
                   lambda: self.oracle.move_slot(b1, i1, b2, i2))

    def write_rule(self, entry: int, rule: RuleEntry) -> None:
        self._both("WRITE_RULE", lambda: self.model.write_rule(entry, rule),
                   lambda: self.oracle.write_rule(entry, rule))

    def read_rule(self, entry: int) -> None:
        got, expected = self._both("READ_RULE", lambda: self.model.read_rule(entry),
                                   lambda: self.oracle.read_rule(entry))
        if got is not None:
            if expected is None:  # never written: only `valid = False` is defined
                assert got.valid is False
            else:
                assert tuple(got) == tuple(expected)

    def clear_table(self) -> None:
        self.model.clear_table()
        self.oracle.clear_table()
        self.mark("CLEAR_TABLE")

    def clear_counters(self) -> None:
        self.model.clear_counters()
        self.oracle.clear_counters()
        self.mark("CLEAR_COUNTERS")

    # -- state comparison ----------------------------------------------------------------
    def check_counters(self) -> None:
        assert self.model.counters() == self.oracle.counter_values()
        assert [int(h) for h in self.model.rule_hits()] == self.oracle.rule_hit
        lookups = self.oracle.counters
        assert lookups["lookups"] == (lookups["exact_hits"] + lookups["rule_hits"] + lookups["misses"]) % (1 << 64)

    def check_counters_one_by_one(self) -> None:
        """The generic register reads (read_counter / read_rule_hits) agree too."""
        expected = self.oracle.counter_values()
        assert [self.model.read_counter(i) for i in range(len(expected))] == list(expected.values())
        assert [self.model.read_rule_hits(e) for e in range(self.g.rules)] == self.oracle.rule_hit

    def check_slots(self) -> None:
        numbers, batch = self.model.valid_slots()
        got = [(int(n), int.from_bytes(k.tobytes(), "big"), v.tobytes())
               for n, k, v in zip(numbers, batch.keys, batch.values)]
        assert got == self.oracle.valid_slots()
        assert batch.valid.all()

    def check_all(self) -> None:
        self.check_counters()
        self.check_slots()
        for e in range(self.g.rules):
            self.read_rule(e)


# --------------------------------------------------------------------------------------------
# Random operation generator shared by the deterministic tests (hypothesis has its own rules).
# --------------------------------------------------------------------------------------------
def random_key_pool(rng: random.Random, g: Geometry, size: int) -> list[int]:
    pool = {0, 1, (1 << g.key_width) - 1}
    while len(pool) < size:
        pool.add(rng.getrandbits(g.key_width) if rng.random() < 0.8 else rng.getrandbits(16))
    return sorted(pool)


def random_mask(rng: random.Random, width: int) -> int:
    choice = rng.random()
    if choice < 0.15:
        return 0
    if choice < 0.25:
        return (1 << width) - 1
    bits = rng.randint(1, 4)
    mask = 0
    for _ in range(bits):
        mask |= 1 << rng.randrange(width)
    return mask


def random_step(h: Harness, rng: random.Random, pool: list[int], max_batch: int = 20) -> None:
    g = h.g
    vb = g.value_bytes
    value = lambda: bytes(rng.getrandbits(8) for _ in range(vb))  # noqa: E731
    batch = lambda: [rng.choice(pool) for _ in range(rng.randint(1, max_batch))]  # noqa: E731
    op = rng.random()
    if op < 0.30:
        keys = batch()
        h.set(keys, [value() for _ in keys])
    elif op < 0.42:
        h.get(batch())
    elif op < 0.56:
        h.lookup(batch())
    elif op < 0.70:
        h.delete(batch())
    elif op < 0.76:  # a copy in one of the key's candidate slots or the stash (often a duplicate)
        key = rng.choice(pool)
        bank = rng.randrange(g.ways + 1)
        if bank < g.ways:
            h.write_slot(bank, h.oracle.rows_of(key)[bank], True, key, value())
        elif g.stash:
            h.write_slot(bank, rng.randrange(g.stash), True, key, value())
    elif op < 0.77:  # two stash copies of one key with different values
        if g.stash >= 2:
            key = rng.choice(pool)
            i, j = rng.sample(range(g.stash), 2)
            h.write_slot(g.ways, i, True, key, value())
            h.write_slot(g.ways, j, True, key, value())
    elif op < 0.79:  # any address, valid or not, possibly bad or misplaced
        h.write_slot(rng.randint(-1, g.ways + 1), rng.randint(-1, g.rows), rng.random() < 0.7,
                     rng.choice(pool), value())
    elif op < 0.85:
        full = [(n // g.rows, n % g.rows) if n < g.way_slots else (g.ways, n - g.way_slots)
                for n, _, _ in h.oracle.valid_slots()]
        if full and rng.random() < 0.7:  # a MOVE that should succeed (if the destination is free)
            b1, i1 = rng.choice(full)
            b2 = rng.choice([b for b in range(g.ways + 1) if b != b1])
            i2 = rng.randrange(g.rows) if b2 < g.ways else rng.randrange(max(g.stash, 1))
        else:
            b1, b2 = rng.randint(-1, g.ways + 1), rng.randint(-1, g.ways + 1)
            i1, i2 = rng.randint(-1, g.rows), rng.randint(-1, g.rows)
        h.move_slot(b1, i1, b2, i2)
    elif op < 0.93:
        mask = random_mask(rng, g.key_width)
        match = rng.choice(pool) & mask
        if rng.random() < 0.05:
            match |= 1 << rng.randrange(g.key_width)  # possibly a bit outside the mask
        prio = rng.randrange(1 << g.prio_width) if rng.random() < 0.93 else (1 << g.prio_width) + rng.randrange(3)
        entry = rng.randint(0, g.rules) if rng.random() < 0.95 else rng.choice([-1, g.rules + 5])
        h.write_rule(entry, RuleEntry(rng.random() < 0.9, match, mask, prio, value()))
    elif op < 0.95:
        h.read_rule(rng.randint(-1, g.rules))
    elif op < 0.97:
        h.read_slot(rng.randint(-1, g.ways + 1), rng.randint(-1, g.rows))
    elif op < 0.985:
        h.clear_counters()
    else:
        h.clear_table()


def random_geometry(rng: random.Random) -> Geometry:
    return Geometry(
        key_width=144 if rng.random() < 0.85 else 288,
        value_width=rng.choice([32, 32, 64, 256]),
        ways=rng.randint(2, 4),
        rows=rng.choice([2, 4, 8]),
        stash=rng.randint(0, 3),
        rules=rng.randint(0, 6),
        prio_width=rng.randint(1, 4),
        hash_seed=DEFAULT_HASH_SEED if rng.random() < 0.5 else rng.getrandbits(64),
    )


# Paths that the random operations must be shown to reach.
REQUIRED_PATHS = [
    "SET INSERTED", "SET INSERTED_STASH", "SET UPDATED", "SET FULL",
    "SET FULL then a later SET in the same batch", "SET batch: inserted then updated by a repeat",
    "GET HIT", "GET MISS", "LOOKUP EXACT", "LOOKUP RULE", "LOOKUP MISS",
    "LOOKUP rule tie (lowest entry wins)", "LOOKUP higher priority beats lower entry index",
    "LOOKUP exact beats a matching rule", "LOOKUP ignores an invalid matching entry",
    "DEL DELETED", "DEL NOT_FOUND", "repeated key in batch",
    "WRITE_SLOT creates a duplicate copy", "WRITE_SLOT misplaced entry",
    "GET with duplicate copies of different values", "LOOKUP with duplicate copies of different values",
    "SET with duplicate copies", "DEL with duplicate copies", "SET with copies in a way and the stash",
    "GET with several copies only in the stash", "LOOKUP with several copies only in the stash",
    "MOVE done", "MOVE refused", "WRITE_SLOT refused", "READ_SLOT refused", "READ_SLOT done",
    "WRITE_RULE done", "WRITE_RULE refused", "READ_RULE done", "READ_RULE refused",
    "CLEAR_TABLE", "CLEAR_COUNTERS",
]


def test_paths_reached() -> None:
    """Seeded random runs over many small geometries; every path of REQUIRED_PATHS occurs."""
    rng = random.Random(20240611)
    reached: Counter = Counter()
    for _ in range(60):
        g = random_geometry(rng)
        h = Harness(g, reached)
        pool = random_key_pool(rng, g, rng.randint(3, 2 * g.capacity + 2))
        for _ in range(60):
            random_step(h, rng, pool)
            h.check_counters()
            h.check_slots()
        h.check_all()
        h.check_counters_one_by_one()
    missing = [p for p in REQUIRED_PATHS if not reached[p]]
    assert not missing, f"never reached: {missing}\nreached: {dict(reached)}"


def test_large_table_matches_contract() -> None:
    """ROWS 1024: 20k random data-plane ops in batches of ~500, model == oracle exactly."""
    rng = random.Random(7)
    g = Geometry(key_width=144, value_width=64, ways=4, rows=1024, stash=8, rules=16, prio_width=4)
    h = Harness(g)
    pool = random_key_pool(rng, g, 5000)  # more keys than the 4104 slots: FULL happens
    for e in range(g.rules):
        mask = random_mask(rng, g.key_width)
        h.write_rule(e, RuleEntry(True, rng.choice(pool) & mask, mask, rng.randrange(16),
                                  rng.getrandbits(64).to_bytes(8, "big")))
    done = 0
    while done < 20_000:
        n = rng.randint(400, 600)
        keys = [rng.choice(pool) for _ in range(n)]
        op = rng.random()
        if op < 0.45:
            h.set(keys, [rng.getrandbits(64).to_bytes(8, "big") for _ in keys])
        elif op < 0.6:
            h.get(keys)
        elif op < 0.8:
            h.lookup(keys)
        else:
            h.delete(keys[: n // 3])
        h.check_counters()
        done += n
    h.check_slots()
    # batches longer than the model's vectorization chunk (CHUNK = 65536): still sequential (§7)
    big = [rng.choice(pool) for _ in range(70_000)]
    h.delete(big[:30_000])
    h.set(big, [rng.getrandbits(64).to_bytes(8, "big") for _ in big])
    h.lookup(big)
    h.delete(big)
    h.check_counters()
    h.check_slots()
    assert h.reached["SET FULL"] and h.reached["SET INSERTED_STASH"] and h.reached["LOOKUP RULE"]


# --------------------------------------------------------------------------------------------
# The hypothesis state machine
# --------------------------------------------------------------------------------------------
geometries = st.builds(
    Geometry,
    key_width=st.sampled_from([144, 144, 144, 144, 288]),
    value_width=st.sampled_from([32, 64, 256]),
    ways=st.integers(2, 4),
    rows=st.sampled_from([2, 4, 8]),
    stash=st.integers(0, 3),
    rules=st.integers(0, 6),
    prio_width=st.integers(1, 4),
    hash_seed=st.one_of(st.just(DEFAULT_HASH_SEED), st.integers(0, (1 << 64) - 1)),
)


class ModelVsContract(RuleBasedStateMachine):
    h: Harness
    pool: list[int]

    @initialize(g=geometries, data=st.data())
    def setup(self, g: Geometry, data) -> None:
        self.h = Harness(g)
        width = g.key_width
        keys = st.one_of(st.integers(0, (1 << width) - 1), st.integers(0, 255))
        self.pool = data.draw(st.lists(keys, min_size=2, max_size=2 * g.capacity + 2, unique=True), label="pool")

    # -- helpers ------------------------------------------------------------------------
    def _stored(self) -> list[int]:
        return sorted({key for _, key, _ in self.h.oracle.valid_slots()})

    def _key(self, data) -> int:
        """A pool key, or (often) one that is stored now, so hits and copies are frequent."""
        stored = self._stored()
        if stored and data.draw(st.booleans(), label="stored key"):
            return data.draw(st.sampled_from(stored), label="key")
        return data.draw(st.sampled_from(self.pool), label="key")

    def _keys(self, data) -> list[int]:
        n = data.draw(st.integers(1, 20), label="batch length")
        return [self._key(data) for _ in range(n)]

    def _value(self, data) -> bytes:
        vb = self.h.g.value_bytes
        return data.draw(st.one_of(st.binary(min_size=vb, max_size=vb), st.just(bytes(vb))), label="value")

    def _bank(self, data, bad: bool = True) -> int:
        g = self.h.g
        return data.draw(st.integers(-1 if bad else 0, g.ways + (1 if bad else 0)), label="bank")

    def _index(self, data, bank: int, bad: bool = True) -> int:
        g = self.h.g
        top = g.rows if bank != g.ways else g.stash
        if bad:
            return data.draw(st.integers(-1, max(top, g.rows)), label="index")
        return data.draw(st.integers(0, top - 1), label="index")

    # -- data plane ---------------------------------------------------------------------
    @rule(data=st.data())
    def set_batch(self, data) -> None:
        keys = self._keys(data)
        self.h.set(keys, [self._value(data) for _ in keys])

    @rule(data=st.data())
    def set_batch_again(self, data) -> None:  # SETs twice as likely: the table fills up
        self.set_batch(data)

    @rule(data=st.data())
    def get_batch(self, data) -> None:
        self.h.get(self._keys(data))

    @rule(data=st.data())
    def lookup_batch(self, data) -> None:
        self.h.lookup(self._keys(data))

    @rule(data=st.data())
    def delete_batch(self, data) -> None:
        self.h.delete(self._keys(data))

    # -- control ------------------------------------------------------------------------
    @rule(data=st.data())
    def write_copy(self, data) -> None:
        """WRITE_SLOT a pool key into one of its own candidate slots or a stash slot."""
        g = self.h.g
        key = self._key(data)
        bank = data.draw(st.integers(0, g.ways if g.stash else g.ways - 1), label="bank")
        index = self.h.oracle.rows_of(key)[bank] if bank < g.ways else data.draw(st.integers(0, g.stash - 1))
        self.h.write_slot(bank, index, True, key, self._value(data))

    @rule(data=st.data())
    def write_stash_copies(self, data) -> None:
        """Two stash copies of one key (first copy = lowest stash index when no way holds it)."""
        g = self.h.g
        if g.stash < 2:
            return
        key = self._key(data)
        i, j = data.draw(st.lists(st.integers(0, g.stash - 1), min_size=2, max_size=2, unique=True))
        self.h.write_slot(g.ways, i, True, key, self._value(data))
        self.h.write_slot(g.ways, j, True, key, self._value(data))

    @rule(data=st.data(), valid=st.booleans())
    def write_slot_anywhere(self, data, valid: bool) -> None:
        bank = self._bank(data)
        index = self._index(data, bank)
        key = data.draw(st.sampled_from(self.pool), label="key")
        self.h.write_slot(bank, index, valid, key, self._value(data))

    @rule(data=st.data())
    def move_valid_entry(self, data) -> None:
        g = self.h.g
        full = [(n // g.rows, n % g.rows) if n < g.way_slots else (g.ways, n - g.way_slots)
                for n, _, _ in self.h.oracle.valid_slots()]
        if not full:
            return
        b1, i1 = data.draw(st.sampled_from(full), label="src")
        b2 = data.draw(st.sampled_from([b for b in range(g.ways + 1) if b != b1 and (b < g.ways or g.stash)]))
        i2 = self._index(data, b2, bad=False)
        self.h.move_slot(b1, i1, b2, i2)

    @rule(data=st.data())
    def move_anything(self, data) -> None:
        b1 = self._bank(data)
        i1 = self._index(data, b1)
        b2 = self._bank(data)
        i2 = self._index(data, b2)
        self.h.move_slot(b1, i1, b2, i2)

    @rule(data=st.data())
    def read_slot(self, data) -> None:
        bank = self._bank(data)
        self.h.read_slot(bank, self._index(data, bank))

    @rule(data=st.data())
    def write_rule(self, data) -> None:
        g = self.h.g
        width = g.key_width
        bits = data.draw(st.lists(st.integers(0, width - 1), max_size=4), label="mask bits")
        mask = sum({1 << b for b in bits})
        mask = data.draw(st.sampled_from([mask, mask, mask, 0, (1 << width) - 1]), label="mask")
        match = data.draw(st.sampled_from(self.pool), label="match from") & mask
        if data.draw(st.integers(0, 19), label="stray bit") == 0:
            match |= 1 << data.draw(st.integers(0, width - 1))
        bad = data.draw(st.integers(0, 9), label="bad")  # 8: priority too wide, 9: bad entry
        top = 1 << g.prio_width
        prio = data.draw(st.integers(0, top - 1) if bad != 8 else st.integers(top, top + 2), label="prio")
        entry = data.draw(st.integers(0, g.rules - 1) if bad != 9 and g.rules else
                          st.sampled_from([-1, g.rules, g.rules + 1]), label="entry")
        valid = data.draw(st.integers(0, 9), label="valid") < 9
        self.h.write_rule(entry, RuleEntry(valid, match, mask, prio, self._value(data)))

    @rule(data=st.data())
    def write_rule_again(self, data) -> None:  # twice as likely: ties need several entries
        self.write_rule(data)

    @rule(data=st.data())
    def read_rule(self, data) -> None:
        self.h.read_rule(data.draw(st.integers(-1, self.h.g.rules)))

    @rule(which=st.integers(0, 9))
    def clear(self, which: int) -> None:
        """CLEAR_COUNTERS or CLEAR_TABLE, rarely (0 shrinks to doing nothing)."""
        if which == 8:
            self.h.clear_counters()
        elif which == 9:
            self.h.clear_table()

    # -- after every step ---------------------------------------------------------------
    @invariant()
    def same_state(self) -> None:
        if not hasattr(self, "h"):
            return
        self.h.check_counters()
        self.h.check_slots()

    def teardown(self) -> None:
        if hasattr(self, "h"):
            self.h.check_all()
            for path in self.h.reached:
                event(path)


def test_model_matches_contract_hypothesis() -> None:
    run_state_machine_as_test(ModelVsContract, settings=settings(
        max_examples=200, stateful_step_count=40, deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large]))


# --------------------------------------------------------------------------------------------
# Hand-written cases of §5 / §7 (small, explicit, readable)
# --------------------------------------------------------------------------------------------
def colliding_keys(g: Geometry, count: int, seed: int = 1) -> list[int]:
    """Keys that share all their candidate rows (so they fill one set of slots)."""
    rng = random.Random(seed)
    o = ContractOracle(g)
    first = rng.getrandbits(g.key_width)
    target = o.rows_of(first)
    out = [first]
    while len(out) < count:
        k = rng.getrandbits(g.key_width)
        if o.rows_of(k) == target:
            out.append(k)
    return out


def test_full_and_stash_paths_explicit() -> None:
    g = Geometry(key_width=144, value_width=32, ways=2, rows=2, stash=1, rules=0, prio_width=1)
    h = Harness(g)
    keys = colliding_keys(g, 4)
    v = [bytes([i]) * 4 for i in range(8)]
    # one batch: two way inserts, a stash insert, a FULL, an update by a repeat, FULL repeated
    h.set([keys[0], keys[1], keys[2], keys[3], keys[0], keys[3]], [v[0], v[1], v[2], v[3], v[4], v[5]])
    assert h.oracle.set_batch([], []) == []
    h.check_all()
    assert [s for s in ("SET INSERTED", "SET INSERTED_STASH", "SET FULL") if not h.reached[s]] == []
    assert h.model.counters()["insert_failures"] == 2
    # DEL repeated in a batch: DELETED once, NOT_FOUND after
    h.delete([keys[2], keys[2], keys[3]])
    h.check_all()
    assert h.model.counters()["deletes"] == 1 and h.model.counters()["delete_misses"] == 2


def test_duplicate_copies_explicit() -> None:
    """Copies made with WRITE_SLOT: first copy answers, SET updates all, DEL removes all."""
    g = Geometry(key_width=144, value_width=32, ways=3, rows=4, stash=2, rules=0, prio_width=1)
    h = Harness(g)
    k = 12345
    rows = h.oracle.rows_of(k)
    h.write_slot(2, rows[2], True, k, b"CCCC")
    h.write_slot(3, 1, True, k, b"SSSS")
    h.write_slot(1, rows[1], True, k, b"BBBB")
    h.get([k])  # way 1 holds the first copy
    h.set([k], [b"NNNN"])
    h.check_all()
    assert h.model.counters()["occupancy"] == 3
    h.delete([k, k])
    h.check_all()
    assert h.model.counters()["occupancy"] == 0
    assert h.reached["GET with duplicate copies of different values"]


def test_counters_wrap_modulo_2_64() -> None:
    """§6: 64-bit counters wrap. (White-box: the registers are preset through the model's
    internals, there being no operation that writes a counter.)"""
    g = Geometry(key_width=144, value_width=32, ways=2, rows=2, stash=0, rules=1, prio_width=1)
    h = Harness(g)
    h.write_rule(0, RuleEntry(True, 0, 0, 0, b"RULE"))
    top = (1 << 64) - 1
    preset = dict.fromkeys(h.oracle.counters, top)
    preset["exact_hits"], preset["misses"] = top - 2, 3  # keeps lookups = exact + rule + misses
    h.model._counters = [preset.get(name, 0) for name in h.model.counters()]  # occupancy 0
    h.model._rule_hits[:] = np.uint64(top)
    h.oracle.counters.update(preset)
    h.oracle.rule_hit = [top]
    h.lookup([5])
    h.get([5])
    h.set([5], [b"vvvv"])
    h.delete([5, 5])
    h.check_counters()
    counters = h.model.counters()
    assert (counters["lookups"], counters["rule_hits"], counters["inserts"], counters["deletes"]) == (1, 0, 0, 0)
    assert h.model.rule_hits().tolist() == [0]


def test_malformed_control_arguments_change_nothing() -> None:
    """Wrong-length raw keys/values or a match wider than KEY_W are refused by the model before
    any state changes (they are outside the contract's register widths)."""
    g = Geometry(key_width=144, value_width=32, ways=2, rows=2, stash=1, rules=2, prio_width=2)
    h = Harness(g)
    h.set([1, 2], [b"aaaa", b"bbbb"])
    h.write_rule(0, RuleEntry(True, 0, 0, 1, b"rule"))
    before = (h.model.counters(), h.model.valid_slots()[0].tolist(), h.model.read_rule(0))
    bad_calls = [
        lambda: h.model.write_slot(0, 0, True, b"short", b"vvvv"),
        lambda: h.model.write_slot(0, 1, False, bytes(18), b"v"),
        lambda: h.model.write_rule(0, RuleEntry(False, 1 << 144, 0, 1, b"rule")),
        lambda: h.model.write_rule(0, RuleEntry(False, 0, 1 << 144, 1, b"rule")),
        lambda: h.model.write_rule(0, RuleEntry(False, 0, 0, 1, b"toolong")),
    ]
    for call in bad_calls:
        with pytest.raises((ValueError, OverflowError)):
            call()
        assert (h.model.counters(), h.model.valid_slots()[0].tolist(), h.model.read_rule(0)) == before
    h.check_all()


def fingerprint_twin(g: Geometry, key: int) -> int:
    """A different key with the same full hashes in ways 0 and 1 (H3 is linear over GF(2)).

    The model groups a batch's repeated keys by those 64 hash bits and must still tell such
    twins apart; a GF(2) dependency among 65 key bits gives a non-zero x with H_0(x)=H_1(x)=0.
    """
    from pynq_kv.hashing import h3_matrix

    q0, q1 = h3_matrix(g.hash_seed, 0, g.key_width), h3_matrix(g.hash_seed, 1, g.key_width)
    basis: dict[int, tuple[int, int]] = {}  # pivot bit -> (vector, key bits combined)
    for bit in range(g.key_width):
        vector, combo = (q0[bit] << 32) | q1[bit], 1 << bit
        while vector:
            pivot = vector.bit_length() - 1
            if pivot not in basis:
                basis[pivot] = (vector, combo)
                break
            vector ^= basis[pivot][0]
            combo ^= basis[pivot][1]
        else:
            return key ^ combo
    raise AssertionError("no dependency found")


def test_batch_tells_fingerprint_twins_apart() -> None:
    g = Geometry(key_width=144, value_width=32, ways=2, rows=64, stash=2, rules=0, prio_width=1)
    h = Harness(g)
    a = 0x1234
    b = fingerprint_twin(g, a)
    assert a != b and h.oracle.rows_of(a) == h.oracle.rows_of(b)
    h.set([a, b, a, b], [b"AAAA", b"BBBB", b"aaaa", b"bbbb"])
    h.get([a, b])
    h.delete([b, a, b])
    h.check_all()
    assert h.model.counters()["inserts"] == 2 and h.model.counters()["deletes"] == 2
