"""The reference model: docs/engine.md implemented in numpy, bit-exact with the RTL.

Every batch operation is vectorized yet means exactly the sequential application of its
operations (§7). SET batches get that by placing new keys way by way: in way w, among the
keys still unplaced whose candidate slot is free, the earliest key per slot wins — which is
what the earliest key would have done had the keys been applied one after another.
"""

from __future__ import annotations

import numpy as np

from .backend import (
    COUNTER_IDS,
    COUNTER_NAMES,
    MASK64,
    Backend,
    DelStatus,
    GetResult,
    LookupResultBatch,
    MatchKind,
    RuleEntry,
    SetStatus,
    SlotBatch,
    register_backend,
)
from .errors import CommandError
from .geometry import Geometry
from .hashing import hash_keys

CHUNK = 1 << 16  # keys per vectorized step: keeps temporaries small and cache-friendly
# SetStatus codes as plain ints: Enum attribute access costs a microsecond in hot paths.
_INSERTED, _INSERTED_STASH, _UPDATED, _FULL = (int(s) for s in SetStatus)


def _word_dtype(nbytes: int) -> np.dtype:
    """Widest unsigned word that tiles nbytes exactly, so rows compare word by word."""
    for size in (8, 4, 2):
        if nbytes % size == 0:
            return np.dtype(f"u{size}")
    return np.dtype("u1")


