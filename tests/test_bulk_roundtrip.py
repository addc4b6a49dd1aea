"""One bulk-file format for every tool: an admin API export loads with `pynq-kv load` into the
same table, byte strings that are not UTF-8 text included (pynq_kv.bulk)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from api_support import client_for, small_appliance
from pynq_kv import KVEngine
from pynq_kv.cli import cli

ENTRIES = {
    b"plain": b"text",
    b"\xff\xfe\x00key": b"caf\xe9",  # neither is UTF-8
    "clé ✓".encode(): b"\x00\x01\x02",
    b"": b"",  # the empty key and value
    b"comma,\"quote\"\nnewline": "✓".encode(),
}
GEOMETRY = ["--rows", "64", "--rules", "16"]  # small_appliance's table


def _cli_load(state, source, *options: str) -> None:
    result = CliRunner().invoke(cli, ["--state", str(state), *GEOMETRY, "load", str(source),
                                      *options], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert f"loaded {len(ENTRIES)} records" in result.output


@pytest.mark.parametrize("query, load_options", [
    ({"format": "ndjson"}, []),
    ({"format": "csv", "encoding": "hex"}, ["--encoding", "hex"]),
    ({"format": "csv", "encoding": "base64"}, ["--encoding", "base64"]),
])
def test_admin_export_loads_with_the_cli(tmp_path, query, load_options):
    appliance = small_appliance()
    appliance.engine.mset(ENTRIES)
    with client_for(appliance) as client:
        response = client.get("/v1/entries", params=query)
    assert response.status_code == 200, response.text
    export = tmp_path / f"entries.{query['format']}"
    export.write_bytes(response.content)

    state = tmp_path / "state.npz"
    _cli_load(state, export, *load_options)
    loaded = KVEngine.from_snapshot(state)
    assert loaded.geometry == appliance.engine.geometry
    assert dict(loaded.items()) == dict(appliance.engine.items()) == ENTRIES


def test_cli_dump_reads_back_through_the_same_module(tmp_path):
    """And the other way: the CLI's NDJSON dump keeps non-UTF-8 bytes, so it reloads exactly."""
    state, out, again = tmp_path / "a.npz", tmp_path / "out.ndjson", tmp_path / "b.npz"
    engine = KVEngine(rows=64, rules=16)
    engine.mset(ENTRIES)
    engine.dump(state)
    result = CliRunner().invoke(cli, ["--state", str(state), "dump", str(out)])
    assert result.exit_code == 0, result.output
    assert '{"hex": "fffe006b6579"}' in out.read_text(encoding="utf-8")
    _cli_load(again, out)
    assert dict(KVEngine.from_snapshot(again).items()) == ENTRIES
    # CSV refuses what UTF-8 text cannot say, and says how to write it
    result = CliRunner().invoke(cli, ["--state", str(state), "dump", str(tmp_path / "x.csv")])
    assert result.exit_code == 1 and "--encoding" in result.output
    assert not (tmp_path / "x.csv").exists()
