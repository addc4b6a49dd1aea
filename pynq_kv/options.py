"""An engine described by options: what the CLI's flags, serve's settings and a notebook say.

`EngineOptions` holds the backend name, the geometry fields that were given (the others take
Geometry's defaults), the value kind and an optional field-layout spec, and builds the
Geometry, the FieldLayout and the KVEngine from them, so every front door builds engines alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Mapping, Optional

from .engine import KVEngine
from .errors import GeometryError, ValueFormatError
from .geometry import Geometry
from .keys import VALUE_KINDS
from .layout import FieldLayout

# Geometry's fields, the names options, config files and flags use for them.
GEOMETRY_KEYS = tuple(f.name for f in fields(Geometry))


@dataclass(frozen=True)
class EngineOptions:
    """backend, geometry fields (only those given), value kind, layout spec -> an engine.

        EngineOptions(backend="rtl", geometry={"rows": 1024}, layout="src_ip:ipv4").make_engine()
    """

    backend: str = "model"
    geometry: Mapping[str, int] = field(default_factory=dict)
    value_kind: Optional[str] = None  # None: "bytes" for a new engine, any for an existing one
    layout: Optional[str] = None  # "src_ip:ipv4,dst_port:port" (layout.parse_layout_spec)

    def __post_init__(self) -> None:
        if self.value_kind is not None and self.value_kind not in VALUE_KINDS:
            raise ValueFormatError(f"value_kind must be one of {', '.join(VALUE_KINDS)}, "
                                   f"got {self.value_kind!r}")

    def make_geometry(self) -> Geometry:
        """The Geometry of the given fields; GeometryError names an unknown or illegal one."""
        unknown = [k for k in self.geometry if k not in GEOMETRY_KEYS]
        if unknown:
            raise GeometryError(f"unknown geometry key(s) {', '.join(unknown)} "
                                f"(known: {', '.join(GEOMETRY_KEYS)})")
        return Geometry(**self.geometry)

    def make_layout(self, key_width: Optional[int] = None) -> Optional[FieldLayout]:
        """The FieldLayout of the layout spec (for key_width, default the geometry's), or None."""
        if not self.layout:
            return None
        return FieldLayout.from_spec(key_width or self.make_geometry().key_width, self.layout)

    def make_engine(self, **engine_kwargs: Any) -> KVEngine:
        """A new, empty engine (extra keywords go to KVEngine, e.g. relocation=False)."""
        return KVEngine(self.backend, self.make_geometry(), value_kind=self.value_kind or "bytes",
                        **engine_kwargs)

    def mismatches(self, engine: KVEngine) -> list[str]:
        """How an existing engine (say, restored from a snapshot) differs from these options:
        "name=actual (asked for wanted)" for each given geometry field and the value kind."""
        found = [f"{name}={getattr(engine.geometry, name)} (asked for {wanted})"
                 for name, wanted in self.geometry.items()
                 if getattr(engine.geometry, name, wanted) != wanted]
        if self.value_kind and self.value_kind != engine.value_kind:
            found.append(f"value_kind={engine.value_kind} (asked for {self.value_kind})")
        return found
