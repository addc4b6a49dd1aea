"""What pyproject.toml cannot say: folders installed under another package name, and the build
step that installs the data packages for their data only.

The metadata, dependencies, extras and entry points are in pyproject.toml. Nothing here touches
a board: this runs on any machine with no BOARD set. Anything that probes a platform (e.g.
``pynqutils.get_platform()``, which raises unless BOARD is set) must stay behind a check of BOARD.
"""

import json
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def _overlay_files() -> list[str]:
    """Each board's manifest.json and the outputs it names, relative to overlays/ (setuptools
    ships those that exist: the flow's outputs only where it has built them)."""
    files = []
    for manifest in sorted((HERE / "overlays").glob("*/manifest.json")):
        board = manifest.parent.name
        outputs = json.loads(manifest.read_text())["outputs"]
        files += [f"{board}/manifest.json", *(f"{board}/{name}" for name in outputs)]
    return files


# Folders of the repository installed as packages of pynq-kv, with the files each carries.
# The data packages are found at run time through importlib.resources, so an installed pynq-kv
# needs no checkout:
# - pynq_kv.hw: the RTL, the Verilator harness and the register-map source the `rtl` backend
#   builds from (pynq_kv.sim);
# - pynq_kv.notebooks: the notebooks, registered for `pynq get-notebooks` (pyproject.toml);
# - pynq_kv.overlays: each board's manifest.json and, when the Vivado flow has built them there,
#   the outputs the manifest names (kv.bit, kv.hwh, kv.xclbin: never committed, shipped if built).
HW_PACKAGE = "pynq_kv.hw"
HW_DATA = ["rtl/*.v", "rtl/*.vh", "sim/*.cpp", "regmap/*.json"]
DATA_PACKAGES = {
    HW_PACKAGE: ("hw", HW_DATA),
    "pynq_kv.notebooks": ("notebooks", ["*.ipynb"]),
    "pynq_kv.overlays": ("overlays", _overlay_files()),
}


class BuildPy(build_py):
    """build_py that installs the data packages for their data only: hw/tools.py and any other
    Python file there belong to the repository's hardware flow, not to the package."""

    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        modules = super().find_package_modules(package, package_dir)
        if package in DATA_PACKAGES:
            modules = [m for m in modules if m[1] == "__init__"]
        return modules


setup(
    packages=find_packages(include=["pynq_kv", "pynq_kv.*"])
    + ["pynq_kv_api", "pynq_kv_api.routers", *DATA_PACKAGES],
    # the admin service lives in api/ (the project layout) and installs as pynq_kv_api
    package_dir={"pynq_kv_api": "api", **{pkg: folder for pkg, (folder, _) in DATA_PACKAGES.items()}},
    package_data={"pynq_kv": ["*.json"], "pynq_kv_api": ["static/*"],
                  **{pkg: files for pkg, (_, files) in DATA_PACKAGES.items()}},
    include_package_data=False,
    cmdclass={"build_py": BuildPy},
    # RESP reply framing in C for the host tier (pynq_kv.redislink), the request parser's
    # fast path (pynq_kv.serve.resp.protocol), the model's H3 hashing (pynq_kv.hashing) and its
    # table search (pynq_kv.model): optional, so a machine without a C compiler still installs
    # pynq-kv, with the same code in Python.
    ext_modules=[Extension("pynq_kv._respframe", ["pynq_kv/_respframe.c"], optional=True),
                 Extension("pynq_kv._respfast", ["pynq_kv/_respfast.c"], optional=True),
                 Extension("pynq_kv._h3", ["pynq_kv/_h3.c"], optional=True),
                 Extension("pynq_kv._slots", ["pynq_kv/_slots.c"], optional=True)],
)
