"""Bulk imports as jobs: the whole file is checked first, then written in chunks on the loop.

POST /v1/entries checks every line before it answers (a bad line is a 422 naming it, and nothing
changes), then answers 202 with a job that writes the records in chunks as an asyncio task,
yielding to the loop between chunks so Redis, memcached and REST requests keep being served.
GET /v1/entries/imports/{id} shows its progress. With a host tier each chunk is one pipeline of
SETs to Redis (pynq_kv.tier.Tier.put_many), and the engine is filled as its cache; keys and
values longer than the engine holds are checked against nothing but the import's size limit and
stay in Redis alone.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import logging
import time
from array import array
from dataclasses import dataclass, field
from typing import Any, Callable, Coroutine, Optional

import numpy as np

from pynq_kv.bulk import BulkFormatError, Item, read_records
from pynq_kv.engine import KVEngine
from pynq_kv.errors import KVError
from pynq_kv.tier import HostTierUnavailable, RedisRefused, Tier

from .codec import redis_value
from .errors import InputError

log = logging.getLogger("pynq_kv_api.imports")

CHECK_BATCH = 2000  # records checked between yields to the loop
CHUNK_SECONDS = 0.05  # how long one write chunk should hold the loop
# A key that finds no room costs ~1 ms (the relocation search), one that does microseconds, so
# chunks start small, grow while they are fast, and never exceed half the free slots (plus a
# few): the chunk that fills the table must not be a big one.
FIRST_CHUNK = 128
MIN_CHUNK = 16
KEEP_FINISHED = 50  # finished jobs kept for GET


@dataclass
class ImportJob:
    id: int
    format: str
    total: int
    created: float = field(default_factory=time.time)
    state: str = "running"
    done: int = 0
    inserted: int = 0
    updated: int = 0
    failed: int = 0
    error: Optional[str] = None
    finished: Optional[float] = None

    def public(self) -> dict:
        return {name: getattr(self, name) for name in (
            "id", "state", "format", "total", "done", "inserted", "updated", "failed", "error",
            "created", "finished")}


def _kind(value: object) -> str:
    return "is an integer" if isinstance(value, int) else "is a byte string"


def _line_of(body: bytes, offset: int) -> int:
    return body.count(b"\n", 0, offset) + 1


Take = Callable[[Item], None]  # takes one checked key or value; ValueError refuses it


async def _check_records(engine: KVEngine, body: bytes, fmt: str, *, encoding: str,
                         int_keys: bool, take_key: Take, take_value: Take) -> None:
    """Every record of body in order, its key and value handed to take_key and take_value; the
    first bad line raises InputError at ("body", line[, "key"|"value"])."""
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = _line_of(body, exc.start)
        raise InputError(("body", line), f"line {line}: not UTF-8 text ({exc.reason})") from None
    int_values = engine.value_kind == "int"
    records = read_records(io.StringIO(text, newline=""), fmt, encoding=encoding,
                           int_keys=int_keys, int_values=int_values)
    try:
        while True:
            batch = list(itertools.islice(records, CHECK_BATCH))
            if not batch:
                break
            for line, key, value in batch:
                column = "key"
                try:
                    take_key(key)
                    column = "value"
                    if isinstance(value, int) != int_values:
                        raise ValueError(f"value {_kind(value)}, this engine stores "
                                         f"{'integer' if int_values else 'byte-string'} values")
                    take_value(value)
                except ValueError as exc:  # the engine's format errors are ValueErrors
                    raise InputError(("body", line, column), f"line {line}: {exc}") from None
            await asyncio.sleep(0)
    except BulkFormatError as exc:
        loc = ("body", exc.line) + ((exc.column,) if exc.column else ())
        raise InputError(loc, str(exc)) from None


async def check_file(engine: KVEngine, body: bytes, fmt: str, *, encoding: str,
                     int_keys: bool) -> tuple[np.ndarray, np.ndarray]:
    """Raw (N, KEY_BYTES) keys and (N, VALUE_BYTES) values of every record in body.

    Each key and value is encoded as the engine will store it, so whatever passes here can be
    written; the first bad line raises InputError at ("body", line[, "key"|"value"]).
    """
    key_format, value_format = engine.key_format, engine.value_format
    keys, values = bytearray(), bytearray()
    await _check_records(engine, body, fmt, encoding=encoding, int_keys=int_keys,
                         take_key=lambda key: keys.extend(key_format.encode(key)),
                         take_value=lambda value: values.extend(value_format.encode(value)))
    g = engine.geometry
    return (np.frombuffer(bytes(keys), dtype=np.uint8).reshape(-1, g.key_bytes),
            np.frombuffer(bytes(values), dtype=np.uint8).reshape(-1, g.value_bytes))


class RedisRecords:
    """The Redis (key, value) strings of an import, packed in one buffer: a 256 MiB file held
    as Python tuples of bytes would take several times its size."""

    def __init__(self) -> None:
        self._data = bytearray()
        self._ends = array("Q")  # where each key, then its value, ends in _data

    def append(self, key: bytes, value: bytes) -> None:
        self._data += key
        self._ends.append(len(self._data))
        self._data += value
        self._ends.append(len(self._data))

    def __len__(self) -> int:
        return len(self._ends) // 2

    def items(self, start: int, stop: int) -> list[tuple[bytes, bytes]]:
        """Records start..stop as (key, value)."""
        data, ends = self._data, self._ends
        out = []
        for i in range(start, min(stop, len(self))):
            begin = ends[2 * i - 1] if i else 0
            middle, end = ends[2 * i], ends[2 * i + 1]
            out.append((bytes(data[begin:middle]), bytes(data[middle:end])))
        return out


async def check_file_tiered(engine: KVEngine, body: bytes, fmt: str, *, encoding: str,
                            int_keys: bool) -> RedisRecords:
    """check_file with a host tier: the Redis (key, value) strings of every record, as a RESP
    SET sends them (codec.redis_value). Keys must be byte strings, of any length, and so must a
    byte-string engine's values: the engine caches those that fit (pynq_kv.tier decides); an
    integer engine's values stay numbers of its width."""
    value_format = engine.value_format
    records = RedisRecords()
    key_of: list[bytes] = []  # the record's key, until its value is checked

    def take_key(key: Item) -> None:
        if not isinstance(key, bytes):
            raise ValueError("with a host tier keys are byte strings (Redis keys), not integers")
        key_of[:] = [key]

    def take_value(value: Item) -> None:
        if isinstance(value, int):
            value_format.encode(value)  # within the engine's width
        records.append(key_of[0], redis_value(engine, value, ("body",)))

    await _check_records(engine, body, fmt, encoding=encoding, int_keys=int_keys,
                         take_key=take_key, take_value=take_value)
    return records


