"""A Backend that drives the engine through its AXI4-Lite command mailbox (docs/registers.md).

The same code serves the Verilated RTL (`pynq_kv.sim`) and a board (`pynq_kv.pynq_driver`):
both hand it an object with `read32(offset)` and `write32(offset, value)`. Every engine
operation is one mailbox round trip, so this path is for control and tests; bulk traffic on a
board goes through the engine's streams.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from . import regcodec
from . import regmap as rm
from .changelog import ChangelogStats, ChangeOp, RawChange
from .backend import (
    COUNTER_NAMES,
    Backend,
    GetResult,
    LookupResultBatch,
    MatchKind,
    RuleEntry,
)
from .errors import CommandError, KVError
from .geometry import Geometry

POLL_LIMIT = 10_000  # STATUS reads before a command is declared lost
# Request register of each single-word request field.
_SCALAR_REGS = {"flag": rm.REG_REQ_FLAG, "bank": rm.REG_REQ_BANK, "index": rm.REG_REQ_INDEX,
                "bank2": rm.REG_REQ_BANK2, "index2": rm.REG_REQ_INDEX2,
                "entry": rm.REG_REQ_ENTRY, "prio": rm.REG_REQ_PRIO}


class RegisterAccess(Protocol):
    """32-bit register access at byte offsets from the engine's CSR base."""

    def read32(self, offset: int) -> int: ...

    def write32(self, offset: int, value: int) -> None: ...


class MailboxError(KVError):
    """The mailbox did not behave as docs/registers.md says (wrong ID, lost command)."""


def read_geometry(regs: RegisterAccess) -> Geometry:
    """The engine's parameters, read from its ID and geometry registers."""
    magic = regs.read32(rm.REG_ID)
    if magic != rm.ID_MAGIC:
        raise MailboxError(f"no pynq-kv engine here: ID register reads {magic:#010x}, "
                           f"expected {rm.ID_MAGIC:#010x}")
    version = regs.read32(rm.REG_VERSION)
    if version >> 16 != rm.VERSION_MAJOR:
        raise MailboxError(f"register map version {version >> 16}.{version & 0xFFFF} is not "
                           f"{rm.VERSION_MAJOR}.x, which this package speaks")
    return Geometry(
        key_width=regs.read32(rm.REG_KEY_W),
        value_width=regs.read32(rm.REG_VALUE_W),
        ways=regs.read32(rm.REG_WAYS),
        rows=regs.read32(rm.REG_ROWS),
        stash=regs.read32(rm.REG_STASH),
        rules=regs.read32(rm.REG_RULES),
        prio_width=regs.read32(rm.REG_PRIO_W),
        hash_seed=regs.read32(rm.REG_HASH_SEED_LO) | regs.read32(rm.REG_HASH_SEED_HI) << 32,
    )


