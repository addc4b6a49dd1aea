"""/v1/lookup/{key}: what the data plane answers for a key, and why."""

from __future__ import annotations

from typing import Any, Optional

from fastapi import APIRouter

from pynq_kv.bulk import item_to_json
from pynq_kv.engine import KVEngine, LookupResult
from pynq_kv.errors import KeyFormatError
from pynq_kv.layout import FieldLayout

from ..codec import KeyEncodingQuery, engine_key, from_redis, item_out, raw_hex
from ..deps import EngineDep, LayoutDep, TierDep
from ..errors import TIER
from ..models import KeyEncoding, LookupPublic, RuleCandidate
from .rules import rule_public

router = APIRouter(prefix="/v1/lookup", tags=["lookup"])


def _candidates(engine: KVEngine, raw: int, winner: Optional[int]) -> list[RuleCandidate]:
    """Every rule with an entry matching raw, in the engine's order: priority, then entry."""
    found = []
    for rule_id, rule in engine.rules().items():
        entries = [e for e, t in zip(engine.rule_entries(rule_id), rule.entries) if t.matches(raw)]
        if entries:
            found.append(RuleCandidate(id=rule_id, name=rule.name, priority=rule.priority,
                                       entry=min(entries), winner=rule_id == winner))
    return sorted(found, key=lambda c: (-c.priority, c.entry))


def _fields(layout: Optional[FieldLayout], raw: int) -> Optional[dict[str, Any]]:
    if layout is None:
        return None
    try:
        return {name: item_to_json(v) if isinstance(v, bytes) else v
                for name, v in layout.decode(raw).items()}
    except KeyFormatError:  # not a key of this layout (e.g. a byte-string key)
        return None


def _explain(kind: str, candidates: list[RuleCandidate]) -> str:
    if kind == "exact":
        shadowed = f"; it shadows {len(candidates)} matching rule(s)" if candidates else ""
        return "exact hit: the key is stored in the exact table, which answers first" + shadowed
    if kind == "miss":
        return "miss: no exact entry and no rule matches the key"
    best = candidates[0]
    text = (f"no exact entry; rule {best.id}{f' ({best.name})' if best.name else ''} wins with "
            f"priority {best.priority} among {len(candidates)} matching rule(s)")
    if len(candidates) > 1 and candidates[1].priority == best.priority:
        text += f"; equal priorities go to the lowest rule-table entry ({best.entry})"
    return text


@router.get("/{key:path}", response_model=LookupPublic, responses={503: TIER[503]})
async def lookup(key: str, engine: EngineDep, layout: LayoutDep, tier: TierDep,
                 encoding: KeyEncoding = KeyEncodingQuery) -> LookupPublic:
    """A full LOOKUP (exact entry, else best rule, else miss), as the data plane does it.

    It is a real engine lookup: it counts in lookups and hits. `candidates` lists every rule
    matching the key, best first, so a rule that loses is visible too. With a host tier, a
    byte-string key the engine does not hold but Redis does is an exact hit with Redis' value
    (and fills the engine), as the RESP and memcached front-ends answer it.
    """
    k = engine_key(engine, key, encoding, layout)
    if tier is not None:
        tier.apply_invalidations()
    result = engine.lookup(k)
    if tier is not None and result.kind != "exact" and isinstance(k, bytes):
        text = (await tier.fetch_many([k]))[0]
        if text is not None:
            result = LookupResult("exact", from_redis(engine, text))
    raw_text = raw_hex(engine, k)
    raw = int(raw_text, 16)
    candidates = _candidates(engine, raw, result.rule_id)
    rule = None
    if result.rule_id is not None:
        rule = rule_public(engine, result.rule_id, engine.rules()[result.rule_id], engine.rule_hits())
    return LookupPublic(
        key=item_out(k), raw_key=raw_text, fields=_fields(layout, raw), kind=result.kind,
        value=None if result.value is None else item_out(result.value), rule_id=result.rule_id,
        entry=result.entry, rule=rule, candidates=candidates,
        explanation=_explain(result.kind, candidates))
