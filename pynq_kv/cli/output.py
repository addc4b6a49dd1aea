"""How ``pynq-kv`` commands print keys, values and tables: text for people, JSON with --json."""

from __future__ import annotations

import json
from typing import Any

import click

json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")


# ---------------------------------------------------------------------------------------------
# output helpers


def show(value: Any) -> str:
    """Human form of a key or value: text when it is printable UTF-8, else a bytes literal."""
    if value is None:
        return "(nil)"
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return repr(data)
        return text if text.isprintable() else repr(data)
    if isinstance(value, int):
        return str(value)
    return str(value)


def jsonable(value: Any) -> Any:
    """JSON form: text for UTF-8 bytes, {"hex": ...} for other bytes, ints as ints."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return {"hex": data.hex()}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if hasattr(value, "_asdict"):
        return jsonable(value._asdict())
    if hasattr(value, "__dataclass_fields__"):
        return jsonable({k: getattr(value, k) for k in value.__dataclass_fields__})
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return value.item()
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def echo_table(data: dict, indent: str = "") -> None:
    """name/value lines, nested dicts indented below their name."""
    data = jsonable(data)
    width = max([len(str(k)) for k in data] + [12]) + 2
    for name, value in data.items():
        if isinstance(value, dict):
            click.echo(f"{indent}{name}:" + ("" if value else " -"))
            echo_table(value, indent + "  ")
        else:
            click.echo(f"{indent}{str(name) + ':':<{width}}{value}")


def echo_json(obj: Any) -> None:
    click.echo(json.dumps(jsonable(obj), indent=2, sort_keys=False))


def display_key(key: Any) -> Any:
    return key.decode("utf-8") if isinstance(key, bytes) else key
