"""KVEngine: the one façade every front-end uses (docs/engine.md §8).

It encodes user keys and values, drives a backend through the engine operations, relocates
entries with cuckoo moves when the table is crowded, owns the mapping from user rules to rule
entries, and saves/restores snapshots. Everything it does goes through the backend interface,
so the model, the RTL and a board see the very same operation sequence.
"""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence, Union

import numpy as np

from .atomic import atomic_write
from .changelog import ChangelogStats, ChangeOp, RawChange
from .backend import (
    Backend,
    DelStatus,
    MatchKind,
    RuleEntry,
    SetStatus,
    SlotBatch,
    make_backend,
)
from .errors import (
    GeometryError,
    InvalidRule,
    KeyFormatError,
    RuleTableFull,
    SnapshotError,
    TableFull,
    UnknownRule,
    ValueFormatError,
)
from .dataplane import DataPlanePort
from .geometry import Geometry
from .hashing import candidate_rows
from .keys import VALUE_KINDS, KeyFormat, KeyLike, ValueFormat, ValueLike, ints_to_raw, raw_to_ints
from .rules import Rule

RELOCATION_NODES = 2048  # slots the relocation search may visit per key (§8)
RETRY_ROUNDS = 4  # rounds of make-room-then-SET for the full keys of one batch (§8)
SNAPSHOT_VERSION = 1

# The SetStatus codes that call for relocation, as plain ints (Enum lookups cost a microsecond).
_STASH, _UPDATED, _FULL = int(SetStatus.INSERTED_STASH), int(SetStatus.UPDATED), int(SetStatus.FULL)
_DELETED = int(DelStatus.DELETED)

KeysArg = Union[np.ndarray, Sequence[KeyLike]]
ValuesArg = Union[np.ndarray, Sequence[ValueLike]]


@dataclass(frozen=True)
class LookupResult:
    """What one key matched: kind is "exact", "rule" or "miss"."""

    kind: str
    value: Any = None
    rule_id: int | None = None
    entry: int | None = None

    @property
    def hit(self) -> bool:
        return self.kind != "miss"


@dataclass(frozen=True)
class LookupBatch:
    """Numpy form of many lookups; kind holds MatchKind codes, rule_id is -1 where none."""

    kind: np.ndarray
    values: np.ndarray
    rule_id: np.ndarray
    entry: np.ndarray


@dataclass(frozen=True)
class Occupancy:
    used: int
    capacity: int

    @property
    def load_factor(self) -> float:
        return self.used / self.capacity if self.capacity else 0.0


@dataclass
class MsetReport:
    """Outcome of a batch SET: counts, and the positions of the keys that found no room."""

    inserted: int = 0
    updated: int = 0
    failed: list[int] = field(default_factory=list)


@dataclass
class Snapshot:
    """An engine's entries (flat slot numbers, raw keys and values) and its rules (`meta`), as
    `dump` writes them and `load_snapshot` takes them back; origin names the file it was read
    from, for error messages."""
    meta: dict[str, Any]
    numbers: np.ndarray
    keys: np.ndarray
    values: np.ndarray
    origin: str = "snapshot"


@dataclass(frozen=True)
class Change:
    """One data-plane mutation from the change log (§10), decoded for the host tier.

    op is "set" or "delete"; status the engine's answer ("INSERTED", "INSERTED_STASH",
    "UPDATED"; "DELETED", "NOT_FOUND": a DEL is logged whether or not the engine held the key);
    key and value as KVEngine's get() shows them (value None for a delete); raw the record as
    the engine keeps it (raw key and value bytes).
    """

    seq: int
    op: str
    status: str
    key: Union[bytes, int]
    value: Union[bytes, int, None]
    raw: RawChange


@dataclass
class _RuleRecord:
    rule: Rule
    entries: list[int]


