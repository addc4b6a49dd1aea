"""The appliance's stored settings (DATA_DIR/settings.json, docs/hosttier.md "Stored settings")
against Debian's real redis-server: the first start with a data dir stores them, a later start
takes those not given from the file, a contradiction is refused with the data dir untouched,
--replace-settings replaces them (only while the stored rules still load), a damaged file is an
error naming it, and memory-only mode writes nothing."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Optional

import pytest

from pynq_kv import KVEngine
from pynq_kv.geometry import Geometry
from pynq_kv.hosttier import HostTierError, read_settings, save_rules, save_settings
from pynq_kv.rules import Rule, Ternary
from pynq_kv.serve.config import ConfigError, ServeConfig, build_config, with_stored_settings

from test_hosttier import tier  # noqa: F401  (the fixture: a private redis-server)

pytestmark = pytest.mark.timeout(90)

redis = pytest.importorskip("redis")
if not __import__("shutil").which("redis-server"):
    pytest.skip("redis-server is not installed (apt-get install redis-server)",
                allow_module_level=True)

SERVE = ["serve", "--resp-port", "0", "--disable", "udp", "--disable", "admin"]
BANNER_END = ("  settings stored in ", "  settings from ", "  settings replaced in ")


class Serve:
    """`pynq-kv GLOBAL... serve ARGS...` in a subprocess, read up to its settings line."""

    def __init__(self, global_args: list[str], args: list[str], cwd: Optional[Path] = None,
                 until: tuple[str, ...] = BANNER_END) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pynq_kv", "--backend", "model", *global_args, *SERVE, *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            cwd=cwd)
        lines = []
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if any(mark in line for mark in until):
                break
        self.banner = "".join(lines)

    @property
    def port(self) -> int:
        return int(self.banner.split("Redis (RESP2/RESP3) on tcp://127.0.0.1:")[1].split()[0])

    def client(self) -> "redis.Redis":
        return redis.Redis(port=self.port, socket_timeout=10)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            assert self.proc.wait(30) == 0, self.banner
        finally:
            self.proc.kill()
            self.proc.wait()


def refused(global_args: list[str], args: list[str]) -> str:
    """stderr of a serve that must refuse to start (exit status 1)."""
    result = subprocess.run([sys.executable, "-m", "pynq_kv", "--backend", "model", *global_args,
                             *SERVE, *args], stdin=subprocess.DEVNULL, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1, (result.stdout, result.stderr)
    return result.stderr


def contents(folder: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file below folder: its bytes, mtime and mode (what "untouched" means)."""
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns, p.stat().st_mode)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def stored(data: Path) -> dict[str, Any]:
    found = read_settings(data / "settings.json")
    assert found is not None
    return found


def int_rule(priority: int) -> Rule:
    """A rule of a 288-bit-key, integer-valued engine: first key byte 10."""
    return Rule((Ternary(0x0A << 280, 0xFF << 280),), priority, 7, name="ten")


@pytest.fixture
def int_dir(tmp_path: Path) -> Path:
    """A data dir first started with --value-kind int --rows 64 (and stopped)."""
    data = tmp_path / "data"
    first = Serve(["--value-kind", "int", "--rows", "64"], ["--data-dir", str(data)])
    try:
        assert f"settings stored in {data / 'settings.json'} (none were stored yet): " \
               "store=private value_kind=int layout=(none)" in first.banner, first.banner
    finally:
        first.stop()
    return data


# -- end to end, through `pynq-kv serve` ---------------------------------------------------------


def test_first_start_stores_the_settings_and_a_plain_restart_uses_them(int_dir):
    settings = stored(int_dir)
    assert settings["store"] == "private" and settings["value_kind"] == "int"
    assert settings["layout"] is None
    assert settings["geometry"] == asdict(Geometry(rows=64))  # every field, the engine's own
    assert (int_dir / "settings.json").stat().st_mode & 0o777 == 0o600
    before = (int_dir / "settings.json").stat().st_mtime_ns
    # Values written through Redis while the appliance ran: one integer, one text.
    again = Serve([], ["--data-dir", str(int_dir)])
    try:
        assert "rows=64" in again.banner and f"settings from {int_dir / 'settings.json'}: " \
               "store=private value_kind=int layout=(none) and the geometry above (not given, " \
               "taken from it: store, value_kind, layout, geometry)" in again.banner, again.banner
        c = again.client()
        assert c.info("engine")["value_kind"] == "int"
        c.set("n", "42")
        c.set("s", "not a number")
        c.close()
    finally:
        again.stop()
    third = Serve([], ["--data-dir", str(int_dir)])  # plain again: an integer engine restores
    try:
        assert "restored 1 of 2 keys from Redis" in third.banner
        assert "1 not integers" in third.banner, third.banner
    finally:
        third.stop()
    assert (int_dir / "settings.json").stat().st_mtime_ns == before  # read, never rewritten


def test_given_settings_equal_to_the_stored_ones_are_accepted(int_dir):
    same = Serve(["--value-kind", "int", "--rows", "64"], ["--data-dir", str(int_dir)])
    try:
        assert "(not given, taken from it: store, layout, geometry key_width, value_width, " \
               "ways, stash, rules, prio_width, hash_seed)" in same.banner, same.banner
    finally:
        same.stop()


