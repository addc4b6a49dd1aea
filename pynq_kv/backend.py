"""The interface every engine implementation offers to KVEngine (docs/engine.md §5–§7).

A backend speaks raw keys and values only: big-endian uint8 arrays of KEY_BYTES / VALUE_BYTES.
Data-plane operations are batch-native because hardware wants streams of requests; a single
operation is a batch of one. Control operations address slots and rule entries directly.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from enum import IntEnum
from typing import Callable, NamedTuple, Union

import numpy as np

from . import regmap
from .changelog import ChangelogStats, RawChange
from .errors import KVError
from .geometry import Geometry


class SetStatus(IntEnum):
    """Result of one SET (§5.4)."""

    INSERTED = regmap.ST_SET_INSERTED
    INSERTED_STASH = regmap.ST_SET_INSERTED_STASH
    UPDATED = regmap.ST_SET_UPDATED
    FULL = regmap.ST_SET_FULL


class DelStatus(IntEnum):
    """Result of one DEL (§5.5)."""

    DELETED = regmap.ST_DEL_DELETED
    NOT_FOUND = regmap.ST_DEL_NOT_FOUND


class MatchKind(IntEnum):
    """Kind of a LOOKUP answer (§5.3)."""

    MISS = regmap.ST_MATCH_MISS
    EXACT = regmap.ST_MATCH_EXACT
    RULE = regmap.ST_MATCH_RULE


# Counter ids of §6, in register order (from the one register-map source).
COUNTER_NAMES = regmap.COUNTER_NAMES
COUNTER_IDS = regmap.COUNTER_IDS


class GetResult(NamedTuple):
    hit: np.ndarray  # (N,) bool
    values: np.ndarray  # (N, VALUE_BYTES) uint8, zeros on a miss


class LookupResultBatch(NamedTuple):
    kind: np.ndarray  # (N,) uint8 MatchKind
    values: np.ndarray  # (N, VALUE_BYTES) uint8, zeros on a miss
    entry: np.ndarray  # (N,) int32 winning rule entry, -1 unless kind == RULE


class SlotBatch(NamedTuple):
    valid: np.ndarray  # (M,) bool
    keys: np.ndarray  # (M, KEY_BYTES) uint8
    values: np.ndarray  # (M, VALUE_BYTES) uint8


class RuleEntry(NamedTuple):
    valid: bool
    match: int
    mask: int
    priority: int
    value: bytes


class Backend(ABC):
    """One engine implementation: the model, the Verilated RTL, or a board."""

    name: str = "abstract"
    # Whether anything outside this process can write the data plane (a board's or the virtual
    # board's Ethernet port), so that its change log needs draining into the host tier. The
    # model's data-plane port is reachable only in-process (KVEngine.data_plane()).
    wired_data_plane: bool = True

    def __init__(self, geometry: Geometry) -> None:
        self.geometry = geometry

    # -- data plane (§5.2–§5.5, batches per §7) ------------------------------------------
    @abstractmethod
    def get_batch(self, keys: np.ndarray) -> GetResult:
        """GET every key, in order."""

    @abstractmethod
    def lookup_batch(self, keys: np.ndarray) -> LookupResultBatch:
        """LOOKUP every key, in order."""

    @abstractmethod
    def set_batch(self, keys: np.ndarray, values: np.ndarray) -> np.ndarray:
        """SET every (key, value), in order; returns (N,) uint8 SetStatus."""

    @abstractmethod
    def delete_batch(self, keys: np.ndarray) -> np.ndarray:
        """DEL every key, in order; returns (N,) uint8 DelStatus."""

    def set_leading(self, keys: list[bytes], values: list[bytes]) -> int:
        """SET of byte-string keys and values (length-tagged), in order, of as many leading
        keys as need neither the stash nor relocation (each updates its copies or takes a free
        way); returns how many, and the caller SETs the rest with set_batch. A shortcut for the
        host tier's fills: 0 here, so every backend without one is correct as it is."""
        return 0

    # -- control (§5.6) ------------------------------------------------------------------
    @abstractmethod
    def read_slot(self, bank: int, index: int) -> tuple[bool, bytes, bytes]:
        """READ_SLOT: (valid, raw key, raw value)."""

    @abstractmethod
    def write_slot(self, bank: int, index: int, valid: bool, key: bytes, value: bytes) -> None:
        """WRITE_SLOT."""

    @abstractmethod
    def move_slot(self, src_bank: int, src_index: int, dst_bank: int, dst_index: int) -> None:
        """MOVE an entry so it is never in two slots nor in none."""

    @abstractmethod
    def write_rule(self, entry: int, rule: RuleEntry) -> None:
        """WRITE_RULE (also zeroes the entry's hit counter)."""

    @abstractmethod
    def read_rule(self, entry: int) -> RuleEntry:
        """READ_RULE."""

    @abstractmethod
    def clear_table(self) -> None:
        """CLEAR_TABLE."""

    @abstractmethod
    def clear_counters(self) -> None:
        """CLEAR_COUNTERS."""

    @abstractmethod
    def read_counter(self, counter_id: int) -> int:
        """One 64-bit counter of §6."""

    @abstractmethod
    def read_rule_hits(self, entry: int) -> int:
        """rule_hit[entry]."""

    # -- the data-plane port and its change log (§10) --------------------------------
    def data_plane_set_batch(self, keys: np.ndarray, values: np.ndarray) -> np.ndarray:
        """SET as the Ethernet front-end sends it: applied like set_batch, and logged."""
        raise KVError(f"the {self.name} backend's data plane is its Ethernet port: send it frames")

    def data_plane_delete_batch(self, keys: np.ndarray) -> np.ndarray:
        """DEL as the Ethernet front-end sends it: applied like delete_batch, and logged."""
        raise KVError(f"the {self.name} backend's data plane is its Ethernet port: send it frames")

    def drain_changes(self, max_records: int) -> list[RawChange]:
        """Up to max_records change-log records, oldest first, removed from the log.
        A backend without a change log has none."""
        return []

    def changelog_stats(self) -> ChangelogStats:
        """The change log's depth, level, drops and overflow flag (depth 0: no log)."""
        return ChangelogStats(depth=0, level=0, dropped=0, overflowed=False)

    def clear_changelog_overflow(self) -> None:
        """Clear the sticky overflow flag (after the host has resynchronized)."""

    # -- conveniences with generic implementations; fast backends override -------------
    def counters(self) -> dict[str, int]:
        return {name: self.read_counter(i) for i, name in enumerate(COUNTER_NAMES)}

    def rule_hits(self) -> np.ndarray:
        return np.array([self.read_rule_hits(e) for e in range(self.geometry.rules)], dtype=np.uint64)

    def read_slots(self, banks: np.ndarray, indexes: np.ndarray) -> SlotBatch:
        """READ_SLOT for many addresses (the relocation search reads a level at a time)."""
        g = self.geometry
        n = len(banks)
        valid = np.zeros(n, dtype=bool)
        keys = np.zeros((n, g.key_bytes), dtype=np.uint8)
        values = np.zeros((n, g.value_bytes), dtype=np.uint8)
        for i, (bank, index) in enumerate(zip(banks, indexes)):
            ok, key, value = self.read_slot(int(bank), int(index))
            valid[i] = ok
            keys[i] = np.frombuffer(key, dtype=np.uint8)
            values[i] = np.frombuffer(value, dtype=np.uint8)
        return SlotBatch(valid, keys, values)

    def valid_slots(self, progress: Callable[[int], None] | None = None) -> tuple[np.ndarray, SlotBatch]:
        """Flat numbers and contents of every valid slot, in flat order (for dumps)."""
        g = self.geometry
        numbers = np.arange(g.capacity, dtype=np.int64)
        batch = self.read_slots(*g.slot_address(numbers))
        if progress:
            progress(g.capacity)
        keep = batch.valid
        return numbers[keep], SlotBatch(batch.valid[keep], batch.keys[keep], batch.values[keep])

    def load_slots(self, numbers: np.ndarray, keys: np.ndarray, values: np.ndarray) -> None:
        """WRITE_SLOT each (flat number, key, value) into an empty table (snapshot restore)."""
        g = self.geometry
        for number, key, value in zip(numbers, keys, values):
            bank, index = g.slot_address(int(number))
            self.write_slot(bank, index, True, key.tobytes(), value.tobytes())

    def close(self) -> None:
        """Release simulator or device resources."""