def _check_placement(path: Union[str, os.PathLike], g: Geometry, numbers: np.ndarray,
                     keys: np.ndarray) -> None:
    """Refuse a snapshot with an entry in a way at a row that is not its key's candidate row.

    The engine's operations never put one there (docs/engine.md §4, §5.1), and such an entry is
    invisible to GET and DEL while it counts in DBSIZE: a file holding one was damaged or
    written for another hash seed, and loading it would serve (and save back) a table that
    cannot find its keys.
    """
    banks, rows = g.slot_address(numbers)
    in_way = np.flatnonzero(banks < g.ways)
    if not len(in_way):
        return
    want = candidate_rows(keys[in_way], g.hash_seed, g.ways, g.key_width, g.rows)
    hashed = want[np.arange(len(in_way)), banks[in_way]]  # each entry's row in its own bank
    wrong = np.flatnonzero(hashed != rows[in_way])
    if len(wrong):
        pos = wrong[np.argmin(numbers[in_way[wrong]])]  # the lowest bad slot
        slot = int(numbers[in_way[pos]])
        bank, row = g.slot_address(slot)
        raise SnapshotError(
            f"{path}: corrupt state file: {len(wrong)} of its {len(numbers)} entries sit in slots "
            f"their keys do not hash to; the first, slot {slot} (bank {bank}, row {row}), holds a "
            f"key whose row in that bank is {int(hashed[pos])}; "
            "nothing was loaded")


def _raw_rows(rows: np.ndarray, nbytes: int, error: type[Exception], what: str) -> np.ndarray:
    """Raw big-endian rows as they are, once their width is checked."""
    if rows.shape[1] != nbytes:
        raise error(f"raw {what} must have {nbytes} bytes per row, got {rows.shape[1]}")
    return np.ascontiguousarray(rows)


def _int_rows(ints: np.ndarray, nbytes: int, error: type[Exception], what: str) -> np.ndarray:
    """Raw rows from an integer array (at most 64 bits each), refusing what does not fit."""
    if np.issubdtype(ints.dtype, np.signedinteger) and (ints < 0).any():
        raise error(f"integer {what} must not be negative")
    if nbytes < 8 and (ints.astype(np.uint64) >> np.uint64(8 * nbytes)).any():
        raise error(f"integer {what} must fit {8 * nbytes} bits")
    return ints_to_raw(ints, nbytes)


