"""Bulk files of entries: NDJSON and CSV, read and written alike by every tool.

NDJSON is the lossless form: one ``{"key": K, "value": V}`` object a line, where K and V are a
JSON string (the UTF-8 text of a byte string), a JSON integer (an integer key or value), or
``{"hex": "..."}`` / ``{"base64": "..."}`` for byte strings that are not UTF-8 text. CSV has a
header row naming a ``key`` and a ``value`` column (other columns are ignored); its cells are
byte strings written as UTF-8 text, hex or base64 (``encoding``), and integer cells are decimal
or 0x-hex numbers. With ``int_keys``/``int_values``, text keys/values are read as integers, which
is how the CLI's --int-keys and --value-kind int read files.

Readers check shape and conversions only; whether an item fits the engine is the caller's check.
Errors are `BulkFormatError` naming the line (1-based) and, when known, the column.
"""

from __future__ import annotations

import base64
import binascii
import csv
import json
from typing import Any, Iterable, Iterator, Optional, Union

from .errors import KVError

FORMATS = ("ndjson", "csv")
ENCODINGS = ("utf8", "hex", "base64")
# File name extensions of each format, for tools that pick the format from a file's name.
EXTENSIONS = {".csv": "csv", ".ndjson": "ndjson", ".jsonl": "ndjson", ".json": "ndjson"}

Item = Union[bytes, int]


class BulkFormatError(KVError, ValueError):
    """A malformed line of a bulk file: `line` is 1-based, `column` "key", "value" or None."""

    def __init__(self, line: int, message: str, column: Optional[str] = None) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.column = column
        self.reason = message


# -- single items ---------------------------------------------------------------------------

def text_to_bytes(text: str, encoding: str) -> bytes:
    """The byte string a text cell stands for; ValueError if it is not valid in that encoding."""
    if encoding == "utf8":
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates from JSON escapes
            raise ValueError("text is not valid Unicode (lone surrogate)") from None
    if encoding == "hex":
        try:
            return bytes.fromhex(text)
        except ValueError:
            raise ValueError(f"{text!r} is not hex (pairs of 0-9, a-f)") from None
    if encoding == "base64":
        standard = text.replace("-", "+").replace("_", "/")  # URL-safe alphabet too
        try:
            return base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"{text!r} is not base64") from None
    raise ValueError(f"unknown encoding {encoding!r} (use {', '.join(ENCODINGS)})")


def bytes_to_text(data: bytes, encoding: str) -> str:
    """The text cell of a byte string; ValueError if it is not UTF-8 text under "utf8"."""
    if encoding == "hex":
        return data.hex()
    if encoding == "base64":
        return base64.b64encode(data).decode("ascii")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{data!r} is not UTF-8 text; use hex or base64") from None


def text_to_int(text: str) -> int:
    """Decimal, 0x hex, 0o octal or 0b binary text; ValueError otherwise."""
    try:
        return int(text.strip(), 0)
    except ValueError:
        raise ValueError(f"{text!r} is not an integer (decimal, 0x hex, 0o octal or 0b binary)") from None


def item_from_json(obj: Any) -> Item:
    """A key or value in its JSON form (string, integer, {"hex"} or {"base64"}) as bytes or int."""
    if isinstance(obj, str):
        return text_to_bytes(obj, "utf8")
    if isinstance(obj, int) and not isinstance(obj, bool):
        return obj
    if isinstance(obj, dict) and len(obj) == 1:
        (encoding, text), = obj.items()
        if encoding in ("hex", "base64") and isinstance(text, str):
            return text_to_bytes(text, encoding)
    raise ValueError('must be a string, an integer, {"hex": "..."} or {"base64": "..."}')


def item_to_json(item: Item) -> Union[str, int, dict[str, str]]:
    """The JSON form of a key or value: text when it is UTF-8, else {"hex": ...}; ints as ints."""
    if isinstance(item, int):
        return item
    try:
        return item.decode("utf-8")
    except UnicodeDecodeError:
        return {"hex": item.hex()}


def format_of(name: str) -> Optional[str]:
    """The format a file name's extension says (EXTENSIONS), or None."""
    dot = name.rfind(".")
    return EXTENSIONS.get(name[dot:].lower()) if dot > 0 else None


