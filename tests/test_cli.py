"""The pynq-kv command line, on the simulated overlay (model backend)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from pynq_kv.cli import cli

SMALL = ["--rows", "64"]  # a small table keeps each invocation's snapshot tiny
LAYOUT = "src_ip:ipv4,dst_port:port"


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path, monkeypatch):
    """Never touch the real ~/.local/share state, and ignore the caller's PYNQ_KV_* settings."""
    for name in list(os.environ):
        if name.startswith("PYNQ_KV_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "home" / ".local" / "share"))


@pytest.fixture
def state(tmp_path) -> Path:
    return tmp_path / "state" / "kv.npz"


def _runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)  # click 8.1
    except TypeError:
        return CliRunner()  # click >= 8.2 keeps stderr apart by default


def run(state: Path | None, *args: str, code: int = 0, env: dict | None = None):
    argv = (["--state", str(state)] if state is not None else []) + list(args)
    result = _runner().invoke(cli, argv, env=env, catch_exceptions=False)
    assert result.exit_code == code, (
        f"pynq-kv {' '.join(argv)} exited {result.exit_code}, wanted {code}\n"
        f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}")
    return result


def jrun(state: Path, *args: str):
    return json.loads(run(state, *args).stdout)


# -- basics ------------------------------------------------------------------------------------


def test_help_lists_every_command():
    out = run(None, "--help").stdout
    for command in ("info", "set", "get", "del", "lookup", "stats", "rules", "load", "dump", "demo"):
        assert command in out
    assert "--int-keys" in out and "PYNQ_KV_STATE" in out
    rules_help = run(None, "rules", "--help").stdout
    for command in ("add", "list", "del"):
        assert command in rules_help


def test_info_on_a_new_state_does_not_create_it(state):
    out = run(state, "info").stdout
    assert "model" in out and "not created yet" in out
    assert not state.exists()
    data = jrun(state, "info", "--json")
    assert data["backend"] == "model"
    assert data["geometry"]["key_width"] == 288 and data["geometry"]["rows"] == 8192
    assert data["occupancy"]["used"] == 0
    assert data["state"] == {"path": str(state), "exists": False}


def test_default_state_path_and_env_override(tmp_path):
    run(None, "set", "a", "1")
    assert (tmp_path / "home" / ".local" / "share" / "pynq-kv" / "state.npz").exists()
    other = tmp_path / "env-state.npz"
    run(None, *SMALL, "set", "b", "2", env={"PYNQ_KV_STATE": str(other)})
    assert other.exists()
    assert run(None, "get", "b", env={"PYNQ_KV_STATE": str(other)}).stdout == "2\n"
    assert run(None, "get", "b").stdout == "(nil)\n"


# -- set / get / del: persistence across invocations --------------------------------------------


def test_set_get_persist_across_invocations(state):
    assert run(state, *SMALL, "set", "user:1", "alice").stdout == "OK (new key)\n"
    assert state.exists()
    assert run(state, "get", "user:1").stdout == "alice\n"
    assert run(state, "set", "user:1", "alicia").stdout == "OK (updated)\n"
    assert run(state, "get", "user:1").stdout == "alicia\n"
    assert jrun(state, "get", "user:1", "--json") == {"key": "user:1", "found": True, "value": "alicia"}
    assert jrun(state, "info", "--json")["geometry"]["rows"] == 64  # created with --rows 64


def test_get_missing_key(state):
    run(state, *SMALL, "set", "a", "1")
    assert run(state, "get", "nope").stdout == "(nil)\n"
    assert jrun(state, "get", "nope", "--json") == {"key": "nope", "found": False, "value": None}


def test_utf8_keys_and_values(state):
    run(state, *SMALL, "set", "clé", "värde ✓")
    assert run(state, "get", "clé").stdout == "värde ✓\n"


