"""/v1/entries: single keys in every URL encoding, paging, export, bulk import jobs."""

from __future__ import annotations

import asyncio
import base64
import json
import time

import pytest

from api_support import AUTH, LAYOUT, client_for, loc_of, small_appliance
from pynq_kv_api.imports import ImportJob, ImportJobs


@pytest.fixture
def appliance():
    return small_appliance()


@pytest.fixture
def client(appliance):
    with client_for(appliance) as c:
        yield c


def wait_for(client, location: str, timeout: float = 10.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = client.get(location).json()
        if job["state"] != "running" or time.monotonic() > deadline:
            return job
        time.sleep(0.01)


# -- one key at a time ---------------------------------------------------------------------

def test_put_get_delete_round_trip(client, appliance):
    r = client.put("/v1/entries/user:1", json={"value": "alice"}, headers=AUTH)
    assert r.status_code == 201 and r.json() == {"key": "user:1", "value": "alice", "created": True}
    r = client.put("/v1/entries/user:1", json={"value": "alicia"}, headers=AUTH)
    assert r.status_code == 200 and r.json()["created"] is False
    assert appliance.engine.get(b"user:1") == b"alicia"
    assert client.get("/v1/entries/user:1").json() == {"key": "user:1", "value": "alicia"}
    assert client.delete("/v1/entries/user:1", headers=AUTH).status_code == 204
    assert client.get("/v1/entries/user:1").status_code == 404
    assert client.delete("/v1/entries/user:1", headers=AUTH).status_code == 404


def test_keys_with_slashes_and_any_bytes(client, appliance):
    assert client.put("/v1/entries/a/b/c", json={"value": "slashes"}, headers=AUTH).status_code == 201
    assert appliance.engine.get(b"a/b/c") == b"slashes"
    raw = bytes([0, 255, 10, 47])
    r = client.put(f"/v1/entries/{raw.hex()}?encoding=hex", json={"value": {"hex": "fffe"}}, headers=AUTH)
    assert r.status_code == 201 and r.json()["key"] == {"hex": raw.hex()}
    assert appliance.engine.get(raw) == b"\xff\xfe"
    b64 = base64.urlsafe_b64encode(raw).decode()
    assert client.get(f"/v1/entries/{b64}?encoding=base64").json()["value"] == {"hex": "fffe"}
    r = client.put("/v1/entries/k?encoding=utf8", json={"value": {"base64": "aGk="}}, headers=AUTH)
    assert r.json()["value"] == "hi"


def test_int_keys_and_int_values():
    appliance = small_appliance(value_kind="int")
    with client_for(appliance) as client:
        r = client.put("/v1/entries/0x2a?encoding=int", json={"value": 7}, headers=AUTH)
        assert r.status_code == 201 and r.json() == {"key": 42, "value": 7, "created": True}
        assert appliance.engine.get(42) == 7
        assert client.get("/v1/entries/42?encoding=int").json() == {"key": 42, "value": 7}
        assert loc_of(client.put("/v1/entries/k", json={"value": "seven"}, headers=AUTH)) == ["body", "value"]


def test_structured_keys_through_the_layout(client, appliance):
    r = client.put("/v1/entries/src_ip=10.1.2.3,dst_port=80?encoding=fields", json={"value": "flow"},
                   headers=AUTH)
    assert r.status_code == 201
    assert appliance.engine.get(LAYOUT.key(src_ip="10.1.2.3", dst_port=80)) == b"flow"
    assert loc_of(client.get("/v1/entries/src_ip=10.1.2.3?encoding=fields")) == ["path", "key"]
    assert loc_of(client.get("/v1/entries/src_ip=300.0.0.1,dst_port=1?encoding=fields")) == ["path", "key"]


def test_bad_keys_and_values_are_422_naming_the_field(client, appliance):
    assert loc_of(client.put("/v1/entries/" + "k" * 36, json={"value": "v"}, headers=AUTH)) == ["path", "key"]
    assert loc_of(client.get("/v1/entries/xyz?encoding=hex")) == ["path", "key"]
    assert loc_of(client.get("/v1/entries/12a?encoding=int")) == ["path", "key"]
    assert loc_of(client.put("/v1/entries/k", json={"value": "v" * 32}, headers=AUTH)) == ["body", "value"]
    assert loc_of(client.put("/v1/entries/k", json={"value": 5}, headers=AUTH)) == ["body", "value"]
    lone_surrogate = b'{"value": "\\ud800"}'
    r = client.put("/v1/entries/k", content=lone_surrogate,
                   headers={**AUTH, "Content-Type": "application/json"})
    assert loc_of(r) == ["body", "value"]
    assert client.put("/v1/entries/k", json={"valeu": "v"}, headers=AUTH).status_code == 422
    assert len(appliance.engine) == 0


def test_full_table_is_507():
    appliance = small_appliance(ways=2, rows=2, stash=0)  # 4 slots
    with client_for(appliance) as client:
        codes = [client.put(f"/v1/entries/k{i}", json={"value": "v"}, headers=AUTH).status_code
                 for i in range(12)]
    assert codes.count(201) == len(appliance.engine) == 4
    assert set(codes) == {201, 507}


def test_writes_need_the_token_reads_do_not(client, appliance):
    assert client.put("/v1/entries/k", json={"value": "v"}).status_code == 401
    r = client.put("/v1/entries/k", json={"value": "v"}, headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    appliance.engine.set(b"k", b"v")
    assert client.delete("/v1/entries/k").status_code == 401
    assert client.post("/v1/entries", content="", headers={"Content-Type": "text/csv"}).status_code == 401
    assert client.get("/v1/entries/k").status_code == 200
    assert appliance.engine.get(b"k") == b"v"


# -- listing and export --------------------------------------------------------------------

def test_paging_walks_every_entry_once_even_while_entries_change(client, appliance):
    expected = {f"key{i}".encode(): f"v{i}".encode() for i in range(40)}
    appliance.engine.mset(expected)
    seen: dict[str, str] = {}
    cursor, pages, deleted = 0, 0, None
    while cursor is not None:
        page = client.get("/v1/entries", params={"cursor": cursor, "limit": 7}).json()
        assert len(page["entries"]) <= 7
        for entry in page["entries"]:
            assert entry["key"] not in seen
            seen[entry["key"]] = entry["value"]
        if pages == 1:  # delete an entry already listed and add one: the cursor stays valid
            deleted = page["entries"][0]["key"]
            appliance.engine.delete(deleted.encode())
        cursor, pages = page["next_cursor"], pages + 1
    assert pages == 6
    assert seen == {k.decode(): v.decode() for k, v in expected.items()}
    assert client.get("/v1/entries").json()["occupancy"] == 39


def test_listing_slots_are_in_order_and_prefix_filters(client, appliance):
    appliance.engine.mset({b"user:1": b"a", b"user:2": b"b", b"item:1": b"c", b"\xffuser": b"d"})
    page = client.get("/v1/entries").json()
    slots = [e["slot"] for e in page["entries"]]
    assert slots == sorted(slots) and len(slots) == 4 and page["next_cursor"] is None
    users = client.get("/v1/entries", params={"prefix": "user:"}).json()["entries"]
    assert sorted(e["key"] for e in users) == ["user:1", "user:2"]
    odd = client.get("/v1/entries", params={"prefix": "/w==", "encoding": "base64"}).json()["entries"]
    assert [e["key"] for e in odd] == [{"hex": "ff75736572"}]


def test_a_sparse_prefix_makes_short_pages_not_long_scans():
    appliance = small_appliance(rows=8192)  # 4 x 8192 + 8 slots
    appliance.engine.mset({b"a": b"1", b"b": b"2"})
    with client_for(appliance) as client:
        cursors, cursor = [], 0
        while cursor is not None:
            page = client.get("/v1/entries", params={"cursor": cursor, "prefix": "nothing"}).json()
            assert page["entries"] == []
            cursor = page["next_cursor"]
            cursors.append(cursor)
    assert cursors == [16384, 32768, None]


@pytest.mark.parametrize("fmt", ["ndjson", "csv"])
def test_export_then_import_round_trips(client, appliance, fmt):
    data = {f"k{i}".encode(): f"value,{i}\"".encode() for i in range(30)}
    appliance.engine.mset(data)
    r = client.get("/v1/entries", params={"format": fmt})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith({"ndjson": "application/x-ndjson", "csv": "text/csv"}[fmt])
    other = small_appliance()
    with client_for(other) as other_client:
        r = other_client.post("/v1/entries", params={"format": fmt}, content=r.content, headers=AUTH)
        assert r.status_code == 202
        job = wait_for(other_client, r.headers["location"])
    assert job["state"] == "done" and job["inserted"] == 30
    assert dict(other.engine.items()) == data


def test_export_of_bytes_that_are_not_text(client, appliance):
    appliance.engine.set(b"\xfe\xff", b"\xc3(")
    lines = client.get("/v1/entries?format=ndjson").text.splitlines()
    assert [json.loads(line) for line in lines] == [{"key": {"hex": "feff"}, "value": {"hex": "c328"}}]
    assert loc_of(client.get("/v1/entries?format=csv")) == ["query", "encoding"]
    assert client.get("/v1/entries?format=csv&encoding=hex").text == "key,value\nfeff,c328\n"


# -- bulk import ---------------------------------------------------------------------------

def test_import_job_reports_progress_in_chunks(client, appliance):
    body = "".join(json.dumps({"key": f"k{i}", "value": f"v{i}"}) + "\n" for i in range(25))
    r = client.post("/v1/entries?chunk_size=4", content=body,
                    headers={**AUTH, "Content-Type": "application/x-ndjson"})
    assert r.status_code == 202
    job = r.json()
    assert r.headers["location"] == f"/v1/entries/imports/{job['id']}"
    assert job["total"] == 25 and job["format"] == "ndjson"
    done = wait_for(client, r.headers["location"])
    assert done | {"finished": None} == job | {"state": "done", "done": 25, "inserted": 25, "finished": None}
    assert done["finished"] >= done["created"]
    assert len(appliance.engine) == 25
    assert [j["id"] for j in client.get("/v1/entries/imports").json()] == [job["id"]]
    assert client.get("/v1/entries/imports/999").status_code == 404


def test_a_bad_line_rejects_the_whole_file(client, appliance):
    body = "key,value\nk1,v1\nk2,v2\n" + "k" * 36 + ",v3\nk4,v4\n"
    r = client.post("/v1/entries", content=body, headers={**AUTH, "Content-Type": "text/csv"})
    assert loc_of(r) == ["body", 4, "key"] and "line 4" in r.json()["detail"][0]["msg"]
    ndjson = '{"key": "a", "value": "b"}\n\n{"key": "c"}\n'
    r = client.post("/v1/entries?format=ndjson", content=ndjson, headers=AUTH)
    assert loc_of(r) == ["body", 3]
    r = client.post("/v1/entries?format=ndjson", content='{"key": "a", "value": 5}\n', headers=AUTH)
    assert loc_of(r) == ["body", 1, "value"]
    r = client.post("/v1/entries?format=csv", content=b"key,value\nk,\xff\n", headers=AUTH)
    assert loc_of(r) == ["body", 2]
    assert len(appliance.engine) == 0 and client.get("/v1/entries/imports").json() == []


def test_import_options_and_limits():
    appliance = small_appliance(value_kind="int")
    with client_for(appliance, max_import_bytes=64) as client:
        r = client.post("/v1/entries?format=csv&int_keys=true", content="key,value\n0x10,7\n12,0x8\n",
                        headers=AUTH)
        assert wait_for(client, r.headers["location"])["inserted"] == 2
        assert dict(appliance.engine.items()) == {16: 7, 12: 8}
        assert client.post("/v1/entries", content="key,value\n", headers=AUTH).status_code == 415
        r = client.post("/v1/entries?format=csv", content="key,value\n" + "1,1\n" * 20, headers=AUTH)
        assert r.status_code == 413


def test_an_import_writes_on_into_the_engine_a_reload_brings():
    appliance = small_appliance()
    first = appliance.engine

    async def scenario() -> ImportJob:
        keys = first.encode_keys([f"k{i}".encode() for i in range(10)])
        job = ImportJobs().start(lambda: appliance.engine, keys, first.encode_values([b"v"] * 10),
                                 "ndjson", 1)
        while job.done < 3:
            await asyncio.sleep(0)
        appliance.reload()
        while job.state == "running":
            await asyncio.sleep(0)
        return job

    job = asyncio.run(scenario())
    assert appliance.engine is not first
    assert job.state == "done" and job.inserted == 10 and len(appliance.engine) == 10


def test_import_into_a_full_table_counts_failures():
    appliance = small_appliance(ways=2, rows=2, stash=0)
    with client_for(appliance) as client:
        body = "key,value\n" + "".join(f"k{i},v\n" for i in range(10))
        r = client.post("/v1/entries?format=csv", content=body, headers=AUTH)
        job = wait_for(client, r.headers["location"])
    assert job["state"] == "done" and job["inserted"] == 4 and job["failed"] == 6


def test_drain_finishes_accepted_imports_or_says_where_it_stopped():
    """Shutdown drains imports before saving: a finished job is whole, a cut one says so."""
    appliance = small_appliance()
    engine = appliance.engine
    keys = engine.encode_keys([f"k{i}".encode() for i in range(40)])
    values = engine.encode_values([b"v"] * 40)

    async def scenario(timeout: float) -> tuple[ImportJob, list[ImportJob]]:
        jobs = ImportJobs()
        job = jobs.start(lambda: appliance.engine, keys, values, "ndjson", 1)
        await asyncio.sleep(0)
        return job, await jobs.drain(timeout)

    job, stopped = asyncio.run(scenario(30.0))
    assert stopped == [] and job.state == "done" and len(engine) == 40
    engine.clear()
    job, stopped = asyncio.run(scenario(0.0))
    assert stopped == [job] and job.state == "failed" and job.done < 40
    assert job.error == f"stopped at shutdown after {job.done} of 40 records"
    assert len(engine) == job.done
