"""/v1/overlay: what is loaded, and reload (the engine is looked up per request)."""

from __future__ import annotations

import pytest

from api_support import AUTH, LAYOUT, client_for, small_appliance
from pynq_kv import KVEngine
from pynq_kv.appliance import Appliance


def test_overlay_describes_the_engine_and_layout():
    appliance = small_appliance()
    appliance.engine.set(b"k", b"v")
    with client_for(appliance, config={"bind": "127.0.0.1", "admin_token": "(set)"}) as client:
        o = client.get("/v1/overlay").json()
    assert o["backend"] == "model" and o["value_kind"] == "bytes"
    assert o["geometry"]["rows"] == 64 and o["geometry"]["rules"] == 16
    assert o["occupancy"] == {"used": 1, "capacity": 4 * 64 + 8, "load_factor": round(1 / 264, 6)}
    assert o["layout"] == LAYOUT.to_dict()
    assert o["config"] == {"bind": "127.0.0.1", "admin_token": "(set)"}
    assert o["max_key_bytes"] == 35 and o["reloads"] == 0 and o["uptime"] >= 0


def test_reload_keeps_tables_and_routes_follow_the_new_engine():
    appliance = small_appliance()
    appliance.engine.set(b"k", b"v")
    rule_id = appliance.engine.add_rule(LAYOUT.rule(5, b"r", dst_port=80))
    old = appliance.engine
    with client_for(appliance) as client:
        assert client.post("/v1/overlay/reload").status_code == 401
        r = client.post("/v1/overlay/reload", headers=AUTH)
        assert r.json() == {"restored": 1, "reloads": 1, "backend": "model"}
        assert appliance.engine is not old
        assert client.put("/v1/entries/new", json={"value": "x"}, headers=AUTH).status_code == 201
        assert appliance.engine.get(b"new") == b"x" and appliance.engine.get(b"k") == b"v"
        assert [r["id"] for r in client.get("/v1/rules").json()] == [rule_id]
        assert client.get("/v1/overlay").json()["reloads"] == 1


def test_a_failed_reload_is_503_and_the_old_engine_serves_on():
    made = []

    def factory() -> KVEngine:
        if made:
            raise OSError("overlay bitstream not found")
        made.append(KVEngine(rows=64))
        return made[0]

    appliance = Appliance(factory)
    with client_for(appliance) as client:
        r = client.post("/v1/overlay/reload", headers=AUTH)
        assert r.status_code == 503 and "bitstream" in r.json()["detail"]
        assert appliance.engine is made[0]
        assert client.get("/healthz").status_code == 200


@pytest.mark.parametrize("token", [None, ""])
def test_without_a_token_everything_is_open(token):
    with client_for(small_appliance(), token=token) as client:
        assert client.post("/v1/overlay/reload").status_code == 200