def test_del_several_keys(state):
    run(state, *SMALL, "set", "a", "1")
    run(state, "set", "b", "2")
    assert run(state, "del", "a", "b", "c").stdout == "deleted 2 of 3\n"
    assert run(state, "get", "a").stdout == "(nil)\n"
    assert jrun(state, "info", "--json")["occupancy"]["used"] == 0
    run(state, "del", code=2)  # at least one key


def test_too_long_key_is_an_error_and_changes_nothing(state):
    run(state, *SMALL, "set", "a", "1")
    before = state.read_bytes()
    result = run(state, "set", "k" * 36, "v", code=1)  # 288-bit keys hold 35 bytes
    assert result.stderr.startswith("error: ")
    assert "35 bytes" in result.stderr
    assert result.stdout == ""
    assert state.read_bytes() == before
    run(state, "set", "k" * 35, "v")  # the longest key that fits


def test_too_long_key_on_a_new_state_creates_nothing(state):
    result = run(state, "set", "k" * 40, "v", code=1)
    assert "error:" in result.stderr
    assert not state.exists()


def test_too_large_value_is_an_error(state):
    result = run(state, *SMALL, "--value-width", "64", "set", "a", "12345678", code=1)
    assert "error:" in result.stderr and "7 bytes" in result.stderr


def test_int_keys_and_int_values(state):
    run(state, *SMALL, "--int-keys", "--value-kind", "int", "set", "0x10", "42")
    assert run(state, "--int-keys", "get", "16").stdout == "42\n"  # value kind is in the state
    assert jrun(state, "--int-keys", "get", "0b10000", "--json")["value"] == 42
    assert run(state, "get", "16").stdout == "(nil)\n"  # the text key "16" is another key
    result = run(state, "--int-keys", "get", "zz", code=2)
    assert "not an integer" in result.stderr
    result = run(state, "--int-keys", "set", "1", "abc", code=2)
    assert "not an integer" in result.stderr


def test_value_kind_must_match_the_state(state):
    run(state, *SMALL, "--value-kind", "int", "--int-keys", "set", "1", "2")
    result = run(state, "--value-kind", "bytes", "info", code=1)
    assert "value_kind=int" in result.stderr


def test_geometry_mismatch_is_a_clear_error(state):
    run(state, "--rows", "64", "--ways", "2", "set", "a", "1")
    run(state, "--rows", "64", "--ways", "2", "get", "a")  # same geometry: fine
    result = run(state, "--rows", "128", "get", "a", code=1)
    assert "does not match" in result.stderr and "rows=64 (asked for 128)" in result.stderr


def test_illegal_geometry(state):
    result = run(state, "--ways", "9", "set", "a", "1", code=1)
    assert "ways" in result.stderr
    run(state, "--key-width", "100", "info", code=2)  # not one of the choices: usage error
    assert not state.exists()


def test_corrupt_state_file(state):
    state.parent.mkdir(parents=True)
    state.write_bytes(b"this is not a snapshot")
    result = run(state, "get", "a", code=1)
    assert result.stderr.startswith("error: ") and "snapshot" in result.stderr
    assert state.read_bytes() == b"this is not a snapshot"


# -- lookup, rules, stats ------------------------------------------------------------------------


def test_lookup_exact_and_miss(state):
    run(state, *SMALL, "set", "a", "1")
    assert run(state, "lookup", "a").stdout == "exact: 1\n"
    assert run(state, "lookup", "b").stdout == "miss\n"
    data = jrun(state, "lookup", "a", "--json")
    assert data == {"key": "a", "kind": "exact", "value": "1", "rule_id": None, "entry": None}