# -- reading --------------------------------------------------------------------------------

def _json_item(obj: Any, as_int: bool) -> Item:
    if as_int and isinstance(obj, str):
        return text_to_int(obj)
    return item_from_json(obj)


def _ndjson(lines: Iterable[str], int_keys: bool, int_values: bool) -> Iterator[tuple[int, Item, Item]]:
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BulkFormatError(lineno, f"invalid JSON: {exc.msg}") from None
        except RecursionError:
            raise BulkFormatError(lineno, "invalid JSON: nested too deeply") from None
        if not isinstance(obj, dict) or "key" not in obj or "value" not in obj:
            raise BulkFormatError(lineno, 'expected an object with "key" and "value"')
        record = []
        for column, as_int in (("key", int_keys), ("value", int_values)):
            try:
                record.append(_json_item(obj[column], as_int))
            except ValueError as exc:
                raise BulkFormatError(lineno, f"{column} {exc}", column) from None
        yield lineno, record[0], record[1]


def _csv(lines: Iterable[str], encoding: str, int_keys: bool,
         int_values: bool) -> Iterator[tuple[int, Item, Item]]:
    reader = csv.reader(lines)
    header: Optional[list[str]] = None
    try:
        for row in reader:
            if not row or len(row) == 1 and not row[0].strip():  # a blank line; "," is a record
                continue
            if header is None:
                header = [cell.strip().lower() for cell in row]
                if "key" not in header or "value" not in header:
                    raise BulkFormatError(reader.line_num, "the first row must be a header naming "
                                                           f"the 'key' and 'value' columns, got {row!r}")
                columns = (("key", header.index("key"), int_keys),
                           ("value", header.index("value"), int_values))
                continue
            if len(row) != len(header):
                raise BulkFormatError(reader.line_num, f"expected {len(header)} columns, got {len(row)}")
            record = []
            for column, index, as_int in columns:
                try:
                    record.append(text_to_int(row[index]) if as_int
                                  else text_to_bytes(row[index], encoding))
                except ValueError as exc:
                    raise BulkFormatError(reader.line_num, f"{column} {exc}", column) from None
            yield reader.line_num, record[0], record[1]
    except csv.Error as exc:
        raise BulkFormatError(reader.line_num, str(exc)) from None
    if header is None:
        raise BulkFormatError(1, "empty file (expected a 'key,value' header)")


def read_records(lines: Iterable[str], fmt: str, *, encoding: str = "utf8", int_keys: bool = False,
                 int_values: bool = False) -> Iterator[tuple[int, Item, Item]]:
    """(line number, key, value) of every record; the first malformed line raises.

    `lines` keep their line ends (a file, or ``io.StringIO(text, newline="")``) so quoted CSV
    cells may hold newlines. `encoding` applies to CSV cells; NDJSON says it per item.
    """
    if encoding not in ENCODINGS:
        raise ValueError(f"unknown encoding {encoding!r} (use {', '.join(ENCODINGS)})")
    if fmt == "ndjson":
        return _ndjson(lines, int_keys, int_values)
    if fmt == "csv":
        return _csv(lines, encoding, int_keys, int_values)
    raise ValueError(f"unknown format {fmt!r} (use {', '.join(FORMATS)})")


# -- writing --------------------------------------------------------------------------------

class _Row:
    """A one-line CSV writer target, so rows come out as strings."""

    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> None:
        self.text = text


def csv_header() -> str:
    return "key,value\n"


def format_record(key: Item, value: Item, fmt: str, encoding: str = "utf8") -> str:
    """One record of a bulk file (with its newline) that read_records reads back as (key, value).

    CSV writes integer keys as 0x hex and integer values in decimal; ValueError when a byte
    string is not UTF-8 text under encoding "utf8" (NDJSON never fails).
    """
    if fmt == "ndjson":
        return json.dumps({"key": item_to_json(key), "value": item_to_json(value)},
                          ensure_ascii=False) + "\n"
    cells = [hex(key) if isinstance(key, int) else bytes_to_text(key, encoding),
             str(value) if isinstance(value, int) else bytes_to_text(value, encoding)]
    row = _Row()
    csv.writer(row, lineterminator="\n").writerow(cells)
    return row.text