def test_a_contradiction_is_refused_and_the_data_dir_left_as_it_was(int_dir, tmp_path):
    before = contents(int_dir)
    error = refused(["--value-kind", "bytes", "--rows", "128"], ["--data-dir", str(int_dir)])
    assert f"error: the settings given contradict those stored in {int_dir / 'settings.json'} " \
           "(value_kind: stored 'int', given 'bytes' (--value-kind); rows: stored 64, given 128 " \
           "(--rows))" in error, error
    assert "--replace-settings" in error and "Nothing was changed" in error
    config_file = tmp_path / "serve.toml"
    config_file.write_text('value_kind = "bytes"\n')  # a config file gives settings too
    error = refused([], ["--config", str(config_file), "--data-dir", str(int_dir)])
    assert "value_kind: stored 'int', given 'bytes'" in error
    error = refused([], ["--data-dir", str(int_dir), "--layout", "src_ip:ipv4"])
    assert "layout: stored None, given 'src_ip:ipv4' (--layout)" in error
    assert contents(int_dir) == before


def test_replace_settings_stores_the_given_ones_if_the_rules_still_load(int_dir):
    engine = KVEngine("model", Geometry(**stored(int_dir)["geometry"]), value_kind="int")
    engine.add_rule(int_rule(5))
    save_rules(int_dir / "rules.json", engine)
    engine.close()
    before = contents(int_dir)
    error = refused(["--value-kind", "bytes"], ["--data-dir", str(int_dir), "--replace-settings"])
    assert f"--replace-settings: the wildcard rules in {int_dir / 'rules.json'} do not load with " \
           "the new settings" in error and "rules for 288-bit keys and int values" in error, error
    assert contents(int_dir) == before  # neither the settings, the rules nor Redis' files
    bigger = Serve(["--rows", "128"], ["--data-dir", str(int_dir), "--replace-settings"])
    try:
        assert f"settings replaced in {int_dir / 'settings.json'} (--replace-settings): rows 64 " \
               "-> 128" in bigger.banner and "rows=128" in bigger.banner, bigger.banner
        c = bigger.client()
        assert c.info("engine")["value_kind"] == "int"  # not given: still the stored one
        assert c.info("engine")["rules_installed"] == 1  # the stored rule loaded
        c.close()
    finally:
        bigger.stop()
    settings = stored(int_dir)
    assert settings["geometry"]["rows"] == 128 and settings["value_kind"] == "int"
    later = Serve([], ["--data-dir", str(int_dir)])  # the replaced settings are the stored ones
    try:
        assert "rows=128" in later.banner and "settings from" in later.banner
    finally:
        later.stop()


def test_a_damaged_settings_file_is_refused_naming_it(int_dir):
    path = int_dir / "settings.json"
    path.write_text(path.read_text()[:40])
    before = contents(int_dir)
    error = refused([], ["--data-dir", str(int_dir)])
    assert f"error: {path}: not a readable settings file" in error, error
    assert contents(int_dir) == before


def test_memory_only_mode_writes_no_settings(tmp_path):
    for args, globals_ in ((["--no-store"], []), ([], ["--state", str(tmp_path / "s.npz")])):
        run = Serve(globals_, args, cwd=tmp_path, until=("state file", "no state file"))
        try:
            assert "host tier" not in run.banner, run.banner
        finally:
            run.stop()
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["s.npz"]  # no pynq-kv-data/


# -- with_stored_settings, the reconciliation itself ---------------------------------------------


def _write(data: Path, **changes: Any) -> Path:
    settings = {"store": "private", "value_kind": "int", "layout": "src_ip:ipv4,dst_port:port",
                "geometry": asdict(Geometry(rows=64)), **changes}
    save_settings(data / "settings.json", settings)
    return data / "settings.json"


def test_settings_not_given_come_from_the_file(tmp_path):
    data = tmp_path / "data"
    _write(data)
    config, origin = with_stored_settings(build_config({}, {"data_dir": data}))
    assert (config.value_kind, config.layout, config.geometry["rows"]) == (
        "int", "src_ip:ipv4,dst_port:port", 64)
    assert origin is not None and origin.action == "used" and not origin.changes
    config, origin = with_stored_settings(build_config(
        {}, {"data_dir": data, "layout": " src_ip:ipv4 , dst_port:port"}))
    assert origin is not None and origin.action == "used"  # spacing aside, the same layout


def test_a_config_made_in_code_is_taken_as_given(tmp_path):
    data = tmp_path / "data"
    _write(data)
    with pytest.raises(ConfigError, match="value_kind: stored 'int', given 'bytes'"):
        with_stored_settings(ServeConfig(store="private", data_dir=data))


