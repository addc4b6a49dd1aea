"""Keys and values between their HTTP forms and the engine's (docs/api.md, "Keys and values").

A {key} in a URL is UTF-8 text by default; ``?encoding=hex|base64`` addresses any byte string,
``?encoding=int`` an integer (raw) key, ``?encoding=fields`` a structured key written
``name=value,name=value`` through the appliance's field layout.
"""

from __future__ import annotations

from typing import Any, Optional, Union

from fastapi import Query

from pynq_kv.bulk import Item, item_to_json, text_to_bytes, text_to_int
from pynq_kv.engine import KVEngine
from pynq_kv.errors import KVError
from pynq_kv.layout import FieldLayout, parse_field_values
from pynq_kv.limits import parse_uint

from .errors import InputError, Loc
from .models import Base64Item, HexItem, ItemIn, KeyEncoding

PATH_KEY = ("path", "key")
KeyEncodingQuery = Query(KeyEncoding.utf8, description="how {key} is written: utf8 text, hex or "
                         "base64 bytes, int (decimal or 0x hex), or fields (name=v,name=v)")


def _fields(text: str, layout: Optional[FieldLayout]) -> int:
    if layout is None:
        raise ValueError("encoding=fields needs a field layout (pynq-kv serve --layout)")
    try:
        values = parse_field_values(text.split(","))
    except ValueError as exc:
        raise ValueError(f"{exc} (write fields as name=value,name=value)") from None
    return layout.key(**values)


def parse_key(text: str, encoding: KeyEncoding, layout: Optional[FieldLayout]) -> Item:
    """The engine key a URL {key} names; InputError at path.key when it is malformed."""
    try:
        if encoding is KeyEncoding.int:
            return text_to_int(text)
        if encoding is KeyEncoding.fields:
            return _fields(text, layout)
        return text_to_bytes(text, encoding.value)
    except ValueError as exc:  # KeyFormatError is one too
        raise InputError(PATH_KEY, str(exc)) from None


def engine_key(engine: KVEngine, text: str, encoding: KeyEncoding,
               layout: Optional[FieldLayout], tiered: bool = False) -> Item:
    """parse_key, and the key fits this engine's key width (else InputError at path.key).

    tiered (an entry route with a host tier): a byte-string key is a Redis key, of any length
    the request carries; the engine caches it only if it fits (pynq_kv.tier decides)."""
    key = parse_key(text, encoding, layout)
    if tiered and isinstance(key, bytes):
        return key
    try:
        engine.key_format.encode(key)
    except KVError as exc:
        raise InputError(PATH_KEY, str(exc)) from None
    return key


def item_in(item: ItemIn, loc: Loc) -> Item:
    """A key or value from a JSON body as bytes or int."""
    try:
        if isinstance(item, HexItem):
            return bytes.fromhex(item.hex)
        if isinstance(item, Base64Item):
            return text_to_bytes(item.base64, "base64")
        if isinstance(item, str):
            return text_to_bytes(item, "utf8")
    except ValueError as exc:
        raise InputError(loc, str(exc)) from None
    return item


def engine_value(engine: KVEngine, item: ItemIn, loc: Loc, tiered: bool = False) -> Item:
    """item_in, checked against the engine's value kind and width (else InputError at loc).

    tiered (an entry route with a host tier): a byte-string engine's value is a Redis string of
    any length the request carries, cached by the engine only if it fits; an integer engine's
    values stay numbers of its width."""
    value = item_in(item, loc)
    if tiered and isinstance(value, bytes) and engine.value_kind != "int":
        return value
    try:
        engine.encode_values([value])
    except KVError as exc:
        raise InputError(loc, str(exc)) from None
    return value


def redis_key(key: Item, loc: Loc = PATH_KEY) -> bytes:
    """With a host tier, the Redis key of an entry: the same bytes a RESP client sends for it
    (pynq_kv/limits.py: one length-tagged encoding for both). Integer and field keys have none."""
    if isinstance(key, bytes):
        return key
    raise InputError(loc, "with a host tier (serve --store) entries are Redis string keys: write "
                          "the key as bytes (utf8, hex or base64); integer and field keys have "
                          "no Redis key (wildcard rules take them)")


def redis_value(engine: KVEngine, value: Item, loc: Loc) -> bytes:
    """With a host tier, the Redis string of a value: the bytes, or an integer engine's decimal
    (what a RESP SET sends and the engine reads back as that integer)."""
    ints = engine.value_kind == "int"
    if isinstance(value, int) != ints:
        raise InputError(loc, f"this engine stores {'integer' if ints else 'byte-string'} values")
    return str(value).encode() if isinstance(value, int) else value


def from_redis(engine: KVEngine, text: bytes) -> Item:
    """A Redis string value as the engine's value kind shows it (an integer engine's decimals
    as a number; anything else as the bytes)."""
    if engine.value_kind == "int":
        number = parse_uint(text, engine.geometry.value_width)
        if number is not None:
            return number
    return text


def item_out(item: Union[bytes, str, int]) -> Any:
    """The response form of a key, value or rule value (str rule values stay text)."""
    return item if isinstance(item, str) else item_to_json(item)


def raw_hex(engine: KVEngine, key: Item) -> str:
    """The raw key as 0x-prefixed hex, KEY_W/4 digits."""
    return "0x" + engine.key_format.encode(key).hex()
