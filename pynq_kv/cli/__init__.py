"""The ``pynq-kv`` command line: manage a key-value + wildcard-rule engine from a shell.

The root group here holds the global options (state file, backend, geometry, key and value
kinds); the commands live in modules by group: data (set/get/del/lookup), rules, files
(load/dump), info (info/stats), demo and serve. Shared pieces are in common and output.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click

from ..geometry import KEY_WIDTHS
from ..keys import VALUE_KINDS
from ..overlay import AUTO, BOARD_ENV, backends, unavailable_here
from . import data, demo, files, info, rules, serve
from .common import Config, Group, default_state_path


def _check_backend(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """--backend names one load() can open here: a usage error listing them, before anything runs."""
    reason = unavailable_here(value)
    if reason is not None:
        raise click.BadParameter(reason)
    return value


_HELP = """\
Manage a pynq-kv key-value + wildcard lookup engine.

\b
The engine is opened through pynq_kv.load(): a PYNQ board (pynq and a
programmable PL here), else an Alveo card (XRT's pyxrt importable), else the
simulated overlay (the model); --backend and --board choose instead.

\b
The tables live in a snapshot file (--state, env PYNQ_KV_STATE, default
~/.local/share/pynq-kv/state.npz): each command loads it if it exists and
commands that change anything save it back (atomically). The geometry options
apply when the state file is created; with an existing state they must match it.
'serve' with a host tier keeps them (and --value-kind, --layout) in its data
dir's settings.json the same way (see 'pynq-kv serve --help').

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


@click.group(cls=Group, help=_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--state", type=click.Path(dir_okay=False, path_type=Path), envvar="PYNQ_KV_STATE",
              default=None, metavar="PATH",
              help="Snapshot file holding the tables [env PYNQ_KV_STATE; "
                   "default ~/.local/share/pynq-kv/state.npz].")
@click.option("--backend", default=AUTO, show_default=True, envvar="PYNQ_KV_BACKEND",
              callback=_check_backend, metavar="NAME",
              help=f"One of {', '.join(backends())}: auto finds the overlay, pynq and xrt are "
                   "boards, model and rtl the simulated overlay [env PYNQ_KV_BACKEND].")
@click.option("--board", default=None, envvar=BOARD_ENV, metavar="BOARD",
              help="The board whose overlay to load: a folder of overlays/ with a manifest.json "
                   f"[env {BOARD_ENV}; default: found from the host].")
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
@click.option("--value-kind", type=click.Choice(VALUE_KINDS), default=None,
              envvar="PYNQ_KV_VALUE_KIND",
              help="Values are UTF-8 text (bytes) or integers; kept in the state file "
                   "(new state; default bytes) [env PYNQ_KV_VALUE_KIND].")
@click.option("--int-keys", is_flag=True, envvar="PYNQ_KV_INT_KEYS",
              help="Keys are integers (raw keys) instead of text [env PYNQ_KV_INT_KEYS].")
@click.version_option(package_name="pynq-kv", prog_name="pynq-kv", message="%(prog)s %(version)s")
@click.pass_context
def cli(ctx: click.Context, state: Optional[Path], backend: str, board: Optional[str],
        key_width: Optional[str],
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
        board=board,
    )


for command in (info.info, info.stats, data.set_cmd, data.get, data.del_cmd, data.lookup,
                rules.rules, files.load, files.dump, demo.demo, serve.serve):
    cli.add_command(command)


def main(argv: Optional[list[str]] = None) -> None:
    """Console-script entry point (``pynq-kv``)."""
    cli.main(args=argv, prog_name="pynq-kv")
