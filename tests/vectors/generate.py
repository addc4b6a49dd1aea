"""Writes hash.json: H_w(k) test vectors of docs/engine.md §3 for every key width.

Run once when the contract changes; the files are committed so that a change in any
implementation (model, RTL) shows up as a failing comparison against them.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from pynq_kv.geometry import DEFAULT_HASH_SEED, KEY_WIDTHS
from pynq_kv.hashing import hash_int
from pynq_kv.keys import KeyFormat

# GOLDEN64 makes way 0 start from state 0, the replaced-state case of engine.md §3 step 2.
SEEDS = (DEFAULT_HASH_SEED, 0, 0x0123456789ABCDEF, 0x9E3779B97F4A7C15)
WAYS = 8


def keys_for(width: int, rng: random.Random) -> list[int]:
    fmt = KeyFormat(width)
    keys = [0, (1 << width) - 1, 1, 1 << (width - 1), 0xFF << (width - 8)]
    keys += [int.from_bytes(fmt.encode(s), "big") for s in (b"", b"foo", b"key:000000000001")]
    keys += [rng.getrandbits(width) for _ in range(8)]
    return keys


def main() -> None:
    rng = random.Random(144288)
    vectors = []
    for width in KEY_WIDTHS:
        for seed in SEEDS:
            for key in keys_for(width, rng):
                vectors.append({
                    "key_width": width, "seed": f"{seed:#018x}", "key": f"{key:#x}",
                    "hashes": [f"{hash_int(key, seed, way, width):#010x}" for way in range(WAYS)],
                })
    path = Path(__file__).with_name("hash.json")
    path.write_text(json.dumps({"ways": WAYS, "vectors": vectors}, indent=1) + "\n")
    print(f"wrote {len(vectors)} vectors to {path}")


if __name__ == "__main__":
    main()
