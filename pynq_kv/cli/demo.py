"""``pynq-kv demo``: a walk-through on a fresh in-memory engine."""

from __future__ import annotations

import click

from ..engine import KVEngine
from ..layout import FieldLayout
from ..overlay import load
from .common import config_of
from .files import report_counts
from .output import echo_table, show
from .rules import rule_entries

# -- demo ------------------------------------------------------------------------------------


@click.command()
@click.pass_context
def demo(ctx: click.Context) -> None:
    """A walk-through on a fresh engine (does not touch --state)."""
    cfg = config_of(ctx)
    with load(cfg.board, cfg.backend, geometry=cfg.geometry, value_kind="bytes") as overlay:
        click.echo(f"pynq-kv demo on the {overlay.kind} overlay {overlay.board} from "
                   f"{overlay.source} (backend: {overlay.engine.backend.name})")
        _walk(overlay.engine)


def _walk(engine: KVEngine) -> None:
    say = click.echo
    g = engine.geometry
    say(f"engine: {g.key_width}-bit keys, {g.value_width}-bit values, {g.ways} ways x {g.rows} rows"
        f" + {g.stash} stash = {g.capacity} entries, {g.rules} rule entries")

    say("\n1. exact table: set and get byte-string keys")
    for key, value in (("user:1", "alice"), ("user:2", "bob"), ("user:1", "alicia")):
        new = engine.set(key.encode(), value.encode())
        say(f"   set {key} = {value:<8} -> {'new key' if new else 'updated'}")
    for key in ("user:1", "user:2", "user:3"):
        say(f"   get {key:<17} -> {show(engine.get(key.encode()))}")

    say("\n2. batch: mset of 1000 keys in one engine batch")
    report = engine.mset([f"item:{i}".encode() for i in range(1000)],
                         [f"v{i}".encode() for i in range(1000)])
    counts = report_counts(report)
    say("   " + ", ".join(f"{n} {name}" for name, n in counts.items()))
    say(f"   get {'item:999':<17} -> {show(engine.get(b'item:999'))}")

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
        n = len(rule_entries(rule))
        say(f"   rule {rule_id}: {shown:<36} priority {priority} -> {value} "
            f"({n} ternary entr{'y' if n == 1 else 'ies'})")
    engine.set(layout.key(src_ip="10.1.2.3", dst_port=1200), b"pinned-flow")
    say("   exact entry: src_ip=10.1.2.3 dst_port=1200 -> pinned-flow")

    say("\n4. lookup: the exact entry first, else the highest-priority matching rule, else miss")
    for ip, port in (("10.1.2.3", 1200), ("10.1.2.4", 1200), ("10.1.2.4", 1500),
                     ("192.168.0.1", 1200), ("10.9.9.9", 2001)):
        result = engine.lookup(layout.key(src_ip=ip, dst_port=port))
        if result.kind == "rule":
            answer = f"rule {result.rule_id}: {show(result.value)}"
        elif result.kind == "exact":
            answer = f"exact: {show(result.value)}"
        else:
            answer = "miss"
        say(f"   lookup {ip + ':' + str(port):<19} -> {answer}")

    say("\n5. delete")
    say(f"   del user:2 -> {'deleted' if engine.delete(b'user:2') else 'not found'}; "
        f"get user:2 -> {show(engine.get(b'user:2'))}")

    say("\n6. stats")
    echo_table(engine.stats(), indent="   ")
    say("\ndone. Next: pynq-kv set hello world; pynq-kv get hello; pynq-kv --help")