def test_raw_rules_add_list_lookup_del(state):
    top = 0xFF << 280  # the top byte of a 288-bit key
    base = ["--int-keys", *SMALL]
    out = run(state, *base, "rules", "add", "-p", "5", "-v", "top-0a",
              "--match", hex(0x0A << 280), "--mask", hex(top)).stdout
    assert out == "rule 1 added (1 ternary entry)\n"
    out = run(state, *base, "rules", "add", "--priority", "9", "--value", "any-high",
              "--match", "0", "--mask", hex(0x80 << 280)).stdout
    assert out.startswith("rule 2 added")

    listing = jrun(state, "rules", "list", "--json")
    assert [(r["id"], r["priority"], r["value"]) for r in listing] == [
        (1, 5, "top-0a"), (2, 9, "any-high")]
    assert listing[0]["entries"] == [{"match": f"0x{0x0A << 280:072x}", "mask": f"0x{top:072x}"}]
    human = run(state, "rules", "list", "--entries").stdout
    assert "top-0a" in human and "any-high" in human and "mask  0xff00" in human

    # 0x0A.. matches both rules: the higher priority (rule 2) wins
    assert run(state, *base, "lookup", hex(0x0A << 280 | 7)).stdout.startswith("rule 2 ")
    data = jrun(state, *base, "lookup", hex(0x0A << 280 | 7), "--json")
    assert data["kind"] == "rule" and data["rule_id"] == 2 and data["value"] == "any-high"
    # 0xFA.. has the top bit set (not rule 2) and another top byte (not rule 1): miss
    assert run(state, *base, "lookup", hex(0xFA << 280)).stdout == "miss\n"
    # an exact entry beats every rule
    run(state, *base, "set", hex(0x0A << 280 | 7), "exact!")
    assert run(state, *base, "lookup", hex(0x0A << 280 | 7)).stdout == "exact: exact!\n"

    assert run(state, "rules", "del", "2").stdout == "rule 2 removed\n"
    assert run(state, *base, "lookup", hex(0x0A << 280 | 8)).stdout.startswith("rule 1 ")
    assert [r["id"] for r in jrun(state, "rules", "list", "--json")] == [1]
    run(state, "rules", "del", "1")
    assert run(state, "rules", "list").stdout == "no rules\n"


def test_unknown_rule_id(state):
    run(state, *SMALL, "set", "a", "1")
    before = state.read_bytes()
    result = run(state, "rules", "del", "99", code=1)
    assert result.stderr == "error: no rule with id 99\n"
    assert state.read_bytes() == before
    run(state, "rules", "del", "x", code=2)


def test_rules_add_usage_errors(state):
    run(state, "rules", "add", "-p", "1", "-v", "x", "--match", "0x1", code=2)  # no --mask
    run(state, "rules", "add", "-p", "1", "-v", "x", code=2)  # nothing to match
    run(state, "rules", "add", "-p", "1", "-v", "x", "--field", "src_ip=1.2.3.4", code=2)  # no layout
    run(state, "rules", "add", "-p", "1", "-v", "x", "--match", "zz", "--mask", "1", code=2)
    assert not state.exists()


def test_invalid_rule_is_an_engine_error(state):
    # a match bit outside the mask can never match: refused (InvalidRule)
    result = run(state, *SMALL, "rules", "add", "-p", "1", "-v", "x", "--match", "0x3",
                 "--mask", "0x1", code=1)
    assert result.stderr.startswith("error: ")
    assert not state.exists()


