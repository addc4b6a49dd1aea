"""`pynq-kv serve` settings: defaults < TOML file < flags, and the refusals that keep it safe."""

from __future__ import annotations

from pathlib import Path

import pytest

from pynq_kv.errors import GeometryError
from pynq_kv.serve.config import ConfigError, ServeConfig, build_config, load_config_file


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "serve.toml"
    path.write_text(text)
    return path


def test_defaults_are_loopback_and_documented_ports(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYNQ_KV_ADMIN_TOKEN", raising=False)
    monkeypatch.delenv("PYNQ_KV_REQUIREPASS", raising=False)
    config = build_config({}, {})
    assert (config.bind, config.resp_port, config.udp_port, config.admin_port) == (
        "127.0.0.1", 6380, 11211, 8080)
    assert config.backend == "auto" and config.board is None and config.state is None
    assert all(config.enabled(f) for f in ("resp", "udp", "admin"))


def test_file_then_flags_override(tmp_path: Path) -> None:
    path = write(tmp_path, """
backend = "model"
resp-port = 7000
admin_port = 7001
rows = 1024
state = "~/kv.npz"
disable = "udp"
[geometry]
rules = 32
""")
    settings = load_config_file(path)
    config = build_config(settings, {"admin_port": 9000, "geometry": {"rows": 2048}})
    assert config.resp_port == 7000 and config.admin_port == 9000
    assert config.geometry == {"rows": 2048, "rules": 32}
    assert config.make_geometry().rows == 2048
    assert config.state == Path.home() / "kv.npz"
    assert not config.enabled("udp") and config.enabled("resp")


@pytest.mark.parametrize("text, message", [
    ("colour = 1\n", "unknown setting 'colour'"),
    ("rows = \n", "config file"),
    ("resp_port = 70000\n", "resp_port must be 0..65535"),
    ("backend = 'fpga'\n", "is not an available backend"),
    ("disable = ['resp', 'udp', 'admin']\n", "nothing to serve"),
    ("disable = ['smtp']\n", "cannot disable smtp"),
    ("layout = 'src_ip'\n", "is not name:type"),
    ("save_interval = -1\n", "save_interval"),
])
def test_bad_files_are_refused_with_the_reason(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build_config(load_config_file(write(tmp_path, text)), {})


def test_bad_geometry_names_the_field(tmp_path: Path) -> None:
    with pytest.raises(GeometryError, match="rows must be a power of two"):
        build_config(load_config_file(write(tmp_path, "rows = 1000\n")), {})


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config_file(tmp_path / "nope.toml")


def test_non_loopback_bind_needs_token_and_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYNQ_KV_ADMIN_TOKEN", raising=False)
    monkeypatch.delenv("PYNQ_KV_REQUIREPASS", raising=False)
    with pytest.raises(ConfigError, match="admin API on 0.0.0.0 .* without a token"):
        build_config({}, {"bind": "0.0.0.0"})
    with pytest.raises(ConfigError, match="RESP on 0.0.0.0 .* without a password"):
        build_config({}, {"bind": "0.0.0.0", "admin_token": "t"})
    monkeypatch.setenv("PYNQ_KV_ADMIN_TOKEN", "zq-t0ken-91")
    monkeypatch.setenv("PYNQ_KV_REQUIREPASS", "pw")
    config = build_config({}, {"bind": "0.0.0.0"})
    assert config.admin_token == "zq-t0ken-91" and config.requirepass == "pw"
    assert config.public()["admin_token"] == "(set)" and "zq-t0ken-91" not in repr(config.public())


@pytest.mark.parametrize("bind", ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"])
def test_loopback_binds_need_no_secrets(bind: str) -> None:
    assert build_config({}, {"bind": bind}).bind == bind


def test_layout_setting_builds_a_field_layout() -> None:
    config = ServeConfig(layout="src_ip:ipv4, dst_port:port")
    layout = config.make_layout(288)
    assert layout is not None and [f.name for f in layout.fields] == ["src_ip", "dst_port"]
    # the same spec language as the CLI's --layout, numeric widths included
    layout = ServeConfig(layout="src_ip:ipv4,flow:20").make_layout(288)
    assert layout is not None and [f.type for f in layout.fields] == ["ipv4", "uint:20"]


def test_resp_limits_come_from_the_resp_table_and_flags(tmp_path: Path) -> None:
    path = write(tmp_path, "[resp]\nmax_clients = 50\nmax-bulk-len = 4096\ncommand_timeout = 5\n")
    config = build_config(load_config_file(path), {"resp": {"max_clients": 60}})
    assert config.resp == {"max_clients": 60, "max_bulk_len": 4096, "command_timeout": 5}


@pytest.mark.parametrize("text, message", [
    ("[resp]\nmaxmemory = 1\n", "unknown RESP limit 'maxmemory'"),
    ("[resp]\nmax_clients = 0\n", r"resp.max_clients must be >= 1"),
    ("[resp]\nmax_clients = 2.5\n", "resp.max_clients must be an integer"),
    ("[resp]\nidle_timeout = 'soon'\n", "resp.idle_timeout must be a number"),
    ("[resp]\nidle_timeout = -1\n", r"resp.idle_timeout must be >= 0"),
    ("resp = 3\n", "'resp' must be a table"),
])
def test_bad_resp_limits_are_refused(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build_config(load_config_file(write(tmp_path, text)), {})


# -- memcached/UDP admission (docs/frontend.md §10) -------------------------------------------
def test_udp_defaults_on_loopback_trust_loopback_and_budget_others() -> None:
    config = build_config({}, {})
    admission = config.udp_admission()
    assert config.udp_on() and admission is not None
    assert admission.decide("127.0.0.1") == (True, 0)
    assert admission.decide("10.0.0.1") == (True, 2)


def test_udp_is_off_beyond_loopback_without_an_allow_list() -> None:
    config = build_config({}, {"bind": "0.0.0.0", "admin_token": "t", "requirepass": "p"})
    assert config.enabled("udp") and not config.udp_on() and config.udp_admission() is None
    config = build_config({}, {"bind": "0.0.0.0", "admin_token": "t", "requirepass": "p",
                               "udp_deny": ["10.9.0.0/16"]})
    assert not config.udp_on()  # a deny list alone allows nobody
    with pytest.raises(ConfigError, match="nothing to serve.*UDP stays off on 0.0.0.0"):
        build_config({}, {"bind": "0.0.0.0", "disable": ["resp", "admin"]})


def test_udp_lists_from_file_and_flags(tmp_path: Path) -> None:
    path = write(tmp_path, 'udp_allow = "10.0.0.0/8"\nudp-trust = ["10.1.0.0/16"]\n'
                           "udp_budget = 3\n")
    settings = load_config_file(path)
    config = build_config(settings, {"bind": "0.0.0.0", "admin_token": "t", "requirepass": "p"})
    admission = config.udp_admission()
    assert admission is not None and config.udp_on()
    assert admission.decide("10.1.2.3") == (True, 0)
    assert admission.decide("10.2.0.1") == (True, 3)
    assert admission.decide("192.168.0.1")[0] is False
    assert config.public()["udp_allow"] == ["10.0.0.0/8"]
    flagged = build_config(settings, {"udp_deny": ["10.2.0.1/32"], "udp_budget": 1})
    assert flagged.udp_admission().decide("10.2.0.1") == (False, 0)  # type: ignore[union-attr]
    assert flagged.udp_admission().decide("10.2.0.2") == (True, 1)  # type: ignore[union-attr]


@pytest.mark.parametrize("text, message", [
    ('udp_allow = "10.0.0.1/8"\n', "host bits set; did you mean 10.0.0.0/8"),
    ('udp_trust = "10.0.0.0/40"\n', "bad prefix length"),
    ('udp_deny = "fe80::/10"\n', "IPv4 networks only"),
    ('udp_allow = "office"\n', "not an IPv4 network"),
    ("udp_allow = [1]\n", "udp_allow must be a list of IPv4 networks"),
    ("udp_budget = 256\n", r"--udp-budget must be an integer 0..255"),
    ("udp_budget = 2.5\n", r"--udp-budget must be an integer 0..255"),
    ("udp_allow = [" + ", ".join(f'"10.{i}.0.0/16"' for i in range(9)) + "]\n", "holds 8"),
])
def test_bad_udp_settings_are_refused(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build_config(load_config_file(write(tmp_path, text)), {})


# -- where the data lives (docs/hosttier.md) ---------------------------------------------------


def test_store_defaults_to_the_private_redis_and_settings_choose_another(tmp_path: Path) -> None:
    config = build_config({}, {})
    assert config.store == "private" and config.host_tier_settings().data_dir == Path("pynq-kv-data")
    none = build_config({}, {"store": "none"})
    assert none.host_tier_settings() is None
    private = build_config({}, {"data_dir": tmp_path / "d", "appendfsync": "always"})
    assert private.store == "private"
    settings = private.host_tier_settings()
    assert settings is not None and (settings.data_dir, settings.appendfsync,
                                     settings.redis_url) == (tmp_path / "d", "always", None)
    url = build_config({}, {"redis_url": "redis://:pw@127.0.0.1:6379/1"})
    assert url.store == "url" and url.host_tier_settings().redis_url == "redis://:pw@127.0.0.1:6379/1"
    assert url.public()["redis_url"] == "redis://:***@127.0.0.1:6379/1"
    assert "pw@" not in repr(url.public())
    named = build_config({}, {"store": "private"})
    assert named.host_tier_settings().data_dir == Path("pynq-kv-data")


def test_store_file_settings_and_refusals(tmp_path: Path) -> None:
    settings = load_config_file(write(tmp_path, 'data_dir = "~/kvdata"\nappendfsync = "no"\n'))
    config = build_config(settings, {})
    assert config.store == "private" and config.data_dir == Path("~/kvdata").expanduser()
    refusals = [
        ({"store": "none", "redis_url": "redis://h"}, "cannot go with --no-store"),
        ({"store": "url"}, "needs the Redis to use: --redis-url URL"),
        ({"store": "private", "state": tmp_path / "s.npz"},
         "--state is a snapshot file for memory-only mode"),
        ({"appendfsync": "sometimes"}, "appendfsync must be one of always, everysec, no"),
        ({"store": "disk"}, "store must be one of none, private, url"),
    ]
    for flags, message in refusals:
        with pytest.raises(ConfigError, match=message):
            build_config({}, flags)
    # A state file asks for memory-only mode, whatever the default store is.
    assert build_config({}, {"state": tmp_path / "s.npz"}).store == "none"
    with pytest.raises(ConfigError, match="--state is a snapshot file"):
        build_config({}, {"state": tmp_path / "s.npz", "data_dir": tmp_path / "d"})


def test_event_loop_from_file_and_flags_and_refusals(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from pynq_kv.serve import eventloop

    assert build_config({}, {}).event_loop == "auto"
    path = write(tmp_path, 'event_loop = "asyncio"\n')
    assert build_config(load_config_file(path), {}).event_loop == "asyncio"
    assert build_config(load_config_file(path), {"event_loop": "auto"}).event_loop == "auto"
    with pytest.raises(ConfigError, match="event_loop must be one of auto, asyncio, uvloop"):
        build_config({"event_loop": "trio"}, {})
    monkeypatch.setattr(eventloop, "uvloop_installed", lambda: False)
    with pytest.raises(ConfigError, match=r"uvloop is not installed.*--event-loop asyncio"):
        build_config({}, {"event_loop": "uvloop"})
    assert build_config({}, {"event_loop": "auto"}).event_loop == "auto"  # auto falls back
    assert eventloop.resolve("auto") == "asyncio"


def test_the_loop_serve_runs_on_is_the_one_named(loop_name: str) -> None:
    from pynq_kv.serve import eventloop

    async def name() -> str:
        return eventloop.running_loop_name()

    assert eventloop.run(name(), loop_name).split()[0] == loop_name
