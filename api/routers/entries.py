"""/v1/entries: paged listing and export, bulk import jobs, and one key at a time."""

from __future__ import annotations

import asyncio
from typing import AsyncIterator, Optional

from fastapi import APIRouter, HTTPException, Query, Request, Response
from fastapi.responses import StreamingResponse

from pynq_kv.bulk import csv_header, format_record, text_to_bytes
from pynq_kv.errors import TableFull

from ..codec import (
    KeyEncodingQuery,
    engine_key,
    engine_value,
    from_redis,
    item_out,
    redis_key,
    redis_value,
)
from ..deps import ApplianceDep, Authorized, EngineDep, ImportsDep, LayoutDep, TierDep
from ..errors import NO_ROOM, NOT_FOUND, TIER, UNAUTHORIZED, InputError
from ..imports import check_file, check_file_tiered
from ..models import (
    BulkFormat,
    EntryListed,
    EntryPage,
    EntryPublic,
    EntryUpdate,
    EntryWritten,
    ImportJobPublic,
    KeyEncoding,
    ListFormat,
    TextEncoding,
)
from ..table import Snapshot, scan

router = APIRouter(prefix="/v1/entries", tags=["entries"])

EXPORT_CHUNK = 2000  # lines encoded between yields to the loop
MEDIA = {"ndjson": "application/x-ndjson", "csv": "text/csv; charset=utf-8"}
IMPORT_MEDIA = {"application/x-ndjson": "ndjson", "application/ndjson": "ndjson",
                "application/jsonl": "ndjson", "application/json": "ndjson", "text/csv": "csv"}


def _prefix(text: str, encoding: TextEncoding) -> bytes:
    try:
        return text_to_bytes(text, encoding.value)
    except ValueError as exc:
        raise InputError(("query", "prefix"), str(exc)) from None


async def _check_csv(snapshot: Snapshot, encoding: str) -> None:
    """Every row can be written as CSV: once streaming has begun, a bad row cannot be reported."""
    for start in range(0, len(snapshot), EXPORT_CHUNK):
        for key, value in snapshot.items(start, start + EXPORT_CHUNK):
            try:
                format_record(key, value, "csv", encoding)
            except ValueError as exc:
                raise InputError(("query", "encoding"), f"cannot export as CSV: {exc}") from None
        await asyncio.sleep(0)


async def _export(snapshot: Snapshot, fmt: str, encoding: str) -> AsyncIterator[str]:
    if fmt == "csv":
        yield csv_header()
    for start in range(0, len(snapshot), EXPORT_CHUNK):
        yield "".join(format_record(key, value, fmt, encoding)
                      for key, value in snapshot.items(start, start + EXPORT_CHUNK))
        await asyncio.sleep(0)


@router.get(
    "", response_model=EntryPage,
    responses={200: {"description": "A page of entries (JSON), or every matching entry as a "
                                    "stream with ?format=ndjson|csv",
                     "content": {"application/x-ndjson": {"schema": {"type": "string"}},
                                 "text/csv": {"schema": {"type": "string"}}}}})
async def list_entries(
    engine: EngineDep,
    tier: TierDep,
    cursor: int = Query(0, ge=0, description="slot number to continue from (next_cursor)"),
    limit: int = Query(100, ge=1, le=1000),
    prefix: str = Query("", description="only byte-string keys starting with these bytes"),
    encoding: TextEncoding = Query(TextEncoding.utf8,
                                   description="how prefix (and CSV cells) are written"),
    fmt: ListFormat = Query(ListFormat.json, alias="format",
                            description="json: one page; ndjson/csv: export every entry"),
) -> EntryPage | StreamingResponse:
    """Entries in slot order, a page at a time; or the whole table as NDJSON or CSV.

    A page may hold fewer than `limit` entries (a page scans at most 16384 slots); keep going
    while next_cursor is not null. Exports are the table as it was when the request came. With
    a host tier this is the engine's table: the hot keys, not all of Redis.
    """
    if tier is not None:
        tier.apply_invalidations()
    wanted = _prefix(prefix, encoding)
    if fmt is ListFormat.json:
        found, following = scan(engine, cursor, limit, wanted)
        return EntryPage(
            entries=[EntryListed(key=item_out(k), value=item_out(v), slot=slot) for slot, k, v in found],
            next_cursor=following, occupancy=engine.occupancy().used)
    snapshot = Snapshot(engine, wanted)
    if fmt is ListFormat.csv:
        await _check_csv(snapshot, encoding.value)
    return StreamingResponse(_export(snapshot, fmt.value, encoding.value), media_type=MEDIA[fmt.value],
                             headers={"Content-Disposition": f'attachment; filename="entries.{fmt.value}"'})