def test_layout_rules_and_structured_lookup(state):
    out = run(state, *SMALL, "rules", "add", "-p", "10", "-v", "internal", "--layout", LAYOUT,
              "--field", "src_ip=10.0.0.0/8", "--field", "dst_port=1000-2000").stdout
    assert out.startswith("rule 1 added (")
    hit = ["--layout", LAYOUT, "--field", "src_ip=10.1.2.3", "--field", "dst_port=1500"]
    assert run(state, "lookup", *hit).stdout == "rule 1 (entry 0): internal\n"
    data = jrun(state, "lookup", *hit, "--json")
    assert data["kind"] == "rule" and data["rule_id"] == 1 and data["value"] == "internal"
    assert data["key"] == "0x0a01020305dc" + "0" * 60  # 10.1.2.3, port 1500, from the top bit
    # a higher-priority rule on one field wins over the first one; names and fields are listed
    run(state, "rules", "add", "-p", "20", "-v", "p1500", "--name", "web", "--layout", LAYOUT,
        "--field", "dst_port=1500")
    assert run(state, "lookup", *hit).stdout == "rule 2 (entry 8): p1500\n"
    listing = run(state, "rules", "list").stdout
    assert "src_ip=10.0.0.0/8 dst_port=1000-2000" in listing and "[web] dst_port=1500" in listing
    rules = jrun(state, "rules", "list", "--json")
    assert rules[1]["name"] == "web" and rules[1]["fields"] == {"dst_port": 1500}
    run(state, "rules", "del", "2")
    miss = ["--field", "src_ip=11.1.2.3", "--field", "dst_port=1500"]
    assert run(state, "lookup", "--layout", LAYOUT, *miss).stdout == "miss\n"
    # the layout can come from the environment
    assert run(state, "lookup", *hit[2:], env={"PYNQ_KV_LAYOUT": LAYOUT}).stdout.startswith("rule 1 ")
    # --field without a layout, or with a key as well, is a usage error
    run(state, "lookup", *hit[2:], code=2)
    run(state, "lookup", "k", *hit, code=2)
    run(state, "lookup", code=2)


def test_bad_field_value_is_an_error(state):
    result = run(state, *SMALL, "rules", "add", "-p", "1", "-v", "x", "--layout", LAYOUT,
                 "--field", "src_ip=300.1.2.3", code=1)
    assert result.stderr.startswith("error: ")
    result = run(state, "lookup", "--layout", "src_ip", "--field", "src_ip=1.2.3.4", code=2)
    assert "is not name:type" in result.stderr


def test_stats(state):
    run(state, *SMALL, "set", "a", "1")
    run(state, "set", "b", "2")
    data = jrun(state, "stats", "--json")
    assert data["occupancy"] == 2
    for name in ("lookups", "exact_hits", "rule_hits", "misses", "inserts", "deletes"):
        assert name in data
    out = run(state, "stats").stdout
    assert "occupancy" in out and "lookups" in out


# -- load / dump -----------------------------------------------------------------------------------


def _write_csv(path: Path, n: int, start: int = 0) -> Path:
    lines = ["key,value"] + [f"k{i},v{i}" for i in range(start, start + n)]
    path.write_text("\n".join(lines) + "\n")
    return path


def _write_ndjson(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"key": f"n{i}", "value": f"w{i}"}) + "\n" for i in range(n)))
    return path


def test_load_csv_in_chunks_with_progress(state, tmp_path):
    src = _write_csv(tmp_path / "data.csv", 2500)
    result = run(state, "load", str(src), "--chunk-size", "1000", "--progress")
    assert result.stdout == f"loaded 2500 records from {src}: 2500 inserted, 0 updated, 0 failed\n"
    assert "100%" in result.stderr and "2500/2500" in result.stderr  # the tqdm bar, on stderr
    assert run(state, "get", "k0").stdout == "v0\n"
    assert run(state, "get", "k2499").stdout == "v2499\n"
    assert jrun(state, "info", "--json")["occupancy"]["used"] == 2500
    # loading again updates; the bar is off by default when stderr is not a terminal
    result = run(state, "load", str(src))
    assert "0 inserted, 2500 updated" in result.stdout
    assert result.stderr == ""


def test_load_csv_extra_columns_quotes_and_blank_lines(state, tmp_path):
    src = tmp_path / "data.csv"
    src.write_text('id,Value,key\n1,"a, b",x\n\n2,"say ""hi""",y\n')
    run(state, *SMALL, "load", str(src), "--no-progress")
    assert run(state, "get", "x").stdout == "a, b\n"
    assert run(state, "get", "y").stdout == 'say "hi"\n'


def test_load_ndjson(state, tmp_path):
    src = _write_ndjson(tmp_path / "data.ndjson", 200)
    result = run(state, *SMALL, "load", str(src), "--progress")
    assert "loaded 200 records" in result.stdout and "100%" in result.stderr
    assert run(state, "get", "n199").stdout == "w199\n"