def test_the_store_is_stored_but_not_the_url(tmp_path):
    data = tmp_path / "data"
    _write(data, store="url")
    with pytest.raises(ConfigError, match="belongs to a Redis named by --redis-url"):
        with_stored_settings(build_config({}, {"data_dir": data}))
    config, _ = with_stored_settings(build_config(
        {}, {"data_dir": data, "redis_url": "redis://127.0.0.1:1/0"}))
    assert config.store == "url"
    private = tmp_path / "private"
    _write(private)
    with pytest.raises(ConfigError, match=r"store: stored 'private', given 'url' \(--store or "
                                          r"--redis-url\)"):
        with_stored_settings(build_config({}, {"data_dir": private,
                                               "redis_url": "redis://127.0.0.1:1/0"}))


def test_no_file_means_a_first_start_and_nothing_is_written_yet(tmp_path):
    data = tmp_path / "data"
    config, origin = with_stored_settings(build_config({}, {"data_dir": data, "value_kind": "int"}))
    assert origin is not None and origin.action == "created" and config.value_kind == "int"
    assert not data.exists()
    assert with_stored_settings(build_config({}, {"store": "none"})) == (
        build_config({}, {"store": "none"}), None)


@pytest.mark.parametrize("text, message", [
    ("", "not a readable settings file"),
    ("[1, 2]", "not a pynq-kv settings file of version 1"),
    ('{"format": "pynq-kv-rules", "version": 1, "settings": {}}', "not a pynq-kv settings file"),
    ('{"format": "pynq-kv-settings", "version": 2, "settings": {}}', "of version 1"),
    ('{"format": "pynq-kv-settings", "version": 1, "settings": {"value_kind": "int"}}',
     "not a usable settings file"),
    (None, "geometry must hold"),
    ("rows", "cannot be used: rows must be a power of two"),
    ("value_kind", "cannot be used: value_kind must be one of"),
    ("layout", "not a usable settings file .*not name:type"),
    (b"\xff\xfe", "not a readable settings file"),
])
def test_a_damaged_file_is_an_error_naming_it(tmp_path, text, message):
    data = tmp_path / "data"
    path = _write(data)
    if text is None:
        state = json.loads(path.read_text())
        del state["settings"]["geometry"]["ways"]
        path.write_text(json.dumps(state))
    elif text in ("rows", "value_kind", "layout"):
        bad = {"rows": {"geometry": {**asdict(Geometry()), "rows": 3}}, "value_kind": {
            "value_kind": "float"}, "layout": {"layout": "src_ip"}}[text]
        _write(data, **bad)
    elif isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    before = contents(data)
    with pytest.raises((ConfigError, HostTierError), match=message) as caught:
        with_stored_settings(build_config({}, {"data_dir": data}))
    assert str(path) in str(caught.value)
    assert contents(data) == before


def test_an_unreadable_file_is_an_error_not_a_first_start(tmp_path):
    data = tmp_path / "data"
    (data / "settings.json").mkdir(parents=True)  # exists, cannot be read as a file
    with pytest.raises(HostTierError, match="not a readable settings file"):
        with_stored_settings(build_config({}, {"data_dir": data}))


def test_replace_settings_needs_a_host_tier():
    with pytest.raises(ConfigError, match="--replace-settings .* needs a host tier"):
        build_config({}, {"store": "none", "replace_settings": True})


def test_a_redis_url_data_dir_needs_its_url_again(tier, tmp_path):  # noqa: F811
    """--redis-url: the data dir (rules, settings) stores "url" but not the URL itself."""
    data = tmp_path / "url-data"
    url = f"unix://{tier.unix_path}"
    first = Serve([], ["--redis-url", url, "--data-dir", str(data)])
    try:
        assert "store=url" in first.banner and "settings stored in" in first.banner, first.banner
    finally:
        first.stop()
    assert stored(data)["store"] == "url" and url not in (data / "settings.json").read_text()
    before = contents(data)
    error = refused([], ["--data-dir", str(data)])
    assert f"the data dir {data} belongs to a Redis named by --redis-url" in error, error
    assert contents(data) == before
    again = Serve([], ["--redis-url", url, "--data-dir", str(data)])
    try:
        assert "settings from" in again.banner
    finally:
        again.stop()


def test_replace_settings_checks_the_rules_fit_the_new_rule_table(tmp_path):
    data = tmp_path / "data"
    _write(data, layout=None)
    engine = KVEngine("model", Geometry(rows=64), value_kind="int")
    engine.add_rule(int_rule(5))
    save_rules(data / "rules.json", engine)
    engine.close()
    before = contents(data)
    flags = {"data_dir": data, "geometry": {"rules": 0}, "replace_settings": True}
    with pytest.raises(ConfigError, match="the wildcard rules in .* do not load with the new "
                                          "settings"):
        with_stored_settings(build_config({}, flags))
    flags["geometry"] = {"rules": 16}  # room for it: replaced (written once serve runs)
    config, origin = with_stored_settings(build_config({}, flags))
    assert origin is not None and origin.changes == ["rules 256 -> 16"]
    assert config.geometry["rules"] == 16 and config.value_kind == "int"
    assert contents(data) == before


def test_replace_settings_is_true_or_false(tmp_path):
    with pytest.raises(ConfigError, match="replace_settings must be true or false"):
        build_config({"replace_settings": "yes"}, {"data_dir": tmp_path})
