"""What every ``pynq-kv`` command shares: the global options, the engine session on the state
file, error reporting, and parsing of keys, values and field layouts typed on the command line.

Every command opens the engine through ``pynq_kv.load()`` (a PYNQ board, an Alveo card or the
simulated overlay, by --board/--backend). The tables of one invocation do not outlive it (the
model lives in memory; a board's overlay is loaded again), so the CLI keeps them in a snapshot
file between invocations: every command loads the snapshot (if it exists), runs, and — for
commands that change entries or rules — writes it back atomically.
"""

from __future__ import annotations

import contextlib
import errno
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

import click

from .. import bulk
from ..engine import KVEngine
from ..errors import KVError
from ..layout import FieldLayout, parse_field_values, parse_layout_spec
from ..options import EngineOptions
from ..overlay import AUTO, KVOverlay, load

try:  # advisory lock so two CLI processes do not lose each other's updates
    import fcntl
except ImportError:  # pragma: no cover - not on Linux
    fcntl = None  # type: ignore[assignment]


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


def describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror}{where}"
    text = str(exc)
    return text or type(exc).__name__


class Group(click.Group):
    """Turns engine and file errors raised by any subcommand into ``error: ...`` / exit 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KVError as exc:
            raise CLIError(describe(exc)) from exc
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                raise
            raise CLIError(describe(exc)) from exc


# ---------------------------------------------------------------------------------------------
# configuration and the engine session


@dataclass
class Config:
    state: Path
    geometry: dict[str, int] = field(default_factory=dict)  # only the options given
    value_kind: Optional[str] = None  # None: the state's own kind ("bytes" for a new state)
    int_keys: bool = False
    backend: str = AUTO  # a name load() accepts: auto, pynq, xrt, model, rtl
    board: Optional[str] = None  # overlays/<board>; None: load() finds it

    def options(self) -> EngineOptions:
        """The engine these global options describe (value kind None: a state's own)."""
        return EngineOptions(self.backend, self.geometry, self.value_kind)

    # -- user input -> engine keys / values (the text forms of pynq_kv.bulk) ---------------
    def key(self, text: str) -> Any:
        """A key from the command line: UTF-8 bytes, or an integer with --int-keys."""
        return _typed(text, self.int_keys, "KEY")

    def value(self, text: str, hint: str = "VALUE") -> Any:
        """A value from the command line: UTF-8 bytes, or an integer with --value-kind int."""
        return _typed(text, self.value_kind == "int", hint)


def _typed(text: str, as_int: bool, hint: str) -> Any:
    try:
        return bulk.text_to_int(text) if as_int else bulk.text_to_bytes(text, "utf8")
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=hint) from None


def _open(cfg: Config) -> KVOverlay:
    """The overlay through load(), with the state file's tables when it exists (its geometry and
    value kind then win; options that disagree with them are an error)."""
    if not cfg.state.exists():
        return load(cfg.board, cfg.backend, geometry=cfg.geometry,
                    value_kind=cfg.value_kind or "bytes")
    snap = KVEngine.read_snapshot(cfg.state)
    overlay = load(cfg.board, cfg.backend, geometry=snap.meta["geometry"],
                   value_kind=snap.meta.get("value_kind", "bytes"))
    try:
        mismatched = cfg.options().mismatches(overlay.engine)
        if mismatched:
            raise CLIError(
                f"state file {cfg.state} does not match the options: {', '.join(mismatched)}; "
                "drop those options or use another --state")
        overlay.engine.load_snapshot(snap)
    except BaseException:
        overlay.close()
        raise
    return overlay


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
def overlay_session(cfg: Config, save: bool = False) -> Iterator[KVOverlay]:
    """The overlay for one command, its tables from the state file; saved back when save is True.

    Nothing is written when the command fails, so a failed command leaves the state unchanged.
    """
    with _lock(cfg.state, exclusive=save):
        overlay = _open(cfg)
        cfg.value_kind = overlay.engine.value_kind
        try:
            yield overlay
            if save:
                overlay.engine.dump(cfg.state)  # a temporary file renamed over the state: atomic
        finally:
            overlay.close()


@contextlib.contextmanager
def session(cfg: Config, save: bool = False) -> Iterator[KVEngine]:
    """The engine of overlay_session(): what every command but info works on."""
    with overlay_session(cfg, save) as overlay:
        yield overlay.engine


def config_of(ctx: click.Context) -> Config:
    return ctx.find_object(Config)  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------
# field layouts (structured keys and rules)


def parse_layout(spec: str, key_width: int) -> FieldLayout:
    """The --layout option's FieldLayout; a malformed spec is a usage error."""
    try:
        fields = parse_layout_spec(spec)
    except KVError as exc:
        raise click.BadParameter(str(exc), param_hint="--layout") from None
    return FieldLayout(key_width, fields)


def parse_fields(items: tuple[str, ...]) -> dict[str, str]:
    """The --field NAME=VALUE options; a malformed one is a usage error."""
    try:
        return parse_field_values(items)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--field") from None