BackendFactory = Callable[[Geometry], Backend]

# Backend names -> a factory, or "module:attribute" naming one that is imported on first use, so
# `import pynq_kv` loads neither the Verilator harness nor anything else a backend needs.
_REGISTRY: dict[str, Union[BackendFactory, str]] = {
    "model": "pynq_kv.model:ModelBackend",  # the bit-exact reference model (the default)
    "rtl": "pynq_kv.sim:rtl_backend",  # the Verilated RTL, built on first use
}


def register_backend(name: str, factory: Union[BackendFactory, str]) -> None:
    """Make a backend available to KVEngine(backend=name): a factory of Geometry -> Backend,
    or "package.module:attribute" naming one, imported when the backend is first made."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"a backend name must be a non-empty string, got {name!r}")
    _REGISTRY[name] = factory


def available_backends() -> list[str]:
    """Every name KVEngine(backend=...) accepts, sorted (nothing is imported to list them)."""
    return sorted(_REGISTRY)


def make_backend(name: str, geometry: Geometry) -> Backend:
    """A new backend of that name for geometry; KVError naming the available ones if unknown."""
    from .errors import KVError

    if name not in _REGISTRY:
        raise KVError(f"unknown backend {name!r}; available: {', '.join(available_backends())}")
    factory = _REGISTRY[name]
    if isinstance(factory, str):
        module, _, attribute = factory.partition(":")
        factory = getattr(importlib.import_module(module), attribute)
        _REGISTRY[name] = factory
    return factory(geometry)
