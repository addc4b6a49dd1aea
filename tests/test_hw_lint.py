"""`make -C hw lint` (Verilator -Wall and Icarus on every module of hw/rtl, plus the register-map
check) stays clean: the suite fails on a lint warning, not only on a wrong answer."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HW = Path(__file__).resolve().parent.parent / "hw"


@pytest.mark.skipif(shutil.which("iverilog") is None, reason="iverilog is installed by `make test`")
def test_hw_lint_is_clean():
    result = subprocess.run(["make", "-C", str(HW), "lint", f"PYTHON={sys.executable}"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
