"""``pynq-kv rules add|list|del``: wildcard rules, raw or built from a field layout."""

from __future__ import annotations

from typing import Optional

import click

from ..rules import Rule
from .common import Group, config_of, parse_fields, parse_layout, session
from .output import echo_json, json_option, show


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


# -- rules -----------------------------------------------------------------------------------


@click.group(cls=Group)
def rules() -> None:
    """Wildcard rules: value/mask entries with a priority (see 'rules add --help')."""


def rule_entries(rule: Rule) -> list[tuple[int, int]]:
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
    cfg = config_of(ctx)
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
            rule = parse_layout(layout, engine.geometry.key_width).rule(
                priority=priority, value=v, name=name, **parse_fields(fields))
        rule_id = engine.add_rule(rule)
        n = len(rule_entries(rule))
    click.echo(f"rule {rule_id} added ({n} ternary entr{'y' if n == 1 else 'ies'})")


@rules.command("list")
@click.option("--entries", is_flag=True, help="Also print each ternary entry (match/mask).")
@json_option
@click.pass_context
def rules_list(ctx: click.Context, entries: bool, as_json: bool) -> None:
    """List the rules: id, priority, value, number of ternary entries."""
    cfg = config_of(ctx)
    with session(cfg) as engine:
        table = engine.rules()
        hex_digits = engine.geometry.key_width // 4
    if as_json:
        echo_json([
            {
                "id": rule_id, "name": rule.name, "priority": rule.priority,
                "value": rule.value, "fields": rule.spec,
                "entries": [{"match": f"0x{m:0{hex_digits}x}", "mask": f"0x{k:0{hex_digits}x}"}
                            for m, k in rule_entries(rule)],
            }
            for rule_id, rule in sorted(table.items())
        ])
        return
    if not table:
        click.echo("no rules")
        return
    click.echo(f"{'id':>5} {'priority':>10} {'entries':>8}  value  [name] fields")
    for rule_id, rule in sorted(table.items()):
        pairs = rule_entries(rule)
        extra = " ".join(x for x in (f"[{rule.name}]" if rule.name else "", _spec_text(rule.spec)) if x)
        click.echo(f"{rule_id:>5} {rule.priority:>10} {len(pairs):>8}  {show(rule.value)}"
                   + (f"  {extra}" if extra else ""))
        if entries:
            for m, k in pairs:
                click.echo(f"{'':>7}match 0x{m:0{hex_digits}x}\n{'':>7}mask  0x{k:0{hex_digits}x}")


@rules.command("del")
@click.argument("rule_id", type=int, metavar="ID")
@click.pass_context
def rules_del(ctx: click.Context, rule_id: int) -> None:
    """Remove rule ID."""
    cfg = config_of(ctx)
    with session(cfg, save=True) as engine:
        engine.remove_rule(rule_id)
    click.echo(f"rule {rule_id} removed")
