"""How bad input and engine errors become HTTP responses (docs/api.md, "Errors").

Every 422 has FastAPI's own shape, ``{"detail": [{"loc": [...], "msg": ..., "type": ...}]}``,
whether pydantic or the engine found the problem, so a client reads one format and `loc` names
the field. Other errors are ``{"detail": "message"}``.
"""

from __future__ import annotations

from typing import Any, Sequence, Union

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from pynq_kv.errors import (
    InvalidRule,
    KeyFormatError,
    KVError,
    RuleTableFull,
    TableFull,
    UnknownRule,
    ValueFormatError,
)
from pynq_kv.tier import HostTierUnavailable, RedisRefused

Loc = Sequence[Union[str, int]]

# First match wins; a table (or rule table) with no room is 507 Insufficient Storage: the request
# was fine and may succeed once entries are deleted, which 409/422 would not say.
STATUS_OF: tuple[tuple[type[KVError], int], ...] = (
    (UnknownRule, 404),
    (TableFull, 507),
    (RuleTableFull, 507),
    (KeyFormatError, 422),
    (ValueFormatError, 422),
    (InvalidRule, 422),
)
CONFLICT = 409  # any other engine refusal (CommandError, GeometryError, SnapshotError)


class Message(BaseModel):
    """An error that is not about one input field."""

    detail: str


class InputError(Exception):
    """Bad input at `loc` (e.g. ("body", "match", "src_ip")), answered as 422."""

    def __init__(self, loc: Loc, msg: str, kind: str = "value_error") -> None:
        super().__init__(msg)
        self.loc = tuple(loc)
        self.msg = msg
        self.kind = kind


def unprocessable(loc: Loc, msg: str, kind: str = "value_error") -> JSONResponse:
    return JSONResponse({"detail": [{"loc": list(loc), "msg": msg, "type": kind}]}, status_code=422)


def status_of(exc: KVError) -> int:
    for cls, status in STATUS_OF:
        if isinstance(exc, cls):
            return status
    return CONFLICT


async def _input_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, InputError)
    return unprocessable(exc.loc, exc.msg, exc.kind)


async def _kv_error(request: Request, exc: Exception) -> JSONResponse:
    """Engine errors a route did not map itself: still the right status, never a 500."""
    assert isinstance(exc, KVError)
    status = status_of(exc)
    if status == 422:
        return unprocessable(("request",), str(exc))
    return JSONResponse({"detail": str(exc)}, status_code=status)


async def _tier_unavailable(request: Request, exc: Exception) -> JSONResponse:
    """Redis (the host tier) is down: nothing was written, try again later."""
    return JSONResponse({"detail": str(exc)}, status_code=503)


async def _redis_refused(request: Request, exc: Exception) -> JSONResponse:
    """Redis answered the write with an error (its text): the upstream refused it."""
    return JSONResponse({"detail": str(exc)}, status_code=502)


def install(app: FastAPI) -> None:
    app.add_exception_handler(InputError, _input_error)
    app.add_exception_handler(KVError, _kv_error)
    app.add_exception_handler(HostTierUnavailable, _tier_unavailable)
    app.add_exception_handler(RedisRefused, _redis_refused)


# OpenAPI descriptions of the error statuses, for routes to pick from.
NOT_FOUND = {404: {"model": Message, "description": "No such key, rule or import"}}
UNAUTHORIZED = {401: {"model": Message, "description": "Missing or wrong bearer token"}}
NO_ROOM = {507: {"model": Message, "description": "The table (or rule table) has no room"}}
TIER: dict[Union[int, str], dict[str, Any]] = {
    502: {"model": Message, "description": "The host tier's Redis refused the write (its error text)"},
    503: {"model": Message, "description": "The host tier's Redis cannot be reached: nothing was "
                                           "written"},
}
