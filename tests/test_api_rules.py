"""/v1/rules: field-spec and raw ternary rules; 422 naming the field; 507 when full."""

from __future__ import annotations

import pytest

from api_support import AUTH, LAYOUT, client_for, loc_of, small_appliance
from pynq_kv import FieldLayout

FIELD_RULE = {"priority": 10, "value": "internal", "name": "lan",
              "match": {"src_ip": "10.0.0.0/8", "dst_port": [1000, 2000]}}


@pytest.fixture
def appliance():
    return small_appliance()


@pytest.fixture
def client(appliance):
    with client_for(appliance) as c:
        yield c


def test_create_get_list_delete(client, appliance):
    r = client.post("/v1/rules", json=FIELD_RULE, headers=AUTH)
    assert r.status_code == 201
    rule = r.json()
    assert r.headers["location"] == f"/v1/rules/{rule['id']}"
    assert rule["name"] == "lan" and rule["priority"] == 10 and rule["value"] == "internal"
    assert rule["match"] == {"src_ip": "10.0.0.0/8", "dst_port": {"range": [1000, 2000]}}
    assert len(rule["ternary"]) == len(rule["entries"]) > 1  # the port range expands
    assert appliance.engine.lookup(LAYOUT.key(src_ip="10.9.8.7", dst_port=1500)).rule_id == rule["id"]
    rule["hits"] = 1
    assert client.get(f"/v1/rules/{rule['id']}").json() == rule
    assert client.get("/v1/rules").json() == [rule]
    assert client.delete(f"/v1/rules/{rule['id']}", headers=AUTH).status_code == 204
    assert client.get(f"/v1/rules/{rule['id']}").status_code == 404
    assert client.delete(f"/v1/rules/{rule['id']}", headers=AUTH).status_code == 404
    assert appliance.engine.rules() == {}


def test_raw_ternary_rule(client, appliance):
    body = {"priority": 3, "value": {"hex": "ff"}, "ternary": [{"match": "0x0a", "mask": "0xff"}]}
    rule = client.post("/v1/rules", json=body, headers=AUTH).json()
    assert rule["match"] is None and rule["value"] == {"hex": "ff"}
    assert rule["ternary"] == [{"match": "0x" + "0" * 70 + "0a", "mask": "0x" + "0" * 70 + "ff"}]
    assert appliance.engine.lookup(0x10A).value == b"\xff"


def test_hits_are_reported_per_rule(client, appliance):
    rule_id = client.post("/v1/rules", json=FIELD_RULE, headers=AUTH).json()["id"]
    for port in (1000, 1999, 3000):
        appliance.engine.lookup(LAYOUT.key(src_ip="10.0.0.1", dst_port=port))
    assert client.get(f"/v1/rules/{rule_id}").json()["hits"] == 2


@pytest.mark.parametrize("change, loc", [
    ({"match": {"src_ip": "10.0.0.0/33"}}, ["body", "match", "src_ip"]),
    ({"match": {"dst_port": [2000, 70000]}}, ["body", "match", "dst_port"]),
    ({"match": {"dst_port": {"value": 1, "mask": 2}}}, ["body", "match", "dst_port"]),
    ({"match": {"dst_port": 1.5}}, ["body", "match", "dst_port"]),
    ({"match": {"proto": 6}}, ["body", "match", "proto"]),
    ({"match": {"priority": 6}}, ["body", "match", "priority"]),
    ({"priority": 1 << 16}, ["body", "priority"]),
    ({"priority": -1}, ["body", "priority"]),
    ({"value": 5}, ["body", "value"]),
    ({"value": "x" * 40}, ["body", "value"]),
    ({"ternary": [{"match": "0x1", "mask": "0x1"}]}, ["body"]),  # both forms
    ({"match": None}, ["body"]),  # neither form
    ({"name": 5}, ["body", "name"]),
])
def test_validation_errors_name_the_field(client, appliance, change, loc):
    assert loc_of(client.post("/v1/rules", json={**FIELD_RULE, **change}, headers=AUTH))[:len(loc)] == loc
    assert appliance.engine.rules() == {}


@pytest.mark.parametrize("entry, loc", [
    ({"match": "0x3", "mask": "0x1"}, ["body", "ternary", 1, "match"]),
    ({"match": "0x0", "mask": "0x1" + "0" * 72}, ["body", "ternary", 1, "mask"]),
    ({"match": "zz", "mask": "0x1"}, ["body", "ternary", 1, "match"]),
])
def test_raw_entry_errors_name_the_entry(client, entry, loc):
    body = {"priority": 1, "value": "v", "ternary": [{"match": "0x1", "mask": "0x1"}, entry]}
    assert loc_of(client.post("/v1/rules", json=body, headers=AUTH)) == loc


def test_a_spec_the_layout_trips_over_is_still_a_422():
    appliance = small_appliance(layout=FieldLayout(288, [("mac", "mac")]))
    with client_for(appliance) as client:
        body = {"priority": 1, "value": "v", "match": {"mac": "aa:bb:cc:00:00:00/\u00b2"}}
        assert loc_of(client.post("/v1/rules", json=body, headers=AUTH)) == ["body", "match", "mac"]


def test_field_rules_need_a_layout():
    with client_for(small_appliance(layout=None)) as client:
        assert loc_of(client.post("/v1/rules", json=FIELD_RULE, headers=AUTH)) == ["body", "match"]


def test_a_rule_bigger_than_the_table_is_refused_and_a_full_table_is_507(client, appliance):
    too_big = {**FIELD_RULE, "match": {"src_ip": "10.0.0.1-10.0.0.6", "dst_port": [1, 65534]}}  # 3 x 16
    assert loc_of(client.post("/v1/rules", json=too_big, headers=AUTH)) == ["body", "match"]
    fits = {**FIELD_RULE, "match": {"dst_port": [1, 14]}}  # 4 entries
    codes = [client.post("/v1/rules", json=fits, headers=AUTH).status_code for _ in range(5)]
    assert codes == [201, 201, 201, 201, 507]
    assert len(appliance.engine.rules()) == 4


def test_mutations_need_the_token(client, appliance):
    assert client.post("/v1/rules", json=FIELD_RULE).status_code == 401
    rule_id = appliance.engine.add_rule(LAYOUT.rule(1, b"v", dst_port=80))
    assert client.delete(f"/v1/rules/{rule_id}").status_code == 401
    assert client.get("/v1/rules").status_code == 200
    assert list(appliance.engine.rules()) == [rule_id]
