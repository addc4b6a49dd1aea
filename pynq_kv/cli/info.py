"""``pynq-kv info`` and ``pynq-kv stats``: what the engine is and what it has counted."""

from __future__ import annotations

import click

from .common import config_of, session
from .output import echo_json, echo_table, json_option

# -- info ------------------------------------------------------------------------------------


@click.command()
@json_option
@click.pass_context
def info(ctx: click.Context, as_json: bool) -> None:
    """Backend, geometry, occupancy and counters of the engine."""
    cfg = config_of(ctx)
    with session(cfg) as engine:
        data = dict(engine.info())
    data["state"] = {"path": str(cfg.state), "exists": cfg.state.exists()}
    if as_json:
        echo_json(data)
        return
    del data["state"]
    data = {"state": f"{cfg.state}" + ("" if cfg.state.exists() else " (not created yet)"), **data}
    geometry = data.get("geometry")
    if isinstance(geometry, dict) and isinstance(geometry.get("hash_seed"), int):
        data["geometry"] = {**geometry, "hash_seed": f"0x{geometry['hash_seed']:016x}"}
    echo_table(data)


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
