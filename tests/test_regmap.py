"""The register map is defined once (hw/regmap/kv_regs.json) and generated into Verilog, Python
and docs; these tests keep the outputs and their users in step with that source."""

from __future__ import annotations

import ast
import copy
import importlib.util
import json
import random
import re
from pathlib import Path

import pytest

from pynq_kv import backend, regcodec, regmap

REPO = Path(__file__).resolve().parents[1]


def _generator():
    spec = importlib.util.spec_from_file_location("kv_regmap_generate", REPO / "hw" / "regmap" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _generator()


def test_outputs_are_up_to_date():
    """Regenerating from the source gives byte-identical committed outputs."""
    outputs = gen.generate()
    assert set(outputs) == {Path("hw/rtl/kv_regs.vh"), Path("pynq_kv/regmap.py"), Path("docs/registers.md")}
    for rel, text in outputs.items():
        assert (REPO / rel).read_bytes() == text.encode(), f"{rel} is stale: run python hw/regmap/generate.py"


def test_generated_python_holds_data_only():
    """pynq_kv/regmap.py is a docstring and assignments: the code that uses the numbers is
    written by hand (pynq_kv/regcodec.py), not pasted in by the generator."""
    tree = ast.parse(gen.generate()[Path("pynq_kv/regmap.py")])
    doc, *body = tree.body
    assert isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant)
    kinds = {type(node).__name__ for node in body}
    assert kinds == {"Assign"}, kinds


def test_generation_is_deterministic(tmp_path):
    assert gen.main(["--root", str(tmp_path)]) == 0
    assert gen.main(["--root", str(tmp_path), "--check"]) == 0
    for rel in gen.OUTPUTS.values():
        assert (tmp_path / rel).read_bytes() == (REPO / rel).read_bytes()


def test_backend_codes_agree():
    assert regmap.COUNTER_NAMES == backend.COUNTER_NAMES
    assert regmap.COUNTER_IDS == backend.COUNTER_IDS
    assert regmap.SET_CODES == {s.name: s.value for s in backend.SetStatus}
    assert regmap.DEL_CODES == {s.name: s.value for s in backend.DelStatus}
    assert regmap.MATCH_CODES == {s.name: s.value for s in backend.MatchKind}
    assert regmap.ST_REFUSED == 15
    assert regmap.ST_REFUSED not in set(regmap.SET_CODES.values()) | set(regmap.DEL_CODES.values()) | set(
        regmap.MATCH_CODES.values())


def test_rtl_doc_opcodes_agree():
    """docs/rtl.md states the opcodes in prose; they must be the generated ones."""
    text = (REPO / "docs" / "rtl.md").read_text()
    line = re.search(r"^Opcodes: (.*?)\. Any other", text, re.MULTILINE | re.DOTALL).group(1)
    doc = {name: int(code) for code, name in re.findall(r"(\d+) ([A-Z_]+)", line)}
    assert doc == regmap.OPCODES


def _vh_constants() -> dict[str, str]:
    text = (REPO / "hw" / "rtl" / "kv_regs.vh").read_text()
    return dict(re.findall(r"localparam (?:\[[^\]]+\] )?(KV_\w+) = ([^;]+);", text))


def _verilog_int(expr: str) -> int | None:
    m = re.fullmatch(r"(?:\d+)?'([hd])([0-9A-Fa-f_]+)", expr)
    if m:
        return int(m.group(2), 16 if m.group(1) == "h" else 10)
    return int(expr) if expr.isdigit() else None


def test_verilog_and_python_agree():
    vh = _vh_constants()
    py = {name: getattr(regmap, name) for name in dir(regmap) if name.isupper()}
    fields = {f"{reg['name']}_{f[0]}" for reg in gen.load()["registers"] for f in reg.get("fields", [])}
    assert {"STATUS_BUSY", "CTRL_GO", "FE_CTRL_ADMIT_COMMIT", "FE_ADMIT_CTRL_LEN"} <= fields
    checked = 0
    for name, expr in vh.items():
        value = _verilog_int(expr)
        short = name[3:]  # without KV_
        if value is None or (short.startswith(("REQ_", "RSP_")) and short not in py):
            continue  # stream offsets that depend on KEY_W/VALUE_W: checked below
        if short in fields or (short.endswith("_W") and short[:-2] in fields):
            # Verilog: bit position and width; Python: mask, shift and width
            if short.endswith("_W"):
                assert py[short] == value, name
            else:
                assert py[short + "_SHIFT"] == value, name
                assert py[short] == ((1 << py[short + "_W"]) - 1) << value, name
        else:
            assert py[short] == value, name
        checked += 1
    assert checked > 100
    # the parametric stream offsets
    for key_w in (144, 288, 576, 1152):
        for value_w in (32, 256, 512):
            env = {"KEY_W": key_w, "VALUE_W": value_w}
            for stream, lay in (("REQ", regcodec.req_layout(key_w, value_w)), ("RSP", regcodec.rsp_layout(key_w, value_w))):
                for field, (lsb, width) in lay.items():
                    assert eval(vh[f"KV_{stream}_{field.upper()}_LSB"], {}, env) == lsb
                    assert eval(vh[f"KV_{stream}_{field.upper()}_W"], {}, env) == width
                assert eval(vh[f"KV_{stream}_W"], {}, env) == sum(w for _, w in lay.values())


def test_stream_layouts():
    lay = regcodec.req_layout(288, 32)
    assert lay["op"] == (0, 5) and lay["key"] == (regmap.REQ_FIXED_W, 288)
    assert regcodec.req_width(288, 32) == regmap.REQ_FIXED_W + 2 * 288 + 32
    assert regcodec.rsp_width(1152, 512) == regmap.RSP_FIXED_W + 2 * 1152 + 512
    rng = random.Random(1)
    for key_w, value_w in ((144, 32), (1152, 512)):
        for lay in (regcodec.req_layout(key_w, value_w), regcodec.rsp_layout(key_w, value_w)):
            fields = {n: rng.getrandbits(w) for n, (_, w) in lay.items()}
            assert regcodec.unpack(lay, regcodec.pack(lay, fields)) == fields
    with pytest.raises(ValueError):
        regcodec.pack(regcodec.req_layout(288, 32), {"op": 32})
    assert regcodec.from_words(regcodec.words(0x1234_5678_9ABC_DEF0_1111, 3)) == 0x1234_5678_9ABC_DEF0_1111


def test_register_map_shape():
    assert regmap.ID_MAGIC.to_bytes(4, "big") == b"PQKV"
    # the arrays hold the largest geometry of engine.md §1
    assert regmap.REG_REQ_KEY_SIZE * 32 >= 1152 and regmap.REG_REQ_VALUE_SIZE * 32 >= 512
    assert regmap.REG_COUNTER_SIZE >= 2 * regmap.NUM_COUNTERS
    assert all(0 < c < 32 for c in regmap.OPCODES.values())


def test_generator_rejects_overlap():
    src = json.loads(gen.SOURCE.read_text())
    bad = copy.deepcopy(src)
    bad["registers"].append({"name": "DUP", "offset": "0x104", "access": "ro", "doc": ""})
    with pytest.raises(AssertionError, match="overlaps"):
        gen.check(bad)
    bad = copy.deepcopy(src)
    bad["opcodes"].append({"name": "X", "code": 1, "doc": ""})
    with pytest.raises(AssertionError):
        gen.check(bad)
