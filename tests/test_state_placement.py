"""A state file whose entries sit in slots their keys do not hash to is corrupt (issue 16 item 7).

Before, such a file loaded silently: DBSIZE counted every entry, GET found none (docs/engine.md
§5.1 searches candidate rows only) and shutdown saved that table back over the file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pynq_kv import Geometry, KVEngine, SnapshotError
from pynq_kv.appliance import Appliance

GEOMETRY = Geometry(rows=256, ways=4, stash=8, rules=16)


def filled(n: int = 300) -> KVEngine:
    engine = KVEngine("model", GEOMETRY)
    for i in range(n):
        engine.set(f"key{i}", f"v{i}")
    return engine


def shifted(good: Path, bad: Path, only_first: bool = False) -> int:
    """Write bad: good's entries, each way entry moved one row down in its own bank (or only
    the one in the lowest way slot); returns the lowest slot number moved."""
    with np.load(good) as npz:
        parts = {k: npz[k] for k in npz.files}
    numbers = parts["slots"].copy()
    banks, rows = GEOMETRY.slot_address(numbers)
    in_way = np.flatnonzero(banks < GEOMETRY.ways)
    if only_first:
        in_way = in_way[[np.argmin(numbers[in_way])]]
    moved = numbers.copy()
    moved[in_way] = banks[in_way] * GEOMETRY.rows + (rows[in_way] + 1) % GEOMETRY.rows
    if only_first:  # one entry only: take a row of its bank no other entry uses
        used = set(moved.tolist())
        row = (int(rows[in_way[0]]) + 1) % GEOMETRY.rows
        while int(banks[in_way[0]]) * GEOMETRY.rows + row in used:
            row = (row + 1) % GEOMETRY.rows
        moved[in_way[0]] = int(banks[in_way[0]]) * GEOMETRY.rows + row
    assert len(np.unique(moved)) == len(moved)  # still a well-formed file: only placement differs
    parts["slots"] = moved
    with open(bad, "wb") as handle:
        np.savez(handle, **parts)
    return int(moved[in_way].min())


def test_good_state_file_loads(tmp_path: Path) -> None:
    source = filled()
    path = tmp_path / "good.npz"
    assert source.dump(path) == 300
    target = KVEngine("model", GEOMETRY)
    assert target.restore(path) == 300
    assert all(target.get(f"key{i}") == f"v{i}".encode() for i in range(300))


@pytest.mark.parametrize("only_first", [False, True])
def test_misplaced_entries_are_refused_and_change_nothing(tmp_path: Path, only_first: bool) -> None:
    good, bad = tmp_path / "good.npz", tmp_path / "bad.npz"
    filled().dump(good)
    first = shifted(good, bad, only_first)
    before = bad.read_bytes()
    target = KVEngine("model", GEOMETRY)
    target.set(b"mine", b"stays")
    with pytest.raises(SnapshotError) as info:
        target.restore(bad)
    message = str(info.value)
    assert str(bad) in message and "corrupt" in message
    assert f"slot {first} " in message
    assert dict(target.items()) == {b"mine": b"stays"}
    assert bad.read_bytes() == before


def test_appliance_refuses_the_file_and_leaves_it_alone(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.npz", tmp_path / "bad.npz"
    filled().dump(good)
    shifted(good, bad)
    before = bad.read_bytes()
    with pytest.raises(SnapshotError, match="corrupt state file"):
        Appliance(lambda: KVEngine("model", GEOMETRY), state_path=bad)
    assert bad.read_bytes() == before


def test_serve_with_a_misplaced_state_file_does_not_start(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.npz", tmp_path / "bad.npz"
    filled().dump(good)
    shifted(good, bad)
    before = bad.read_bytes()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYNQ_KV_")}
    proc = subprocess.run(
        [sys.executable, "-m", "pynq_kv", "--backend", "model", "--rows", "256", "--rules", "16",
         "--stash", "8", "--state", str(bad), "serve", "--resp-port", "0", "--admin-port", "0",
         "--udp-port", "0"],
        capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL)
    assert proc.returncode != 0
    assert "corrupt state file" in proc.stderr and str(bad) in proc.stderr
    assert bad.read_bytes() == before
