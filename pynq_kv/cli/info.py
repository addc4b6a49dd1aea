"""``pynq-kv info`` and ``pynq-kv stats``: what the overlay and engine are, what they counted."""

from __future__ import annotations

from typing import Any

import click

from .common import config_of, overlay_session, session
from .output import echo_json, echo_table, json_option

# -- info ------------------------------------------------------------------------------------


@click.command()
@json_option
@click.pass_context
def info(ctx: click.Context, as_json: bool) -> None:
    """The overlay (kind, source, board, manifest, front-end), backend, geometry, occupancy and
    counters of the engine."""
    cfg = config_of(ctx)
    with overlay_session(cfg) as overlay:
        data = dict(overlay.engine.info())
        loaded = overlay.info()
    data["overlay"] = loaded
    data["state"] = {"path": str(cfg.state), "exists": cfg.state.exists()}
    if as_json:
        echo_json(data)
        return
    del data["state"], data["overlay"]
    manifest = {k: _line(v) for k, v in loaded["manifest"].items() if not k.startswith("_")}
    data = {"overlay": f"{loaded['kind']} {loaded['board']} from {loaded['source']}",
            "state": f"{cfg.state}" + ("" if cfg.state.exists() else " (not created yet)"),
            **data,
            "frontend": loaded["frontend"] or "none: the model has no RTL Ethernet front-end",
            "manifest": manifest}
    geometry = data.get("geometry")
    if isinstance(geometry, dict) and isinstance(geometry.get("hash_seed"), int):
        data["geometry"] = {**geometry, "hash_seed": f"0x{geometry['hash_seed']:016x}"}
    echo_table(data)


def _line(value: Any) -> Any:
    """A manifest list on one line: items joined, {"what", "how"} entries as "what (how)"."""
    if not isinstance(value, list):
        return value
    return "; ".join(f"{v['what']} ({v['how']})" if isinstance(v, dict) and "what" in v else str(v)
                     for v in value)


# -- stats -----------------------------------------------------------------------------------


@click.command()
@json_option
@click.pass_context
def stats(ctx: click.Context, as_json: bool) -> None:
    """Engine counters (lookups, hits, misses, inserts, deletes, per-rule hits) and occupancy.

    Snapshots keep the tables and rules but not the counters, so across separate CLI
    invocations only 'occupancy' carries over; the other counters cover this invocation.
    """
    cfg = config_of(ctx)
    with session(cfg) as engine:
        data = engine.stats()
    if as_json:
        echo_json(data)
        return
    echo_table(data)
    click.echo("(counters other than occupancy cover this invocation only: snapshots do not keep them)")