class MailboxBackend(Backend):
    """Engine operations as mailbox commands over a register accessor."""

    name = "mailbox"

    def __init__(self, regs: RegisterAccess, name: str | None = None) -> None:
        super().__init__(read_geometry(regs))
        self.regs = regs
        if name:
            self.name = name
        g = self.geometry
        self._key_words = -(-g.key_width // 32)  # 144-bit keys take 5 words, the last one half used
        self._value_words = g.value_width // 32
        self._written: dict[int, int] = {}  # last value written to each request register
        self._changelog: bool | None = None  # whether CL_DEPTH > 0, read on first use

    # -- mailbox -------------------------------------------------------------------------
    def _put(self, offset: int, value: int) -> None:
        """Write a request register unless it already holds the value (they keep it)."""
        if self._written.get(offset) != value:
            self.regs.write32(offset, value)
            self._written[offset] = value

    def _put_words(self, base: int, value: int, count: int) -> None:
        for i, word in enumerate(regcodec.words(value, count)):
            self._put(base + 4 * i, word)

    def _get_words(self, base: int, count: int) -> int:
        return regcodec.from_words(self.regs.read32(base + 4 * i) for i in range(count))

    def _command(self, op: int, **fields: int) -> int:
        """Send one request; returns the response status code. Refused commands raise."""
        self._put(rm.REG_REQ_OP, op)
        for name, value in fields.items():
            if name == "key":
                self._put_words(rm.REG_REQ_KEY, value, self._key_words)
            elif name == "mask":
                self._put_words(rm.REG_REQ_MASK, value, self._key_words)
            elif name == "value":
                self._put_words(rm.REG_REQ_VALUE, value, self._value_words)
            else:
                self._put(_SCALAR_REGS[name], value)
        self.regs.write32(rm.REG_CTRL, rm.CTRL_GO)
        for _ in range(POLL_LIMIT):
            status = self.regs.read32(rm.REG_STATUS)
            if status & rm.STATUS_DONE and not status & rm.STATUS_BUSY:
                break
        else:
            raise MailboxError(f"opcode {op}: no response after {POLL_LIMIT} status reads")
        code = (status & rm.STATUS_RSP_STATUS) >> rm.STATUS_RSP_STATUS_SHIFT
        if code == rm.ST_REFUSED:
            raise CommandError(f"the engine refused opcode {op} with {_fields_text(fields)}")
        return code

    def _key_int(self, raw: np.ndarray) -> int:
        return int.from_bytes(raw.tobytes(), "big")

    def _value_bytes(self) -> bytes:
        value = self._get_words(rm.REG_RSP_VALUE, self._value_words)
        return value.to_bytes(self.geometry.value_bytes, "big")

    # -- data plane ----------------------------------------------------------------------
    def get_batch(self, keys: np.ndarray) -> GetResult:
        hit = np.zeros(len(keys), dtype=bool)
        values = np.zeros((len(keys), self.geometry.value_bytes), dtype=np.uint8)
        for i, key in enumerate(keys):
            if self._command(rm.OP_GET, key=self._key_int(key)) == rm.ST_MATCH_EXACT:
                hit[i] = True
                values[i] = np.frombuffer(self._value_bytes(), dtype=np.uint8)
        return GetResult(hit, values)

    def lookup_batch(self, keys: np.ndarray) -> LookupResultBatch:
        n = len(keys)
        kind = np.zeros(n, dtype=np.uint8)
        values = np.zeros((n, self.geometry.value_bytes), dtype=np.uint8)
        entry = np.full(n, -1, dtype=np.int32)
        for i, key in enumerate(keys):
            kind[i] = self._command(rm.OP_LOOKUP, key=self._key_int(key))
            if kind[i] != MatchKind.MISS:
                values[i] = np.frombuffer(self._value_bytes(), dtype=np.uint8)
            if kind[i] == MatchKind.RULE:
                entry[i] = self.regs.read32(rm.REG_RSP_ENTRY)
        return LookupResultBatch(kind, values, entry)

    def set_batch(self, keys: np.ndarray, values: np.ndarray) -> np.ndarray:
        return np.array([self._command(rm.OP_SET, key=self._key_int(k), value=self._key_int(v))
                         for k, v in zip(keys, values)], dtype=np.uint8)

    def delete_batch(self, keys: np.ndarray) -> np.ndarray:
        return np.array([self._command(rm.OP_DEL, key=self._key_int(k)) for k in keys], dtype=np.uint8)

    # -- control -------------------------------------------------------------------------
    def read_slot(self, bank: int, index: int) -> tuple[bool, bytes, bytes]:
        self._command(rm.OP_READ_SLOT, **_address(bank, index))
        valid = bool(self.regs.read32(rm.REG_RSP_FLAG))
        key = self._get_words(rm.REG_RSP_KEY, self._key_words).to_bytes(self.geometry.key_bytes, "big")
        return valid, key, self._value_bytes()

    def write_slot(self, bank: int, index: int, valid: bool, key: bytes, value: bytes) -> None:
        g = self.geometry
        if len(key) != g.key_bytes or len(value) != g.value_bytes:
            raise CommandError(f"WRITE_SLOT needs a {g.key_bytes}-byte key and a {g.value_bytes}-byte value")
        self._command(rm.OP_WRITE_SLOT, flag=int(bool(valid)), **_address(bank, index),
                      key=int.from_bytes(key, "big"), value=int.from_bytes(value, "big"))

    def move_slot(self, src_bank: int, src_index: int, dst_bank: int, dst_index: int) -> None:
        dst = _address(dst_bank, dst_index)
        self._command(rm.OP_MOVE, **_address(src_bank, src_index), bank2=dst["bank"], index2=dst["index"])

    def write_rule(self, entry: int, rule: RuleEntry) -> None:
        g = self.geometry
        if not 0 <= rule.match < 1 << g.key_width or not 0 <= rule.mask < 1 << g.key_width:
            raise CommandError(f"rule match and mask must fit {g.key_width} bits")
        if len(rule.value) != g.value_bytes:
            raise CommandError(f"a rule value has {g.value_bytes} bytes")
        if not 0 <= rule.priority < 1 << rm.REQ_PRIO_W:
            raise CommandError(f"priority {rule.priority} does not fit the {rm.REQ_PRIO_W}-bit register")
        self._command(rm.OP_WRITE_RULE, flag=int(bool(rule.valid)), entry=_field(entry, rm.REQ_ENTRY_W),
                      prio=rule.priority, key=rule.match, mask=rule.mask,
                      value=int.from_bytes(rule.value, "big"))

    def read_rule(self, entry: int) -> RuleEntry:
        self._command(rm.OP_READ_RULE, entry=_field(entry, rm.REQ_ENTRY_W))
        return RuleEntry(
            bool(self.regs.read32(rm.REG_RSP_FLAG)),
            self._get_words(rm.REG_RSP_KEY, self._key_words),
            self._get_words(rm.REG_RSP_MASK, self._key_words),
            self.regs.read32(rm.REG_RSP_PRIO),
            self._value_bytes(),
        )

    def clear_table(self) -> None:
        self._command(rm.OP_CLEAR_TABLE)

    def clear_counters(self) -> None:
        self._command(rm.OP_CLEAR_COUNTERS)

    def read_counter(self, counter_id: int) -> int:
        self._command(rm.OP_READ_COUNTER, index=_field(counter_id, rm.REQ_INDEX_W))
        return self._get_words(rm.REG_RSP_DATA_LO, 2)

    def read_rule_hits(self, entry: int) -> int:
        self._command(rm.OP_READ_RULE_HITS, entry=_field(entry, rm.REQ_ENTRY_W))
        return self._get_words(rm.REG_RSP_DATA_LO, 2)

    # -- change log (§10): the CL_* registers; none before register map 1.1 ------------
    def _has_changelog(self) -> bool:
        if self._changelog is None:
            minor = self.regs.read32(rm.REG_VERSION) & 0xFFFF
            self._changelog = minor >= 1 and self.regs.read32(rm.REG_CL_DEPTH) > 0
        return self._changelog

    def drain_changes(self, max_records: int) -> list[RawChange]:
        if not self._has_changelog():
            return []
        g = self.geometry
        return read_changes(self.regs, g.key_width, g.value_width, max_records)

    def changelog_stats(self) -> ChangelogStats:
        if not self._has_changelog():
            return super().changelog_stats()
        return read_changelog_stats(self.regs)

    def clear_changelog_overflow(self) -> None:
        if self._has_changelog():
            self.regs.write32(rm.REG_CL_CTRL, rm.CL_CTRL_CLR_OVERFLOW)

    def counters(self) -> dict[str, int]:
        """All counters from the CSR counter block (LO then HI: an atomic 64-bit read each)."""
        out = {}
        for counter_id, name in enumerate(COUNTER_NAMES):
            low = self.regs.read32(rm.REG_COUNTER + 8 * counter_id)
            out[name] = low | self.regs.read32(rm.REG_COUNTER + 8 * counter_id + 4) << 32
        return out


def read_changelog_stats(regs: RegisterAccess) -> ChangelogStats:
    """The log's state through CL_DEPTH, CL_LEVEL, CL_DROPPED (LO then HI) and CL_STATUS."""
    depth = regs.read32(rm.REG_CL_DEPTH)
    level = regs.read32(rm.REG_CL_LEVEL)
    dropped = regs.read32(rm.REG_CL_DROPPED_LO)
    dropped |= regs.read32(rm.REG_CL_DROPPED_HI) << 32
    overflowed = bool(regs.read32(rm.REG_CL_STATUS) & rm.CL_STATUS_OVERFLOWED)
    return ChangelogStats(depth, level, dropped, overflowed)


def read_changes(regs: RegisterAccess, key_width: int, value_width: int, max_records: int) -> list[RawChange]:
    """Drain up to max_records records through the CL_* registers, oldest first.

    Per record: CL_STATUS (stop when VALID is 0; the read also rewinds CL_DATA to the record's
    first word), CL_SEQ_LO/HI, ceil(KEY_W/32) CL_DATA reads for the key words, VALUE_W/32 more
    for a SET's value (a DELETE's value is zero), then CL_CTRL.POP — the next record is at the
    head one clock cycle after the POP, before any further read can arrive.
    """
    key_words = -(-key_width // 32)
    value_words = value_width // 32
    out: list[RawChange] = []
    while len(out) < max_records:
        status = regs.read32(rm.REG_CL_STATUS)
        if not status & rm.CL_STATUS_VALID:
            break
        op = ChangeOp((status & rm.CL_STATUS_DELETE) >> rm.CL_STATUS_DELETE_SHIFT)
        code = (status & rm.CL_STATUS_REC_STATUS) >> rm.CL_STATUS_REC_STATUS_SHIFT
        seq = regs.read32(rm.REG_CL_SEQ_LO) | regs.read32(rm.REG_CL_SEQ_HI) << 32
        key = regcodec.from_words([regs.read32(rm.REG_CL_DATA) for _ in range(key_words)])
        value = 0
        if op == ChangeOp.SET:
            value = regcodec.from_words([regs.read32(rm.REG_CL_DATA) for _ in range(value_words)])
        regs.write32(rm.REG_CL_CTRL, rm.CL_CTRL_POP)
        out.append(RawChange(seq, op, code, key.to_bytes(key_width // 8, "big"),
                             value.to_bytes(value_width // 8, "big")))
    return out


def _field(value: int, width: int) -> int:
    """A request field value, refused on the host when it cannot even be encoded."""
    if not 0 <= value < 1 << width:
        raise CommandError(f"{value} does not fit a {width}-bit request field")
    return value


def _address(bank: int, index: int) -> dict[str, int]:
    return {"bank": _field(bank, rm.REQ_BANK_W), "index": _field(index, rm.REQ_INDEX_W)}


def _fields_text(fields: dict[str, int]) -> str:
    shown = {k: v for k, v in fields.items() if k not in ("key", "mask", "value")}
    return ", ".join(f"{k}={v}" for k, v in shown.items()) or "no fields"
