"""The ``pynq-kv`` command line: manage a key-value + wildcard-rule engine from a shell.

The simulated overlay (the ``model`` backend) keeps its tables in memory, so the CLI keeps them
in a snapshot file between invocations: every command loads the snapshot (if it exists), runs,
and — for commands that change entries or rules — writes it back atomically.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

import click
from tqdm import tqdm

from .engine import KVEngine, MsetReport
from .errors import KVError
from .geometry import KEY_WIDTHS, Geometry
from .keys import KeyFormat, ValueFormat
from .layout import FieldLayout
from .rules import Rule

try:  # advisory lock so two CLI processes do not lose each other's updates
    import fcntl
except ImportError:  # pragma: no cover - not on Linux
    fcntl = None  # type: ignore[assignment]

FORMATS = ("csv", "ndjson")
EXTENSIONS = {".csv": "csv", ".ndjson": "ndjson", ".jsonl": "ndjson", ".json": "ndjson"}
DEFAULT_CHUNK = 10_000


def default_state_path() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "pynq-kv" / "state.npz"


# ---------------------------------------------------------------------------------------------
# errors


class CLIError(click.ClickException):
    """A failure reported as ``error: ...`` on stderr with exit status 1."""

    exit_code = 1

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror}{where}"
    text = str(exc)
    return text or type(exc).__name__


class _Group(click.Group):
    """Turns engine and file errors raised by any subcommand into ``error: ...`` / exit 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KVError as exc:
            raise CLIError(_describe(exc)) from exc
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                raise
            raise CLIError(_describe(exc)) from exc


# ---------------------------------------------------------------------------------------------
# configuration and the engine session


@dataclass
class Config:
    state: Path
    geometry: dict[str, int] = field(default_factory=dict)  # only the options given
    value_kind: Optional[str] = None  # None: the state's own kind ("bytes" for a new state)
    int_keys: bool = False
    backend: str = "model"

    # -- user input -> engine keys / values --------------------------------------------------
    def key(self, text: str) -> Any:
        """A key from the command line: UTF-8 bytes, or an integer with --int-keys."""
        if self.int_keys:
            try:
                return int(text, 0)
            except ValueError:
                raise click.BadParameter(
                    f"{text!r} is not an integer (decimal, 0x hex, 0o octal or 0b binary)",
                    param_hint="KEY") from None
        return text.encode("utf-8")

    def value(self, text: str, hint: str = "VALUE") -> Any:
        """A value from the command line: UTF-8 bytes, or an integer with --value-kind int."""
        if self.value_kind == "int":
            try:
                return int(text, 0)
            except ValueError:
                raise click.BadParameter(
                    f"{text!r} is not an integer (--value-kind int)", param_hint=hint) from None
        return text.encode("utf-8")


def _new_engine(cfg: Config) -> KVEngine:
    geometry = Geometry(**cfg.geometry)
    return KVEngine(backend=cfg.backend, geometry=geometry, value_kind=cfg.value_kind or "bytes")


def _load_engine(cfg: Config) -> KVEngine:
    engine = KVEngine.from_snapshot(cfg.state, backend=cfg.backend)
    mismatched = [
        f"{name}={getattr(engine.geometry, name)} (asked for {wanted})"
        for name, wanted in cfg.geometry.items()
        if getattr(engine.geometry, name) != wanted
    ]
    if cfg.value_kind and cfg.value_kind != engine.value_kind:
        mismatched.append(f"value_kind={engine.value_kind} (asked for {cfg.value_kind})")
    if mismatched:
        raise CLIError(
            f"state file {cfg.state} does not match the options: {', '.join(mismatched)}; "
            "drop those options or use another --state")
    return engine


@contextlib.contextmanager
def _lock(path: Path, exclusive: bool) -> Iterator[None]:
    if fcntl is None:
        yield
        return
    if not exclusive and not path.parent.is_dir():
        yield  # nothing to read, nothing to protect; do not create directories for a read
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def session(cfg: Config, save: bool = False) -> Iterator[Any]:
    """The engine for one command, from the state file or new; saved back when save is True.

    Nothing is written when the command fails, so a failed command leaves the state unchanged.
    """
    with _lock(cfg.state, exclusive=save):
        engine = _load_engine(cfg) if cfg.state.exists() else _new_engine(cfg)
        cfg.value_kind = engine.value_kind
        try:
            yield engine
            if save:
                engine.dump(cfg.state)  # a temporary file renamed over the state: atomic
        finally:
            engine.close()


def _cfg(ctx: click.Context) -> Config:
    return ctx.find_object(Config)  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------
# output helpers


def _text(value: Any) -> str:
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


