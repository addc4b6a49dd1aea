"""Packaging of pynq-kv: the Python package, its console script and its test extras.

Nothing here touches a board: the package installs and runs on any machine, against the
simulated overlay. Board-specific dependencies (pynq, XRT bindings) will go into their own
extras, and anything that probes a platform (e.g. ``pynqutils.get_platform()``, which raises
unless BOARD is set) must stay behind a check of BOARD.
"""

import re
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def _version() -> str:
    """``__version__`` from pynq_kv/__init__.py when it declares one, else 0.1.0."""
    init = HERE / "pynq_kv" / "__init__.py"
    try:
        match = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", init.read_text(), re.M)
    except OSError:
        match = None
    return match.group(1) if match else "0.1.0"


def _readme() -> str:
    try:
        return (HERE / "README.md").read_text(encoding="utf-8")
    except OSError:
        return ""


TEST_REQUIRES = [
    "pytest>=7",
    "hypothesis>=6",
    "pytest-timeout>=2",
    "redis>=5",  # redis-py: the RESP client tests (also run against a real redis-server)
    "httpx>=0.27",  # FastAPI's TestClient
    "schemathesis>=4",  # the admin API's OpenAPI, fuzzed
    "scapy>=2.5",  # frames for the Ethernet front-end tests
]

# The PYNQ driver (pynq_kv.pynq_driver). Only pynq 4.0.0 is tested; it pins numpy 1.26 and pulls
# grpcio(-tools) 1.64.0, which has wheels up to CPython 3.12.
PYNQ_REQUIRES = ["pynq==4.0.0"]

# tests/test_pynq_driver.py and the backend suite run PYNQ's own DefaultIP/MMIO code on a
# simulated device, so the test extra installs pynq wherever its wheels exist.
TEST_REQUIRES += ["pynq==4.0.0; python_version < '3.13'"]

# tests/test_package.py builds the wheel with `pip wheel --no-build-isolation` (offline): the
# venv's setuptools needs the wheel package for bdist_wheel
TEST_REQUIRES += ["wheel"]

DEV_REQUIRES = TEST_REQUIRES + [
    "ruff",
    "mypy",
    "build",
]

# The repository's hw/ folder, installed as the package pynq_kv.hw for the files the `rtl`
# backend builds from (pynq_kv.sim finds them through importlib.resources).
HW_PACKAGE = "pynq_kv.hw"
HW_DATA = ["rtl/*.v", "rtl/*.vh", "sim/*.cpp", "regmap/*.json"]


class BuildPy(build_py):
    """build_py that installs hw/ for its data only: hw/tools.py and any other Python file
    there belong to the repository's hardware flow, not to the package."""

    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        modules = super().find_package_modules(package, package_dir)
        if package == HW_PACKAGE:
            modules = [m for m in modules if m[1] == "__init__"]
        return modules


setup(
    name="pynq-kv",
    version=_version(),
    description="Open FPGA key-value and wildcard lookup appliance driven from Python",
    long_description=_readme(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["pynq_kv", "pynq_kv.*"])
    + ["pynq_kv_api", "pynq_kv_api.routers", HW_PACKAGE],
    # the admin service lives in api/ (the project layout) and installs as pynq_kv_api; the
    # hardware sources live in hw/ and install as pynq_kv.hw
    package_dir={"pynq_kv_api": "api", HW_PACKAGE: "hw"},
    package_data={"pynq_kv": ["*.json"], "pynq_kv_api": ["static/*"], HW_PACKAGE: HW_DATA},
    include_package_data=False,
    cmdclass={"build_py": BuildPy},
    install_requires=[
        # pynq 4.0.0 (to be added as a board extra) pins numpy 1.26: keep the same pin everywhere.
        "numpy==1.26.*",
        "click>=8.1",
        "tqdm>=4.60",
        # pynq-kv serve: the admin service, its metrics, and the RESP front-end's parser
        "fastapi>=0.110",
        "uvicorn>=0.29",
        "prometheus-client>=0.20",
        "swagger-ui-bundle-v2>=5.17",  # /docs without a CDN (Swagger UI 5: OpenAPI 3.1)
        "hiredis>=2.3",
        "tomli>=2; python_version < '3.11'",
    ],
    extras_require={
        "test": TEST_REQUIRES,
        "dev": DEV_REQUIRES,
        "pynq": PYNQ_REQUIRES,
    },
    entry_points={
        "console_scripts": [
            "pynq-kv = pynq_kv.cli:main",
        ],
        # pynq.Overlay imports the modules of this group before binding IP drivers, so an
        # overlay holding kv_engine_top gets KVEngineIP (pynq/overlay.py _register_drivers).
        "pynq.lib": [
            "pynq_kv = pynq_kv.pynq_driver",
        ],
    },
    classifiers=[
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.11",
        "Operating System :: POSIX :: Linux",
        "Topic :: System :: Hardware",
    ],
)
