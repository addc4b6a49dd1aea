"""`make -C hw synth` flow (hw/tools.py synth): Yosys synth_xilinx of kv_engine_top and its
resource report (hw/build/synth_report.json at the reference configuration).

The reference configuration takes minutes in Yosys 0.23, so the suite runs the same script on a
small configuration (`--small`) and checks the report it writes: the issue-3 keys, no latches,
cell counts that add up, and that a LUT limit below the result makes the check fail. The pass/fail rules are
also checked on made-up reports (no Yosys needed).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HW = Path(__file__).resolve().parent.parent / "hw"
sys.path.insert(0, str(HW))

import tools  # noqa: E402  (hw/tools.py)

KEYS = ("lut", "ff", "ramb36", "ramb18", "uram", "latches")


def test_summarize_cells_counts_lut_sites_and_latches():
    cells = {"LUT2": 10, "LUT6": 5, "SRLC32E": 7, "RAM32M16": 2, "FDRE": 40, "FDSE": 2,
             "RAMB36E2": 3, "RAMB18E2": 1, "URAM288": 4, "LDCE": 1, "MUXF7": 9, "CARRY8": 2}
    r = tools.summarize_cells(cells)
    assert r["lut_logic"] == 15
    assert r["lut_memory"] == 7 + 2 * 8
    assert r["lut"] == 15 + 23
    assert (r["ff"], r["ramb36"], r["ramb18"], r["uram"], r["latches"]) == (42, 3, 1, 4, 1)
    assert tools.summarize_cells({"$_DLATCH_P_": 2})["latches"] == 2


def test_check_report_limits():
    ok = {"lut": 1000, "ff": 1000, "ramb36": 10, "ramb18": 2, "uram": 40, "latches": 0}
    assert tools.check_report(ok) == []
    assert tools.check_report(dict(ok, latches=1))
    assert tools.check_report(dict(ok, lut=tools.DEFAULT_MAX_LUT + 1))
    assert tools.check_report(dict(ok, lut=tools.DEFAULT_MAX_LUT)) == []
    assert tools.check_report(dict(ok, uram=65))
    assert tools.check_report(dict(ok, ramb36=144, ramb18=1))
    assert tools.DEFAULT_MAX_LUT == 58560


@pytest.mark.skipif(shutil.which("yosys") is None, reason="yosys is installed by `make test`")
def test_synth_small_configuration(tmp_path):
    out = tmp_path / "synth_report.json"
    cmd = [sys.executable, str(HW / "tools.py"), "synth", str(out), "--small"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads(out.read_text())
    for key in KEYS:
        assert isinstance(report[key], int) and report[key] >= 0, key
    assert report["latches"] == 0
    assert report["pass"] is True and report["problems"] == []
    assert report["parameters"] == {k: str(v) for k, v in tools.SYNTH_SMALL.items()}
    assert report["top"] == "kv_engine_top"
    cells = report["cells"]
    assert report["lut"] == report["lut_logic"] + report["lut_memory"] > 0
    assert report["ff"] == sum(n for c, n in cells.items() if c.startswith("FD"))
    # the rule matcher's shift registers: RULES x ceil(KEY_W / 5) SRLC32E
    small = tools.SYNTH_SMALL
    assert cells.get("SRLC32E", 0) >= small["RULES"] * -(-small["KEY_W"] // 5)
    assert report["lut_levels"] > 0 and report["logic_depth_cells"] >= report["lut_levels"]
    assert "kv_engine" in report["logic_depth_per_module"]
    assert f"{report['lut']} LUTs" in result.stdout

    # a LUT limit below the report fails, and says why (synth applies the same check)
    cmd = [sys.executable, str(HW / "tools.py"), "synth-check", str(out), "--max-lut", "100"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "LUTs > limit 100" in result.stderr
    assert json.loads(out.read_text())["pass"] is False
