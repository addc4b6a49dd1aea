"""Speed, memory and load-factor figures of the reference model; prints one JSON object.

Besides the bulk figures, "small_batches" gives the per-call cost of the 16- and 50-key batches
that the RESP server's pipelines hand the model (what bounds its requests/s).

Configuration of issue 2: 288-bit keys, 32-bit values, 4 ways. Every figure is measured in this
one run, and the plain-dict lookup rate beside ours, because these machines are noisy.

    python benchmarks/model.py            # full run (about a minute)
    python benchmarks/model.py --quick    # smaller tables, for a smoke test
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

from pynq_kv import Geometry, KVEngine, Rule, SetStatus
from pynq_kv.hashing import hash_keys, hash_keys_numpy
from pynq_kv.keys import KeyFormat

KEY_W, VALUE_W, WAYS = 288, 32, 4


def engine(rows: int, stash: int = 8, relocation: bool = True) -> KVEngine:
    geometry = Geometry(key_width=KEY_W, value_width=VALUE_W, ways=WAYS, rows=rows, stash=stash, rules=256)
    eng = KVEngine("model", geometry, value_kind="int", relocation=relocation)
    eng.get(b"warm-up")  # builds the cached hash tables outside the timed regions
    return eng


def random_keys(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 256, size=(n, KEY_W // 8), dtype=np.uint8)


def best_of(runs: int, fn) -> float:
    """Shortest wall time of several runs: the least disturbed by other load on the machine."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def bulk_load(rng: np.random.Generator, n: int) -> float:
    """Seconds to SET n new keys in one batch into a table of at least twice their number."""
    keys, values = random_keys(rng, n), rng.integers(0, 2**32, n, dtype=np.uint64)
    rows = 1 << max(1, (2 * n - 1) // WAYS).bit_length()
    eng = engine(rows=rows)
    start = time.perf_counter()
    status = eng.set_batch(keys, values)
    elapsed = time.perf_counter() - start
    if (status == SetStatus.FULL).any():
        raise SystemExit("bulk load hit TableFull")
    return elapsed


def small_batches(rng: np.random.Generator, rows: int) -> dict[str, float]:
    """Microseconds per backend call for the small batches a RESP pipeline hands the model:
    SET (all updates, some keys repeated) and GET (all hits) of 16 and 50 length-tagged keys
    drawn from 10,000 stored ones, and the hashing of such a batch (hash_keys: in C where
    pynq_kv._h3 was built; hash_keys_numpy beside it, the code used where it was not)."""
    eng = engine(rows=rows)
    g, backend = eng.geometry, eng.backend
    stored = KeyFormat(KEY_W).encode_many(b"key:%012d" % i for i in range(10_000))
    eng.set_batch(stored, rng.integers(0, 2**32, len(stored), dtype=np.uint64))
    out = {}
    for n in (16, 50):
        keys = stored[rng.integers(0, len(stored), n)]
        values = rng.integers(0, 256, (n, g.value_bytes), dtype=np.uint8)
        calls = 2000
        for name, call in (("hash_keys", lambda: hash_keys(keys, g.hash_seed, g.ways, g.key_width)),
                           ("hash_keys_numpy",
                            lambda: hash_keys_numpy(keys, g.hash_seed, g.ways, g.key_width)),
                           ("set_batch", lambda: backend.set_batch(keys, values)),
                           ("get_batch", lambda: backend.get_batch(keys))):
            out[f"{name}_{n}_us"] = round(best_of(5, lambda: [call() for _ in range(calls)]) / calls * 1e6, 1)
    return out


def load_factor(rng: np.random.Generator, rows: int, relocation: bool) -> float:
    """Occupancy / capacity at the first SET that fails (TableFull), inserting random keys."""
    eng = engine(rows=rows, relocation=relocation)
    capacity = eng.geometry.capacity
    while True:
        used = eng.occupancy().used
        # Big batches while far from full; one key at a time near the end, so the first
        # failure is seen exactly where it happens.
        size = max(1, capacity // 64) if used < 0.85 * capacity else 1
        status = eng.set_batch(random_keys(rng, size), rng.integers(0, 2**32, size, dtype=np.uint64))
        full = np.flatnonzero(status == SetStatus.FULL)
        if len(full):
            if relocation and size > 1:
                raise SystemExit("relocation failed far from full")
            placed_before = int((status[:full[0]] != SetStatus.FULL).sum())
            # Without relocation a batch is exactly the sequential SETs, so the occupancy at the
            # first failure is the occupancy before the batch plus the keys placed before it.
            return (used + placed_before) / capacity


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small tables: a smoke test, not figures")
    args = parser.parse_args()
    rng = np.random.default_rng(2026)
    n_bulk = 50_000 if args.quick else 1_000_000
    lookup_rows = 1 << 14 if args.quick else 1 << 18
    lf_rows = 1 << 10 if args.quick else 1 << 14

    bulk_s = min(bulk_load(rng, n_bulk) for _ in range(2))

    # Lookup table: filled to 90 %, 16 wildcard rules; the batch is 90 % stored keys, 10 % new.
    eng = engine(rows=lookup_rows)
    stored = random_keys(rng, int(0.9 * eng.geometry.capacity))
    eng.set_batch(stored, rng.integers(0, 2**32, len(stored), dtype=np.uint64))
    for i in range(16):
        eng.add_rule(Rule.ternary(match=i << (KEY_W - 8), mask=0xFF << (KEY_W - 8), priority=i, value=i))
    n_lookup = len(stored)
    batch = stored.copy()
    fresh = rng.random(n_lookup) < 0.1
    batch[fresh] = random_keys(rng, int(fresh.sum()))
    lookup_s = best_of(3, lambda: eng.lookup_batch(batch))
    hits_s = best_of(3, lambda: eng.lookup_batch(stored))
    result = eng.lookup_batch(batch)

    table = {bytes(k): int(v) for k, v in zip(stored, eng.get_batch(stored)[1])}
    probe = [bytes(k) for k in batch]
    dict_s = best_of(3, lambda: [table.get(k) for k in probe])

    used = eng.occupancy().used
    memory = eng.backend.memory_bytes()
    raw_bytes = (KEY_W + VALUE_W) // 8

    figures = {
        "config": {"key_width": KEY_W, "value_width": VALUE_W, "ways": WAYS, "stash": 8,
                   "lookup_table_rows": lookup_rows, "quick": args.quick},
        "lookups_per_s": round(n_lookup / lookup_s),
        "lookups_per_s_all_hits": round(n_lookup / hits_s),
        "lookup_batch": n_lookup,
        "lookup_mix": {"exact": int((result.kind == 1).sum()), "rule": int((result.kind == 2).sum()),
                       "miss": int((result.kind == 0).sum())},
        "lookup_table_load": round(used / eng.geometry.capacity, 4),
        "dict_lookups_per_s": round(n_lookup / dict_s),
        "ratio_lookups_vs_dict": round(dict_s / lookup_s, 3),
        "bulk_load_keys": n_bulk,
        "bulk_load_1m_s": round(bulk_s * 1_000_000 / n_bulk, 3),
        "bytes_per_entry": round(memory / used, 2),
        "raw_bytes_per_entry": raw_bytes,
        "ratio_bytes_per_entry": round(memory / used / raw_bytes, 3),
        "load_factor_plain": round(load_factor(rng, lf_rows, relocation=False), 4),
        "load_factor_relocation": round(load_factor(rng, lf_rows, relocation=True), 4),
        "load_factor_table_slots": WAYS * lf_rows + 8,
        "small_batches": small_batches(rng, rows=1 << 13),
        "machine": {"python": platform.python_version(), "numpy": np.__version__,
                    "cpus": os.cpu_count()},
    }
    json.dump(figures, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