def test_load_format_override_and_unknown_extension(state, tmp_path):
    src = _write_ndjson(tmp_path / "data.txt", 3)
    result = run(state, *SMALL, "load", str(src), code=2)
    assert "--format" in result.stderr
    run(state, *SMALL, "load", str(src), "--format", "ndjson")
    assert run(state, "get", "n2").stdout == "w2\n"
    jsonl = _write_ndjson(tmp_path / "data.jsonl", 2)
    run(state, "load", str(jsonl))


def test_load_int_keys_and_values(state, tmp_path):
    src = tmp_path / "ints.ndjson"
    src.write_text('{"key": 1, "value": 10}\n{"key": "0x2", "value": "0x20"}\n')
    run(state, *SMALL, "--int-keys", "--value-kind", "int", "load", str(src))
    assert run(state, "--int-keys", "get", "2").stdout == "32\n"
    assert run(state, "--int-keys", "get", "1").stdout == "10\n"


@pytest.mark.parametrize("name, content, where", [
    ("bad.csv", "key,value\na,1\nb,2\nc\nd,4\n", "line 4"),
    ("bad.csv", "key,value\na,1\nb,2,3\n", "line 3"),
    ("bad.csv", "name,data\na,1\n", "line 1"),
    ("bad.csv", "", "empty file"),
    ("bad.csv", "key,value\na,1\n" + "k" * 36 + ",2\n", "line 3"),
    ("bad.ndjson", '{"key": "a", "value": "1"}\n{"key": "b", "value": "2"\n', "line 2"),
    ("bad.ndjson", '{"key": "a", "value": "1"}\n\n{"key": "b"}\n', "line 3"),
    ("bad.ndjson", '{"key": "a", "value": "1"}\n["b", "2"]\n', "line 2"),
    ("bad.ndjson", '{"key": "a", "value": "1"}\n{"key": 5, "value": "2"}\n', "line 2"),
    ("bad.ndjson", '{"key": "a", "value": "1"}\n{"key": "b", "value": 2}\n', "line 2"),
    ("bad.ndjson", '{"key": "a", "value": "1"}\n{"key": "b", "value": null}\n', "line 2"),
    ("bad.ndjson", '{"key": "a", "value": "' + "v" * 40 + '"}\n', "line 1"),
])
def test_malformed_file_is_rejected_and_nothing_is_loaded(state, tmp_path, name, content, where):
    run(state, *SMALL, "set", "keep", "me")
    before = state.read_bytes()
    src = tmp_path / name
    src.write_text(content)
    result = run(state, "load", str(src), "--chunk-size", "1", code=1)
    assert result.stderr.startswith("error: ") and where in result.stderr, result.stderr
    assert str(src) in result.stderr
    assert result.stdout == ""
    assert state.read_bytes() == before
    assert run(state, "get", "a").stdout == "(nil)\n"


def test_load_a_non_utf8_file(state, tmp_path):
    src = tmp_path / "latin1.csv"
    src.write_bytes(b"key,value\nk,caf\xe9\n")
    result = run(state, *SMALL, "load", str(src), code=1)
    assert "not UTF-8" in result.stderr
    assert not state.exists()


def test_load_missing_file(state, tmp_path):
    result = run(state, *SMALL, "load", str(tmp_path / "nope.csv"), code=1)
    assert result.stderr.startswith("error: No such file or directory")
    assert not state.exists()


def test_load_into_a_full_table_reports_the_failures(state, tmp_path):
    tiny = ["--ways", "2", "--rows", "2", "--stash", "0"]  # capacity 4
    src = _write_csv(tmp_path / "many.csv", 10)
    result = run(state, *tiny, "load", str(src), code=1)
    assert "did not fit" in result.stderr
    assert "loaded 10 records" in result.stdout
    used = jrun(state, "info", "--json")["occupancy"]["used"]
    assert 0 < used <= 4  # what fitted was kept