class KVEngine:
    """Exact-match table plus wildcard rules on one backend ("model", or a registered one)."""

    def __init__(
        self,
        backend: Union[str, Backend] = "model",
        geometry: Geometry | None = None,
        *,
        value_kind: str = "bytes",
        relocation: bool = True,
        **geometry_fields: int,
    ) -> None:
        if geometry is not None and geometry_fields:
            raise GeometryError("pass either geometry= or geometry keywords, not both")
        if value_kind not in VALUE_KINDS:
            raise ValueFormatError(f"value_kind must be one of {VALUE_KINDS}, got {value_kind!r}")
        if isinstance(backend, Backend):
            if geometry is not None and geometry != backend.geometry:
                raise GeometryError("geometry differs from the backend's own geometry")
            self.backend = backend
        else:
            self.backend = make_backend(backend, geometry or Geometry(**geometry_fields))
        self.geometry = self.backend.geometry
        self.key_format = KeyFormat(self.geometry.key_width)
        self.value_format = ValueFormat(self.geometry.value_width)
        self.value_kind = value_kind
        self.relocation = relocation
        self._rules: dict[int, _RuleRecord] = {}
        self._entry_owner = np.full(self.geometry.rules, -1, dtype=np.int64)
        self._next_rule_id = 1
        self._host = {"relocations": 0, "relocation_moves": 0, "relocation_failures": 0}

    def __repr__(self) -> str:
        g = self.geometry
        return (f"KVEngine(backend={self.backend.name!r}, key_width={g.key_width}, "
                f"value_width={g.value_width}, ways={g.ways}, rows={g.rows}, stash={g.stash}, "
                f"rules={g.rules})")

    def __enter__(self) -> "KVEngine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.backend.close()

    # -- encodings -----------------------------------------------------------------------
    def encode_keys(self, keys: KeysArg) -> np.ndarray:
        """Raw (N, KEY_BYTES) uint8 keys from raw arrays, integer arrays or key-likes."""
        kb = self.geometry.key_bytes
        if isinstance(keys, np.ndarray):
            if keys.dtype == np.uint8 and keys.ndim == 2:
                return _raw_rows(keys, kb, KeyFormatError, "keys")
            if keys.ndim == 1 and np.issubdtype(keys.dtype, np.integer):
                return _int_rows(keys, kb, KeyFormatError, "keys")
            if keys.ndim == 1 and keys.dtype == object:
                return self.key_format.encode_many(keys.tolist())
            raise KeyFormatError(f"cannot use a {keys.dtype} array of shape {keys.shape} as keys")
        return self.key_format.encode_many(keys)

    def encode_values(self, values: ValuesArg) -> np.ndarray:
        vb = self.geometry.value_bytes
        if isinstance(values, np.ndarray):
            if values.dtype == np.uint8 and values.ndim == 2:
                return _raw_rows(values, vb, ValueFormatError, "values")
            if values.ndim == 1 and np.issubdtype(values.dtype, np.integer):
                if self.value_kind != "int":
                    raise ValueFormatError("this engine stores byte-string values; integer arrays "
                                           "need value_kind='int' (or pass raw uint8 rows)")
                return _int_rows(values, vb, ValueFormatError, "values")
            if values.ndim == 1 and values.dtype == object:
                values = values.tolist()
            else:
                raise ValueFormatError(f"cannot use a {values.dtype} array of shape {values.shape} as values")
        return self.value_format.encode_many(self._checked_value(v) for v in values)

    def decode_value(self, raw: bytes) -> Union[bytes, int]:
        if self.value_kind == "int":
            return int.from_bytes(raw, "big")
        return self.value_format.decode(raw)

    def decode_key(self, raw: bytes) -> Union[bytes, int]:
        return self.key_format.decode(raw)

    def _one_key(self, key: KeyLike) -> np.ndarray:
        return np.frombuffer(self.key_format.encode(key), dtype=np.uint8).reshape(1, -1)

    def _checked_value(self, value: ValueLike) -> ValueLike:
        """The value if it is of this engine's kind: mixing kinds would make reads ambiguous."""
        is_int = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
        if self.value_kind == "int" and not is_int:
            raise ValueFormatError(f"this engine stores integer values, not {type(value).__name__}")
        if self.value_kind == "bytes" and not isinstance(value, (bytes, bytearray, memoryview, str)):
            raise ValueFormatError(f"this engine stores byte-string values, not {type(value).__name__}")
        return value

    def _one_value(self, value: ValueLike) -> np.ndarray:
        encoded = self.value_format.encode(self._checked_value(value))
        return np.frombuffer(encoded, dtype=np.uint8).reshape(1, -1)

    # -- exact table ---------------------------------------------------------------------
    def set(self, key: KeyLike, value: ValueLike) -> bool:
        """Store value under key; True when the key is new. TableFull if there is no room."""
        status = self._set_raw(self._one_key(key), self._one_value(value))
        if status[0] == _FULL:
            raise TableFull(f"no room for key {key!r}: its {self.geometry.ways} candidate slots "
                            f"and the stash are full (occupancy {self.occupancy().used})")
        return bool(status[0] != _UPDATED)

    def get(self, key: KeyLike) -> Union[bytes, int, None]:
        result = self.backend.get_batch(self._one_key(key))
        return self.decode_value(result.values[0].tobytes()) if result.hit[0] else None

    def exists(self, key: KeyLike) -> bool:
        return bool(self.backend.get_batch(self._one_key(key)).hit[0])

    def delete(self, key: KeyLike) -> bool:
        return bool(self.backend.delete_batch(self._one_key(key))[0] == DelStatus.DELETED)

    def mset(self, items: Union[Mapping[Any, Any], KeysArg], values: ValuesArg | None = None) -> MsetReport:
        """Batch SET, from a mapping or from parallel keys and values; reports failures."""
        if values is None:
            if not isinstance(items, Mapping):
                raise TypeError("mset takes a mapping, or keys and values")
            keys, values = list(items.keys()), list(items.values())
        else:
            keys = items
        status = self.set_batch(keys, values)
        return MsetReport(
            inserted=int(((status == SetStatus.INSERTED) | (status == SetStatus.INSERTED_STASH)).sum()),
            updated=int((status == SetStatus.UPDATED).sum()),
            failed=np.flatnonzero(status == SetStatus.FULL).tolist(),
        )

    def mget(self, keys: KeysArg) -> list[Union[bytes, int, None]]:
        result = self.backend.get_batch(self.encode_keys(keys))
        return [self.decode_value(v.tobytes()) if hit else None for hit, v in zip(result.hit, result.values)]

    def set_batch(self, keys: KeysArg, values: ValuesArg) -> np.ndarray:
        """Batch SET of numpy arrays; returns SetStatus codes (after relocation)."""
        raw_keys = self.encode_keys(keys)
        raw_values = self.encode_values(values)
        if len(raw_keys) != len(raw_values):
            raise ValueFormatError(f"{len(raw_keys)} keys but {len(raw_values)} values")
        return self._set_raw(raw_keys, raw_values)

    def set_leading(self, keys: list[bytes], values: list[bytes]) -> int:
        """SET of byte-string keys and values that fit, in order, of as many leading keys as
        need neither the stash nor relocation (Backend.set_leading); returns how many: the
        caller SETs the rest with set_batch. Only a byte-string engine's values are
        length-tagged, so an integer engine answers 0."""
        if self.value_kind != "bytes":
            return 0
        return self.backend.set_leading(keys, values)

    def get_batch(self, keys: KeysArg) -> tuple[np.ndarray, np.ndarray]:
        """(hit, values): values as uint64 for integer engines up to 64 bits, else raw rows."""
        result = self.backend.get_batch(self.encode_keys(keys))
        return result.hit, self._values_out(result.values)

    def delete_batch(self, keys: KeysArg) -> np.ndarray:
        """Batch DEL; returns True where a key was removed."""
        return self.backend.delete_batch(self.encode_keys(keys)) == _DELETED

    def _values_out(self, raw: np.ndarray) -> np.ndarray:
        if self.value_kind == "int" and self.geometry.value_bytes <= 8:
            return raw_to_ints(raw)
        return raw

    def _set_raw(self, keys: np.ndarray, values: np.ndarray) -> np.ndarray:
        """One engine SET batch, then the relocation pass of §8 for its stash and full keys."""
        status = self.backend.set_batch(keys, values)
        if not self.relocation:
            return status
        if len(status) == 1:  # the common request-at-a-time case, without array temporaries
            if status[0] != _STASH and status[0] != _FULL:
                return status
        elif not ((status == _STASH) | (status == _FULL)).any():
            return status
        for i in np.flatnonzero(status == SetStatus.INSERTED_STASH):
            self._relocate_from_stash(keys[i])
        pending = np.flatnonzero(status == SetStatus.FULL)
        for _ in range(RETRY_ROUNDS):
            roomy = np.array([i for i in pending if self._make_room(keys[i])], dtype=np.int64)
            if not len(roomy):
                break
            # A later key's path may take the slot freed for an earlier one; those go round again.
            status[roomy] = self.backend.set_batch(keys[roomy], values[roomy])
            for i in roomy[status[roomy] == SetStatus.INSERTED_STASH]:
                self._relocate_from_stash(keys[i])
            pending = np.concatenate([np.setdiff1d(pending, roomy), roomy[status[roomy] == SetStatus.FULL]])
            pending.sort()
        self._host["relocation_failures"] += int((status == SetStatus.FULL).sum())
        return status

    # -- relocation (§8) -----------------------------------------------------------------
    def _rows_of(self, keys: np.ndarray) -> np.ndarray:
        g = self.geometry
        return candidate_rows(keys, g.hash_seed, g.ways, g.key_width, g.rows)

    def _find_path(self, key: np.ndarray) -> list[tuple[int, int]] | None:
        """Shortest cuckoo path from one of key's candidate slots to a free slot, or None."""
        g = self.geometry
        start_rows = self._rows_of(key.reshape(1, -1))[0]
        nodes: list[tuple[int, int]] = []
        parent: list[int] = []
        seen: set[tuple[int, int]] = set()
        level = []
        for way in range(g.ways):
            slot = (way, int(start_rows[way]))
            if slot not in seen:
                seen.add(slot)
                level.append(len(nodes))
                nodes.append(slot)
                parent.append(-1)
        while level:
            slots = self.backend.read_slots(np.array([nodes[n][0] for n in level]),
                                            np.array([nodes[n][1] for n in level]))
            free = np.flatnonzero(~slots.valid)
            if len(free):
                path = []
                node = level[int(free[0])]
                while node >= 0:
                    path.append(nodes[node])
                    node = parent[node]
                return path[::-1]
            rows = self._rows_of(slots.keys)
            next_level = []
            for position, node in enumerate(level):
                bank = nodes[node][0]
                for way in range(g.ways):
                    slot = (way, int(rows[position, way]))
                    if way == bank or slot in seen:
                        continue
                    if len(nodes) >= RELOCATION_NODES:
                        return None
                    seen.add(slot)
                    next_level.append(len(nodes))
                    nodes.append(slot)
                    parent.append(node)
            level = next_level
        return None

    def _shift(self, path: list[tuple[int, int]]) -> None:
        """Carry out a path from its free end so that path[0] becomes free."""
        for src, dst in zip(reversed(path[:-1]), reversed(path[1:])):
            self.backend.move_slot(src[0], src[1], dst[0], dst[1])
        self._host["relocation_moves"] += len(path) - 1

    def _make_room(self, key: np.ndarray) -> bool:
        path = self._find_path(key)
        if path is None:
            return False
        self._shift(path)
        self._host["relocations"] += 1
        return True

    def _relocate_from_stash(self, key: np.ndarray) -> None:
        g = self.geometry
        stash = self.backend.read_slots(np.full(g.stash, g.ways), np.arange(g.stash))
        where = np.flatnonzero(stash.valid & (stash.keys == key).all(axis=1))
        if not len(where):
            return
        path = self._find_path(key)
        if path is None:
            return
        self._shift(path)
        self.backend.move_slot(g.ways, int(where[0]), path[0][0], path[0][1])
        self._host["relocations"] += 1
        self._host["relocation_moves"] += 1

    # -- wildcard rules ------------------------------------------------------------------
    def add_rule(self, rule: Rule) -> int:
        """Write every ternary entry of rule; returns its id. The rule table is unchanged on error."""
        g = self.geometry
        if not isinstance(rule, Rule):
            raise InvalidRule(f"add_rule takes a Rule, not {type(rule).__name__}")
        rule.validate(g.key_width, g.prio_width)
        try:
            value = self.value_format.encode(self._checked_value(rule.value))
        except ValueFormatError as exc:
            raise InvalidRule(f"rule value: {exc}") from exc
        free = np.flatnonzero(self._entry_owner < 0)
        if len(free) < len(rule.entries):
            raise RuleTableFull(f"rule needs {len(rule.entries)} entries, {len(free)} of "
                                f"{g.rules} are free")
        rule_id = self._next_rule_id
        self._install_rule(rule_id, rule, value, [int(e) for e in free[:len(rule.entries)]])
        self._next_rule_id += 1
        return rule_id

    def _install_rule(self, rule_id: int, rule: Rule, value: bytes, entries: list[int]) -> None:
        for entry, ternary in zip(entries, rule.entries):
            self.backend.write_rule(entry, RuleEntry(True, ternary.match, ternary.mask, rule.priority, value))
            self._entry_owner[entry] = rule_id
        self._rules[rule_id] = _RuleRecord(rule, entries)

    def remove_rule(self, rule_id: int) -> None:
        record = self._rules.get(rule_id)
        if record is None:
            raise UnknownRule(f"no rule with id {rule_id!r}")
        empty = RuleEntry(False, 0, 0, 0, bytes(self.geometry.value_bytes))
        for entry in record.entries:
            self.backend.write_rule(entry, empty)
            self._entry_owner[entry] = -1
        del self._rules[rule_id]

    def rules(self) -> dict[int, Rule]:
        return {rule_id: record.rule for rule_id, record in self._rules.items()}

    def rule_entries(self, rule_id: int) -> list[int]:
        if rule_id not in self._rules:
            raise UnknownRule(f"no rule with id {rule_id!r}")
        return list(self._rules[rule_id].entries)

    def rule_hits(self) -> dict[int, int]:
        """Lookups won by each rule (the sum over its entries)."""
        hits = self.backend.rule_hits()
        return {rule_id: int(hits[record.entries].sum()) for rule_id, record in self._rules.items()}

    # -- lookups -------------------------------------------------------------------------
    def lookup(self, key: KeyLike) -> LookupResult:
        """Exact match first, else the best wildcard rule, else miss (§5.3)."""
        result = self.backend.lookup_batch(self._one_key(key))
        kind = MatchKind(int(result.kind[0]))
        if kind == MatchKind.MISS:
            return LookupResult("miss")
        value = self.decode_value(result.values[0].tobytes())
        if kind == MatchKind.EXACT:
            return LookupResult("exact", value)
        entry = int(result.entry[0])
        return LookupResult("rule", value, int(self._entry_owner[entry]), entry)

    def lookup_batch(self, keys: KeysArg) -> LookupBatch:
        result = self.backend.lookup_batch(self.encode_keys(keys))
        rule_id = np.where(result.entry >= 0, self._entry_owner[np.maximum(result.entry, 0)], -1)
        return LookupBatch(result.kind, self._values_out(result.values), rule_id, result.entry)

    # -- state ---------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Engine counters (§6), per-rule hits and the host's relocation counters."""
        out: dict[str, Any] = dict(self.backend.counters())
        out.update(self._host)
        out["rule_hits_by_id"] = self.rule_hits()
        return out

    def reset_stats(self) -> None:
        self.backend.clear_counters()
        self._host = dict.fromkeys(self._host, 0)

    def occupancy(self) -> Occupancy:
        return Occupancy(int(self.backend.counters()["occupancy"]), self.geometry.capacity)

    def clear(self, rules: bool = True) -> None:
        """Empty the exact table, and the rule table unless rules=False. Counters stay."""
        self.backend.clear_table()
        if rules:
            for rule_id in list(self._rules):
                self.remove_rule(rule_id)

    def read_slots(self, numbers: np.ndarray) -> SlotBatch:
        """Raw contents of flat slots (§4) by READ_SLOT: control reads, no counter moves."""
        return self.backend.read_slots(*self.geometry.slot_address(np.asarray(numbers, dtype=np.int64)))

    def valid_slots(self) -> tuple[np.ndarray, SlotBatch]:
        """Flat numbers and raw contents of every valid slot, in slot order, read at once."""
        return self.backend.valid_slots()

    def items(self) -> Iterator[tuple[Union[bytes, int], Union[bytes, int]]]:
        """Every stored (key, value), in slot order."""
        _, slots = self.valid_slots()
        for key, value in zip(slots.keys, slots.values):
            yield self.decode_key(key.tobytes()), self.decode_value(value.tobytes())

    def __len__(self) -> int:
        return self.occupancy().used

    def info(self) -> dict[str, Any]:
        occ = self.occupancy()
        return {
            "backend": self.backend.name,
            "geometry": self.geometry.as_dict(),
            "value_kind": self.value_kind,
            "relocation": self.relocation,
            "max_key_bytes": self.key_format.max_bytes,
            "max_value_bytes": self.value_format.max_bytes,
            "occupancy": {"used": occ.used, "capacity": occ.capacity,
                          "load_factor": round(occ.load_factor, 6)},
            "rules": len(self._rules),
            "rule_entries_used": int((self._entry_owner >= 0).sum()),
            "counters": self.backend.counters(),
        }

    # -- data plane and change log (§10) ---------------------------------------------------
    def data_plane(self) -> "KVEngine":
        """This engine as the Ethernet front-end reaches it: its SETs and DELs go to the
        backend's data-plane port and into the change log; no relocation (the RTL data plane
        has none). Only a backend that models the port (the model) takes them; on the RTL and
        on boards the data plane is the Ethernet port itself."""
        return KVEngine(DataPlanePort(self.backend), value_kind=self.value_kind, relocation=False)

    def drain_changes(self, max_records: int = 1024) -> list[Change]:
        """Up to max_records data-plane mutations from the change log, oldest first, removed
        from it. Sequence numbers are consecutive over every mutation, so a jump from one record
        to the next is the number of records dropped by an overflow in between
        (changelog_stats() says whether any were). Empty on an engine without a data plane."""
        if isinstance(max_records, bool) or not isinstance(max_records, int) or max_records < 0:
            raise ValueError(f"max_records must be a non-negative integer, got {max_records!r}")
        out = []
        for raw in self.backend.drain_changes(max_records):
            if raw.op == ChangeOp.DELETE:
                out.append(Change(raw.seq, "delete", DelStatus(raw.status).name, self.decode_key(raw.key),
                                  None, raw))
            else:
                out.append(Change(raw.seq, "set", SetStatus(raw.status).name, self.decode_key(raw.key),
                                  self.decode_value(raw.value), raw))
        return out

    def changelog_stats(self) -> ChangelogStats:
        """The change log's depth (0: no data plane), level, dropped records since reset and
        the sticky overflow flag (set: records were lost, the host must resynchronize)."""
        return self.backend.changelog_stats()

    def clear_changelog_overflow(self) -> None:
        """Clear the overflow flag once the host has resynchronized."""
        self.backend.clear_changelog_overflow()

    # -- snapshots -----------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """Every entry (at its slot) and every rule, copied to host memory."""
        numbers, slots = self.valid_slots()
        meta = {
            "format": "pynq-kv-snapshot",
            "version": SNAPSHOT_VERSION,
            "geometry": self.geometry.as_dict(),
            "value_kind": self.value_kind,
            **self.rules_state(),
        }
        return Snapshot(meta, numbers.astype(np.int64), slots.keys, slots.values)

    def rules_state(self) -> dict[str, Any]:
        """Every rule (id, rule entries, the rule as Rule.to_dict) and the next rule id: the
        rule part of a snapshot's meta, JSON-able; the host tier's rules file holds the same."""
        return {
            "next_rule_id": self._next_rule_id,
            "rules": [{"id": rule_id, "entries": record.entries, "rule": record.rule.to_dict()}
                      for rule_id, record in sorted(self._rules.items())],
        }

    def load_rules_state(self, state: Mapping[str, Any], origin: str = "rules") -> int:
        """Replace every rule with those of a `rules_state()` (the exact table is untouched);
        everything is checked before anything changes. Returns the rules loaded."""
        rules, encoded = self._checked_rules(state, origin)
        for rule_id in list(self._rules):
            self.remove_rule(rule_id)
        self._install_rules(state, rules, encoded)
        return len(rules)

    def _checked_rules(self, state: Mapping[str, Any], path: str
                       ) -> tuple[list[tuple[int, Rule, list[int]]], list[bytes]]:
        """The rules of a rules state, validated for this engine, with their encoded values."""
        g = self.geometry
        try:
            rules = [(int(r["id"]), Rule.from_dict(r["rule"]), [int(e) for e in r["entries"]])
                     for r in state["rules"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise SnapshotError(f"{path}: bad rule record: {exc}") from exc
        encoded = []
        for rule_id, rule, entries in rules:
            rule.validate(g.key_width, g.prio_width)
            try:
                encoded.append(self.value_format.encode(self._checked_value(rule.value)))
            except ValueFormatError as exc:
                raise SnapshotError(f"{path}: rule value: {exc}") from exc
            if len(entries) != len(rule.entries):
                raise SnapshotError(f"{path}: rule {rule_id} lists {len(entries)} entries for "
                                    f"{len(rule.entries)} ternary entries")
        used = [e for _, _, entries in rules for e in entries]
        if len(used) > g.rules:
            raise RuleTableFull(f"{path}: the rules need {len(used)} rule entries; this engine "
                                f"has {g.rules}")
        if len({rule_id for rule_id, _, _ in rules}) != len(rules) or len(set(used)) != len(used):
            raise SnapshotError(f"{path}: rule ids or rule entries repeat")
        # Rules go back to their own entries, which keeps §5.3 ties; a smaller rule table packs
        # them from entry 0 in their old entry order instead.
        if used and max(used) >= g.rules:
            order = {old: new for new, old in enumerate(sorted(used))}
            rules = [(rule_id, rule, [order[e] for e in entries]) for rule_id, rule, entries in rules]
        return rules, encoded

    def _install_rules(self, state: Mapping[str, Any], rules: list[tuple[int, Rule, list[int]]],
                       encoded: list[bytes]) -> None:
        for (rule_id, rule, entries), value in zip(rules, encoded):
            self._install_rule(rule_id, rule, value, entries)
        self._next_rule_id = max([int(state.get("next_rule_id", 1))] + [r + 1 for r, _, _ in rules])

    def dump(self, path: Union[str, os.PathLike]) -> int:
        """Write every entry (at its slot) and every rule to path atomically; returns entries."""
        snap = self.snapshot()
        with atomic_write(path) as handle:
            np.savez(handle, meta=np.frombuffer(json.dumps(snap.meta).encode(), dtype=np.uint8),
                     slots=snap.numbers, keys=snap.keys, values=snap.values)
        return len(snap.numbers)

    @staticmethod
    def read_snapshot(path: Union[str, os.PathLike]) -> Snapshot:
        """A dump read back, checked for shape and consistency."""
        try:
            with np.load(path, allow_pickle=False) as data:
                meta = json.loads(data["meta"].tobytes().decode())
                numbers, keys, values = data["slots"], data["keys"], data["values"]
        except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
            raise SnapshotError(f"{path}: not a readable pynq-kv snapshot ({exc})") from exc
        if (not isinstance(meta, dict) or meta.get("format") != "pynq-kv-snapshot"
                or meta.get("version") != SNAPSHOT_VERSION):
            raise SnapshotError(f"{path}: not a pynq-kv snapshot of version {SNAPSHOT_VERSION}")
        try:
            geometry = Geometry(**meta["geometry"])
        except (TypeError, KeyError, GeometryError) as exc:
            raise SnapshotError(f"{path}: bad geometry: {exc}") from exc
        n = len(numbers)
        if (numbers.ndim != 1 or keys.shape != (n, geometry.key_bytes) or keys.dtype != np.uint8
                or values.shape != (n, geometry.value_bytes) or values.dtype != np.uint8):
            raise SnapshotError(f"{path}: entry arrays do not match the geometry")
        if n and (numbers.min() < 0 or numbers.max() >= geometry.capacity
                  or len(np.unique(numbers)) != n):
            raise SnapshotError(f"{path}: slot numbers out of range or repeated")
        _check_placement(path, geometry, numbers, keys)
        return Snapshot(meta, numbers, keys, values, origin=str(path))

    @classmethod
    def from_snapshot(cls, path: Union[str, os.PathLike], backend: str = "model", **kwargs: Any) -> "KVEngine":
        """A new engine with the geometry, value kind and contents of a dump."""
        snap = cls.read_snapshot(path)
        kwargs.setdefault("value_kind", snap.meta.get("value_kind", "bytes"))
        engine = cls(backend, Geometry(**snap.meta["geometry"]), **kwargs)
        engine.load_snapshot(snap)
        return engine

    def restore(self, path: Union[str, os.PathLike]) -> int:
        """Replace contents with a dump's (see load_snapshot); returns entries restored."""
        return self.load_snapshot(self.read_snapshot(path))

    def load_snapshot(self, snap: Snapshot) -> int:
        """Replace contents with a snapshot's; everything is checked before anything changes.

        Same geometry: each entry goes back to its slot. Same key and value widths but another
        table shape: entries are inserted again (with relocation). Returns entries restored.
        """
        meta, numbers, keys, values, path = snap.meta, snap.numbers, snap.keys, snap.values, snap.origin
        snap_geometry = Geometry(**meta["geometry"])
        g = self.geometry
        if (snap_geometry.key_width, snap_geometry.value_width) != (g.key_width, g.value_width):
            raise GeometryError(f"snapshot has {snap_geometry.key_width}-bit keys and "
                                f"{snap_geometry.value_width}-bit values; this engine "
                                f"{g.key_width} and {g.value_width}")
        if meta.get("value_kind") != self.value_kind:
            raise SnapshotError(f"{path}: snapshot stores {meta.get('value_kind')} values, this "
                                f"engine {self.value_kind} values")
        rules, encoded = self._checked_rules(meta, path)
        exact_place = snap_geometry == g
        if not exact_place:
            # Entries are inserted again; try it on a scratch model first (KVEngine's moves are
            # the same on every backend), so a table that cannot hold them all is left alone.
            scratch = KVEngine("model", g, value_kind=self.value_kind, relocation=self.relocation)
            full = int((scratch._set_raw(keys, values) == SetStatus.FULL).sum())
            if full:
                raise TableFull(f"{full} of the snapshot's {len(keys)} entries find no room in this "
                                "table; nothing was restored")

        self.clear()
        if exact_place:
            self.backend.load_slots(numbers, keys, values)
        else:
            self._set_raw(keys, values)
        self._install_rules(meta, rules, encoded)
        return len(keys)