def _jsonable(value: Any) -> Any:
    """JSON form: text for UTF-8 bytes, {"hex": ...} for other bytes, ints as ints."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return {"hex": data.hex()}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "_asdict"):
        return _jsonable(value._asdict())
    if hasattr(value, "__dataclass_fields__"):
        return _jsonable({k: getattr(value, k) for k in value.__dataclass_fields__})
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return value.item()
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def _echo_table(data: dict, indent: str = "") -> None:
    """name/value lines, nested dicts indented below their name."""
    data = _jsonable(data)
    width = max([len(str(k)) for k in data] + [12]) + 2
    for name, value in data.items():
        if isinstance(value, dict):
            click.echo(f"{indent}{name}:" + ("" if value else " -"))
            _echo_table(value, indent + "  ")
        else:
            click.echo(f"{indent}{str(name) + ':':<{width}}{value}")


def _echo_json(obj: Any) -> None:
    click.echo(json.dumps(_jsonable(obj), indent=2, sort_keys=False))


def _display_key(cfg: Config, key: Any) -> Any:
    return key.decode("utf-8") if isinstance(key, bytes) else key


# ---------------------------------------------------------------------------------------------
# field layouts (structured keys and rules)


def _parse_layout(spec: str, key_width: int) -> Any:
    """'src_ip:ipv4,dst_port:port' -> FieldLayout(key_width, [("src_ip", "ipv4"), ...])."""
    fields = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, kind = part.partition(":")
        if not sep or not name.strip() or not kind.strip():
            raise click.BadParameter(
                f"{part!r} is not NAME:TYPE (e.g. src_ip:ipv4,dst_port:port)", param_hint="--layout")
        kind = kind.strip()
        fields.append((name.strip(), int(kind) if kind.isdecimal() else kind))
    if not fields:
        raise click.BadParameter("empty layout", param_hint="--layout")
    return FieldLayout(key_width, fields)


def _parse_fields(items: tuple[str, ...]) -> dict[str, str]:
    """NAME=VALUE options; the values stay text: FieldLayout parses addresses, numbers,
    prefixes (10.0.0.0/8), ranges (1000-2000) and wildcards (*) itself."""
    fields: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(f"{item!r} is not NAME=VALUE", param_hint="--field")
        if name.strip() in fields:
            raise click.BadParameter(f"field {name.strip()!r} given twice", param_hint="--field")
        fields[name.strip()] = value.strip()
    return fields


def _spec_text(spec: Optional[dict]) -> str:
    """The field matches a layout rule was built from, e.g. 'src_ip=10.0.0.0/8 dst_port=1000-2000'."""
    if not spec:
        return ""
    parts = []
    for name, match in spec.items():
        if isinstance(match, dict) and set(match) == {"range"}:
            lo, hi = match["range"]
            match = f"{lo}-{hi}"
        elif isinstance(match, dict) and set(match) == {"value", "mask"}:
            match = f"{match['value']}/{match['mask']}"
        parts.append(f"{name}={match}")
    return " ".join(parts)


# ---------------------------------------------------------------------------------------------
# the command group

_HELP = """\
Manage a pynq-kv key-value + wildcard lookup engine on the simulated overlay.

\b
The tables live in a snapshot file (--state, env PYNQ_KV_STATE, default
~/.local/share/pynq-kv/state.npz): each command loads it if it exists and
commands that change anything save it back (atomically). The geometry options
apply when the state file is created; with an existing state they must match it.

\b
Keys are byte strings by default: the text you type, UTF-8 encoded (at most
KEY_W/8 - 1 bytes). With --int-keys a key is an integer (decimal, 0x hex, 0b
binary) used as the raw KEY_W-bit key. Use one kind of key per table.
Values are UTF-8 text by default, or integers with --value-kind int (the state
file remembers its value kind).

\b
Structured keys: 'lookup' and 'rules add' take --layout "src_ip:ipv4,dst_port:port"
(env PYNQ_KV_LAYOUT) and --field NAME=VALUE options.

