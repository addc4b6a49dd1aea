"""Structured keys: named header fields packed into a raw key (docs/engine.md §2, §8).

Fields are packed from the most significant bit of the KEY_W-bit raw key downward in
declaration order; the bits below the last field are zero. A `FieldLayout` builds raw keys from
natural field values ("10.0.0.1", "aa:bb:cc:dd:ee:ff", 443, b"tag") and wildcard `Rule`s from
per-field match specs (prefixes, value/mask pairs, numeric ranges), so packet-classifier style
rules need no bit arithmetic by the caller.

Field types: ipv4 (32 bits), ipv6 (128), mac (48), port (16), proto (8), vlan (12), uint:N
(N bits; a bare integer N means the same) and bytes:N (N bytes). A bytes field takes bytes or a
str (UTF-8) of at most N bytes, zero-padded on the right, and decodes to exactly N bytes.

As text (the CLI's and serve's --layout, a config file) a layout is written
"src_ip:ipv4,dst_port:port,flow:20" (`parse_layout_spec`, `FieldLayout.from_spec`), and field
values "name=value" (`parse_field_values`).
"""

from __future__ import annotations

import ipaddress
import itertools
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Any, Callable, Optional, Union

from .errors import InvalidRule, KeyFormatError
from .geometry import KEY_WIDTHS
from .ranges import range_to_ternary
from .rules import Rule, RuleValue, Ternary

_FIXED_WIDTHS = {"ipv4": 32, "ipv6": 128, "mac": 48, "port": 16, "proto": 8, "vlan": 12}
_NUMERIC = ("port", "proto", "vlan", "uint")
# rule()'s own keyword arguments cannot also be field names
_RESERVED = frozenset({"priority", "value", "name", "max_entries"})
_WILDCARDS = ("any", "*")
_MAC = re.compile(r"[0-9a-fA-F]{2}([:-])[0-9a-fA-F]{2}(?:\1[0-9a-fA-F]{2}){4}")
_PRIO_W_MAX = 32  # the widest priority any geometry allows (§1)


