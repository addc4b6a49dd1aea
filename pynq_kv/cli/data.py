"""``pynq-kv set``, ``get``, ``del`` and ``lookup``: one key at a time."""

from __future__ import annotations

from typing import Any, Optional

import click

from .common import Config, config_of, parse_fields, parse_layout, session
from .output import display_key, echo_json, json_option, show

# -- set / get / del / lookup ----------------------------------------------------------------


@click.command("set")
@click.argument("key")
@click.argument("value")
@click.pass_context
def set_cmd(ctx: click.Context, key: str, value: str) -> None:
    """Set KEY to VALUE (prints whether the key is new)."""
    cfg = config_of(ctx)
    k = cfg.key(key)
    with session(cfg, save=True) as engine:
        new = engine.set(k, cfg.value(value))
    click.echo("OK (new key)" if new else "OK (updated)")


@click.command()
@click.argument("key")
@json_option
@click.pass_context
def get(ctx: click.Context, key: str, as_json: bool) -> None:
    """Value of KEY from the exact table ('(nil)' when absent; exit status 0 either way)."""
    cfg = config_of(ctx)
    k = cfg.key(key)
    with session(cfg) as engine:
        value = engine.get(k)
    if as_json:
        echo_json({"key": display_key(k), "found": value is not None, "value": value})
    else:
        click.echo(show(value))


@click.command("del")
@click.argument("keys", nargs=-1, required=True, metavar="KEY...")
@click.pass_context
def del_cmd(ctx: click.Context, keys: tuple[str, ...]) -> None:
    """Delete one or more keys (prints how many existed)."""
    cfg = config_of(ctx)
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
        return parse_layout(layout, key_width).key(**parse_fields(fields))
    if key is None:
        raise click.UsageError("give a KEY, or --layout and --field options")
    return cfg.key(key)


@click.command()
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
    cfg = config_of(ctx)
    with session(cfg) as engine:
        k = _lookup_key(cfg, key, layout, fields, engine.geometry.key_width)
        result = engine.lookup(k)
    if as_json:
        shown = (f"0x{k:0{engine.geometry.key_width // 4}x}" if fields
                 else display_key(k))  # a structured key as its raw hex
        echo_json({
            "key": shown, "kind": result.kind, "value": result.value,
            "rule_id": result.rule_id, "entry": result.entry,
        })
        return
    if result.kind == "exact":
        click.echo(f"exact: {show(result.value)}")
    elif result.kind == "rule":
        click.echo(f"rule {result.rule_id} (entry {result.entry}): {show(result.value)}")
    else:
        click.echo("miss")
