"""The reference model: docs/engine.md implemented in numpy, bit-exact with the RTL.

Every batch operation is vectorized yet means exactly the sequential application of its
operations (§7). A SET batch splits into keys that already have copies and keys that do not.
A slot holds one key, so the batch positions that write a copy slot are exactly the
occurrences of that slot's key: the last of them gives the slot its value (and, for DEL, the
first is the one that deletes). New keys are placed way by way: in way w, among the keys still
unplaced whose candidate slot is free, the earliest key per slot wins — which is what the
earliest key would have done had the keys been applied one after another.

Front-ends hand the model many small batches (a pipeline's worth of keys), so the common case
costs a fixed few dozen numpy calls: the batch's keys are grouped (sorted) only when new keys
appear in it more than once. The search of the table for a batch's keys — each key's first copy
(GET, LOOKUP), the update of every copy (SET) — is one C call where pynq_kv._slots was built,
and the numpy code here where it was not.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

import numpy as np

from .backend import (
    COUNTER_IDS,
    COUNTER_NAMES,
    Backend,
    DelStatus,
    GetResult,
    LookupResultBatch,
    MatchKind,
    RuleEntry,
    SetStatus,
    SlotBatch,
)
from .changelog import DEFAULT_DEPTH, ChangelogStats, ChangeLog, ChangeOp, RawChange, logged
from .errors import CommandError
from .geometry import Geometry
from .hashing import MASK64, hash_keys, row_tables
from .regmap import CONTROL_OPS

try:
    from ._slots import (first_copies as _first_copies_c, set_tagged as _set_tagged_c,
                         update_copies as _update_copies_c)
except ImportError:  # not built (no C compiler at install): the numpy searches below
    _first_copies_c = _update_copies_c = _set_tagged_c = None

CHUNK = 1 << 16  # keys per vectorized step: keeps temporaries small and cache-friendly
SMALL_BATCH = 1024  # GET batches up to this size search every way at once (see _first_copy)
# Status codes as plain ints: Enum attribute access costs a microsecond in hot paths, and numpy
# converting an IntEnum several.
_INSERTED, _INSERTED_STASH, _UPDATED, _FULL = (int(s) for s in SetStatus)
_DELETED, _NOT_FOUND = int(DelStatus.DELETED), int(DelStatus.NOT_FOUND)
_EXACT, _RULE = int(MatchKind.EXACT), int(MatchKind.RULE)


# The engine's request ports (docs/engine.md §5.7): data-plane and table operations on the
# request port, rule and counter operations (regmap.CONTROL_OPS) on the control port, and with
# LOOKUP_PORTS = 2 (issue 14, being built) a second request port with the first one's opcodes.
REQUEST_PORT = 0
CONTROL_PORT = 1
REQUEST_PORT1 = 2

# within one acceptance cycle: request port, second request port, control port
_ORDER_IN_CYCLE = {REQUEST_PORT: 0, REQUEST_PORT1: 1, CONTROL_PORT: 2}

_T = TypeVar("_T")


def engine_port(opcode: int) -> int:
    """The port an opcode belongs on; the other port refuses it (status REFUSED, cmd_errors)."""
    return CONTROL_PORT if opcode in CONTROL_OPS else REQUEST_PORT


def engine_order(accepted: Iterable[tuple[int, int, _T]]) -> list[_T]:
    """The sequential order in which the engine applies requests taken on its ports.

    accepted holds (acceptance cycle, port, request) with each port's requests in acceptance
    order. The engine applies them by acceptance cycle and, within one cycle, the request
    port's request first, then the second request port's, then the control port's
    (docs/engine.md §5.7): a WRITE_RULE accepted in cycle t is seen by every LOOKUP accepted
    after cycle t and by none accepted up to cycle t. Applying the returned requests one by
    one to ModelBackend gives the RTL's responses.
    """
    return [item for _, _, item in sorted(accepted, key=lambda a: (a[0], _ORDER_IN_CYCLE[a[1]]))]


def _word_dtype(nbytes: int) -> np.dtype:
    """Widest unsigned word that tiles nbytes exactly, so rows compare word by word."""
    for size in (8, 4, 2):
        if nbytes % size == 0:
            return np.dtype(f"u{size}")
    return np.dtype("u1")


class ModelBackend(Backend):
    """In-memory engine; the table is stored as flat slot arrays of key and value words."""

    name = "model"
    wired_data_plane = False

    def __init__(self, geometry: Geometry, changelog_depth: int = DEFAULT_DEPTH) -> None:
        super().__init__(geometry)
        self.changelog = ChangeLog(changelog_depth)  # the data-plane port's log (§10)
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
        self._key_bytes = self._keys.view(np.uint8)  # and as (capacity, KEY_BYTES) bytes, for C
        self._value_bytes = self._values.view(np.uint8)  # (capacity, VALUE_BYTES), for C
        self._way_base = np.arange(g.ways, dtype=np.int64) * g.rows  # flat slot of (w, 0)
        self._row_mask = np.uint32(g.rows - 1)  # row_w(k) = H_w(k) mod ROWS (§3 step 5)
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

    def _key_items_of(self, keys: np.ndarray) -> np.ndarray:
        """(N, KEY_BYTES) uint8 rows as N opaque items (whole-key compares, row copies)."""
        return np.ascontiguousarray(keys, dtype=np.uint8).view(self._key_row).reshape(-1)

    def _key_words(self, keys: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(keys, dtype=np.uint8).view(self._kdt)

    def _value_words(self, values: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(values, dtype=np.uint8).view(self._vdt)

    def _values_out(self, words: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(words).view(np.uint8).reshape(len(words), self.geometry.value_bytes)

    def _hashes(self, keys: np.ndarray) -> np.ndarray:
        g = self.geometry
        return hash_keys(keys, g.hash_seed, g.ways, g.key_width)

    def _candidates_of(self, hashes: np.ndarray) -> np.ndarray:
        """Flat slot numbers of every key's candidate slots (§4), (N, ways) int64."""
        return (hashes & self._row_mask) + self._way_base

    def _candidates(self, keys: np.ndarray) -> np.ndarray:
        return self._candidates_of(self._hashes(keys))

    def _candidate_hits(self, items: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        """(N × ways) flat mask: candidate slot holds a valid copy of the key. Only occupied
        slots are compared, so the work follows the load, not the batch size."""
        ways = candidates.shape[1]
        flat = candidates.ravel()
        hit = self._valid[flat]
        occupied = np.flatnonzero(hit)
        hit[occupied] = self._key_items.take(flat[occupied]) == items[occupied // ways]
        return hit

    def _stash_hits(self, items: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """(N, S) mask of copies among the S valid stash slots, and those slots; None if the
        stash is empty (the usual case: the host moves stash entries out)."""
        g = self.geometry
        stash = g.way_slots + np.flatnonzero(self._valid[g.way_slots:])
        if not len(stash):
            return None
        return items[:, None] == self._key_items[stash], stash

    def _first_copies(self, keys: np.ndarray) -> np.ndarray:
        """Flat slot of each raw key's first copy (§5.1), -1 where it has none: one C call
        where pynq_kv._slots was built, else _first_copy."""
        hashes = self._hashes(keys)
        if _first_copies_c is None:
            return self._first_copy(self._key_items_of(keys), self._candidates_of(hashes))
        found = np.empty(len(keys), dtype=np.int64)
        _first_copies_c(np.ascontiguousarray(keys, dtype=np.uint8), np.ascontiguousarray(hashes),
                        self._valid, self._key_bytes, self.geometry.rows, found)
        return found

    def _first_copy(self, items: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        """Flat slot of each key's first copy (§5.1), -1 where it has none.

        Flat slot numbers grow with the way and then the stash index, which is §5.1's order
        of preference: the first copy is the copy with the smallest slot number. Small
        batches look in every way at once (fewest numpy calls); large ones look for a key
        only until a way holds it (at high load that saves about half the key compares).
        """
        n, ways = candidates.shape
        none = self.geometry.capacity
        if n <= SMALL_BATCH:
            hit = self._candidate_hits(items, candidates).reshape(n, ways)
            found = np.where(hit, candidates, none).min(axis=1)
        else:
            found = np.full(n, none, dtype=np.int64)
            pending = np.arange(n)
            for way in range(ways):
                slots = candidates[pending, way]
                hit = self._valid[slots]
                occupied = np.flatnonzero(hit)
                hit[occupied] = self._key_items.take(slots[occupied]) == items[pending[occupied]]
                found[pending[hit]] = slots[hit]
                pending = pending[~hit]
        missing = np.flatnonzero(found == none)
        stash = self._stash_hits(items[missing]) if len(missing) else None
        if stash is not None:
            found[missing] = np.where(stash[0], stash[1], none).min(axis=1)
        found[found == none] = -1
        return found

    def _all_copies(self, items: np.ndarray, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(batch position, flat slot) of every copy of every key."""
        hit = np.flatnonzero(self._candidate_hits(items, candidates))
        owners, slots = hit // self.geometry.ways, candidates.ravel()[hit]
        stash = self._stash_hits(items)
        if stash is not None:
            stash_owners, stash_index = np.nonzero(stash[0])
            owners = np.concatenate([owners, stash_owners])
            slots = np.concatenate([slots, stash[1][stash_index]])
        return owners, slots

    @staticmethod
    def _one_per_slot(owners: np.ndarray, slots: np.ndarray, n: int, last: bool) -> tuple[np.ndarray, np.ndarray]:
        """Each distinct slot once, with its last (or first) batch position among owners."""
        if len(slots) < 2:
            return slots, owners
        code = slots * n + owners
        code.sort()
        slot_of = code // n
        keep = np.ones(len(code), dtype=bool)
        if last:
            np.not_equal(slot_of[1:], slot_of[:-1], out=keep[:-1])
        else:
            np.not_equal(slot_of[1:], slot_of[:-1], out=keep[1:])
        code = code[keep]
        return code // n, code % n

    def _first_occurrence(self, items: np.ndarray, hashes: np.ndarray) -> np.ndarray:
        """Index of the first occurrence in the batch of each key (the batch's repeats, §7).

        Equal keys have equal hashes, so sorting by the full hashes of ways 0 and 1 groups
        repeats cheaply; the groups are then checked key by key.
        """
        n = len(items)
        if n < 2:
            return np.arange(n)
        fingerprint = (hashes[:, 0].astype(np.uint64) << np.uint64(32)) | hashes[:, 1]
        order = np.argsort(fingerprint, kind="stable")
        sorted_fp = fingerprint[order]
        starts = np.ones(n, dtype=bool)
        starts[1:] = sorted_fp[1:] != sorted_fp[:-1]
        if starts.all():  # no fingerprint repeats, so no key repeats
            return np.arange(n)
        group_start = np.maximum.accumulate(np.where(starts, np.arange(n), 0))
        representative = order[group_start]
        if not (items.take(order) == items.take(representative)).all():
            # Two different keys share a fingerprint: settle it exactly (rare, slower).
            _, first, inverse = np.unique(items, return_index=True, return_inverse=True)
            return first[inverse.ravel()]
        first = np.empty(n, dtype=np.int64)
        first[order] = representative
        return first

    # -- data plane ----------------------------------------------------------------------
    def get_batch(self, keys: np.ndarray) -> GetResult:
        n = len(keys)
        if n <= CHUNK:
            hit, values = self._get_chunk(keys)
        else:
            parts = [self._get_chunk(keys[start:start + CHUNK]) for start in range(0, n, CHUNK)]
            hit = np.concatenate([p[0] for p in parts])
            values = np.concatenate([p[1] for p in parts])
        hits = int(np.count_nonzero(hit))
        self._count("lookups", n)
        self._count("exact_hits", hits)
        self._count("misses", n - hits)
        return GetResult(hit, values)

    def _get_chunk(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        found = self._first_copies(keys)
        hit = found >= 0
        words = self._values.take(found, axis=0)  # a miss (-1) reads some slot; zeroed below
        if not hit.all():
            words[~hit] = 0
        return hit, self._values_out(words)

    def lookup_batch(self, keys: np.ndarray) -> LookupResultBatch:
        n = len(keys)
        kind = np.zeros(n, dtype=np.uint8)
        values = np.zeros((n, self.geometry.value_bytes), dtype=np.uint8)
        entry = np.full(n, -1, dtype=np.int32)
        for start in range(0, n, CHUNK):
            part = keys[start:start + CHUNK]
            words = self._key_words(part)
            found = self._first_copies(part)
            ok = found >= 0
            kind[start:start + CHUNK][ok] = _EXACT
            values[start:start + CHUNK][ok] = self._values_out(self._values.take(found[ok], axis=0))
            pending = np.flatnonzero(~ok)
            for rule in self._rule_order:
                if not len(pending):
                    break
                hit = ((words[pending] & self._rule_mask[rule]) == self._rule_match[rule]).all(axis=1)
                winners = pending[hit] + start
                kind[winners] = _RULE
                entry[winners] = rule
                pending = pending[~hit]
        rule_won = entry >= 0
        if rule_won.any():
            values[rule_won] = self._values_out(self._rule_values[entry[rule_won]])
            self._rule_hits += np.bincount(entry[rule_won], minlength=self.geometry.rules).astype(np.uint64)
        exact = int((kind == _EXACT).sum())
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
        item = self._key_items_of(keys)[0]
        value = self._value_words(values)[0]
        candidates = self._candidates(keys)[0].tolist()
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
        self._key_items[slot] = item
        self._values[slot] = value
        self._valid[slot] = True
        self._count("inserts", 1)
        self._count("occupancy", 1)
        return status

    def set_leading(self, keys: list[bytes], values: list[bytes]) -> int:
        """Backend.set_leading in one C call (pynq_kv._slots.set_tagged): a fill's tagging,
        hashing, search and placement without the arrays and numpy calls of set_batch, whose
        fixed cost per batch was most of a host-tier SET's engine update. 0 where the
        extension was not built."""
        if _set_tagged_c is None or not keys:
            return 0
        g = self.geometry
        done, inserted = _set_tagged_c(keys, values, row_tables(g.hash_seed, g.ways, g.key_width),
                                       self._valid, self._key_bytes, self._value_bytes, g.rows, g.ways)
        self._count("updates", done - inserted)
        self._count("inserts", inserted)
        self._count("occupancy", inserted)
        return done

    def _set_chunk(self, keys: np.ndarray, values: np.ndarray) -> np.ndarray:
        n = len(keys)
        items = self._key_items_of(keys)
        value_words = self._value_words(values)
        hashes = self._hashes(keys)
        existed = self._update_copies(keys, hashes, items, value_words)

        status = np.full(n, _UPDATED, dtype=np.uint8)
        new = np.flatnonzero(~existed)
        inserted = self._insert(new, items, hashes, self._candidates_of(hashes), value_words,
                                status) if len(new) else 0
        failures = int(np.count_nonzero(status == _FULL))
        self._count("inserts", inserted)
        self._count("updates", n - inserted - failures)
        self._count("insert_failures", failures)
        self._count("occupancy", inserted)
        return status

    def _update_copies(self, keys: np.ndarray, hashes: np.ndarray, items: np.ndarray,
                       value_words: np.ndarray) -> np.ndarray:
        """SET's update of the keys already in the table: every copy takes the value of its
        key's last occurrence in the batch. Returns which keys had a copy. One C call where
        pynq_kv._slots was built, else a vectorized pass over all copies."""
        n = len(keys)
        if _update_copies_c is not None:
            existed = np.empty(n, dtype=bool)
            _update_copies_c(np.ascontiguousarray(keys, dtype=np.uint8), np.ascontiguousarray(hashes),
                             self._valid, self._key_bytes, self._value_bytes,
                             np.ascontiguousarray(value_words).view(np.uint8).reshape(n, -1),
                             self.geometry.rows, existed)
            return existed
        owners, slots = self._all_copies(items, self._candidates_of(hashes))
        existed = np.zeros(n, dtype=bool)
        existed[owners] = True
        slots, owners = self._one_per_slot(owners, slots, n, last=True)
        self._values[slots] = value_words[owners]
        return existed

    def _insert(self, new: np.ndarray, items: np.ndarray, hashes: np.ndarray, candidates: np.ndarray,
                value_words: np.ndarray, status: np.ndarray) -> int:
        """Place the batch positions `new` (keys with no copy, in batch order) as §5.4 steps
        2–4 would one after another; writes their status, returns how many keys were placed."""
        g = self.geometry
        m = len(new)
        first = self._first_occurrence(items[new], hashes[new])  # indexes into new
        unique = np.flatnonzero(first == np.arange(m))
        last = np.arange(m)
        if len(unique) < m:
            np.maximum.at(last, first, np.arange(m))
        keys_at = new[unique]  # batch position of each distinct new key, in batch order
        values_at = new[last[unique]]  # the position whose value it ends with
        cand = candidates[keys_at]
        placed = np.full(len(unique), -1, dtype=np.int64)
        pending = np.arange(len(unique))
        for way in range(g.ways):
            if not len(pending):
                break
            slots = cand[pending, way]
            free = np.flatnonzero(~self._valid[slots])
            if not len(free):
                continue
            if len(free) > 1:  # the earliest key per free slot
                order = np.argsort(slots[free], kind="stable")
                ordered = slots[free][order]
                keep = np.ones(len(order), dtype=bool)
                np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
                free = free[order[keep]]
            winners = pending[free]
            self._store(slots[free], items[keys_at[winners]], value_words[values_at[winners]])
            placed[winners] = slots[free]
            lost = np.ones(len(pending), dtype=bool)
            lost[free] = False
            pending = pending[lost]
        if len(pending):
            free_stash = g.way_slots + np.flatnonzero(~self._valid[g.way_slots:])
            take = min(len(free_stash), len(pending))
            if take:
                winners = pending[:take]
                self._store(free_stash[:take], items[keys_at[winners]], value_words[values_at[winners]])
                placed[winners] = free_stash[:take]

        # First occurrences: where they went; repeats: updates of a placed key, else FULL too.
        group = np.empty(m, dtype=np.int64)
        group[unique] = np.arange(len(unique))
        status[new] = np.where(placed[group[first]] >= 0, _UPDATED, _FULL)
        status[keys_at] = np.where(placed < 0, _FULL,
                                   np.where(placed >= g.way_slots, _INSERTED_STASH, _INSERTED))
        return int(np.count_nonzero(placed >= 0))

    def _store(self, slots: np.ndarray, key_items: np.ndarray, value_words: np.ndarray) -> None:
        self._key_items[slots] = key_items
        self._values[slots] = value_words
        self._valid[slots] = True

    def delete_batch(self, keys: np.ndarray) -> np.ndarray:
        status = np.full(len(keys), _NOT_FOUND, dtype=np.uint8)
        for start in range(0, len(keys), CHUNK):
            part = keys[start:start + CHUNK]
            owners, slots = self._all_copies(self._key_items_of(part), self._candidates(part))
            slots, owners = self._one_per_slot(owners, slots, len(part), last=False)
            self._valid[slots] = False
            status[start + owners] = _DELETED  # a key's first occurrence deletes it
            deleted = int(np.count_nonzero(status[start:start + CHUNK] == _DELETED))
            self._count("deletes", deleted)
            self._count("delete_misses", len(part) - deleted)
            self._count("occupancy", -len(slots))
        return status

    # -- data-plane port and change log (§10) ---------------------------------------------
    def data_plane_set_batch(self, keys: np.ndarray, values: np.ndarray) -> np.ndarray:
        status = self.set_batch(keys, values)
        self._log(ChangeOp.SET, status, keys, values)
        return status

    def data_plane_delete_batch(self, keys: np.ndarray) -> np.ndarray:
        status = self.delete_batch(keys)
        self._log(ChangeOp.DELETE, status, keys, np.zeros((len(keys), self.geometry.value_bytes), np.uint8))
        return status

    def _log(self, op: ChangeOp, status: np.ndarray, keys: np.ndarray, values: np.ndarray) -> None:
        """Record a batch's mutations in batch order (§7: the batch is its operations in order)."""
        for code, key, value in zip(status.tolist(), keys, values):
            if logged(op, code):
                self.changelog.record(op, code, key.tobytes(), value.tobytes())

    def drain_changes(self, max_records: int) -> list[RawChange]:
        return self.changelog.drain(max_records)

    def changelog_stats(self) -> ChangelogStats:
        return self.changelog.stats()

    def clear_changelog_overflow(self) -> None:
        self.changelog.clear_overflow()

    # -- control -------------------------------------------------------------------------
    def _slot_number(self, bank: int, index: int) -> int:
        g = self.geometry
        if g.has_slot(bank, index):
            return g.slot_number(bank, index)
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
        good = g.has_slot(banks, indexes)
        if not good.all():
            bad = int(np.flatnonzero(~good)[0])
            return super().read_slots(banks[bad:bad + 1], indexes[bad:bad + 1])  # raises
        slots = g.slot_number(banks, indexes)
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
        self._store(numbers, self._key_items_of(keys), self._value_words(values))

    def memory_bytes(self) -> int:
        """Bytes held by the table and rule arrays (for the memory benchmark)."""
        arrays = (self._keys, self._values, self._valid, self._rule_valid, self._rule_match,
                  self._rule_mask, self._rule_prio, self._rule_values, self._rule_hits)
        return sum(a.nbytes for a in arrays)
