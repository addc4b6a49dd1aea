"""Overlay manifests: overlays/<board>/manifest.json read and checked in one place.

A board's manifest is the one description of its overlay: part (or Alveo platform), clock,
geometry, every kv_top parameter, the register-map version it was built with, its output files
and what was verified. The Vivado flow (hw/vivado/flow.py) builds from it and `pynq_kv.load()`
checks a bitstream and the hardware against it. The simulated overlay has no file: its manifest
is made here from the geometry in use, with the clock marked as assumed.

Where the overlays are: the `overlays` argument, else $PYNQ_KV_OVERLAYS, else the repository's
overlays/ folder next to this package (a checkout or an editable install).
"""

from __future__ import annotations

import importlib.resources
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

from . import regmap as rm
from .errors import ManifestError, UnknownBoard

if TYPE_CHECKING:
    from .geometry import Geometry

PathLike = Union[str, "os.PathLike[str]"]

#: The repository's overlays/ folder (one directory per board, each with a manifest.json).
OVERLAYS_PACKAGE = "pynq_kv.overlays"  # the repository's overlays/, installed as package data
OVERLAYS_ENV = "PYNQ_KV_OVERLAYS"

#: The clock the simulated overlay reports: the target of docs/rtl.md, not a timing result.
ASSUMED_MHZ = 300.0

#: The keys every board manifest must have (the flow and the loader read them).
REQUIRED_KEYS = ("board", "flow", "part", "top", "instance", "clock", "regmap_version",
                 "geometry", "parameters", "outputs")


def overlays_dir(overlays: Optional[PathLike] = None) -> Path:
    """The folder holding overlays/<board>/: the argument, then $PYNQ_KV_OVERLAYS, then the
    overlays/ installed with the package (the repository's own in an editable install)."""
    if overlays is not None:
        return Path(overlays)
    env = os.environ.get(OVERLAYS_ENV)
    if env:
        return Path(env)
    return Path(str(importlib.resources.files(OVERLAYS_PACKAGE)))


def boards(overlays: Optional[PathLike] = None) -> list[str]:
    """Boards with a manifest, sorted."""
    return sorted(p.parent.name for p in overlays_dir(overlays).glob("*/manifest.json"))


def manifest_path(board: str, overlays: Optional[PathLike] = None) -> Path:
    return overlays_dir(overlays) / board / "manifest.json"


def regmap_version() -> str:
    """The register-map version this package speaks, as manifests write it ("1.1")."""
    return f"{rm.VERSION_MAJOR}.{rm.VERSION_MINOR}"


def load_manifest(board: str, overlays: Optional[PathLike] = None) -> dict[str, Any]:
    """overlays/<board>/manifest.json, checked to be a complete manifest of that board.

    UnknownBoard names the boards there are; ManifestError names the file and what is wrong.
    """
    path = manifest_path(board, overlays)
    if not board or "/" in board or board.startswith(".") or not path.is_file():
        known = ", ".join(boards(overlays)) or "(none)"
        raise UnknownBoard(f"unknown board {board!r}: known boards are {known} (each is a "
                           f"directory {overlays_dir(overlays)}/<board>/ with a manifest.json)")
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ManifestError(f"{path}: cannot read the manifest: {exc}") from exc
    if not isinstance(manifest, dict):
        raise ManifestError(f"{path}: a manifest is a JSON object")
    missing = [k for k in REQUIRED_KEYS if k not in manifest]
    if missing:
        raise ManifestError(f"{path}: missing {', '.join(missing)}")
    if manifest["board"] != board:
        raise ManifestError(f"{path}: 'board' is {manifest['board']!r}, expected {board!r}")
    overlap = set(manifest["geometry"]) & set(manifest["parameters"])
    if overlap:
        raise ManifestError(f"{path}: {sorted(overlap)} both in 'geometry' and 'parameters'")
    return manifest


def check_regmap_version(manifest: dict[str, Any], path: PathLike) -> None:
    """The overlay must speak this package's register-map major version (the mailbox's rule)."""
    version = str(manifest.get("regmap_version"))
    major, _, minor = version.partition(".")
    if not (major.isdigit() and minor.isdigit()) or int(major) != rm.VERSION_MAJOR:
        raise ManifestError(
            f"{path}: the overlay was built for register map {version}, this pynq-kv speaks "
            f"{regmap_version()}: rebuild the overlay from this version of pynq-kv "
            f"(make -C hw overlay BOARD={manifest.get('board')}) or install the pynq-kv it was "
            "built with")


def geometry_params(geometry: "Geometry") -> dict[str, int]:
    """The geometry as the manifests' "geometry" block names it (kv_top's parameters)."""
    from .sim import engine_params  # the one Geometry -> RTL parameter mapping

    return {k: int(v) for k, v in engine_params(geometry).items() if k != "HASH_SEED"}


def check_geometry(manifest: dict[str, Any], geometry: "Geometry", where: str) -> None:
    """The hardware's geometry (read from its registers) must be the manifest's."""
    found = geometry_params(geometry)
    wrong = [f"{k}={found.get(k)} (manifest: {v})" for k, v in manifest["geometry"].items()
             if found.get(k) != v]
    if wrong:
        raise ManifestError(
            f"{where} does not match its manifest: the hardware reports {', '.join(wrong)}; "
            f"the bitstream and manifest.json come from different builds: rebuild with "
            f"make -C hw overlay BOARD={manifest['board']}")


def simulated_manifest(geometry: "Geometry", backend: str, top: Optional[str]) -> dict[str, Any]:
    """The manifest the simulated overlay reports: no part, no file, an assumed clock."""
    return {
        "board": "sim",
        "name": "simulated overlay",
        "flow": "simulation",
        "backend": backend,
        "top": top,
        "part": None,
        "clock": {"mhz": ASSUMED_MHZ, "assumed": True,
                  "source": "assumed: the RTL's target clock (docs/rtl.md), not a timing result"},
        "regmap_version": regmap_version(),
        "geometry": geometry_params(geometry),
        "parameters": {"HASH_SEED": f"64'h{geometry.hash_seed:016X}"},
        "outputs": [],
    }
