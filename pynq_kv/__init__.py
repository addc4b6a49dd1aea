"""pynq-kv: an open FPGA key-value and wildcard lookup engine, driven from Python.

`KVEngine` is the one entry point; it runs on the bit-exact reference model by default.
`EngineOptions` builds one from the options the CLI, `pynq-kv serve` and notebooks share.
Backends are loaded when first used, so importing the package loads no simulator.
`load()` opens the overlay this machine has (a PYNQ board, an Alveo card, or the simulated
overlay) as a `KVOverlay` (docs/overlay.md); both come from pynq_kv.overlay on first use.
The engine's behaviour is specified in docs/engine.md.
"""

from .backend import Backend, DelStatus, MatchKind, SetStatus, available_backends, register_backend
from .changelog import ChangelogStats
from .engine import Change, KVEngine, LookupBatch, LookupResult, MsetReport, Occupancy
from .errors import (
    CommandError,
    GeometryError,
    InvalidRule,
    KeyFormatError,
    KeyTooLong,
    KVError,
    ManifestError,
    OverlayError,
    OverlayNotBuilt,
    RuleTableFull,
    SnapshotError,
    TableFull,
    UnknownBoard,
    UnknownRule,
    ValueFormatError,
    ValueTooLarge,
)
from .geometry import Geometry
from .keys import KeyFormat, ValueFormat
from .layout import FieldLayout
from .options import EngineOptions
from .rules import Rule, Ternary

__version__ = "0.1.0"

_LAZY = {"load": "pynq_kv.overlay", "KVOverlay": "pynq_kv.overlay", "Frontend": "pynq_kv.frontend"}


def __getattr__(name: str) -> object:
    """load and KVOverlay (pynq_kv.overlay), Frontend (pynq_kv.frontend): imported on first use."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pynq_kv' has no attribute {name!r}")


__all__ = [
    "Backend", "Change", "ChangelogStats", "CommandError", "DelStatus", "EngineOptions", "FieldLayout", "Frontend", "Geometry",
    "GeometryError", "InvalidRule", "KVEngine", "KVError", "KVOverlay", "KeyFormat",
    "KeyFormatError", "KeyTooLong", "LookupBatch", "LookupResult", "ManifestError", "MatchKind",
    "MsetReport", "Occupancy", "OverlayError", "OverlayNotBuilt", "Rule", "RuleTableFull",
    "SetStatus", "SnapshotError", "TableFull", "Ternary", "UnknownBoard", "UnknownRule",
    "ValueFormat", "ValueFormatError", "ValueTooLarge", "available_backends", "load",
    "register_backend",
]