@pytest.mark.parametrize("ext", ["csv", "ndjson"])
def test_dump_round_trip(state, tmp_path, ext):
    run(state, *SMALL, "set", "a", "1")
    run(state, "set", "comma,key", 'quote "value"')
    run(state, "set", "ü", "✓")
    out = tmp_path / f"out.{ext}"
    assert run(state, "dump", str(out)).stdout == f"dumped 3 records to {out}\n"
    other = tmp_path / "other.npz"
    run(other, *SMALL, "load", str(out))
    for key, value in (("a", "1"), ("comma,key", 'quote "value"'), ("ü", "✓")):
        assert run(other, "get", key).stdout == value + "\n"
    assert jrun(other, "info", "--json")["occupancy"]["used"] == 3


def test_dump_int_keys_round_trip(state, tmp_path):
    run(state, *SMALL, "--int-keys", "--value-kind", "int", "set", "0x1234", "7")
    for ext in ("csv", "ndjson"):
        out = tmp_path / f"ints.{ext}"
        run(state, "dump", str(out))
        other = tmp_path / f"other-{ext}.npz"
        run(other, *SMALL, "--int-keys", "--value-kind", "int", "load", str(out))
        assert run(other, "--int-keys", "get", "0x1234").stdout == "7\n"


def test_dump_snapshot_is_a_usable_state(state, tmp_path):
    run(state, *SMALL, "set", "a", "1")
    run(state, "rules", "add", "-p", "1", "-v", "r", "--match", "0", "--mask", "0")
    snap = tmp_path / "copy.npz"
    assert run(state, "dump", str(snap)).stdout == f"snapshot written to {snap}\n"
    assert run(snap, "get", "a").stdout == "1\n"
    assert run(snap, "lookup", "zzz").stdout == "rule 1 (entry 0): r\n"


# -- demo and the installed console script -----------------------------------------------------


def test_demo(state):
    result = run(state, "demo")
    out = result.stdout
    assert "simulated overlay" in out
    assert "-> rule" in out and "-> exact" in out and "-> miss" in out
    assert not state.exists()  # the demo never touches the state


def _console_script() -> str:
    here = Path(sys.executable).parent / "pynq-kv"
    found = str(here) if here.exists() else shutil.which("pynq-kv")
    if not found:
        pytest.fail("the pynq-kv console script is not installed (run `make venv`)")
    return found


def test_installed_console_script(tmp_path):
    exe = _console_script()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYNQ_KV_")}
    env["PYNQ_KV_STATE"] = str(tmp_path / "sub.npz")

    def sh(*args: str, code: int = 0) -> subprocess.CompletedProcess:
        proc = subprocess.run([exe, *args], capture_output=True, text=True, env=env,
                              stdin=subprocess.DEVNULL, timeout=120)
        assert proc.returncode == code, proc.stderr
        return proc

    assert "Usage: pynq-kv" in sh("--help").stdout
    assert sh("--version").stdout.startswith("pynq-kv ")
    sh("--rows", "64", "set", "hello", "world")
    assert sh("get", "hello").stdout == "world\n"
    assert sh("rules", "del", "7", code=1).stderr == "error: no rule with id 7\n"
    sh("bogus-command", code=2)
    proc = subprocess.run([sys.executable, "-m", "pynq_kv", "get", "hello"], capture_output=True,
                          text=True, env=env, stdin=subprocess.DEVNULL, timeout=120)
    assert proc.returncode == 0 and proc.stdout == "world\n"


def test_concurrent_invocations_do_not_lose_updates(tmp_path):
    exe = _console_script()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYNQ_KV_")}
    env["PYNQ_KV_STATE"] = str(tmp_path / "shared.npz")
    subprocess.run([exe, "--rows", "64", "set", "first", "0"], check=True, env=env,
                   stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    procs = [subprocess.Popen([exe, "set", f"k{i}", f"v{i}"], env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for i in range(6)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    out = subprocess.run([exe, "info", "--json"], env=env, stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert json.loads(out)["occupancy"]["used"] == 7
