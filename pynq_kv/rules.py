"""Wildcard rules as the host sees them (docs/engine.md §4, §5.3, §8 "Rules").

A `Rule` is one priority and one value over a list of ternary entries; the engine writes every
entry into its own rule-table slot, and a lookup matches the rule when it matches any of them.
Ranges (and other non-cube matches) therefore become several entries of one rule.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from numbers import Integral
from typing import Any, Optional, Union

from .errors import InvalidRule, ValueFormatError

RuleValue = Union[bytes, str, int]


def _plain_int(number: Any) -> Any:
    """numpy and other Integral types as int, so equality, hashing and JSON are uniform."""
    if isinstance(number, Integral) and not isinstance(number, bool):
        return int(number)
    return number


def _is_int(number: Any) -> bool:
    return isinstance(number, int) and not isinstance(number, bool)


@dataclass(frozen=True)
class Ternary:
    """The match part of one rule-table entry: raw KEY_W-bit `match` and `mask` (1 = care)."""

    match: int
    mask: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "match", _plain_int(self.match))
        object.__setattr__(self, "mask", _plain_int(self.mask))

    def matches(self, raw_key: int) -> bool:
        """The engine's entry test (§5.3): (key AND mask) = match."""
        return raw_key & self.mask == self.match


@dataclass(frozen=True)
class Rule:
    """One priority and value over ternary entries; a key matching any entry matches the rule.

    `spec` is the per-field match description the rule was built from (FieldLayout.rule), kept
    for display and snapshots; it counts for equality but not for matching or hashing.
    """

    entries: tuple[Ternary, ...]
    priority: int
    value: RuleValue
    name: Optional[str] = None
    spec: Optional[dict] = field(default=None, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "entries", tuple(self.entries))
        object.__setattr__(self, "priority", _plain_int(self.priority))
        value = self.value
        if isinstance(value, (bytearray, memoryview)):
            value = bytes(value)
        value = _plain_int(value)
        if not isinstance(value, (bytes, str)) and not _is_int(value):
            raise ValueFormatError(f"a rule value must be bytes, str or int, not {type(value).__name__}")
        object.__setattr__(self, "value", value)

    @classmethod
    def ternary(cls, match: int, mask: int, priority: int, value: RuleValue,
                name: Optional[str] = None) -> Rule:
        """A rule of a single raw value/mask entry."""
        return cls((Ternary(match, mask),), priority, value, name)

    def matches(self, raw_key: int) -> bool:
        return any(entry.matches(raw_key) for entry in self.entries)

    def validate(self, key_width: int, prio_width: int) -> None:
        """Raise InvalidRule unless every entry and the priority fit the engine (§5.3, §5.6).

        The engine would accept a match bit outside the mask but such an entry never matches,
        so the host refuses it.
        """
        label = f"rule {self.name!r}" if self.name is not None else "rule"
        if self.name is not None and not isinstance(self.name, str):
            raise InvalidRule(f"rule name must be a string, not {type(self.name).__name__}")
        if not self.entries:
            raise InvalidRule(f"{label} has no entries, it could never match")
        for i, entry in enumerate(self.entries):
            where = f"{label}, entry {i}"
            if not isinstance(entry, Ternary):
                raise InvalidRule(f"{where} is a {type(entry).__name__}, not a Ternary")
            if not _is_int(entry.match) or not _is_int(entry.mask):
                raise InvalidRule(f"{where}: match and mask must be integers")
            if entry.match < 0 or entry.mask < 0:
                raise InvalidRule(f"{where}: match and mask must not be negative")
            if entry.mask >> key_width:
                raise InvalidRule(f"{where}: mask 0x{entry.mask:x} is wider than the {key_width}-bit key")
            if entry.match & ~entry.mask:
                raise InvalidRule(
                    f"{where}: match bits 0x{entry.match & ~entry.mask:x} are outside the mask, "
                    f"the entry could never match")
        if not _is_int(self.priority):
            raise InvalidRule(f"{label}: priority must be an integer, not {type(self.priority).__name__}")
        if not 0 <= self.priority < 1 << prio_width:
            raise InvalidRule(
                f"{label}: priority {self.priority} is outside 0 .. {(1 << prio_width) - 1} "
                f"({prio_width}-bit priorities)")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form: integers as hex strings, the value tagged with its type."""
        if isinstance(self.value, bytes):
            value: dict[str, str] = {"bytes": self.value.hex()}
        elif isinstance(self.value, str):
            value = {"str": self.value}
        else:
            value = {"int": hex(self.value)}
        return {
            "entries": [{"match": hex(e.match), "mask": hex(e.mask)} for e in self.entries],
            "priority": self.priority,
            "value": value,
            "name": self.name,
            "spec": copy.deepcopy(self.spec),
        }

    @classmethod
    def from_dict(cls, data: Any) -> Rule:
        """The inverse of to_dict; InvalidRule for anything malformed."""
        try:
            entries = tuple(Ternary(_hex_int(e["match"]), _hex_int(e["mask"])) for e in data["entries"])
            (kind, raw), = data["value"].items()
            if kind == "bytes":
                value: RuleValue = bytes.fromhex(raw)
            elif kind == "str" and isinstance(raw, str):
                value = raw
            elif kind == "int":
                value = _hex_int(raw)
            else:
                raise ValueError(f"unknown value kind {kind!r}")
            priority = data["priority"]
            if not _is_int(priority):
                raise ValueError(f"priority {priority!r} is not an integer")
            spec = data.get("spec")
            if spec is not None and not isinstance(spec, dict):
                raise ValueError("spec must be an object")
            return cls(entries, priority, value, data.get("name"), spec)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InvalidRule(f"not a rule record: {exc}") from exc


def _hex_int(text: Any) -> int:
    if not isinstance(text, str) or not text.startswith("0x"):
        raise ValueError(f"{text!r} is not a 0x-prefixed hex string")
    return int(text, 16)