async def _read_body(request: Request) -> bytes:
    """The body, read as a stream (limits.BodyGuard has refused it already if it is too long)."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
    return bytes(body)


def _import_format(request: Request, fmt: Optional[BulkFormat]) -> str:
    if fmt is not None:
        return fmt.value
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media in IMPORT_MEDIA:
        return IMPORT_MEDIA[media]
    raise HTTPException(415, "say the file format with ?format=ndjson|csv or a Content-Type of "
                             "application/x-ndjson or text/csv")


@router.post(
    "", status_code=202, response_model=ImportJobPublic, dependencies=Authorized,
    responses={**UNAUTHORIZED, **TIER, 413: {"description": "File too large"},
               415: {"description": "Unknown file format"}},
    openapi_extra={"requestBody": {"required": True, "content": {
        "application/x-ndjson": {"schema": {"type": "string"},
                                 "example": '{"key": "user:1", "value": "alice"}\n'},
        "text/csv": {"schema": {"type": "string"}, "example": "key,value\nuser:1,alice\n"}}}})
async def import_entries(
    request: Request,
    response: Response,
    appliance: ApplianceDep,
    jobs: ImportsDep,
    fmt: Optional[BulkFormat] = Query(None, alias="format",
                                      description="default: from the Content-Type"),
    encoding: TextEncoding = Query(TextEncoding.utf8, description="how CSV cells are written"),
    int_keys: bool = Query(False, description="text keys are integers (decimal or 0x hex)"),
    chunk_size: int = Query(5000, ge=1, le=100_000,
                            description="most records per engine batch (batches shrink to keep "
                                        "each under ~50 ms)"),
) -> ImportJobPublic:
    """Bulk import of NDJSON or CSV (the format GET ?format= exports) as a job.

    Every line is checked first; a bad one is a 422 whose loc is ["body", line, column] and
    nothing is written. Otherwise 202 with the job (Location: its URL), which writes the records
    in chunks; keys that find no room are counted in `failed`, the others are stored. A body
    over the import limit (256 MiB by default) is 413 before it is read.

    With a host tier the records are written to Redis (a pipeline of SETs per chunk; `inserted`
    counts keys Redis did not hold) and enter the engine as a cache; keys must be byte strings,
    and keys and values longer than the engine holds stay in Redis alone.
    """
    fmt_name = _import_format(request, fmt)
    body = await _read_body(request)
    tier = appliance.tier
    if tier is None:
        keys, values = await check_file(appliance.engine, body, fmt_name,
                                        encoding=encoding.value, int_keys=int_keys)
        job = jobs.start(lambda: appliance.engine, keys, values, fmt_name, chunk_size)
    else:
        records = await check_file_tiered(appliance.engine, body, fmt_name,
                                          encoding=encoding.value, int_keys=int_keys)
        job = jobs.start_tiered(tier, records, fmt_name, chunk_size)
    response.headers["Location"] = str(request.url_for("get_import", job_id=job.id).path)
    return ImportJobPublic(**job.public())


@router.get("/imports", response_model=list[ImportJobPublic])
async def list_imports(jobs: ImportsDep) -> list[ImportJobPublic]:
    """Running and recently finished imports, oldest first."""
    return [ImportJobPublic(**job.public()) for job in jobs.all()]


@router.get("/imports/{job_id}", response_model=ImportJobPublic, responses=NOT_FOUND,
            name="get_import")
async def get_import(job_id: int, jobs: ImportsDep) -> ImportJobPublic:
    """Progress of one import: state, records done of total, inserted/updated/failed."""
    job = jobs.get(job_id)
    if job is None:
        raise HTTPException(404, f"no import with id {job_id}")
    return ImportJobPublic(**job.public())


@router.get("/{key:path}", response_model=EntryPublic, responses={**NOT_FOUND, 503: TIER[503]})
async def get_entry(key: str, engine: EngineDep, layout: LayoutDep, tier: TierDep,
                    encoding: KeyEncoding = KeyEncodingQuery) -> EntryPublic:
    """The value stored under key in the exact table (a GET: counts as a lookup); with a host
    tier, from Redis when the engine does not hold it (which fills the engine if it fits)."""
    k = engine_key(engine, key, encoding, layout, tiered=tier is not None)
    if tier is not None and isinstance(k, bytes):
        text = (await tier.get_many([k]))[0]
        value = None if text is None else from_redis(engine, text)
    else:
        value = engine.get(k)
    if value is None:
        raise HTTPException(404, f"no entry for key {key!r}")
    return EntryPublic(key=item_out(k), value=item_out(value))


@router.put("/{key:path}", response_model=EntryWritten, dependencies=Authorized,
            responses={201: {"model": EntryWritten, "description": "A new key"},
                       **UNAUTHORIZED, **NO_ROOM, **TIER})
async def put_entry(key: str, body: EntryUpdate, response: Response, engine: EngineDep,
                    layout: LayoutDep, tier: TierDep,
                    encoding: KeyEncoding = KeyEncodingQuery) -> EntryWritten:
    """Store a value under key: 201 for a new key, 200 for an update, 507 if there is no room.

    With a host tier the value is written to Redis and the answer comes once Redis acknowledged
    it (201: Redis did not hold the key); the engine is filled as its cache, never 507. The key
    and value may then be longer than the engine holds (up to the request's size limit): they
    stay in Redis alone."""
    k = engine_key(engine, key, encoding, layout, tiered=tier is not None)
    value = engine_value(engine, body.value, ("body", "value"), tiered=tier is not None)
    if tier is not None:
        item = (redis_key(k), redis_value(engine, value, ("body", "value")))
        created = (await tier.put_many([item]))[0]
    else:
        try:
            created = engine.set(k, value)
        except TableFull as exc:
            raise HTTPException(507, str(exc)) from None
    response.status_code = 201 if created else 200
    return EntryWritten(key=item_out(k), value=item_out(value), created=created)


@router.delete("/{key:path}", status_code=204, dependencies=Authorized,
               responses={**NOT_FOUND, **UNAUTHORIZED, **TIER})
async def delete_entry(key: str, engine: EngineDep, layout: LayoutDep, tier: TierDep,
                       encoding: KeyEncoding = KeyEncodingQuery) -> Response:
    """Remove key from the exact table (404 if it was not there); with a host tier from Redis
    (404 if Redis did not hold it), answered once Redis acknowledged it."""
    k = engine_key(engine, key, encoding, layout, tiered=tier is not None)
    deleted = (await tier.delete_many([redis_key(k)]) if tier is not None
               else engine.delete(k))
    if not deleted:
        raise HTTPException(404, f"no entry for key {key!r}")
    return Response(status_code=204)

