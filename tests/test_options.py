"""pynq_kv.options.EngineOptions: the one way flags, settings and notebooks build an engine."""

from __future__ import annotations

import pytest

from pynq_kv import GeometryError, KVEngine, ValueFormatError
from pynq_kv.options import GEOMETRY_KEYS, EngineOptions
from pynq_kv.serve.config import ServeConfig


def test_builds_geometry_layout_and_engine():
    options = EngineOptions(geometry={"rows": 64, "value_width": 64}, value_kind="int",
                            layout="src_ip:ipv4,flow:20")
    g = options.make_geometry()
    assert (g.rows, g.value_width, g.ways) == (64, 64, 4)  # the rest are Geometry's defaults
    assert [f.type for f in options.make_layout().fields] == ["ipv4", "uint:20"]
    engine = options.make_engine(relocation=False)
    assert engine.geometry == g and engine.value_kind == "int" and not engine.relocation
    assert engine.backend.name == "model"
    assert EngineOptions().make_layout() is None
    assert EngineOptions().make_engine().value_kind == "bytes"


def test_bad_options_are_named():
    with pytest.raises(GeometryError, match="unknown geometry key.*colour"):
        EngineOptions(geometry={"colour": 1}).make_geometry()
    with pytest.raises(GeometryError, match="rows must be a power of two"):
        EngineOptions(geometry={"rows": 1000}).make_engine()
    with pytest.raises(ValueFormatError, match="value_kind"):
        EngineOptions(value_kind="float")
    assert set(GEOMETRY_KEYS) == {"key_width", "value_width", "ways", "rows", "stash", "rules",
                                  "prio_width", "hash_seed"}


def test_mismatches_name_what_differs():
    engine = KVEngine(rows=64, value_kind="int")
    assert EngineOptions(geometry={"rows": 64}).mismatches(engine) == []
    assert EngineOptions(geometry={"rows": 64}, value_kind="int").mismatches(engine) == []
    assert EngineOptions(geometry={"rows": 128, "ways": 4}, value_kind="bytes").mismatches(engine) == [
        "rows=64 (asked for 128)", "value_kind=int (asked for bytes)"]


def test_serve_settings_describe_the_same_engine():
    config = ServeConfig(backend="model", geometry={"rows": 128}, value_kind="int",
                         layout="dst_port:port")
    options = config.engine_options()
    assert options == EngineOptions("model", {"rows": 128}, "int", "dst_port:port")
    assert config.make_geometry() == options.make_geometry()
    assert config.make_layout(288) == options.make_layout(288)
