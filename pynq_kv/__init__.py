"""pynq-kv: an open FPGA key-value and wildcard lookup engine, driven from Python.

`KVEngine` is the one entry point; it runs on the bit-exact reference model by default.
`EngineOptions` builds one from the options the CLI, `pynq-kv serve` and notebooks share.
Backends are loaded when first used, so importing the package loads no simulator.
The engine's behaviour is specified in docs/engine.md.
"""

from .backend import Backend, DelStatus, MatchKind, SetStatus, available_backends, register_backend
from .engine import KVEngine, LookupBatch, LookupResult, MsetReport, Occupancy
from .errors import (
    CommandError,
    GeometryError,
    InvalidRule,
    KeyFormatError,
    KeyTooLong,
    KVError,
    RuleTableFull,
    SnapshotError,
    TableFull,
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

__all__ = [
    "Backend", "CommandError", "DelStatus", "EngineOptions", "FieldLayout", "Geometry", "GeometryError",
    "InvalidRule", "KVEngine", "KVError", "KeyFormat", "KeyFormatError", "KeyTooLong",
    "LookupBatch", "LookupResult", "MatchKind", "MsetReport", "Occupancy", "Rule",
    "RuleTableFull", "SetStatus", "SnapshotError", "TableFull", "Ternary", "UnknownRule",
    "ValueFormat", "ValueFormatError", "ValueTooLarge", "available_backends", "register_backend",
]