@dataclass(frozen=True)
class Field:
    """One field: name, canonical type string, width in bits, position of its lowest bit."""

    name: str
    type: str
    width: int
    shift: int

    @property
    def kind(self) -> str:
        """ipv4, ipv6, mac, bytes, or one of the numeric kinds (port, proto, vlan, uint)."""
        return self.type.split(":")[0]

    @property
    def full(self) -> int:
        return (1 << self.width) - 1

    def encode(self, value: Any) -> int:
        """The field's bits for one natural value; KeyFormatError naming the field if bad."""
        try:
            number = _ENCODERS[self.kind](self, value)
        except (ValueError, TypeError) as exc:
            raise KeyFormatError(f"field {self.name!r} ({self.type}): {exc}") from None
        if not 0 <= number <= self.full:
            raise KeyFormatError(
                f"field {self.name!r} ({self.type}): {value!r} is outside 0 .. {self.full}")
        return number

    def decode(self, number: int) -> Union[str, int, bytes]:
        """The natural form of the field's bits (the inverse of encode)."""
        if self.kind == "ipv4":
            return str(ipaddress.IPv4Address(number))
        if self.kind == "ipv6":
            return str(ipaddress.IPv6Address(number))
        if self.kind == "mac":
            return ":".join(f"{byte:02x}" for byte in number.to_bytes(6, "big"))
        if self.kind == "bytes":
            return number.to_bytes(self.width // 8, "big")
        return number


def _integer(value: Any) -> Optional[int]:
    """An Integral (not bool) as int, else None."""
    if isinstance(value, Integral) and not isinstance(value, bool):
        return int(value)
    return None


def _encode_ip(field: Field, value: Any) -> int:
    cls = ipaddress.IPv4Address if field.kind == "ipv4" else ipaddress.IPv6Address
    if _integer(value) is not None:
        return _integer(value)
    if isinstance(value, cls):
        return int(value)
    if isinstance(value, str):
        return int(cls(value.strip()))
    raise TypeError(f"expected an {field.kind} address (str, {cls.__name__} or int), "
                    f"not {type(value).__name__}")


def _encode_mac(field: Field, value: Any) -> int:
    if _integer(value) is not None:
        return _integer(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        if len(value) != 6:
            raise ValueError(f"a MAC address has 6 bytes, not {len(value)}")
        return int.from_bytes(bytes(value), "big")
    if isinstance(value, str):
        text = value.strip()
        if not _MAC.fullmatch(text):
            raise ValueError(f"{value!r} is not a MAC address like aa:bb:cc:dd:ee:ff")
        return int(re.sub("[:-]", "", text), 16)
    raise TypeError(f"expected a MAC address (str, 6 bytes or int), not {type(value).__name__}")


def _encode_number(field: Field, value: Any) -> int:
    if _integer(value) is not None:
        return _integer(value)
    if isinstance(value, str):
        text = value.strip()
        if text[:2].lower() == "0x":
            return int(text, 16)
        if not (text.isascii() and text.isdecimal()):
            raise ValueError(f"{value!r} is not a decimal (or 0x hex) number")
        return int(text, 10)
    raise TypeError(f"expected an integer, not {type(value).__name__}")


def _encode_bytes(field: Field, value: Any) -> int:
    if isinstance(value, str):
        value = value.encode("utf-8")
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError(f"expected bytes or str, not {type(value).__name__}")
    data = bytes(value)
    size = field.width // 8
    if len(data) > size:
        raise ValueError(f"{len(data)} bytes do not fit in {size}")
    return int.from_bytes(data.ljust(size, b"\0"), "big")


_ENCODERS: dict[str, Callable[[Field, Any], int]] = {
    "ipv4": _encode_ip, "ipv6": _encode_ip, "mac": _encode_mac, "bytes": _encode_bytes,
    **{kind: _encode_number for kind in _NUMERIC},
}


def _parse_type(name: str, kind: Any) -> tuple[str, int]:
    """(canonical type string, width in bits) of one declared field type."""
    if _integer(kind) is not None:
        kind = f"uint:{int(kind)}"
    if not isinstance(kind, str):
        raise KeyFormatError(f"field {name!r}: type must be a string like 'ipv4' or 'uint:20'")
    kind = kind.strip().lower()
    if kind in _FIXED_WIDTHS:
        return kind, _FIXED_WIDTHS[kind]
    base, sep, size = kind.partition(":")
    if sep and base in ("uint", "bytes") and size.isascii() and size.isdecimal() and int(size) > 0:
        n = int(size)
        return f"{base}:{n}", n * 8 if base == "bytes" else n
    raise KeyFormatError(
        f"field {name!r}: unknown type {kind!r} (use {', '.join(_FIXED_WIDTHS)}, uint:N or bytes:N)")


def parse_layout_spec(spec: str) -> list[tuple[str, Union[str, int]]]:
    """'src_ip:ipv4, dst_port:port, flow:20' -> [("src_ip", "ipv4"), ("dst_port", "port"),
    ("flow", 20)]; KeyFormatError when a part is not name:type or there is none.

    Only the syntax is checked here; FieldLayout checks names, types and widths.
    """
    if not isinstance(spec, str):
        raise KeyFormatError(f"a layout is text like 'src_ip:ipv4,dst_port:port', not {spec!r}")
    fields: list[tuple[str, Union[str, int]]] = []
    for part in spec.split(","):
        if not part.strip():
            continue
        name, sep, kind = (text.strip() for text in part.partition(":"))
        if not sep or not name or not kind:
            raise KeyFormatError(
                f"layout field {part.strip()!r} is not name:type (e.g. src_ip:ipv4,dst_port:port)")
        fields.append((name, int(kind) if kind.isascii() and kind.isdecimal() else kind))
    if not fields:
        raise KeyFormatError("empty layout (write it as name:type,name:type)")
    return fields


def parse_field_values(items: Iterable[str]) -> dict[str, str]:
    """["src_ip=10.0.0.0/8", "dst_port=80"] -> {"src_ip": "10.0.0.0/8", "dst_port": "80"}.

    Values stay text: FieldLayout.key and .rule parse addresses, numbers, prefixes, ranges
    (1000-2000) and wildcards (*) themselves. ValueError for a part that is not name=value or
    a field given twice.
    """
    values: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ValueError(f"{item!r} is not name=value")
        if name in values:
            raise ValueError(f"field {name!r} is given twice")
        values[name] = value.strip()
    return values


class FieldLayout:
    """Named fields packed from the top of a KEY_W-bit raw key: builds keys and rules."""

    def __init__(self, key_width: int, fields: Sequence[Sequence[Any]]) -> None:
        if _integer(key_width) not in KEY_WIDTHS:
            raise KeyFormatError(f"key width must be one of {KEY_WIDTHS}, got {key_width!r}")
        self.key_width = int(key_width)
        if isinstance(fields, (str, bytes)) or not fields:
            raise KeyFormatError("a field layout needs a list of (name, type) fields")
        parsed: list[Field] = []
        top = self.key_width
        for item in fields:
            if isinstance(item, (str, bytes)) or not isinstance(item, Sequence) or len(item) != 2:
                raise KeyFormatError(f"field {item!r} is not a (name, type) pair")
            name, kind = item
            if not isinstance(name, str) or not name.isidentifier():
                raise KeyFormatError(f"field name {name!r} is not an identifier")
            if name in _RESERVED:
                raise KeyFormatError(f"field name {name!r} is reserved (rule() uses it)")
            if any(f.name == name for f in parsed):
                raise KeyFormatError(f"field name {name!r} is used twice")
            canonical, width = _parse_type(name, kind)
            top -= width
            parsed.append(Field(name, canonical, width, top))
        if top < 0:
            raise KeyFormatError(
                f"the fields need {self.key_width - top} bits, the key has only {self.key_width}")
        self.fields: list[Field] = parsed
        self._by_name = {f.name: f for f in parsed}

    def __repr__(self) -> str:
        return f"FieldLayout({self.key_width}, {[(f.name, f.type) for f in self.fields]!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FieldLayout) and other.to_dict() == self.to_dict()

    def __hash__(self) -> int:
        return hash((self.key_width, tuple((f.name, f.type) for f in self.fields)))

    @classmethod
    def from_spec(cls, key_width: int, spec: str) -> FieldLayout:
        """The layout written as text, "src_ip:ipv4,dst_port:port" (see parse_layout_spec)."""
        return cls(key_width, parse_layout_spec(spec))

    def to_dict(self) -> dict[str, Any]:
        return {"key_width": self.key_width, "fields": [[f.name, f.type] for f in self.fields]}

    @classmethod
    def from_dict(cls, data: Any) -> FieldLayout:
        if not isinstance(data, dict) or set(data) != {"key_width", "fields"}:
            raise KeyFormatError("a layout record has exactly the keys 'key_width' and 'fields'")
        return cls(data["key_width"], data["fields"])

    def _check_names(self, given: Sequence[str], error: type[Exception], need_all: bool) -> None:
        unknown = [n for n in given if n not in self._by_name]
        missing = [f.name for f in self.fields if f.name not in given] if need_all else []
        if unknown or missing:
            parts = []
            if missing:
                parts.append(f"missing field(s) {', '.join(missing)}")
            if unknown:
                parts.append(f"unknown field(s) {', '.join(unknown)}")
            raise error(f"{'; '.join(parts)} (layout fields: {', '.join(self._by_name)})")

    def key(self, **values: Any) -> int:
        """The raw key of one value per field; KeyFormatError naming any bad field."""
        self._check_names(list(values), KeyFormatError, need_all=True)
        raw = 0
        for f in self.fields:
            raw |= f.encode(values[f.name]) << f.shift
        return raw

    def decode(self, raw_key: int) -> dict[str, Union[str, int, bytes]]:
        """The natural field values of a raw key built by key()."""
        raw = _integer(raw_key)
        if raw is None or raw < 0 or raw >> self.key_width:
            raise KeyFormatError(f"{raw_key!r} is not a {self.key_width}-bit raw key")
        if raw & ((1 << self.fields[-1].shift) - 1):
            raise KeyFormatError("raw key has bits set below the last field: not a key of this layout")
        return {f.name: f.decode(raw >> f.shift & f.full) for f in self.fields}

    def rule(self, priority: int, value: RuleValue, name: Optional[str] = None, *,
             max_entries: int = 4096, **matches: Any) -> Rule:
        """A Rule matching keys whose fields all match their specs (omitted fields: any).

        Specs per field: None / "any" / "*"; an exact value; a prefix "10.0.0.0/8",
        "2001:db8::/32" or "aa:bb:cc:00:00:00/24"; {"value": v, "mask": m}; a range (lo, hi),
        {"range": [lo, hi]} or "lo-hi" (numeric and IP fields) expanded to a minimum set of
        ternary entries. A rule's entries are the cross product over fields, refused with
        InvalidRule beyond max_entries.
        """
        self._check_names(list(matches), InvalidRule, need_all=False)
        alternatives = []
        spec: dict[str, Any] = {}
        for f in self.fields:
            pairs, canonical = _field_match(f, matches.get(f.name))
            alternatives.append(pairs)
            if canonical is not None:
                spec[f.name] = canonical
        count = math.prod(len(pairs) for pairs in alternatives)
        if count > max_entries:
            raise InvalidRule(
                f"rule expands to {count} ternary entries (the cross product of "
                f"{' x '.join(str(len(p)) for p in alternatives)} per field), more than "
                f"max_entries={max_entries}")
        entries = []
        for combo in itertools.product(*alternatives):
            match = mask = 0
            for f, (v, m) in zip(self.fields, combo):
                match |= v << f.shift
                mask |= m << f.shift
            entries.append(Ternary(match, mask))
        rule = Rule(tuple(entries), priority, value, name, spec)
        rule.validate(self.key_width, _PRIO_W_MAX)
        return rule


Pairs = list[tuple[int, int]]


def _field_match(f: Field, spec: Any) -> tuple[Pairs, Any]:
    """(value, mask) alternatives within the field, and the JSON-able canonical spec (None = any)."""
    try:
        return _field_match_unchecked(f, spec)
    except (KeyFormatError, InvalidRule) as exc:
        message = str(exc)
        if not message.startswith(f"field {f.name!r}"):
            message = f"field {f.name!r} ({f.type}): {message}"
        raise InvalidRule(message) from None


def _field_match_unchecked(f: Field, spec: Any) -> tuple[Pairs, Any]:
    if spec is None or isinstance(spec, str) and spec.strip().lower() in _WILDCARDS:
        return [(0, 0)], None
    if isinstance(spec, (ipaddress.IPv4Network, ipaddress.IPv6Network)):
        return _prefix(f, str(spec))
    if isinstance(spec, dict):
        if set(spec) == {"value", "mask"}:
            return _value_mask(f, spec["value"], spec["mask"])
        if set(spec) == {"range"}:
            return _range(f, spec["range"])
        raise InvalidRule(f"a dict spec is {{'value': v, 'mask': m}} or {{'range': [lo, hi]}}, "
                          f"got keys {sorted(spec)}")
    if isinstance(spec, (tuple, list)):
        return _range(f, spec)
    if isinstance(spec, str) and "/" in spec:
        return _prefix(f, spec)
    if isinstance(spec, str) and "-" in spec and f.kind != "mac":
        return _range(f, spec.split("-"))
    number = f.encode(spec)
    if f.kind == "bytes":
        return [(number, f.full)], {"value": hex(number), "mask": hex(f.full)}
    return [(number, f.full)], f.decode(number)


def _prefix(f: Field, text: str) -> tuple[Pairs, Any]:
    if f.kind in ("ipv4", "ipv6"):
        try:
            net = ipaddress.ip_network(text.strip(), strict=True)
        except ValueError as exc:
            raise InvalidRule(f"bad prefix: {exc}") from None
        if f"ipv{net.version}" != f.kind:
            raise InvalidRule(f"{text!r} is an IPv{net.version} prefix")
        address, length = int(net.network_address), net.prefixlen
        canonical = str(net)
    elif f.kind == "mac":
        address_text, _, length_text = text.partition("/")
        address = f.encode(address_text)
        digits = length_text.strip()
        if not (digits.isascii() and digits.isdecimal()) or int(digits) > f.width:
            raise InvalidRule(f"bad prefix length {length_text!r} in {text!r} (0 .. {f.width})")
        length = int(length_text)
        if address & ((1 << (f.width - length)) - 1):
            raise InvalidRule(f"{text!r} has bits set after the prefix length")
        canonical = f"{f.decode(address)}/{length}"
    else:
        raise InvalidRule(f"prefixes are for ipv4, ipv6 and mac fields, not {f.type}: {text!r}")
    return [(address, f.full ^ ((1 << (f.width - length)) - 1))], canonical


def _value_mask(f: Field, value: Any, mask: Any) -> tuple[Pairs, Any]:
    def bits(x: Any, label: str) -> int:
        """Raw field bits: an int or "0x.." hex string, else a natural value of the field."""
        number = _integer(x)
        if isinstance(x, str) and x.strip()[:2].lower() == "0x":
            try:
                number = int(x.strip(), 16)
            except ValueError:
                raise InvalidRule(f"{label} {x!r} is not a hex number") from None
        if number is None:
            return f.encode(x)
        if number < 0:
            raise InvalidRule(f"{label} {number} is negative")
        if number > f.full:
            raise InvalidRule(f"{label} 0x{number:x} has bits outside the {f.width}-bit field")
        return number

    v, m = bits(value, "value"), bits(mask, "mask")
    if v & ~m:
        raise InvalidRule(f"value 0x{v:x} has bits outside mask 0x{m:x}, it could never match")
    return [(v, m)], {"value": hex(v), "mask": hex(m)}


def _range(f: Field, bounds: Any) -> tuple[Pairs, Any]:
    if f.kind == "bytes":
        raise InvalidRule("ranges are not supported on bytes fields")
    if not isinstance(bounds, (list, tuple)) or len(bounds) != 2:
        raise InvalidRule(f"a range has two ends, got {bounds!r}")
    lo, hi = (f.encode(b.strip() if isinstance(b, str) else b) for b in bounds)
    return range_to_ternary(lo, hi, f.width), {"range": [f.decode(lo), f.decode(hi)]}