\b
Exit status: 0 ok, 1 error (engine or file error: "error: ..." on stderr),
2 usage error.
"""


@click.group(cls=_Group, help=_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--state", type=click.Path(dir_okay=False, path_type=Path), envvar="PYNQ_KV_STATE",
              default=None, metavar="PATH",
              help="Snapshot file holding the tables [env PYNQ_KV_STATE; "
                   "default ~/.local/share/pynq-kv/state.npz].")
@click.option("--backend", default="model", show_default=True, envvar="PYNQ_KV_BACKEND",
              help="Engine backend ('model' = the simulated overlay) [env PYNQ_KV_BACKEND].")
@click.option("--key-width", type=click.Choice([str(w) for w in KEY_WIDTHS]), default=None,
              help="Key width in bits (new state; default 288).")
@click.option("--value-width", type=int, default=None,
              help="Value width in bits, multiple of 32 from 32 to 512 (new state; default 256).")
@click.option("--ways", type=int, default=None, help="Hash banks, 2..8 (new state; default 4).")
@click.option("--rows", type=int, default=None,
              help="Rows per bank, a power of two (new state; default 8192).")
@click.option("--stash", type=int, default=None, help="Stash entries, 0..64 (new state; default 8).")
@click.option("--rules", "rule_entries", type=int, default=None,
              help="Wildcard rule entries, 0..4096 (new state; default 256).")
@click.option("--prio-width", type=int, default=None,
              help="Rule priority width in bits, 1..32 (new state; default 16).")
@click.option("--value-kind", type=click.Choice(["bytes", "int"]), default=None,
              envvar="PYNQ_KV_VALUE_KIND",
              help="Values are UTF-8 text (bytes) or integers; kept in the state file "
                   "(new state; default bytes) [env PYNQ_KV_VALUE_KIND].")
@click.option("--int-keys", is_flag=True, envvar="PYNQ_KV_INT_KEYS",
              help="Keys are integers (raw keys) instead of text [env PYNQ_KV_INT_KEYS].")
@click.version_option(package_name="pynq-kv", prog_name="pynq-kv", message="%(prog)s %(version)s")
@click.pass_context
def cli(ctx: click.Context, state: Optional[Path], backend: str, key_width: Optional[str],
        value_width: Optional[int], ways: Optional[int], rows: Optional[int],
        stash: Optional[int], rule_entries: Optional[int], prio_width: Optional[int],
        value_kind: Optional[str], int_keys: bool) -> None:
    given = {
        "key_width": int(key_width) if key_width is not None else None,
        "value_width": value_width,
        "ways": ways,
        "rows": rows,
        "stash": stash,
        "rules": rule_entries,
        "prio_width": prio_width,
    }
    ctx.obj = Config(
        state=Path(state).expanduser() if state else default_state_path(),
        geometry={k: v for k, v in given.items() if v is not None},
        value_kind=value_kind,
        int_keys=int_keys,
        backend=backend,
    )


json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")


# -- info ------------------------------------------------------------------------------------


@cli.command()
@json_option
@click.pass_context
def info(ctx: click.Context, as_json: bool) -> None:
    """Backend, geometry, occupancy and counters of the engine."""
    cfg = _cfg(ctx)
    with session(cfg) as engine:
        data = dict(engine.info())
    data["state"] = {"path": str(cfg.state), "exists": cfg.state.exists()}
    if as_json:
        _echo_json(data)
        return
    del data["state"]
    data = {"state": f"{cfg.state}" + ("" if cfg.state.exists() else " (not created yet)"), **data}
    geometry = data.get("geometry")
    if isinstance(geometry, dict) and isinstance(geometry.get("hash_seed"), int):
        data["geometry"] = {**geometry, "hash_seed": f"0x{geometry['hash_seed']:016x}"}
    _echo_table(data)


# -- set / get / del / lookup ----------------------------------------------------------------


@cli.command("set")
@click.argument("key")
@click.argument("value")
@click.pass_context
def set_cmd(ctx: click.Context, key: str, value: str) -> None:
    """Set KEY to VALUE (prints whether the key is new)."""
    cfg = _cfg(ctx)
    k = cfg.key(key)
    with session(cfg, save=True) as engine:
        new = engine.set(k, cfg.value(value))
    click.echo("OK (new key)" if new else "OK (updated)")


@cli.command()
@click.argument("key")
@json_option
@click.pass_context
def get(ctx: click.Context, key: str, as_json: bool) -> None:
    """Value of KEY from the exact table ('(nil)' when absent; exit status 0 either way)."""
    cfg = _cfg(ctx)
    k = cfg.key(key)
    with session(cfg) as engine:
        value = engine.get(k)
    if as_json:
        _echo_json({"key": _display_key(cfg, k), "found": value is not None, "value": value})
    else:
        click.echo(_text(value))


@cli.command("del")
@click.argument("keys", nargs=-1, required=True, metavar="KEY...")
@click.pass_context
def del_cmd(ctx: click.Context, keys: tuple[str, ...]) -> None:
    """Delete one or more keys (prints how many existed)."""
    cfg = _cfg(ctx)
    parsed = [cfg.key(k) for k in keys]
    with session(cfg, save=True) as engine:
        deleted = sum(1 for k in parsed if engine.delete(k))
    click.echo(f"deleted {deleted} of {len(parsed)}")


def _lookup_key(cfg: Config, key: Optional[str], layout: Optional[str], fields: tuple[str, ...],
                key_width: int) -> Any:
    if fields:
        if key is not None:
            raise click.UsageError("give either KEY or --field options, not both")
        if not layout:
            raise click.UsageError("--field needs --layout (or PYNQ_KV_LAYOUT)")
        return _parse_layout(layout, key_width).key(**_parse_fields(fields))
    if key is None:
        raise click.UsageError("give a KEY, or --layout and --field options")
    return cfg.key(key)


@cli.command()
@click.argument("key", required=False)
@click.option("--layout", envvar="PYNQ_KV_LAYOUT", metavar="SPEC",
              help='Field layout for --field, e.g. "src_ip:ipv4,dst_port:port" [env PYNQ_KV_LAYOUT].')
@click.option("--field", "fields", multiple=True, metavar="NAME=VALUE",
              help="Build the key from layout fields (repeat), e.g. --field src_ip=10.1.2.3.")
@json_option
@click.pass_context
def lookup(ctx: click.Context, key: Optional[str], layout: Optional[str], fields: tuple[str, ...],
           as_json: bool) -> None:
    """Full lookup of KEY: exact hit, else the highest-priority matching rule, else miss."""
    cfg = _cfg(ctx)
    with session(cfg) as engine:
        k = _lookup_key(cfg, key, layout, fields, engine.geometry.key_width)
        result = engine.lookup(k)
    if as_json:
        shown = (f"0x{k:0{engine.geometry.key_width // 4}x}" if fields
                 else _display_key(cfg, k))  # a structured key as its raw hex
        _echo_json({
            "key": shown, "kind": result.kind, "value": result.value,
            "rule_id": result.rule_id, "entry": result.entry,
        })
        return
    if result.kind == "exact":
        click.echo(f"exact: {_text(result.value)}")
    elif result.kind == "rule":
        click.echo(f"rule {result.rule_id} (entry {result.entry}): {_text(result.value)}")
    else:
        click.echo("miss")


# -- stats -----------------------------------------------------------------------------------


@cli.command()
@json_option
@click.pass_context
def stats(ctx: click.Context, as_json: bool) -> None:
    """Engine counters (lookups, hits, misses, inserts, deletes, per-rule hits) and occupancy.

    Snapshots keep the tables and rules but not the counters, so across separate CLI
    invocations only 'occupancy' carries over; the other counters cover this invocation.
    """
    cfg = _cfg(ctx)
    with session(cfg) as engine:
        data = engine.stats()
    if as_json:
        _echo_json(data)
        return
    _echo_table(data)
    click.echo("(counters other than occupancy cover this invocation only: snapshots do not keep them)")


# -- rules -----------------------------------------------------------------------------------


@cli.group(cls=_Group)
def rules() -> None:
    """Wildcard rules: value/mask entries with a priority (see 'rules add --help')."""


def _rule_entries(rule: Rule) -> list[tuple[int, int]]:
    return [(entry.match, entry.mask) for entry in rule.entries]


@rules.command("add")
@click.option("--priority", "-p", type=int, required=True, help="Higher priority wins.")
@click.option("--value", "-v", "value", required=True, help="Value returned when the rule wins.")
@click.option("--name", default=None, help="Optional name shown by 'rules list'.")
@click.option("--match", "match", metavar="HEX", help="Raw ternary match (hex, with --mask).")
@click.option("--mask", "mask", metavar="HEX", help="Raw ternary mask (hex): 1 bits are compared.")
@click.option("--layout", envvar="PYNQ_KV_LAYOUT", metavar="SPEC",
              help='Field layout, e.g. "src_ip:ipv4,dst_port:port" [env PYNQ_KV_LAYOUT].')
@click.option("--field", "fields", multiple=True, metavar="NAME=SPEC",
              help="Field match (repeat): an exact value (proto=6), a prefix (src_ip=10.0.0.0/8), "
                   "a range (dst_port=1000-2000) or * ; fields not given are wildcards.")
@click.pass_context
def rules_add(ctx: click.Context, priority: int, value: str, name: Optional[str], match: Optional[str],
              mask: Optional[str], layout: Optional[str], fields: tuple[str, ...]) -> None:
    """Add a wildcard rule; prints its id.

    \b
    Raw form:    rules add -p 10 -v hit --match 0x0a000000... --mask 0xff000000...
    Field form:  rules add -p 10 -v hit --layout "src_ip:ipv4,dst_port:port" \\
                     --field src_ip=10.0.0.0/8 --field dst_port=1000-2000
    """
    cfg = _cfg(ctx)
    raw = match is not None or mask is not None
    if raw and fields:
        raise click.UsageError("give either --match/--mask or --field options, not both")
    if raw:
        if match is None or mask is None:
            raise click.UsageError("--match and --mask go together")
        try:
            m, k = int(match, 16), int(mask, 16)
        except ValueError:
            raise click.BadParameter("--match and --mask take hexadecimal numbers") from None
    elif not fields:
        raise click.UsageError("give --match/--mask, or --layout with --field options")
    elif not layout:
        raise click.UsageError("--field needs --layout (or PYNQ_KV_LAYOUT)")
    with session(cfg, save=True) as engine:
        v = cfg.value(value, hint="--value")
        if raw:
            rule = Rule.ternary(m, k, priority, v, name=name)
        else:
            rule = _parse_layout(layout, engine.geometry.key_width).rule(
                priority=priority, value=v, name=name, **_parse_fields(fields))
        rule_id = engine.add_rule(rule)
        n = len(_rule_entries(rule))
    click.echo(f"rule {rule_id} added ({n} ternary entr{'y' if n == 1 else 'ies'})")


@rules.command("list")
@click.option("--entries", is_flag=True, help="Also print each ternary entry (match/mask).")
@json_option
@click.pass_context
def rules_list(ctx: click.Context, entries: bool, as_json: bool) -> None:
    """List the rules: id, priority, value, number of ternary entries."""
    cfg = _cfg(ctx)
    with session(cfg) as engine:
        table = engine.rules()
        hex_digits = engine.geometry.key_width // 4
    if as_json:
        _echo_json([
            {
                "id": rule_id, "name": rule.name, "priority": rule.priority,
                "value": rule.value, "fields": rule.spec,
                "entries": [{"match": f"0x{m:0{hex_digits}x}", "mask": f"0x{k:0{hex_digits}x}"}
                            for m, k in _rule_entries(rule)],
            }
            for rule_id, rule in sorted(table.items())
        ])
        return
    if not table:
        click.echo("no rules")
        return
    click.echo(f"{'id':>5} {'priority':>10} {'entries':>8}  value  [name] fields")
    for rule_id, rule in sorted(table.items()):
        pairs = _rule_entries(rule)
        extra = " ".join(x for x in (f"[{rule.name}]" if rule.name else "", _spec_text(rule.spec)) if x)
        click.echo(f"{rule_id:>5} {rule.priority:>10} {len(pairs):>8}  {_text(rule.value)}"
                   + (f"  {extra}" if extra else ""))
        if entries:
            for m, k in pairs:
                click.echo(f"{'':>7}match 0x{m:0{hex_digits}x}\n{'':>7}mask  0x{k:0{hex_digits}x}")


@rules.command("del")
@click.argument("rule_id", type=int, metavar="ID")
@click.pass_context
def rules_del(ctx: click.Context, rule_id: int) -> None:
    """Remove rule ID."""
    cfg = _cfg(ctx)
    with session(cfg, save=True) as engine:
        engine.remove_rule(rule_id)
    click.echo(f"rule {rule_id} removed")


# -- load / dump -----------------------------------------------------------------------------


class LoadError(KVError):
    """A malformed bulk-load file (reported with its line number)."""


def _detect_format(path: Path, fmt: Optional[str]) -> str:
    if fmt:
        return fmt
    found = EXTENSIONS.get(path.suffix.lower())
    if not found:
        raise click.UsageError(
            f"cannot tell the format of {path.name!r} from its extension; "
            f"use --format {'|'.join(FORMATS)} (.csv, .ndjson/.jsonl/.json)")
    return found


def _raw_records(path: Path, fmt: str) -> Iterator[tuple[int, Any, Any]]:
    """(line number, key, value) as found in the file, checked for shape only."""
    with open(path, newline="", encoding="utf-8") as fh:
        try:
            if fmt == "csv":
                reader = csv.reader(fh)
                header = None
                for row in reader:
                    if not row or all(not cell.strip() for cell in row):
                        continue
                    if header is None:
                        header = [cell.strip().lower() for cell in row]
                        if "key" not in header or "value" not in header:
                            raise LoadError(
                                f"{path}: line {reader.line_num}: the first row must be a header "
                                f"naming the 'key' and 'value' columns, got {row!r}")
                        ki, vi = header.index("key"), header.index("value")
                        continue
                    if len(row) != len(header):
                        raise LoadError(
                            f"{path}: line {reader.line_num}: expected {len(header)} columns, "
                            f"got {len(row)}")
                    yield reader.line_num, row[ki], row[vi]
                if header is None:
                    raise LoadError(f"{path}: empty file (expected a 'key,value' header)")
            else:
                for lineno, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
                    try:
                        obj = json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise LoadError(f"{path}: line {lineno}: invalid JSON: {exc.msg}") from None
                    if not isinstance(obj, dict) or "key" not in obj or "value" not in obj:
                        raise LoadError(
                            f"{path}: line {lineno}: expected an object with \"key\" and \"value\"")
                    yield lineno, obj["key"], obj["value"]
        except UnicodeDecodeError as exc:
            raise LoadError(f"{path}: not UTF-8 text ({exc.reason})") from None
        except csv.Error as exc:
            raise LoadError(f"{path}: line {reader.line_num}: {exc}") from None


def _convert(cfg: Config, path: Path, lineno: int, key: Any, value: Any) -> tuple[Any, Any]:
    """File key/value -> engine key/value, with the same rules as the command line."""
    where = f"{path}: line {lineno}"
    if isinstance(key, bool) or not isinstance(key, (str, int)):
        raise LoadError(f"{where}: key must be a string or an integer")
    if cfg.int_keys:
        if isinstance(key, str):
            try:
                key = int(key.strip(), 0)
            except ValueError:
                raise LoadError(f"{where}: key {key!r} is not an integer (--int-keys)") from None
    elif isinstance(key, int):
        raise LoadError(f"{where}: key {key} is a number; use --int-keys for integer keys")
    else:
        key = key.encode("utf-8")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise LoadError(f"{where}: value must be a string or an integer")
    if cfg.value_kind == "int":
        if isinstance(value, str):
            try:
                value = int(value.strip(), 0)
            except ValueError:
                raise LoadError(f"{where}: value {value!r} is not an integer (--value-kind int)") from None
    elif isinstance(value, int):
        raise LoadError(f"{where}: value {value} is a number; use --value-kind int for integer values")
    else:
        value = value.encode("utf-8")
    return key, value


def _records(cfg: Config, path: Path, fmt: str, key_fmt: KeyFormat,
             value_fmt: ValueFormat) -> Iterator[tuple[Any, Any]]:
    """Converted and encoding-checked records; the first bad one raises LoadError."""
    for lineno, key, value in _raw_records(path, fmt):
        k, v = _convert(cfg, path, lineno, key, value)
        try:
            key_fmt.encode(k)
            value_fmt.encode(v)
        except KVError as exc:
            raise LoadError(f"{path}: line {lineno}: {exc}") from None
        yield k, v


def _show_progress(progress: Optional[bool]) -> bool:
    if progress is not None:
        return progress
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _report_counts(report: MsetReport) -> dict[str, int]:
    return {"inserted": report.inserted, "updated": report.updated, "failed": len(report.failed)}


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="File format (default: from the extension: .csv, .ndjson/.jsonl/.json).")
@click.option("--chunk-size", type=click.IntRange(min=1), default=DEFAULT_CHUNK, show_default=True,
              help="Keys per engine batch (mset).")
@click.option("--progress/--no-progress", default=None,
              help="Progress bar on stderr (default: when stderr is a terminal).")
@click.pass_context
def load(ctx: click.Context, file: Path, fmt: Optional[str], chunk_size: int,
         progress: Optional[bool]) -> None:
    """Bulk-import FILE: CSV with a 'key,value' header, or NDJSON lines {"key": ..., "value": ...}.

    The whole file is checked first (a malformed line is reported with its line number and
    nothing is loaded); then it is streamed into the engine in chunks.
    """
    cfg = _cfg(ctx)
    fmt = _detect_format(file, fmt)
    with session(cfg, save=True) as engine:
        g = engine.geometry
        key_fmt, value_fmt = KeyFormat(g.key_width), ValueFormat(g.value_width)
        total = sum(1 for _ in _records(cfg, file, fmt, key_fmt, value_fmt))  # pass 1: validate
        totals: dict[str, int] = {}
        bar = tqdm(total=total, unit="key", desc=f"load {file.name}",
                   file=sys.stderr, disable=not _show_progress(progress), dynamic_ncols=True)
        with bar:
            keys: list[Any] = []
            values: list[Any] = []

            def flush() -> None:
                report = engine.mset(keys, values)
                for name, count in _report_counts(report).items():
                    totals[name] = totals.get(name, 0) + count
                bar.update(len(keys))
                keys.clear()
                values.clear()

            for k, v in _records(cfg, file, fmt, key_fmt, value_fmt):  # pass 2: load
                keys.append(k)
                values.append(v)
                if len(keys) >= chunk_size:
                    flush()
            if keys:
                flush()
    details = ", ".join(f"{n} {name}" for name, n in totals.items())
    click.echo(f"loaded {total} records from {file}" + (f": {details}" if details else ""))
    failed = totals.get("failed", 0)
    if failed:
        raise CLIError(f"{failed} keys did not fit (table full); the others were loaded")


def _entries(engine: Any) -> Iterator[tuple[Any, Any]]:
    """Every (key, value) in the exact table."""
    return iter(engine.items())


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(FORMATS + ("snapshot",)), default=None,
              help="csv, ndjson, or snapshot (.npz, the engine's own dump) "
                   "(default: from the extension).")
@click.pass_context
def dump(ctx: click.Context, file: Path, fmt: Optional[str]) -> None:
    """Export every key and value to FILE (the format 'load' reads), or a snapshot (.npz)."""
    cfg = _cfg(ctx)
    if fmt is None and file.suffix.lower() == ".npz":
        fmt = "snapshot"
    fmt = _detect_format(file, fmt)
    with session(cfg) as engine:
        if fmt == "snapshot":
            engine.dump(file)
            click.echo(f"snapshot written to {file}")
            return
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n") if fmt == "csv" else None
        if writer:
            writer.writerow(["key", "value"])
        count = 0
        for key, value in _entries(engine):
            k, v = _export(key, "key"), _export(value, "value")
            if writer:
                if isinstance(k, int):
                    k = hex(k)
                writer.writerow([k, v])
            else:
                buf.write(json.dumps({"key": k, "value": v}, ensure_ascii=False) + "\n")
            count += 1
    file.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=file.parent, prefix=f".{file.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(buf.getvalue())
        os.replace(tmp, file)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    click.echo(f"dumped {count} records to {file}")


def _export(item: Any, what: str) -> Any:
    if isinstance(item, (bytes, bytearray, memoryview)):
        try:
            return bytes(item).decode("utf-8")
        except UnicodeDecodeError:
            raise CLIError(
                f"{what} {bytes(item)!r} is not UTF-8 text and cannot be exported") from None
    return int(item)


# -- demo ------------------------------------------------------------------------------------


@cli.command()
@click.pass_context
def demo(ctx: click.Context) -> None:
    """A walk-through on a fresh in-memory engine (does not touch --state)."""
    cfg = _cfg(ctx)
    engine = KVEngine(backend=cfg.backend, geometry=Geometry(**cfg.geometry), value_kind="bytes")
    say = click.echo
    g = engine.geometry
    say(f"pynq-kv demo on the simulated overlay (backend: {engine.backend.name})")
    say(f"engine: {g.key_width}-bit keys, {g.value_width}-bit values, {g.ways} ways x {g.rows} rows"
        f" + {g.stash} stash = {g.capacity} entries, {g.rules} rule entries")

    say("\n1. exact table: set and get byte-string keys")
    for key, value in (("user:1", "alice"), ("user:2", "bob"), ("user:1", "alicia")):
        new = engine.set(key.encode(), value.encode())
        say(f"   set {key} = {value:<8} -> {'new key' if new else 'updated'}")
    for key in ("user:1", "user:2", "user:3"):
        say(f"   get {key:<17} -> {_text(engine.get(key.encode()))}")

    say("\n2. batch: mset of 1000 keys in one engine batch")
    report = engine.mset([f"item:{i}".encode() for i in range(1000)],
                         [f"v{i}".encode() for i in range(1000)])
    counts = _report_counts(report)
    say("   " + ", ".join(f"{n} {name}" for name, n in counts.items()))
    say(f"   get {'item:999':<17} -> {_text(engine.get(b'item:999'))}")

    fields = [("src_ip", "ipv4"), ("dst_port", "port")]
    layout = FieldLayout(g.key_width, fields)
    say(f"\n3. wildcard rules on a FieldLayout: {', '.join(f'{n}:{t}' for n, t in fields)}")
    rules_to_add = (
        (10, "internal-app", {"src_ip": "10.0.0.0/8", "dst_port": (1000, 2000)}),
        (20, "port-1500", {"dst_port": 1500}),
    )
    for priority, value, matches in rules_to_add:
        rule = layout.rule(priority=priority, value=value.encode(), **matches)
        rule_id = engine.add_rule(rule)
        shown = " ".join(f"{k}={'-'.join(map(str, v)) if isinstance(v, tuple) else v}"
                         for k, v in matches.items())
        n = len(_rule_entries(rule))
        say(f"   rule {rule_id}: {shown:<36} priority {priority} -> {value} "
            f"({n} ternary entr{'y' if n == 1 else 'ies'})")
    engine.set(layout.key(src_ip="10.1.2.3", dst_port=1200), b"pinned-flow")
    say("   exact entry: src_ip=10.1.2.3 dst_port=1200 -> pinned-flow")

    say("\n4. lookup: the exact entry first, else the highest-priority matching rule, else miss")
    for ip, port in (("10.1.2.3", 1200), ("10.1.2.4", 1200), ("10.1.2.4", 1500),
                     ("192.168.0.1", 1200), ("10.9.9.9", 2001)):
        result = engine.lookup(layout.key(src_ip=ip, dst_port=port))
        if result.kind == "rule":
            answer = f"rule {result.rule_id}: {_text(result.value)}"
        elif result.kind == "exact":
            answer = f"exact: {_text(result.value)}"
        else:
            answer = "miss"
        say(f"   lookup {ip + ':' + str(port):<19} -> {answer}")

    say("\n5. delete")
    say(f"   del user:2 -> {'deleted' if engine.delete(b'user:2') else 'not found'}; "
        f"get user:2 -> {_text(engine.get(b'user:2'))}")

    say("\n6. stats")
    _echo_table(engine.stats(), indent="   ")
    say("\ndone. Next: pynq-kv set hello world; pynq-kv get hello; pynq-kv --help")


# -- serve -----------------------------------------------------------------------------------


@cli.command()
@click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
              envvar="PYNQ_KV_CONFIG", metavar="FILE",
              help="TOML file with the same settings as the flags (flags win) [env PYNQ_KV_CONFIG].")
@click.option("--bind", default=None, metavar="ADDR",
              help="Address every front-end listens on [default 127.0.0.1].")
@click.option("--resp-port", type=int, default=None, help="Redis (RESP) TCP port [default 6380].")
@click.option("--udp-port", type=int, default=None,
              help="memcached UDP port (binary and text protocol) [default 11211].")
@click.option("--admin-port", type=int, default=None, help="Admin REST/dashboard port [default 8080].")
@click.option("--disable", multiple=True, type=click.Choice(["resp", "udp", "admin"]),
              help="Do not start this front-end (repeatable).")
@click.option("--save-interval", type=float, default=None, metavar="SECONDS",
              help="With a state file: save it this often, 0 = only at shutdown [default 60].")
@click.option("--requirepass", default=None, metavar="PASSWORD",
              help="Password for RESP AUTH [env PYNQ_KV_REQUIREPASS]; required off loopback.")
@click.option("--admin-token", default=None, metavar="TOKEN",
              help="Bearer token for mutating admin routes [env PYNQ_KV_ADMIN_TOKEN]; "
                   "required off loopback.")
@click.option("--layout", default=None, envvar="PYNQ_KV_LAYOUT", metavar="SPEC",
              help="Field layout for rules and lookups by field, e.g. 'src_ip:ipv4,dst_port:port'.")
@click.option("--maxclients", "max_clients", type=int, default=None, metavar="N",
              help="RESP: most clients at once, then '-ERR max number of clients reached' "
                   "[default 10000; other limits: the config file's [resp] table].")
@click.option("--timeout", "idle_timeout", type=float, default=None, metavar="SECONDS",
              help="RESP: close a client idle this long, 0 = never (Redis' timeout) [default 0].")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]),
              default=None, help="Log level [default info].")
@click.pass_context
def serve(ctx: click.Context, config_file: Optional[Path], bind: Optional[str],
          resp_port: Optional[int], udp_port: Optional[int], admin_port: Optional[int],
          disable: tuple[str, ...], save_interval: Optional[float], requirepass: Optional[str],
          admin_token: Optional[str], layout: Optional[str], max_clients: Optional[int],
          idle_timeout: Optional[float], log_level: Optional[str]) -> None:
    """Run the appliance: Redis, memcached-UDP and admin front-ends over one engine.

    \b
    Backend and geometry come from the global options (pynq-kv --backend rtl --rows 1024 serve)
    or the config file. The tables live in memory unless a state file is given with the global
    --state option or `state = "..."` in the config file: then serve loads it at start and saves
    it periodically and at shutdown. Stop with Ctrl-C or SIGTERM (graceful: nothing is lost).
    """
    import asyncio
    import logging

    from .serve.runner import serve as run_appliance
    from .serve.config import build_config, load_config_file

    cfg = _cfg(ctx)
    parent = ctx.parent
    assert parent is not None
    flags: dict[str, Any] = {}

    def explicit(name: str) -> bool:
        return parent.get_parameter_source(name) not in (
            click.core.ParameterSource.DEFAULT, None)

    if explicit("backend"):
        flags["backend"] = cfg.backend
    if explicit("state"):
        flags["state"] = cfg.state
    if cfg.value_kind:
        flags["value_kind"] = cfg.value_kind
    if cfg.geometry:
        flags["geometry"] = dict(cfg.geometry)
    given = {"bind": bind, "resp_port": resp_port, "udp_port": udp_port, "admin_port": admin_port,
             "save_interval": save_interval, "requirepass": requirepass,
             "admin_token": admin_token, "layout": layout, "log_level": log_level}
    flags.update({k: v for k, v in given.items() if v is not None})
    resp_limits = {"max_clients": max_clients, "idle_timeout": idle_timeout}
    if any(v is not None for v in resp_limits.values()):
        flags["resp"] = {k: v for k, v in resp_limits.items() if v is not None}
    if disable:
        flags["disable"] = list(disable)
    file_settings = load_config_file(config_file) if config_file else {}
    config = build_config(file_settings, flags)
    logging.basicConfig(level=config.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(run_appliance(config))
    except OSError as exc:
        raise CLIError(f"cannot start: {_describe(exc)}") from exc


def main(argv: Optional[list[str]] = None) -> None:
    """Console-script entry point (``pynq-kv``)."""
    cli.main(args=argv, prog_name="pynq-kv")


if __name__ == "__main__":  # pragma: no cover
    main()
