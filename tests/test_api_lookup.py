"""/v1/lookup/{key}: the kind of answer, the winning rule, the rules it beat, and why."""

from __future__ import annotations

import pytest

from api_support import LAYOUT, client_for, loc_of, small_appliance


@pytest.fixture
def appliance():
    appliance = small_appliance()
    engine = appliance.engine
    engine.set(b"user:1", b"alice")
    engine.set(LAYOUT.key(src_ip="10.1.2.3", dst_port=1200), b"pinned")
    engine.add_rule(LAYOUT.rule(10, b"internal", "lan", src_ip="10.0.0.0/8"))
    engine.add_rule(LAYOUT.rule(20, b"web", "web", dst_port=(1000, 2000)))
    engine.add_rule(LAYOUT.rule(20, b"web-too", "same-priority", dst_port=1500))
    return appliance


@pytest.fixture
def client(appliance):
    with client_for(appliance) as c:
        yield c


def test_exact_hit_shadows_the_rules(client):
    r = client.get("/v1/lookup/src_ip=10.1.2.3,dst_port=1200?encoding=fields").json()
    assert r["kind"] == "exact" and r["value"] == "pinned" and r["rule"] is None
    assert r["fields"] == {"src_ip": "10.1.2.3", "dst_port": 1200}
    assert r["raw_key"] == "0x" + f"{LAYOUT.key(src_ip='10.1.2.3', dst_port=1200):072x}"
    assert [c["id"] for c in r["candidates"]] == [2, 1] and not any(c["winner"] for c in r["candidates"])
    assert "shadows 2" in r["explanation"]


def test_rule_hit_names_the_winner_and_the_losers(client):
    r = client.get("/v1/lookup/src_ip=10.1.2.4,dst_port=1500?encoding=fields").json()
    assert r["kind"] == "rule" and r["value"] == "web" and r["rule_id"] == 2
    assert r["rule"]["name"] == "web" and r["rule"]["match"] == {"dst_port": {"range": [1000, 2000]}}
    assert r["entry"] in r["rule"]["entries"]
    assert [(c["id"], c["priority"], c["winner"]) for c in r["candidates"]] == [
        (2, 20, True), (3, 20, False), (1, 10, False)]
    assert "rule 2 (web) wins with priority 20 among 3" in r["explanation"]
    assert "lowest rule-table entry" in r["explanation"]


def test_miss_and_plain_keys(client, appliance):
    r = client.get("/v1/lookup/src_ip=192.168.0.1,dst_port=80?encoding=fields").json()
    assert r["kind"] == "miss" and r["value"] is None and r["candidates"] == []
    r = client.get("/v1/lookup/user:1").json()
    assert (r["kind"], r["key"], r["value"], r["fields"]) == ("exact", "user:1", "alice", None)
    assert appliance.engine.stats()["lookups"] == 2  # a real LOOKUP each


def test_bad_keys_are_422(client):
    assert loc_of(client.get("/v1/lookup/src_ip=10.0.0.1?encoding=fields")) == ["path", "key"]
    assert loc_of(client.get("/v1/lookup/" + "x" * 40)) == ["path", "key"]
    assert loc_of(client.get("/v1/lookup/k?encoding=morse")) == ["query", "encoding"]
