"""Wildcard commands, the engine's own (module style): KV.MATCH, KV.RULE.ADD/DEL/LIST, KV.STATS.

    KV.MATCH key                                 exact entry, else best wildcard rule, else miss
    KV.MATCH FIELD name value [FIELD ...]        the same for a structured key (appliance layout)
    KV.RULE.ADD PRIORITY p VALUE v [NAME n] MATCH hex MASK hex
    KV.RULE.ADD PRIORITY p VALUE v [NAME n] PREFIX bytes
    KV.RULE.ADD PRIORITY p VALUE v [NAME n] FIELD name spec [FIELD name spec ...]
    KV.RULE.DEL id                               1 if the rule existed, else 0
    KV.RULE.LIST                                 every rule: id, name, priority, value, match, hits
    KV.STATS                                     the engine's counters (engine.stats())

Replies with several named parts are maps in RESP3 and flat name/value arrays in RESP2 (as
HELLO and CONFIG GET), except KV.MATCH, whose RESP2 reply is the array [kind, value, rule_id].
Engine refusals (InvalidRule, RuleTableFull, a bad field) become "ERR <the engine's message>".
"""

from __future__ import annotations

from typing import Any, Optional

from ....errors import KVError
from ....ranges import range_to_ternary
from ....rules import Rule, Ternary
from .. import errors as E
from ..protocol import ErrorReply, string2ll
from .base import Client, Command, Server, key_error, value_in, value_out


def _text(arg: bytes) -> str:
    return arg.decode("utf-8", "surrogateescape")


def _fields(srv: Server, args: list[bytes]) -> Any:
    """{name: text} from FIELD name value triples, or an ErrorReply."""
    if srv.appliance.layout is None:
        return ErrorReply(b"ERR FIELD needs a field layout; this appliance serves byte-string keys")
    out: dict[str, str] = {}
    j = 0
    while j < len(args):
        if args[j].upper() != b"FIELD" or j + 2 >= len(args):
            return ErrorReply(E.SYNTAX)
        name = _text(args[j + 1])
        if name in out:
            return ErrorReply(f"ERR field {name!r} given twice".encode())
        out[name] = _text(args[j + 2])
        j += 3
    return out


def cmd_match(srv: Server, conn: Client, args: list[bytes]) -> Any:
    eng = srv.engine
    if len(args) == 2:
        error = key_error(srv, args[1])
        if error is not None:
            return error
        key: Any = args[1]
    else:
        fields = _fields(srv, args[1:])
        if type(fields) is ErrorReply:
            return fields
        try:
            key = srv.appliance.layout.key(**fields)
        except KVError as exc:
            return ErrorReply(E.engine_error(exc))
    result = eng.lookup(key)
    srv.count_lookups(1, result.hit)
    value = value_out(result.value)
    kind = result.kind.encode()
    if conn.resp3:
        return {b"kind": kind, b"value": value, b"rule_id": result.rule_id}
    return [kind, value, result.rule_id]


def _prefix_rule(srv: Server, prefix: bytes, priority: int, value: Any,
                 name: Optional[str]) -> Any:
    """A rule over the length-tagged encoding: key bytes 1..len(prefix) equal the prefix.

    When the prefix ends in NUL bytes a shorter key padded with zeros would match too, so then
    the length byte is constrained to >= len(prefix) (a few entries of a range cover).
    """
    eng = srv.engine
    fmt = eng.key_format
    if len(prefix) > fmt.max_bytes:
        return ErrorReply(srv.key_too_long)
    width = fmt.width
    body_shift = width - 8 - 8 * len(prefix)
    match = int.from_bytes(prefix, "big") << body_shift if prefix else 0
    mask = ((1 << 8 * len(prefix)) - 1) << body_shift if prefix else 0
    if prefix and prefix[-1] == 0:
        lengths = range_to_ternary(len(prefix), fmt.max_bytes, 8)
    else:
        lengths = [(0, 0)]
    entries = tuple(Ternary(match | (v << (width - 8)), mask | (m << (width - 8))) for v, m in lengths)
    spec = {"prefix": prefix.decode("utf-8", "backslashreplace")}
    return Rule(entries, priority, value, name, spec)


