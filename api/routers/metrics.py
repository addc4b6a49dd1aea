"""/metrics: the appliance in Prometheus text format, read from the engine at scrape time."""

from __future__ import annotations

import re
from typing import Any, Iterator

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                     HistogramMetricFamily, Metric)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from pynq_kv.appliance import Appliance
from pynq_kv.latency import LatencyRecorder

from ..deps import ApplianceDep, LatenciesDep

router = APIRouter(tags=["metrics"])

PREFIX = "pynq_kv_"
COUNTER_HELP = {
    "lookups": "GETs and LOOKUPs",
    "exact_hits": "GETs and LOOKUPs answered from the exact table",
    "rule_hits": "LOOKUPs answered by a wildcard rule",
    "misses": "GETs and LOOKUPs with no answer",
    "inserts": "SETs that placed a new key",
    "updates": "SETs that changed an existing key",
    "insert_failures": "SETs that found no free slot",
    "deletes": "DELs that removed a key",
    "delete_misses": "DELs of an absent key",
    "cmd_errors": "control operations the engine refused",
    "relocations": "keys the host made room for by cuckoo moves",
    "relocation_moves": "entries moved by host relocation",
    "relocation_failures": "keys host relocation found no room for",
}


def _flatten(stats: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, float]]:
    """Numeric leaves of nested front-end stats as (a_b_c, number); text is left out."""
    for key, value in stats.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _flatten(value, f"{name}_")
        else:
            number = value.item() if callable(getattr(value, "item", None)) else value  # numpy
            if isinstance(number, (int, float)):
                yield re.sub(r"[^a-zA-Z0-9_]", "_", name), float(number)


LATENCY_HELP = ("front-end requests, server side: arrival at the event loop to the reply handed to "
                "the kernel (resp: per command, udp: per datagram, admin: per HTTP request)")


class ApplianceCollector(Collector):
    """Reads the appliance's engine, front-ends and their latency recorders each time
    Prometheus scrapes."""

    def __init__(self, appliance: Appliance, latencies: dict[str, LatencyRecorder]) -> None:
        self.appliance = appliance
        self.latencies = latencies

    def collect(self) -> Iterator[Metric]:
        engine = self.appliance.engine
        counters = engine.stats()
        rule_hits = counters.pop("rule_hits_by_id")
        counters.pop("occupancy")
        for name, value in counters.items():
            yield CounterMetricFamily(PREFIX + name, COUNTER_HELP.get(name, name), value=int(value))
        occ = engine.occupancy()
        yield GaugeMetricFamily(PREFIX + "occupancy", "entries in the exact table", value=occ.used)
        yield GaugeMetricFamily(PREFIX + "capacity", "slots of the exact table (ways x rows + stash)",
                                value=occ.capacity)
        yield GaugeMetricFamily(PREFIX + "load_factor", "occupancy / capacity", value=occ.load_factor)
        rules = engine.rules()
        yield GaugeMetricFamily(PREFIX + "rules", "wildcard rules installed", value=len(rules))
        per_rule = CounterMetricFamily(PREFIX + "rule_hits_per_rule", "LOOKUPs won by each rule",
                                       labels=["rule_id", "rule_name"])
        for rule_id, rule in sorted(rules.items()):
            per_rule.add_metric([str(rule_id), rule.name or ""], rule_hits.get(rule_id, 0))
        yield per_rule
        yield GaugeMetricFamily(PREFIX + "uptime_seconds", "seconds since the appliance started",
                                value=self.appliance.uptime)
        yield CounterMetricFamily(PREFIX + "reloads", "engine reloads", value=self.appliance.reloads)
        families: dict[str, GaugeMetricFamily] = {}
        for frontend, stats in sorted(self.appliance.frontend_stats().items()):
            for name, value in _flatten(stats):
                family = families.get(name)
                if family is None:
                    family = families[name] = GaugeMetricFamily(
                        f"{PREFIX}frontend_{name}", f"front-end counter {name}", labels=["frontend"])
                family.add_metric([frontend], value)
        yield from families.values()
        latency = HistogramMetricFamily(PREFIX + "frontend_request_duration_seconds", LATENCY_HELP,
                                        labels=["frontend"])
        for frontend, recorder in self.latencies.items():
            latency.add_metric([frontend],
                               [(floatToGoString(le), count) for le, count in recorder.cumulative()],
                               recorder.sum)
        yield latency


@router.get("/metrics", response_class=Response,
            responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                             "description": "Prometheus text exposition format"}})
async def metrics(appliance: ApplianceDep, latencies: LatenciesDep) -> Response:
    """Engine counters (pynq_kv_*_total), occupancy, per-rule hits, front-end counters and the
    front-ends' request latency histograms."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ApplianceCollector(appliance, latencies))
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