class ImportJobs:
    """The import jobs of one admin app, running and recently finished."""

    def __init__(self) -> None:
        self._jobs: dict[int, ImportJob] = {}
        self._tasks: dict[int, asyncio.Task] = {}  # strong references: the loop keeps weak ones
        self._ids = itertools.count(1)

    def get(self, job_id: int) -> Optional[ImportJob]:
        return self._jobs.get(job_id)

    def all(self) -> list[ImportJob]:
        return list(self._jobs.values())

    def counts(self) -> dict[str, int]:
        out = {"imports_running": 0, "imports_done": 0, "imports_failed": 0}
        for job in self._jobs.values():
            out[f"imports_{job.state}"] += 1
        return out

    def start(self, engine_of: Callable[[], KVEngine], keys: np.ndarray, values: np.ndarray,
              fmt: str, chunk: int) -> ImportJob:
        """A running job writing keys/values into engine_of() (looked up per chunk: a reload
        replaces the engine, and later chunks must go to the new one)."""
        job = ImportJob(next(self._ids), fmt, len(keys))
        return self._launch(job, self._run(job, engine_of, keys, values, chunk))

    def start_tiered(self, tier: Tier, records: RedisRecords, fmt: str, chunk: int) -> ImportJob:
        """A running job writing Redis (key, value) strings through the host tier."""
        job = ImportJob(next(self._ids), fmt, len(records))
        return self._launch(job, self._run_tiered(job, tier, records, chunk))

    def _launch(self, job: ImportJob, work: Coroutine[Any, Any, None]) -> ImportJob:
        self._jobs[job.id] = job
        self._tasks[job.id] = asyncio.get_running_loop().create_task(work)
        self._forget_old()
        return job

    async def _run(self, job: ImportJob, engine_of: Callable[[], KVEngine], keys: np.ndarray,
                   values: np.ndarray, max_chunk: int) -> None:
        """Write in chunks sized so each holds the loop about CHUNK_SECONDS, at most max_chunk."""
        size = min(max_chunk, FIRST_CHUNK)
        try:
            while job.done < len(keys):
                engine = engine_of()
                occupancy = engine.occupancy()
                room = max(MIN_CHUNK, (occupancy.capacity - occupancy.used) // 2)
                start, stop = job.done, job.done + min(size, room)
                began = time.perf_counter()
                report = engine.mset(keys[start:stop], values[start:stop])
                took = time.perf_counter() - began
                job.inserted += report.inserted
                job.updated += report.updated
                job.failed += len(report.failed)
                job.done = min(stop, len(keys))
                if took > CHUNK_SECONDS:
                    size = max(1, int((stop - start) * CHUNK_SECONDS / took))
                elif took < CHUNK_SECONDS / 2:
                    size = min(max_chunk, size * 2)
                await asyncio.sleep(0)
            job.state = "done"
        except (KVError, OSError) as exc:  # e.g. a board gone away mid-import
            log.exception("import %d failed", job.id)
            job.state, job.error = "failed", str(exc) or type(exc).__name__
        except asyncio.CancelledError:
            job.state = "failed"
            job.error = f"stopped at shutdown after {job.done} of {job.total} records"
            raise
        finally:
            job.finished = time.time()
            self._tasks.pop(job.id, None)

    async def _run_tiered(self, job: ImportJob, tier: Tier, records: RedisRecords,
                          chunk: int) -> None:
        """Write through the host tier, chunk records per pipeline; a chunk is acknowledged by
        Redis before the next is sent (done counts acknowledged records)."""
        try:
            while job.done < len(records):
                stop = min(job.done + chunk, len(records))
                new = await tier.put_many(records.items(job.done, stop))
                job.inserted += sum(new)
                job.updated += len(new) - sum(new)
                job.done = stop
            job.state = "done"
        except (HostTierUnavailable, RedisRefused) as exc:
            log.error("import %d failed after %d records: %s", job.id, job.done, exc)
            job.state, job.error = "failed", str(exc)
        except asyncio.CancelledError:
            job.state = "failed"
            job.error = f"stopped at shutdown after {job.done} of {job.total} records"
            raise
        finally:
            job.finished = time.time()
            self._tasks.pop(job.id, None)

    async def drain(self, timeout: float) -> list[ImportJob]:
        """Let running jobs finish, up to timeout seconds, then stop the rest; returns those.

        A shutdown calls this before the state file is saved: an import the client was told
        was accepted should land whole, not as whatever prefix the loop had reached.
        """
        running = dict(self._tasks)
        if not running:
            return []
        _, late = await asyncio.wait(running.values(), timeout=timeout)
        for task in late:
            task.cancel()
        if late:
            await asyncio.wait(late)
        return [self._jobs[job_id] for job_id, task in running.items() if task in late]

    def _forget_old(self) -> None:
        finished = [job.id for job in self._jobs.values() if job.state != "running"]
        for job_id in finished[:max(0, len(finished) - KEEP_FINISHED)]:
            del self._jobs[job_id]
