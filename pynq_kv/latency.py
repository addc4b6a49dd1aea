"""Request latency of the front-ends: a fixed-bucket histogram cheap enough for the RESP hot path.

Each front-end owns a `LatencyRecorder` and registers it with the Appliance beside its counters
(`Appliance.register_frontend(name, stats, latency=recorder)`); /metrics exposes every recorder as
one Prometheus histogram labelled by front-end. The buckets are defined here once, for all of
them: from 10 µs (a RESP batch on loopback) to 2.5 s (an admin export).
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import compress, repeat
from operator import mul, sub
from typing import Optional

# Upper bounds in seconds; an observation of exactly a bound lands in that bound's bucket
# (Prometheus' `le`). Observations above the last bound go to the +Inf bucket.
BUCKETS: tuple[float, ...] = (
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1.0, 2.5)


class LatencyRecorder:
    """Counts per bucket (not cumulative; the last one is +Inf), their total and the sum of the
    observed seconds. Not thread-safe: every front-end observes from the appliance's event loop."""

    __slots__ = ("bounds", "counts", "count", "sum")

    def __init__(self, bounds: tuple[float, ...] = BUCKETS) -> None:
        if not bounds or list(bounds) != sorted(set(bounds)) or bounds[0] <= 0:
            raise ValueError(f"latency buckets must be positive and strictly increasing: {bounds}")
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.count = 0
        self.sum = 0.0

    def observe(self, seconds: float, n: int = 1) -> None:
        """n requests that each took seconds (a batch answered together adds n at once)."""
        self.counts[bisect_left(self.bounds, seconds)] += n
        self.count += n
        self.sum += seconds * n

    def observe_since(self, now: float, stamps: list[tuple[float, int]]) -> None:
        """Many observe(now - stamp, n) at once, for (stamp, n) in stamps: the RESP server's
        requests of one tick end together, and one call per tick keeps its hot path short.

        Every step is a C-level pass over the stamps (no Python step per stamp): the buckets
        they fall in are found together, and each bucket reached (a tick's stamps mostly
        share one or two) adds its stamps' counts in one pass."""
        if not stamps:
            return
        starts, ns = zip(*stamps)
        elapsed = list(map(sub, repeat(now), starts))
        where = list(map(bisect_left, repeat(self.bounds), elapsed))
        total = sum(ns)
        counts = self.counts
        first = where[0]
        if where.count(first) == len(where):
            counts[first] += total
        else:
            for bucket in set(where):
                counts[bucket] += sum(compress(ns, map(bucket.__eq__, where)))
        self.count += total
        self.sum += sum(map(mul, elapsed, ns))

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, requests at or below it) for every bucket, +Inf last (Prometheus' view)."""
        out: list[tuple[float, int]] = []
        total = 0
        for bound, count in zip(self.bounds + (float("inf"),), self.counts):
            total += count
            out.append((bound, total))
        return out

    def quantile(self, q: float) -> Optional[float]:
        """The q-quantile since start, interpolated inside its bucket as Prometheus'
        histogram_quantile does (the +Inf bucket answers the last finite bound); None if empty."""
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile must be within [0, 1], not {q}")
        if self.count == 0:
            return None
        rank = q * self.count
        lower, below = 0.0, 0
        for bound, total in self.cumulative():
            if total >= rank:
                if bound == float("inf"):
                    return lower
                inside = total - below
                return lower + (bound - lower) * ((rank - below) / inside if inside else 0.0)
            lower, below = bound, total
        return lower  # unreachable: the +Inf bucket holds every observation
