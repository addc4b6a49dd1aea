"""/v1/rules: wildcard rules from per-field specs or raw ternary entries.

With a host tier every change is saved to its rules file (Appliance.rules_changed) before the
answer; a change that cannot be saved is undone where it can be (an added rule) and answered 503.
"""

from __future__ import annotations

from typing import Optional

from fastapi import APIRouter, HTTPException, Request, Response

from pynq_kv.engine import KVEngine
from pynq_kv.errors import KVError, RuleTableFull, UnknownRule
from pynq_kv.layout import FieldLayout
from pynq_kv.rules import Rule, Ternary

from ..codec import engine_value, item_out
from ..deps import ApplianceDep, Authorized, EngineDep, LayoutDep
from ..errors import NO_ROOM, NOT_FOUND, UNAUTHORIZED, InputError, Message
from ..models import RuleCreate, RulePublic, TernaryIn, TernaryOut

router = APIRouter(prefix="/v1/rules", tags=["rules"])

NOT_SAVED = {503: {"model": Message, "description": "The rules file of the host tier could not "
                                                    "be written"}}

_LAYOUT_ERRORS = (KVError, ValueError, TypeError)  # odd JSON shapes must not become a 500


def rule_public(engine: KVEngine, rule_id: int, rule: Rule, hits: dict[int, int]) -> RulePublic:
    digits = engine.geometry.key_width // 4
    return RulePublic(
        id=rule_id, name=rule.name, priority=rule.priority, value=item_out(rule.value),
        match=rule.spec,
        ternary=[TernaryOut(match=f"0x{t.match:0{digits}x}", mask=f"0x{t.mask:0{digits}x}")
                 for t in rule.entries],
        entries=engine.rule_entries(rule_id), hits=hits.get(rule_id, 0))


def _from_fields(body: RuleCreate, value: object, layout: Optional[FieldLayout],
                 max_entries: int) -> Rule:
    assert body.match is not None
    if layout is None:
        raise InputError(("body", "match"), "this appliance has no field layout "
                         "(pynq-kv serve --layout); give raw 'ternary' entries instead")
    known = [f.name for f in layout.fields]
    for name in body.match:
        if name not in known:
            raise InputError(("body", "match", name),
                             f"unknown field {name!r} (layout fields: {', '.join(known)})")
    try:
        return layout.rule(body.priority, value, body.name, max_entries=max_entries, **body.match)
    except _LAYOUT_ERRORS as exc:
        raise InputError(("body", "match") + _culprit(layout, body.match, value, max_entries),
                         str(exc)) from None


def _culprit(layout: FieldLayout, match: dict, value: object, max_entries: int) -> tuple[str, ...]:
    """The first field whose spec fails on its own; none when only their product is too big."""
    for name, spec in match.items():
        try:
            layout.rule(0, value, max_entries=max_entries, **{name: spec})
        except _LAYOUT_ERRORS:
            return (name,)
    return ()


def _ternary(entry: TernaryIn, i: int, key_width: int) -> Ternary:
    match, mask = int(entry.match, 16), int(entry.mask, 16)
    if mask >> key_width:
        raise InputError(("body", "ternary", i, "mask"), f"mask is wider than the {key_width}-bit key")
    if match & ~mask:
        raise InputError(("body", "ternary", i, "match"),
                         f"match bits 0x{match & ~mask:x} are outside the mask: the entry could never match")
    return Ternary(match, mask)


@router.get("", response_model=list[RulePublic])
async def list_rules(engine: EngineDep) -> list[RulePublic]:
    """Every rule, by id, with its ternary entries and hits."""
    hits = engine.rule_hits()
    return [rule_public(engine, rule_id, rule, hits) for rule_id, rule in sorted(engine.rules().items())]


@router.post("", status_code=201, response_model=RulePublic, dependencies=Authorized,
             responses={**UNAUTHORIZED, **NO_ROOM, **NOT_SAVED})
async def create_rule(body: RuleCreate, request: Request, response: Response, engine: EngineDep,
                      layout: LayoutDep, appliance: ApplianceDep) -> RulePublic:
    """Add a rule; 422 names the offending field in loc, 507 if the rule table has no room.

    A range expands to several ternary entries, and specs on several fields to their cross
    product; a rule needing more entries than the rule table holds is refused.
    """
    g = engine.geometry
    if body.priority >= 1 << g.prio_width:
        raise InputError(("body", "priority"), f"priority must be below 2^{g.prio_width} "
                                               f"({(1 << g.prio_width) - 1} at most)")
    value = engine_value(engine, body.value, ("body", "value"))
    if body.ternary is not None:
        entries = tuple(_ternary(entry, i, g.key_width) for i, entry in enumerate(body.ternary))
        rule = Rule(entries, body.priority, value, body.name)
    else:
        rule = _from_fields(body, value, layout, max(g.rules, 1))
    try:
        rule_id = engine.add_rule(rule)
    except RuleTableFull as exc:
        raise HTTPException(507, str(exc)) from None
    try:
        appliance.rules_changed()
    except (KVError, OSError) as exc:
        engine.remove_rule(rule_id)
        raise HTTPException(503, f"the rule was not added: cannot save the rules file: {exc}") from None
    response.headers["Location"] = str(request.url_for("get_rule", rule_id=rule_id).path)
    return rule_public(engine, rule_id, rule, {})


@router.get("/{rule_id}", response_model=RulePublic, responses=NOT_FOUND, name="get_rule")
async def get_rule(rule_id: int, engine: EngineDep) -> RulePublic:
    rule = engine.rules().get(rule_id)
    if rule is None:
        raise HTTPException(404, f"no rule with id {rule_id}")
    return rule_public(engine, rule_id, rule, engine.rule_hits())


@router.delete("/{rule_id}", status_code=204, dependencies=Authorized,
               responses={**NOT_FOUND, **UNAUTHORIZED, **NOT_SAVED})
async def delete_rule(rule_id: int, engine: EngineDep, appliance: ApplianceDep) -> Response:
    try:
        engine.remove_rule(rule_id)
    except UnknownRule as exc:
        raise HTTPException(404, str(exc)) from None
    try:
        appliance.rules_changed()
    except (KVError, OSError) as exc:
        raise HTTPException(503, f"the rule is removed from the engine, but the rules file "
                                 f"still holds it (it comes back on reload): {exc}") from None
    return Response(status_code=204)
