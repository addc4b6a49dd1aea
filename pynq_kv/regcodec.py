"""Values in and out of the register map's formats: engine stream beats and multi-word registers.

Hand-written helpers over the numbers that hw/regmap/generate.py writes into `pynq_kv.regmap`
(REQ_FIELDS, RSP_FIELDS): the generated module holds the data only, this one the code, so the
code is linted, type-checked and read like any other. Stream field widths may be "KEY_W" or
"VALUE_W"; a layout resolves them for one engine geometry.
"""

from __future__ import annotations

from typing import Iterable, Sequence, Union

from . import regmap as rm

Layout = dict[str, tuple[int, int]]  # {field: (lsb, width)} of one stream's tdata
FieldSpec = Sequence[tuple[str, Union[int, str]]]


def _layout(fields: FieldSpec, key_w: int, value_w: int) -> Layout:
    sizes = {"KEY_W": key_w, "VALUE_W": value_w}
    out = {}
    lsb = 0
    for name, width in fields:
        w = sizes[width] if isinstance(width, str) else width
        out[name] = (lsb, w)
        lsb += w
    return out


def req_layout(key_w: int, value_w: int) -> Layout:
    """{field: (lsb, width)} of the request tdata."""
    return _layout(rm.REQ_FIELDS, key_w, value_w)


def rsp_layout(key_w: int, value_w: int) -> Layout:
    """{field: (lsb, width)} of the response tdata."""
    return _layout(rm.RSP_FIELDS, key_w, value_w)


def req_width(key_w: int, value_w: int) -> int:
    """Bits of the request tdata."""
    return sum(w for _, w in req_layout(key_w, value_w).values())


def rsp_width(key_w: int, value_w: int) -> int:
    """Bits of the response tdata."""
    return sum(w for _, w in rsp_layout(key_w, value_w).values())


def pack(layout: Layout, fields: dict[str, int]) -> int:
    """tdata of the given field values (missing fields are 0; too wide a value is an error)."""
    tdata = 0
    for name, value in fields.items():
        lsb, width = layout[name]
        if not 0 <= value < 1 << width:
            raise ValueError(f"{name}={value:#x} does not fit in {width} bits")
        tdata |= value << lsb
    return tdata


def unpack(layout: Layout, tdata: int) -> dict[str, int]:
    """{field: value} of a tdata."""
    return {name: (tdata >> lsb) & ((1 << width) - 1) for name, (lsb, width) in layout.items()}


def words(value: int, n: int) -> list[int]:
    """The n 32-bit register words of a multi-word field, word 0 = bits 31:0."""
    return [(value >> (32 * i)) & 0xFFFFFFFF for i in range(n)]


def from_words(ws: Iterable[int]) -> int:
    """Inverse of words()."""
    return sum((w & 0xFFFFFFFF) << (32 * i) for i, w in enumerate(ws))
