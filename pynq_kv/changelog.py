"""The engine's change log (docs/engine.md §10): the data plane's SETs and DELs for the host.

`ChangeLog` is the reference model of the RTL's kv_changelog: a FIFO of `CHANGELOG_DEPTH`
records, a 64-bit sequence number per mutation (dropped ones included, so the host sees a
gap for every record lost), a drop counter and a sticky overflow flag. The model backend keeps
one for its data-plane port; the testbenches use it as their scoreboard. `pynq_kv.mailbox`
drains the same log through the CL_* registers of a board or the Verilated RTL.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import IntEnum

from . import regmap as rm

MASK64 = (1 << 64) - 1
# kv_top's CHANGELOG_DEPTH: the depth a model data plane gets unless told otherwise
DEFAULT_DEPTH = 512
MAX_DEPTH = 65536


class ChangeOp(IntEnum):
    """What a record says happened to its key (CL_STATUS.DELETE)."""

    SET = 0
    DELETE = 1


@dataclass(frozen=True)
class RawChange:
    """One change-log record as the engine keeps it: raw key and value bytes (big-endian,
    KEY_BYTES / VALUE_BYTES long); the value is all zeros for a DELETE."""

    seq: int
    op: ChangeOp
    status: int  # SetStatus (INSERTED, INSERTED_STASH, UPDATED) or DelStatus (DELETED, NOT_FOUND)
    key: bytes
    value: bytes


@dataclass(frozen=True)
class ChangelogStats:
    """The log's state: capacity (0: this engine has no data plane, nothing is ever logged),
    records waiting, the sequence number the next mutation gets (model only; None when read
    through registers), records dropped since reset, and the sticky overflow flag."""

    depth: int
    level: int
    dropped: int
    overflowed: bool
    next_seq: int | None = None


def check_depth(depth: int) -> int:
    """A legal CHANGELOG_DEPTH (0, or a power of two from 2 to 65536), else ValueError."""
    if isinstance(depth, bool) or not isinstance(depth, int) or not (
            depth == 0 or (2 <= depth <= MAX_DEPTH and depth & (depth - 1) == 0)):
        raise ValueError(f"a change log depth is 0 or a power of two from 2 to {MAX_DEPTH}, got {depth!r}")
    return depth


def logged(op: ChangeOp, status: int) -> bool:
    """Whether a data-plane operation makes a record: a SET that changed the table, every DEL."""
    return op == ChangeOp.DELETE or status != rm.ST_SET_FULL


class ChangeLog:
    """The change log of docs/engine.md §10, as kv_changelog keeps it."""

    def __init__(self, depth: int = DEFAULT_DEPTH) -> None:
        self.depth = check_depth(depth)
        self._records: deque[RawChange] = deque()
        self.next_seq = 0
        self.dropped = 0
        self.overflowed = False

    def record(self, op: ChangeOp, status: int, key: bytes, value: bytes) -> None:
        """One data-plane mutation: kept if there is room, else counted as dropped; either way
        it takes the next sequence number. A DELETE's value is recorded as zeros."""
        if not self.depth:
            return
        if op == ChangeOp.DELETE:
            value = bytes(len(value))
        if len(self._records) < self.depth:
            self._records.append(RawChange(self.next_seq, ChangeOp(op), int(status), bytes(key), bytes(value)))
        else:
            self.dropped = (self.dropped + 1) & MASK64
            self.overflowed = True
        self.next_seq = (self.next_seq + 1) & MASK64

    def head(self) -> RawChange | None:
        return self._records[0] if self._records else None

    def pop(self) -> None:
        """CL_CTRL.POP: drop the head record (nothing when the log is empty)."""
        if self._records:
            self._records.popleft()

    def drain(self, max_records: int) -> list[RawChange]:
        """Up to max_records records, oldest first, removed from the log."""
        out = []
        while self._records and len(out) < max_records:
            out.append(self._records.popleft())
        return out

    def clear_overflow(self) -> None:
        self.overflowed = False

    def stats(self) -> ChangelogStats:
        return ChangelogStats(self.depth, len(self._records), self.dropped, self.overflowed, self.next_seq)


def register_accesses(key_width: int, value_width: int, op: ChangeOp) -> int:
    """AXI4-Lite accesses the register drain (pynq_kv.mailbox.read_changes) makes per record:
    CL_STATUS, CL_SEQ_LO/HI, a CL_DATA read per key word and per value word of a SET, and the
    CL_CTRL.POP write (a board's drain rate is its bus rate divided by this)."""
    value_words = value_width // 32 if op == ChangeOp.SET else 0
    return 4 + -(-key_width // 32) + value_words
