"""pynq_kv.frontend.Frontend's admission table on a register double (no simulator): the words
it writes for a table, the commit written last, the table read back, and a table the hardware
cannot hold refused before any write. The RTL's side of the same registers is tests/test_net_board.py and the
kv_top testbench."""

from __future__ import annotations

import ipaddress

import pytest

from pynq_kv import regmap as rm
from pynq_kv.frontend import Frontend
from pynq_kv.admission import Admission, AdmissionEntry


class Registers:
    """Words by offset, every write recorded; FE_ADMIT_ENTRIES reads as the hardware's 8."""

    def __init__(self) -> None:
        self.words = {rm.REG_FE_ADMIT_ENTRIES: 8}
        self.writes: list[tuple[int, int]] = []

    def read32(self, offset: int) -> int:
        return self.words.get(offset, 0)

    def write32(self, offset: int, value: int) -> None:
        self.writes.append((offset, value))
        self.words[offset] = value


def entry(network: str, allow: bool, budget: int) -> AdmissionEntry:
    return AdmissionEntry(ipaddress.IPv4Network(network), allow, budget)


def test_a_table_is_written_then_committed_once() -> None:
    regs = Registers()
    fe = Frontend(regs)
    table = Admission((entry("10.1.2.3/32", False, 0), entry("10.0.0.0/8", True, 5),
                       entry("0.0.0.0/0", True, 0)), default_allow=False, default_budget=7)
    fe.program_admission(table)
    assert regs.writes[-1] == (rm.REG_FE_CTRL, rm.FE_CTRL_ADMIT_COMMIT)
    assert [w for w in regs.writes if w[0] == rm.REG_FE_CTRL] == [regs.writes[-1]]
    assert regs.words[rm.REG_FE_ADMIT_DEFAULT] == 7 << 16                    # deny, budget 7
    assert regs.words[rm.REG_FE_ADMIT_ADDR + 4] == 0x0A000000
    assert regs.words[rm.REG_FE_ADMIT_CTRL + 0] == 0x00002001               # valid, deny, /32
    assert regs.words[rm.REG_FE_ADMIT_CTRL + 4] == 0x00050803               # valid, allow, /8, x5
    assert regs.words[rm.REG_FE_ADMIT_CTRL + 8] == 0x00000003               # valid, allow, /0
    for i in range(3, 8):  # the rest cleared: not valid
        assert (rm.REG_FE_ADMIT_CTRL + 4 * i, 0) in regs.writes
    assert fe.admission() == table


def test_a_table_longer_than_the_hardwares_is_refused_before_any_write() -> None:
    """A board built with fewer entries than the table has: nothing is written (invalid tables
    cannot be built at all: tests/test_udp_guard.py)."""
    regs = Registers()
    regs.words[rm.REG_FE_ADMIT_ENTRIES] = 4
    table = Admission(tuple(entry(f"10.{i}.0.0/16", True, 1) for i in range(5)), True, 2)
    with pytest.raises(ValueError, match="holds 4"):
        Frontend(regs).program_admission(table)
    assert regs.writes == []
