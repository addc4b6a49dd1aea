"""Backend names come from the registry alone, and registration is lazy.

`import pynq_kv` must not import the Verilator harness (pynq_kv.sim) nor FastAPI; a backend name
nothing registers fails where it is given (CLI option parsing, serve settings), listing the
available ones.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pynq_kv import Geometry, KVEngine, KVError, available_backends, register_backend
from pynq_kv.backend import _REGISTRY
from pynq_kv.model import ModelBackend
from pynq_kv.serve.config import ConfigError, build_config

HEAVY = ("pynq_kv.sim", "pynq_kv.model", "pynq_kv.mailbox", "fastapi", "starlette", "uvicorn",
         "pynq_kv_api", "pynq_kv.serve")


def _imported_after(statement: str) -> set[str]:
    code = (f"import sys, json; {statement}; "
            "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


def test_importing_the_package_loads_no_backend_and_no_web_stack():
    loaded = _imported_after("import pynq_kv")
    assert "pynq_kv.engine" in loaded  # the check sees the package's own modules
    assert not [m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def test_the_model_is_imported_when_first_used():
    loaded = _imported_after("import pynq_kv; pynq_kv.KVEngine(rows=2, ways=2, stash=0, rules=0)")
    assert "pynq_kv.model" in loaded and "pynq_kv.sim" not in loaded


def test_names_come_from_the_registry():
    assert {"model", "rtl"} <= set(available_backends())
    assert not {"pynq", "xrt"} & set(available_backends())  # boards: load()'s, not KVEngine's
    with pytest.raises(KVError, match="available: .*model"):
        KVEngine(backend="pynq")


def test_register_a_factory_or_a_lazy_name(monkeypatch):
    monkeypatch.setitem(_REGISTRY, "other-model", "pynq_kv.model:ModelBackend")
    monkeypatch.setitem(_REGISTRY, "direct", ModelBackend)
    assert {"other-model", "direct"} <= set(available_backends())
    assert isinstance(KVEngine("other-model", Geometry(rows=64)).backend, ModelBackend)
    assert _REGISTRY["other-model"] is ModelBackend  # resolved once, then kept
    assert KVEngine("direct", rows=64).backend.name == "model"
    with pytest.raises(ValueError):
        register_backend("", ModelBackend)


def test_serve_settings_refuse_an_unregistered_backend():
    with pytest.raises(ConfigError, match="model.*rtl"):
        build_config({"backend": "fpga"}, {})


@pytest.mark.parametrize("how", [["--backend", "fpga"], []])
def test_cli_refuses_an_unknown_backend_at_option_parsing(tmp_path, how):
    env = {"PYNQ_KV_STATE": str(tmp_path / "state.npz"), "PATH": "/usr/bin:/bin",
           **({} if how else {"PYNQ_KV_BACKEND": "fpga"})}
    result = subprocess.run([sys.executable, "-m", "pynq_kv", *how, "serve", "--disable", "udp"],
                            capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 2, result.stderr  # click's usage error: nothing was started
    assert "--backend" in result.stderr and "'fpga' is not an available backend" in result.stderr
    assert "model" in result.stderr and "rtl" in result.stderr
    assert not (tmp_path / "state.npz").exists()


@pytest.mark.skipif(Path("/sys/class/fpga_manager/fpga0/firmware").exists(),
                    reason="this machine is a PYNQ board: --backend pynq is available here")
def test_cli_refuses_a_board_backend_this_machine_lacks_at_option_parsing(tmp_path):
    """`pynq-kv --backend pynq serve` off a board: a usage error naming what pynq needs and the
    backends there are, before any overlay, engine or port is touched."""
    env = {"PYNQ_KV_STATE": str(tmp_path / "state.npz"), "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-m", "pynq_kv", "--backend", "pynq", "serve"],
                            capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 2, result.stderr
    assert "--backend" in result.stderr and "needs a PYNQ board" in result.stderr
    assert "available here: auto, model, rtl" in result.stderr  # no XRT on these machines either
    assert not (tmp_path / "state.npz").exists()


def test_serve_settings_refuse_a_board_backend_this_machine_lacks(monkeypatch):
    from pynq_kv import overlay

    monkeypatch.setattr(overlay, "pynq_device_present", lambda: False)
    with pytest.raises(ConfigError, match="needs a PYNQ board.*available here: auto"):
        build_config({"backend": "pynq"}, {})
    monkeypatch.setattr(overlay, "pynq_device_present", lambda: True)
    assert build_config({"backend": "pynq"}, {}).backend == "pynq"
