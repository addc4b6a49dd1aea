"""Bulk imports as jobs: the whole file is checked first, then written in chunks on the loop.

POST /v1/entries checks every line before it answers (a bad line is a 422 naming it, and nothing
changes), then answers 202 with a job that writes the records in chunks as an asyncio task,
yielding to the loop between chunks so Redis, memcached and REST requests keep being served.
GET /v1/entries/imports/{id} shows its progress. With a host tier each chunk is one pipeline of
SETs to Redis (pynq_kv.tier.Tier.put_many), and the engine is filled as its cache.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from pynq_kv.bulk import BulkFormatError, read_records
from pynq_kv.engine import KVEngine
from pynq_kv.errors import KVError
from pynq_kv.tier import HostTierUnavailable, RedisRefused, Tier

from .codec import redis_key, redis_value
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


async def check_file(engine: KVEngine, body: bytes, fmt: str, *, encoding: str,
                     int_keys: bool, byte_keys: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Raw (N, KEY_BYTES) keys and (N, VALUE_BYTES) values of every record in body.

    Each key and value is encoded as the engine will store it, so whatever passes here can be
    written; the first bad line raises InputError at ("body", line[, "key"|"value"]).
    byte_keys: every key must be a byte string (a host tier's Redis keys).
    """
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = _line_of(body, exc.start)
        raise InputError(("body", line), f"line {line}: not UTF-8 text ({exc.reason})") from None
    key_format, value_format = engine.key_format, engine.value_format
    int_values = engine.value_kind == "int"
    keys, values = bytearray(), bytearray()
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
                    if byte_keys and not isinstance(key, bytes):
                        raise ValueError("with a host tier keys are byte strings (Redis keys), "
                                         "not integers")
                    keys += key_format.encode(key)
                    column = "value"
                    if isinstance(value, int) != int_values:
                        raise ValueError(f"value {_kind(value)}, this engine stores "
                                         f"{'integer' if int_values else 'byte-string'} values")
                    values += value_format.encode(value)
                except ValueError as exc:  # the engine's format errors are ValueErrors
                    raise InputError(("body", line, column), f"line {line}: {exc}") from None
            await asyncio.sleep(0)
    except BulkFormatError as exc:
        loc = ("body", exc.line) + ((exc.column,) if exc.column else ())
        raise InputError(loc, str(exc)) from None
    g = engine.geometry
    return (np.frombuffer(bytes(keys), dtype=np.uint8).reshape(-1, g.key_bytes),
            np.frombuffer(bytes(values), dtype=np.uint8).reshape(-1, g.value_bytes))


def redis_items(engine: KVEngine, keys: np.ndarray, values: np.ndarray) -> list[tuple[bytes, bytes]]:
    """The Redis (key, value) strings of raw rows check_file made with byte_keys, as a RESP SET
    sends them (codec.redis_key, codec.redis_value)."""
    return [(redis_key(engine.decode_key(key.tobytes()), ("body",)),
             redis_value(engine, engine.decode_value(value.tobytes()), ("body",)))
            for key, value in zip(keys, values)]


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
              fmt: str, chunk: int, tier: Optional[Tier] = None) -> ImportJob:
        """A running job writing keys/values into engine_of() (looked up per chunk: a reload
        replaces the engine, and later chunks must go to the new one), or through the host
        tier when there is one."""
        job = ImportJob(next(self._ids), fmt, len(keys))
        self._jobs[job.id] = job
        work = (self._run(job, engine_of, keys, values, chunk) if tier is None
                else self._run_tiered(job, tier, engine_of, keys, values, chunk))
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

    async def _run_tiered(self, job: ImportJob, tier: Tier, engine_of: Callable[[], KVEngine],
                          keys: np.ndarray, values: np.ndarray, chunk: int) -> None:
        """Write through the host tier, chunk records per pipeline; a chunk is acknowledged by
        Redis before the next is sent (done counts acknowledged records)."""
        try:
            while job.done < len(keys):
                start, stop = job.done, min(job.done + chunk, len(keys))
                items = redis_items(engine_of(), keys[start:stop], values[start:stop])
                new = await tier.put_many(items)
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