def cmd_rule_add(srv: Server, conn: Client, args: list[bytes]) -> Any:
    eng = srv.engine
    priority: Optional[int] = None
    value: Any = None
    name: Optional[str] = None
    match = mask = prefix = None
    fields: list[bytes] = []
    j = 1
    while j < len(args):
        word = args[j].upper()
        if word == b"FIELD" and j + 2 < len(args):
            fields += args[j:j + 3]
            j += 3
            continue
        if j + 1 >= len(args) or word not in (b"PRIORITY", b"VALUE", b"NAME", b"MATCH", b"MASK",
                                              b"PREFIX"):
            return ErrorReply(E.SYNTAX)
        arg = args[j + 1]
        if word == b"PRIORITY":
            priority = string2ll(arg)
            if priority is None:
                return ErrorReply(E.NOT_INTEGER)
        elif word == b"VALUE":
            value = value_in(srv, arg)
            if type(value) is ErrorReply:
                return value
        elif word == b"NAME":
            name = _text(arg)
        elif word == b"PREFIX":
            prefix = arg
        else:
            try:
                number = int(arg.decode("ascii"), 16)
            except (UnicodeDecodeError, ValueError):
                return ErrorReply(b"ERR " + word + b" takes a hexadecimal number")
            if word == b"MATCH":
                match = number
            else:
                mask = number
        j += 2
    if priority is None or value is None:
        return ErrorReply(b"ERR KV.RULE.ADD needs PRIORITY and VALUE")
    forms = (match is not None or mask is not None) + (prefix is not None) + bool(fields)
    if forms != 1:
        return ErrorReply(b"ERR KV.RULE.ADD takes one of: MATCH hex MASK hex, PREFIX bytes, "
                          b"FIELD name spec ...")
    try:
        if prefix is not None:
            rule = _prefix_rule(srv, prefix, priority, value, name)
            if type(rule) is ErrorReply:
                return rule
        elif fields:
            specs = _fields(srv, fields)
            if type(specs) is ErrorReply:
                return specs
            rule = srv.appliance.layout.rule(priority=priority, value=value, name=name, **specs)
        else:
            if match is None or mask is None:
                return ErrorReply(b"ERR MATCH and MASK go together")
            rule = Rule.ternary(match, mask, priority, value, name=name)
        rule_id = eng.add_rule(rule)
        srv.appliance.rules_changed()  # durable before the reply (with a host tier)
        return rule_id
    except (KVError, TypeError) as exc:
        return ErrorReply(E.engine_error(exc))


def cmd_rule_del(srv: Server, conn: Client, args: list[bytes]) -> Any:
    rule_id = string2ll(args[1])
    if rule_id is None:
        return ErrorReply(E.NOT_INTEGER)
    eng = srv.engine
    if rule_id not in eng.rules():
        return 0
    eng.remove_rule(rule_id)
    srv.appliance.rules_changed()
    return 1


def _match_text(srv: Server, rule: Rule) -> str:
    if rule.spec:
        return " ".join(f"{k}={v}" for k, v in rule.spec.items())
    digits = srv.engine.geometry.key_width // 4
    return " ".join(f"match=0x{e.match:0{digits}x} mask=0x{e.mask:0{digits}x}" for e in rule.entries)


def cmd_rule_list(srv: Server, conn: Client, args: list[bytes]) -> Any:
    eng = srv.engine
    hits = eng.rule_hits()
    out = []
    for rule_id, rule in sorted(eng.rules().items()):
        value = rule.value.encode() if isinstance(rule.value, str) else value_out(rule.value)
        out.append({
            b"id": rule_id,
            b"name": None if rule.name is None else rule.name.encode(),
            b"priority": rule.priority,
            b"value": value,
            b"entries": len(rule.entries),
            b"match": _match_text(srv, rule).encode(),
            b"hits": hits.get(rule_id, 0),
        })
    return out


def cmd_stats(srv: Server, conn: Client, args: list[bytes]) -> Any:
    eng = srv.engine
    stats = eng.stats()
    out: dict[bytes, Any] = {}
    for name, number in stats.items():
        if name == "rule_hits_by_id":
            out[b"rule_hits_by_id"] = {str(k).encode(): int(v) for k, v in number.items()}
        else:
            out[name.encode()] = int(number)
    out[b"capacity"] = eng.geometry.capacity
    return out


def commands() -> list[Command]:
    """KV.MATCH, KV.RULE.ADD, KV.RULE.DEL, KV.RULE.LIST, KV.STATS."""
    return [
        Command("kv.match", -2, ("readonly", "fast"), cmd_match,
             "Exact entry, else best wildcard rule, else miss: [kind, value, rule_id]", "kv",
             (1, 1, 1)),
        Command("kv.rule.add", -5, ("write", "denyoom"), cmd_rule_add,
             "Adds a wildcard rule (MATCH/MASK, PREFIX or FIELD specs); returns its id", "kv"),
        Command("kv.rule.del", 2, ("write",), cmd_rule_del, "Removes a wildcard rule", "kv"),
        Command("kv.rule.list", 1, ("readonly",), cmd_rule_list, "Lists the wildcard rules", "kv"),
        Command("kv.stats", 1, ("readonly", "fast"), cmd_stats, "Returns the engine's counters", "kv"),
    ]
