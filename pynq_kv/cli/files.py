"""``pynq-kv load`` and ``dump``: bulk files (pynq_kv.bulk, the admin API's formats) and
snapshots."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any, Iterator, Optional

import click
from tqdm import tqdm

from .. import bulk
from ..atomic import atomic_write
from ..engine import KVEngine, MsetReport
from ..errors import KVError
from .common import CLIError, Config, config_of, session

FORMATS = tuple(sorted(bulk.FORMATS))  # csv, ndjson
DEFAULT_CHUNK = 10_000


# -- load / dump -----------------------------------------------------------------------------


class LoadError(KVError):
    """A malformed bulk-load file (reported with its path and line number)."""


def _detect_format(path: Path, fmt: Optional[str]) -> str:
    found = fmt or bulk.format_of(path.name)
    if not found:
        raise click.UsageError(
            f"cannot tell the format of {path.name!r} from its extension; "
            f"use --format {'|'.join(FORMATS)} ({', '.join(bulk.EXTENSIONS)})")
    return found


def _kind(item: Any) -> str:
    return "an integer" if isinstance(item, int) else "a byte string"


def _records(cfg: Config, engine: KVEngine, path: Path, fmt: str,
             encoding: str) -> Iterator[tuple[Any, Any]]:
    """The file's (key, value) records (pynq_kv.bulk), keys of the kind --int-keys says and
    both as the engine will store them; the first bad one raises LoadError naming the line."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            for line, key, value in bulk.read_records(fh, fmt, encoding=encoding,
                                                      int_keys=cfg.int_keys,
                                                      int_values=engine.value_kind == "int"):
                if isinstance(key, int) != cfg.int_keys:
                    raise LoadError(f"{path}: line {line}: key is {_kind(key)}; "
                                    + ("drop --int-keys" if cfg.int_keys else
                                       "use --int-keys for integer keys"))
                try:
                    engine.key_format.encode(key)
                    engine.encode_values([value])  # the engine's value kind and width
                except KVError as exc:
                    raise LoadError(f"{path}: line {line}: {exc}") from None
                yield key, value
    except bulk.BulkFormatError as exc:
        raise LoadError(f"{path}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise LoadError(f"{path}: not UTF-8 text ({exc.reason})") from None


def _show_progress(progress: Optional[bool]) -> bool:
    if progress is not None:
        return progress
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def report_counts(report: MsetReport) -> dict[str, int]:
    return {"inserted": report.inserted, "updated": report.updated, "failed": len(report.failed)}


format_option = click.option(
    "--format", "fmt", type=click.Choice(FORMATS), default=None,
    help=f"File format (default: from the extension: {', '.join(bulk.EXTENSIONS)}).")
encoding_option = click.option(
    "--encoding", type=click.Choice(bulk.ENCODINGS), default="utf8", show_default=True,
    help="How CSV cells write byte strings: UTF-8 text, hex or base64 (NDJSON says it per item: "
         'text, or {"hex": ...} / {"base64": ...}).')


@click.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@format_option
@encoding_option
@click.option("--chunk-size", type=click.IntRange(min=1), default=DEFAULT_CHUNK, show_default=True,
              help="Keys per engine batch (mset).")
@click.option("--progress/--no-progress", default=None,
              help="Progress bar on stderr (default: when stderr is a terminal).")
@click.pass_context
def load(ctx: click.Context, file: Path, fmt: Optional[str], encoding: str, chunk_size: int,
         progress: Optional[bool]) -> None:
    """Bulk-import FILE: CSV with a 'key,value' header, or NDJSON lines {"key": ..., "value": ...}.

    These are the files 'dump' and the admin API's export write (pynq_kv.bulk). The whole file
    is checked first (a malformed line is reported with its line number and nothing is
    loaded); then it is streamed into the engine in chunks.
    """
    cfg = config_of(ctx)
    fmt = _detect_format(file, fmt)
    with session(cfg, save=True) as engine:
        records = functools.partial(_records, cfg, engine, file, fmt, encoding)
        total = sum(1 for _ in records())  # pass 1: validate
        totals: dict[str, int] = {}
        bar = tqdm(total=total, unit="key", desc=f"load {file.name}",
                   file=sys.stderr, disable=not _show_progress(progress), dynamic_ncols=True)
        with bar:
            keys: list[Any] = []
            values: list[Any] = []

            def flush() -> None:
                report = engine.mset(keys, values)
                for name, count in report_counts(report).items():
                    totals[name] = totals.get(name, 0) + count
                bar.update(len(keys))
                keys.clear()
                values.clear()

            for k, v in records():  # pass 2: load
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


@click.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(FORMATS + ("snapshot",)), default=None,
              help="csv, ndjson, or snapshot (.npz, the engine's own dump) "
                   "(default: from the extension).")
@encoding_option
@click.pass_context
def dump(ctx: click.Context, file: Path, fmt: Optional[str], encoding: str) -> None:
    """Export every key and value to FILE (the format 'load' reads), or a snapshot (.npz).

    NDJSON keeps any byte string (as {"hex": ...} when it is not UTF-8 text); CSV needs
    --encoding hex or base64 for such keys and values.
    """
    cfg = config_of(ctx)
    if fmt is None and file.suffix.lower() == ".npz":
        fmt = "snapshot"
    fmt = _detect_format(file, fmt)
    with session(cfg) as engine:
        if fmt == "snapshot":
            engine.dump(file)
            click.echo(f"snapshot written to {file}")
            return
        lines = [bulk.csv_header()] if fmt == "csv" else []
        try:
            lines += [bulk.format_record(key, value, fmt, encoding) for key, value in engine.items()]
        except ValueError as exc:
            raise CLIError(f"cannot export as CSV: {exc} (--encoding)") from None
    with atomic_write(file, "w", encoding="utf-8") as fh:
        fh.writelines(lines)
    click.echo(f"dumped {len(lines) - (fmt == 'csv')} records to {file}")
