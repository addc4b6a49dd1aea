"""A register-level stand-in for kv_csr + kv_engine, written from docs/registers.md.

It decodes the mailbox exactly as the register map describes and executes each command on a
ModelBackend, so `pynq_kv.mailbox` can be tested without a simulator; the Verilated RTL takes
its place in the RTL tests. Only what the mailbox protocol needs is modelled (no AXI errors).
"""

from __future__ import annotations

import numpy as np

from pynq_kv import regcodec
from pynq_kv import regmap as rm
from pynq_kv.backend import RuleEntry
from pynq_kv.errors import CommandError
from pynq_kv.geometry import Geometry
from pynq_kv.model import ModelBackend


class CsrDouble:
    """read32/write32 over a ModelBackend, with the mailbox semantics of docs/registers.md."""

    def __init__(self, geometry: Geometry) -> None:
        self.model = ModelBackend(geometry)
        g = geometry
        self.regs: dict[int, int] = {
            rm.REG_ID: rm.ID_MAGIC, rm.REG_VERSION: rm.VERSION, rm.REG_KEY_W: g.key_width,
            rm.REG_VALUE_W: g.value_width, rm.REG_WAYS: g.ways, rm.REG_ROWS: g.rows,
            rm.REG_STASH: g.stash, rm.REG_RULES: g.rules, rm.REG_PRIO_W: g.prio_width,
            rm.REG_HASH_SEED_LO: g.hash_seed & 0xFFFFFFFF, rm.REG_HASH_SEED_HI: g.hash_seed >> 32,
            rm.REG_NUM_COUNTERS: rm.NUM_COUNTERS, rm.REG_STATUS: 0,
        }
        self.shadow: dict[int, int] = {}
        self.commands = 0

    def read32(self, offset: int) -> int:
        if rm.REG_COUNTER <= offset < rm.REG_COUNTER + 8 * rm.NUM_COUNTERS:
            counter, high = divmod(offset - rm.REG_COUNTER, 8)
            if not high:
                value = self.model.read_counter(counter)
                self.shadow[counter] = value >> 32
                return value & 0xFFFFFFFF
            return self.shadow.get(counter, 0)
        return self.regs.get(offset, 0)

    def write32(self, offset: int, value: int) -> None:
        if offset == rm.REG_CTRL:
            if value & rm.CTRL_GO:
                self._execute()
            return
        self.regs[offset] = value & 0xFFFFFFFF

    def _words(self, base: int, count: int) -> int:
        return regcodec.from_words(self.regs.get(base + 4 * i, 0) for i in range(count))

    def _respond(self, base: int, value: int, count: int) -> None:
        for i, word in enumerate(regcodec.words(value, count)):
            self.regs[base + 4 * i] = word

    def _execute(self) -> None:
        g = self.model.geometry
        kw, vw = -(-g.key_width // 32), g.value_width // 32
        op = self.regs.get(rm.REG_REQ_OP, 0)
        key_int = self._words(rm.REG_REQ_KEY, kw)
        key = np.frombuffer(key_int.to_bytes(g.key_bytes, "big"), dtype=np.uint8).reshape(1, -1)
        value = self._words(rm.REG_REQ_VALUE, vw).to_bytes(g.value_bytes, "big")
        bank, index = self.regs.get(rm.REG_REQ_BANK, 0), self.regs.get(rm.REG_REQ_INDEX, 0)
        entry = self.regs.get(rm.REG_REQ_ENTRY, 0)
        flag = self.regs.get(rm.REG_REQ_FLAG, 0) & 1
        status = rm.ST_OK
        self.commands += 1
        try:
            if op == rm.OP_GET:
                result = self.model.get_batch(key)
                status = rm.ST_MATCH_EXACT if result.hit[0] else rm.ST_MATCH_MISS
                self._respond(rm.REG_RSP_VALUE, int.from_bytes(result.values[0].tobytes(), "big"), vw)
            elif op == rm.OP_LOOKUP:
                result = self.model.lookup_batch(key)
                status = int(result.kind[0])
                self.regs[rm.REG_RSP_ENTRY] = max(int(result.entry[0]), 0)
                self._respond(rm.REG_RSP_VALUE, int.from_bytes(result.values[0].tobytes(), "big"), vw)
            elif op == rm.OP_SET:
                raw_value = np.frombuffer(value, dtype=np.uint8).reshape(1, -1)
                status = int(self.model.set_batch(key, raw_value)[0])
            elif op == rm.OP_DEL:
                status = int(self.model.delete_batch(key)[0])
            elif op == rm.OP_READ_SLOT:
                valid, slot_key, slot_value = self.model.read_slot(bank, index)
                self.regs[rm.REG_RSP_FLAG] = int(valid)
                self._respond(rm.REG_RSP_KEY, int.from_bytes(slot_key, "big"), kw)
                self._respond(rm.REG_RSP_VALUE, int.from_bytes(slot_value, "big"), vw)
            elif op == rm.OP_WRITE_SLOT:
                self.model.write_slot(bank, index, bool(flag), key_int.to_bytes(g.key_bytes, "big"), value)
            elif op == rm.OP_MOVE:
                self.model.move_slot(bank, index, self.regs.get(rm.REG_REQ_BANK2, 0),
                                     self.regs.get(rm.REG_REQ_INDEX2, 0))
            elif op == rm.OP_WRITE_RULE:
                self.model.write_rule(entry, RuleEntry(bool(flag), key_int, self._words(rm.REG_REQ_MASK, kw),
                                                       self.regs.get(rm.REG_REQ_PRIO, 0), value))
            elif op == rm.OP_READ_RULE:
                rule = self.model.read_rule(entry)
                self.regs[rm.REG_RSP_FLAG] = int(rule.valid)
                self.regs[rm.REG_RSP_PRIO] = rule.priority
                self._respond(rm.REG_RSP_KEY, rule.match, kw)
                self._respond(rm.REG_RSP_MASK, rule.mask, kw)
                self._respond(rm.REG_RSP_VALUE, int.from_bytes(rule.value, "big"), vw)
            elif op == rm.OP_CLEAR_TABLE:
                self.model.clear_table()
            elif op == rm.OP_CLEAR_COUNTERS:
                self.model.clear_counters()
            elif op == rm.OP_READ_COUNTER:
                self._respond(rm.REG_RSP_DATA_LO, self.model.read_counter(index), 2)
            elif op == rm.OP_READ_RULE_HITS:
                self._respond(rm.REG_RSP_DATA_LO, self.model.read_rule_hits(entry), 2)
            else:
                self.model._count("cmd_errors", 1)
                status = rm.ST_REFUSED
        except CommandError:
            status = rm.ST_REFUSED  # the model has counted cmd_errors, as the engine does
        self.regs[rm.REG_RSP_OP] = op
        self.regs[rm.REG_RSP_STATUS] = status
        self.regs[rm.REG_STATUS] = rm.STATUS_DONE | status << rm.STATUS_RSP_STATUS_SHIFT | (
            rm.STATUS_REFUSED if status == rm.ST_REFUSED else 0)