class ModelBackend(Backend):
    """In-memory engine; the table is stored as flat slot arrays of key and value words."""

    name = "model"

    def __init__(self, geometry: Geometry) -> None:
        super().__init__(geometry)
        g = geometry
        self._kdt = _word_dtype(g.key_bytes)
        self._vdt = _word_dtype(g.value_bytes)
        self._keys = np.zeros((g.capacity, g.key_bytes // self._kdt.itemsize), dtype=self._kdt)
        self._values = np.zeros((g.capacity, g.value_bytes // self._vdt.itemsize), dtype=self._vdt)
        self._valid = np.zeros(g.capacity, dtype=bool)
        # The same key memory seen as one opaque item per slot: whole-key equality is then one
        # memcmp per slot, several times faster in numpy than comparing words and reducing.
        self._key_row = np.dtype((np.void, g.key_bytes))
        self._key_items = self._keys.view(self._key_row).reshape(-1)
        self._rule_valid = np.zeros(g.rules, dtype=bool)
        self._rule_match = np.zeros((g.rules, self._keys.shape[1]), dtype=self._kdt)
        self._rule_mask = np.zeros((g.rules, self._keys.shape[1]), dtype=self._kdt)
        self._rule_prio = np.zeros(g.rules, dtype=np.int64)
        self._rule_values = np.zeros((g.rules, self._values.shape[1]), dtype=self._vdt)
        self._rule_hits = np.zeros(g.rules, dtype=np.uint64)
        self._rule_order = np.zeros(0, dtype=np.int64)  # valid entries, best first
        self._counters = [0] * len(COUNTER_NAMES)

    # -- helpers -------------------------------------------------------------------------
    def _count(self, name: str, amount: int) -> None:
        index = COUNTER_IDS[name]
        self._counters[index] = (self._counters[index] + amount) & MASK64

    def _key_items_of(self, words: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(words).view(self._key_row).reshape(-1)

    def _key_words(self, keys: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(keys, dtype=np.uint8).view(self._kdt)

    def _value_words(self, values: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(values, dtype=np.uint8).view(self._vdt)

    def _values_out(self, words: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(words).view(np.uint8).reshape(len(words), self.geometry.value_bytes)

    def _hashes(self, keys: np.ndarray) -> np.ndarray:
        g = self.geometry
        return hash_keys(keys, g.hash_seed, g.ways, g.key_width)

    def _rows(self, keys: np.ndarray) -> np.ndarray:
        return self._rows_of(self._hashes(keys))

    def _rows_of(self, hashes: np.ndarray) -> np.ndarray:
        return (hashes & np.uint32(self.geometry.rows - 1)).astype(np.int64)

    def _first_copy(self, words: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Flat slot of each key's first copy (§5.1), -1 where it has none."""
        g = self.geometry
        items = self._key_items_of(words)
        found = np.full(len(words), -1, dtype=np.int64)
        pending = np.arange(len(words))
        for way in range(g.ways):
            if not len(pending):
                return found
            slots = way * g.rows + rows[pending, way]
            hit = self._valid[slots]
            occupied = np.flatnonzero(hit)
            hit[occupied] = self._key_items.take(slots[occupied]) == items[pending[occupied]]
            found[pending[hit]] = slots[hit]
            pending = pending[~hit]
        for slot in range(g.way_slots, g.capacity):
            if not len(pending):
                break
            if self._valid[slot]:
                hit = items[pending] == self._key_items[slot]
                found[pending[hit]] = slot
                pending = pending[~hit]
        return found

    def _all_copies(self, words: np.ndarray, rows: np.ndarray) -> list[np.ndarray]:
        """(key index, flat slot) pairs of every copy, as two arrays."""
        g = self.geometry
        items = self._key_items_of(words)
        owners, slots_out = [], []
        everyone = np.arange(len(words))
        for way in range(g.ways):
            slots = way * g.rows + rows[:, way]
            hit = self._valid[slots]
            occupied = np.flatnonzero(hit)
            hit[occupied] = self._key_items.take(slots[occupied]) == items[occupied]
            owners.append(everyone[hit])
            slots_out.append(slots[hit])
        for slot in range(g.way_slots, g.capacity):
            if self._valid[slot]:
                hit = items == self._key_items[slot]
                owners.append(everyone[hit])
                slots_out.append(np.full(int(hit.sum()), slot, dtype=np.int64))
        return [np.concatenate(owners), np.concatenate(slots_out)]

    def _first_occurrence(self, keys: np.ndarray, words: np.ndarray, hashes: np.ndarray) -> np.ndarray:
        """Index of the first occurrence in the batch of each key (the batch's repeats, §7).

        Equal keys have equal hashes, so sorting by the full hashes of ways 0 and 1 groups
        repeats cheaply; the groups are then checked word by word.
        """
        n = len(words)
        if n < 2:
            return np.arange(n)
        fingerprint = (hashes[:, 0].astype(np.uint64) << np.uint64(32)) | hashes[:, 1]
        order = np.argsort(fingerprint, kind="stable")
        sorted_fp = fingerprint[order]
        starts = np.ones(n, dtype=bool)
        starts[1:] = sorted_fp[1:] != sorted_fp[:-1]
        group_start = np.maximum.accumulate(np.where(starts, np.arange(n), 0))
        representative = order[group_start]
        items = self._key_items_of(words)
        if not (items.take(order) == items.take(representative)).all():
            # Two different keys share a fingerprint: settle it exactly (rare, slower).
            flat = np.ascontiguousarray(keys).view(np.dtype((np.void, keys.shape[1]))).ravel()
            _, first, inverse = np.unique(flat, return_index=True, return_inverse=True)
            return first[inverse.ravel()]
        first = np.empty(n, dtype=np.int64)
        first[order] = representative
        return first

    # -- data plane ----------------------------------------------------------------------
    def get_batch(self, keys: np.ndarray) -> GetResult:
        hit = np.zeros(len(keys), dtype=bool)
        values = np.zeros((len(keys), self.geometry.value_bytes), dtype=np.uint8)
        for start in range(0, len(keys), CHUNK):
            part = keys[start:start + CHUNK]
            found = self._first_copy(self._key_words(part), self._rows(part))
            ok = found >= 0
            hit[start:start + CHUNK] = ok
            values[start:start + CHUNK][ok] = self._values_out(self._values.take(found[ok], axis=0))
        hits = int(hit.sum())
        self._count("lookups", len(keys))
        self._count("exact_hits", hits)
        self._count("misses", len(keys) - hits)
        return GetResult(hit, values)

    def lookup_batch(self, keys: np.ndarray) -> LookupResultBatch:
        n = len(keys)
        kind = np.zeros(n, dtype=np.uint8)
        values = np.zeros((n, self.geometry.value_bytes), dtype=np.uint8)
        entry = np.full(n, -1, dtype=np.int32)
        for start in range(0, n, CHUNK):
            part = keys[start:start + CHUNK]
            words = self._key_words(part)
            found = self._first_copy(words, self._rows(part))
            ok = found >= 0
            kind[start:start + CHUNK][ok] = MatchKind.EXACT
            values[start:start + CHUNK][ok] = self._values_out(self._values.take(found[ok], axis=0))
            pending = np.flatnonzero(~ok)
            for rule in self._rule_order:
                if not len(pending):
                    break
                hit = ((words[pending] & self._rule_mask[rule]) == self._rule_match[rule]).all(axis=1)
                winners = pending[hit] + start
                kind[winners] = MatchKind.RULE
                entry[winners] = rule
                pending = pending[~hit]
        rule_won = entry >= 0
        if rule_won.any():
            values[rule_won] = self._values_out(self._rule_values[entry[rule_won]])
            self._rule_hits += np.bincount(entry[rule_won], minlength=self.geometry.rules).astype(np.uint64)
        exact = int((kind == MatchKind.EXACT).sum())
        rule_hits = int(rule_won.sum())
        self._count("lookups", n)
        self._count("exact_hits", exact)
        self._count("rule_hits", rule_hits)
        self._count("misses", n - exact - rule_hits)
        return LookupResultBatch(kind, values, entry)

    def set_batch(self, keys: np.ndarray, values: np.ndarray) -> np.ndarray:
        if len(keys) == 1:
            return np.array([self._set_one(keys, values)], dtype=np.uint8)
        status = np.empty(len(keys), dtype=np.uint8)
        for start in range(0, len(keys), CHUNK):
            status[start:start + CHUNK] = self._set_chunk(
                keys[start:start + CHUNK], values[start:start + CHUNK])
        return status

    def _set_one(self, keys: np.ndarray, values: np.ndarray) -> int:
        """§5.4 for a single key, step by step: a batch of one costs microseconds, not a
        vectorized pass (interactive use, request-at-a-time front-ends)."""
        g = self.geometry
        item = self._key_items_of(self._key_words(keys))[0]
        value = self._value_words(values)[0]
        rows = self._rows(keys)[0]
        candidates = [way * g.rows + int(rows[way]) for way in range(g.ways)]
        copies = [slot for slot in candidates if self._valid[slot] and self._key_items[slot] == item]
        copies += [slot for slot in range(g.way_slots, g.capacity)
                   if self._valid[slot] and self._key_items[slot] == item]
        if copies:
            self._values[copies] = value
            self._count("updates", 1)
            return _UPDATED
        free = [slot for slot in candidates if not self._valid[slot]]
        status = _INSERTED
        if not free:
            free = [slot for slot in range(g.way_slots, g.capacity) if not self._valid[slot]]
            status = _INSERTED_STASH
        if not free:
            self._count("insert_failures", 1)
            return _FULL
        slot = free[0]
        self._keys[slot] = self._key_words(keys)[0]
        self._values[slot] = value
        self._valid[slot] = True
        self._count("inserts", 1)
        self._count("occupancy", 1)
        return status

    def _set_chunk(self, keys: np.ndarray, values: np.ndarray) -> np.ndarray:
        g = self.geometry
        n = len(keys)
        words = self._key_words(keys)
        value_words = self._value_words(values)
        hashes = self._hashes(keys)
        rows = self._rows_of(hashes)
        first = self._first_occurrence(keys, words, hashes)
        is_first = first == np.arange(n)
        last = np.zeros(n, dtype=np.int64)
        np.maximum.at(last, first, np.arange(n))  # last occurrence, stored at the first one

        # Keys already in the table: every copy takes the value of the last occurrence.
        uniques = np.flatnonzero(is_first)
        owners, slots = self._all_copies(words[uniques], rows[uniques])
        owners = uniques[owners]
        self._values[slots] = value_words[last[owners]]
        existed = np.zeros(n, dtype=bool)
        existed[owners] = True

        # New keys, way by way, earliest key per free slot (see module docstring).
        placed = np.full(n, -1, dtype=np.int64)
        pending = uniques[~existed[uniques]]
        for way in range(g.ways):
            if not len(pending):
                break
            cand_slots = way * g.rows + rows[pending, way]
            free = ~self._valid[cand_slots]
            _, first_pos = np.unique(cand_slots[free], return_index=True)
            winners = pending[free][first_pos]
            win_slots = cand_slots[free][first_pos]
            self._store(win_slots, words[winners], value_words[last[winners]])
            placed[winners] = win_slots
            won = np.zeros(n, dtype=bool)
            won[winners] = True
            pending = pending[~won[pending]]
        free_stash = g.way_slots + np.flatnonzero(~self._valid[g.way_slots:])
        take = min(len(free_stash), len(pending))
        if take:
            winners, win_slots = pending[:take], free_stash[:take]
            self._store(win_slots, words[winners], value_words[last[winners]])
            placed[winners] = win_slots

        status = np.full(n, SetStatus.FULL, dtype=np.uint8)
        key_placed = placed[first] >= 0
        status[key_placed] = SetStatus.UPDATED
        status[existed[first]] = SetStatus.UPDATED
        new_here = placed >= 0
        status[new_here] = np.where(placed[new_here] >= g.way_slots,
                                    SetStatus.INSERTED_STASH, SetStatus.INSERTED)
        inserted = int(new_here.sum())
        self._count("inserts", inserted)
        self._count("updates", int((status == SetStatus.UPDATED).sum()))
        self._count("insert_failures", int((status == SetStatus.FULL).sum()))
        self._count("occupancy", inserted)
        return status

    def _store(self, slots: np.ndarray, key_words: np.ndarray, value_words: np.ndarray) -> None:
        self._keys[slots] = key_words
        self._values[slots] = value_words
        self._valid[slots] = True

    def delete_batch(self, keys: np.ndarray) -> np.ndarray:
        status = np.empty(len(keys), dtype=np.uint8)
        for start in range(0, len(keys), CHUNK):
            part = keys[start:start + CHUNK]
            words = self._key_words(part)
            hashes = self._hashes(part)
            first = self._first_occurrence(part, words, hashes)
            uniques = np.flatnonzero(first == np.arange(len(part)))
            owners, slots = self._all_copies(words[uniques], self._rows_of(hashes)[uniques])
            self._valid[slots] = False
            chunk_status = np.full(len(part), DelStatus.NOT_FOUND, dtype=np.uint8)
            chunk_status[uniques[owners]] = DelStatus.DELETED
            status[start:start + CHUNK] = chunk_status
            deleted = int((chunk_status == DelStatus.DELETED).sum())
            self._count("deletes", deleted)
            self._count("delete_misses", len(part) - deleted)
            self._count("occupancy", -len(slots))
        return status

    # -- control -------------------------------------------------------------------------
    def _slot_number(self, bank: int, index: int) -> int:
        g = self.geometry
        if 0 <= bank < g.ways and 0 <= index < g.rows:
            return bank * g.rows + index
        if bank == g.ways and 0 <= index < g.stash:
            return g.way_slots + index
        self._count("cmd_errors", 1)
        raise CommandError(f"no slot at bank {bank}, index {index}")

    def read_slot(self, bank: int, index: int) -> tuple[bool, bytes, bytes]:
        slot = self._slot_number(bank, index)
        return bool(self._valid[slot]), self._keys[slot].tobytes(), self._values[slot].tobytes()

    def write_slot(self, bank: int, index: int, valid: bool, key: bytes, value: bytes) -> None:
        slot = self._slot_number(bank, index)
        key_words, value_words = self._slot_words(key, value)  # raises before anything changes
        self._count("occupancy", int(bool(valid)) - int(self._valid[slot]))
        self._keys[slot] = key_words
        self._values[slot] = value_words
        self._valid[slot] = bool(valid)

    def _slot_words(self, key: bytes, value: bytes) -> tuple[np.ndarray, np.ndarray]:
        g = self.geometry
        if len(key) != g.key_bytes or len(value) != g.value_bytes:
            raise ValueError(f"a slot holds a {g.key_bytes}-byte key and a {g.value_bytes}-byte value, "
                             f"got {len(key)} and {len(value)} bytes")
        return np.frombuffer(key, dtype=self._kdt), np.frombuffer(value, dtype=self._vdt)

    def move_slot(self, src_bank: int, src_index: int, dst_bank: int, dst_index: int) -> None:
        src = self._slot_number(src_bank, src_index)
        dst = self._slot_number(dst_bank, dst_index)
        problem = ("source and destination are in the same bank" if src_bank == dst_bank else
                   "source slot is empty" if not self._valid[src] else
                   "destination slot is occupied" if self._valid[dst] else None)
        if problem:
            self._count("cmd_errors", 1)
            raise CommandError(f"MOVE ({src_bank},{src_index}) -> ({dst_bank},{dst_index}): {problem}")
        self._keys[dst] = self._keys[src]
        self._values[dst] = self._values[src]
        self._valid[dst] = True
        self._valid[src] = False

    def _rule_index(self, entry: int) -> int:
        if not 0 <= entry < self.geometry.rules:
            self._count("cmd_errors", 1)
            raise CommandError(f"rule entry {entry} is outside 0..{self.geometry.rules - 1}")
        return entry

    def write_rule(self, entry: int, rule: RuleEntry) -> None:
        g = self.geometry
        entry = self._rule_index(entry)
        if not 0 <= rule.priority < 1 << g.prio_width:
            self._count("cmd_errors", 1)
            raise CommandError(f"priority {rule.priority} does not fit {g.prio_width} bits")
        # Encode everything first so a malformed entry (match/mask wider than KEY_W, value not
        # VALUE_BYTES long: OverflowError/ValueError) leaves the entry as it was.
        match, value = self._slot_words(rule.match.to_bytes(g.key_bytes, "big"), bytes(rule.value))
        mask = np.frombuffer(rule.mask.to_bytes(g.key_bytes, "big"), dtype=self._kdt)
        self._rule_valid[entry] = rule.valid
        self._rule_match[entry] = match
        self._rule_mask[entry] = mask
        self._rule_prio[entry] = rule.priority
        self._rule_values[entry] = value
        self._rule_hits[entry] = 0
        active = np.flatnonzero(self._rule_valid)
        self._rule_order = active[np.lexsort((active, -self._rule_prio[active]))]

    def read_rule(self, entry: int) -> RuleEntry:
        entry = self._rule_index(entry)
        return RuleEntry(
            bool(self._rule_valid[entry]),
            int.from_bytes(self._rule_match[entry].tobytes(), "big"),
            int.from_bytes(self._rule_mask[entry].tobytes(), "big"),
            int(self._rule_prio[entry]),
            self._rule_values[entry].tobytes(),
        )

    def clear_table(self) -> None:
        self._valid[:] = False
        self._counters[COUNTER_IDS["occupancy"]] = 0

    def clear_counters(self) -> None:
        occupancy = self._counters[COUNTER_IDS["occupancy"]]
        self._counters = [0] * len(COUNTER_NAMES)
        self._counters[COUNTER_IDS["occupancy"]] = occupancy
        self._rule_hits[:] = 0

    def read_counter(self, counter_id: int) -> int:
        if not 0 <= counter_id < len(COUNTER_NAMES):
            self._count("cmd_errors", 1)
            raise CommandError(f"no counter {counter_id}")
        return self._counters[counter_id]

    def read_rule_hits(self, entry: int) -> int:
        return int(self._rule_hits[self._rule_index(entry)])

    # -- fast overrides ------------------------------------------------------------------
    def counters(self) -> dict[str, int]:
        return dict(zip(COUNTER_NAMES, self._counters))

    def rule_hits(self) -> np.ndarray:
        return self._rule_hits.copy()

    def read_slots(self, banks: np.ndarray, indexes: np.ndarray) -> SlotBatch:
        g = self.geometry
        banks = np.asarray(banks, dtype=np.int64)
        indexes = np.asarray(indexes, dtype=np.int64)
        good = ((banks >= 0) & (banks < g.ways) & (indexes >= 0) & (indexes < g.rows)) | (
            (banks == g.ways) & (indexes >= 0) & (indexes < g.stash))
        if not good.all():
            bad = int(np.flatnonzero(~good)[0])
            return super().read_slots(banks[bad:bad + 1], indexes[bad:bad + 1])  # raises
        slots = np.where(banks < g.ways, banks * g.rows + indexes, g.way_slots + indexes)
        return SlotBatch(self._valid[slots].copy(),
                         np.ascontiguousarray(self._keys[slots]).view(np.uint8).reshape(len(slots), g.key_bytes),
                         self._values_out(self._values[slots]))

    def valid_slots(self, progress=None) -> tuple[np.ndarray, SlotBatch]:
        numbers = np.flatnonzero(self._valid)
        if progress:
            progress(self.geometry.capacity)
        return numbers, SlotBatch(
            np.ones(len(numbers), dtype=bool),
            np.ascontiguousarray(self._keys[numbers]).view(np.uint8).reshape(len(numbers), self.geometry.key_bytes),
            self._values_out(self._values[numbers]))

    def load_slots(self, numbers: np.ndarray, keys: np.ndarray, values: np.ndarray) -> None:
        numbers = np.asarray(numbers, dtype=np.int64)
        self._count("occupancy", int((~self._valid[numbers]).sum()))
        self._store(numbers, self._key_words(keys), self._value_words(values))

    def memory_bytes(self) -> int:
        """Bytes held by the table and rule arrays (for the memory benchmark)."""
        arrays = (self._keys, self._values, self._valid, self._rule_valid, self._rule_match,
                  self._rule_mask, self._rule_prio, self._rule_values, self._rule_hits)
        return sum(a.nbytes for a in arrays)


register_backend("model", ModelBackend)
