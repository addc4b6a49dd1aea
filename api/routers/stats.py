"""/v1/stats: engine counters, hit rate, per-rule hits and every front-end's counters."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ..deps import ApplianceDep, LatenciesDep
from ..models import LatencyPublic, OccupancyPublic, RuleHits, StatsPublic

router = APIRouter(prefix="/v1/stats", tags=["stats"])


def _plain(value: Any) -> Any:
    """Front-end counters as JSON: numpy scalars as numbers, anything odd as text."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


@router.get("", response_model=StatsPublic)
async def stats(appliance: ApplianceDep, latencies: LatenciesDep) -> StatsPublic:
    """Counters as the engine keeps them (docs/engine.md §6) and the front-ends' latency
    quantiles since start; the dashboard polls this."""
    engine = appliance.engine
    counters = engine.stats()
    hits = counters.pop("rule_hits_by_id")
    occ = engine.occupancy()
    lookups = counters["lookups"]
    rules = engine.rules()
    return StatsPublic(
        backend=appliance.backend, uptime=appliance.uptime, reloads=appliance.reloads,
        occupancy=OccupancyPublic(used=occ.used, capacity=occ.capacity, load_factor=occ.load_factor),
        counters={name: int(value) for name, value in counters.items()},
        hit_rate=(counters["exact_hits"] + counters["rule_hits"]) / lookups if lookups else None,
        rules=[RuleHits(id=rule_id, name=rule.name, priority=rule.priority, hits=hits.get(rule_id, 0))
               for rule_id, rule in sorted(rules.items())],
        frontends=_plain(appliance.frontend_stats()),
        latency={name: LatencyPublic(count=rec.count, sum=rec.sum, p50=rec.quantile(0.5),
                                     p99=rec.quantile(0.99))
                 for name, rec in latencies.items()})
