"""The engine's data-plane port as a Backend (docs/engine.md §10).

On a board the data plane is the Ethernet front-end: its SETs and DELs reach the engine on a
port of their own and are written to the change log. `DataPlanePort` is that port of a
backend that can model it (the reference model): SET and DEL go to the backend's
`data_plane_*_batch`, everything else is the backend's own. `KVEngine.data_plane()` wraps it in
a KVEngine, so the software model of the front-end (`handle_datagram`) run on it makes exactly
the log records the RTL front-end makes.
"""

from __future__ import annotations

import numpy as np

from .backend import Backend, GetResult, LookupResultBatch, RuleEntry, SlotBatch
from .changelog import ChangelogStats, RawChange


class DataPlanePort(Backend):
    """A backend's data-plane port: SET and DEL logged (§10), every other operation unchanged.
    Closing the port leaves the backend open (it belongs to its own engine)."""

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend.geometry)
        self.inner = backend
        self.name = backend.name

    def set_batch(self, keys: np.ndarray, values: np.ndarray) -> np.ndarray:
        return self.inner.data_plane_set_batch(keys, values)

    def delete_batch(self, keys: np.ndarray) -> np.ndarray:
        return self.inner.data_plane_delete_batch(keys)

    def get_batch(self, keys: np.ndarray) -> GetResult:
        return self.inner.get_batch(keys)

    def lookup_batch(self, keys: np.ndarray) -> LookupResultBatch:
        return self.inner.lookup_batch(keys)

    def read_slot(self, bank: int, index: int) -> tuple[bool, bytes, bytes]:
        return self.inner.read_slot(bank, index)

    def write_slot(self, bank: int, index: int, valid: bool, key: bytes, value: bytes) -> None:
        self.inner.write_slot(bank, index, valid, key, value)

    def move_slot(self, src_bank: int, src_index: int, dst_bank: int, dst_index: int) -> None:
        self.inner.move_slot(src_bank, src_index, dst_bank, dst_index)

    def write_rule(self, entry: int, rule: RuleEntry) -> None:
        self.inner.write_rule(entry, rule)

    def read_rule(self, entry: int) -> RuleEntry:
        return self.inner.read_rule(entry)

    def clear_table(self) -> None:
        self.inner.clear_table()

    def clear_counters(self) -> None:
        self.inner.clear_counters()

    def read_counter(self, counter_id: int) -> int:
        return self.inner.read_counter(counter_id)

    def read_rule_hits(self, entry: int) -> int:
        return self.inner.read_rule_hits(entry)

    def read_slots(self, banks: np.ndarray, indexes: np.ndarray) -> SlotBatch:
        return self.inner.read_slots(banks, indexes)

    def counters(self) -> dict[str, int]:
        return self.inner.counters()

    def drain_changes(self, max_records: int) -> list[RawChange]:
        return self.inner.drain_changes(max_records)

    def changelog_stats(self) -> ChangelogStats:
        return self.inner.changelog_stats()

    def clear_changelog_overflow(self) -> None:
        self.inner.clear_changelog_overflow()

    def data_plane_set_batch(self, keys: np.ndarray, values: np.ndarray) -> np.ndarray:
        return self.inner.data_plane_set_batch(keys, values)

    def data_plane_delete_batch(self, keys: np.ndarray) -> np.ndarray:
        return self.inner.data_plane_delete_batch(keys)
