"""Dependencies every router shares: the appliance, its engine, its layout, the bearer token.

`get_engine` lends the route ``appliance.engine`` for the route's whole run
(`Appliance.lease`): a reload waits until the route has returned, so the engine a route writes to
is the one being served when it answers. Tests replace `get_appliance` (or `get_engine`) through
``app.dependency_overrides``.

Every dependency here is `async def`, trivial as they are: FastAPI runs a plain `def` dependency
in its thread pool, and each such hop costs a request two more turns of the event loop, each
of which may wait behind a RESP tick (docs/hardening.md: the control-stall target).
"""

from __future__ import annotations

import secrets
from typing import Annotated, AsyncIterator, Optional

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from pynq_kv.engine import KVEngine
from pynq_kv.latency import LatencyRecorder
from pynq_kv.layout import FieldLayout
from pynq_kv.appliance import Appliance
from pynq_kv.tier import Tier

from .imports import ImportJobs


async def get_appliance(request: Request) -> Appliance:
    appliance = request.app.state.appliance
    if appliance is None:
        raise HTTPException(503, "no appliance is attached to this admin service")
    return appliance


async def get_engine(appliance: Annotated[Appliance, Depends(get_appliance)]) -> AsyncIterator[KVEngine]:
    """The served engine, lent until the route function returns (before the response is sent:
    a slow reader must not hold reloads back)."""
    async with appliance.lease() as engine:
        yield engine


async def get_tier(request: Request) -> Optional[Tier]:
    """The host tier entries are written through and read through: the app's appliance's (None:
    the engine alone, as for an app whose engine a test provides without an appliance)."""
    appliance = request.app.state.appliance
    return None if appliance is None else appliance.tier


async def get_layout(appliance: Annotated[Appliance, Depends(get_appliance)]) -> Optional[FieldLayout]:
    return appliance.layout


async def get_latencies(request: Request,
                  appliance: Annotated[Appliance, Depends(get_appliance)]) -> dict[str, LatencyRecorder]:
    """Every front-end's latency recorder by name, sorted; this app's own is "admin" when the
    appliance has none under that name (an app built without one, given it by override)."""
    recorders = {"admin": request.app.state.latency, **appliance.frontend_latencies()}
    return dict(sorted(recorders.items()))


async def get_imports(request: Request) -> ImportJobs:
    return request.app.state.imports


_bearer = HTTPBearer(auto_error=False, description="The admin token (serve --admin-token); "
                                                    "required by every route that changes something")


TOKEN_REFUSED = "this route needs the admin bearer token (Authorization: Bearer TOKEN)"


def token_matches(token: str, authorization: str) -> bool:
    """Whether an Authorization header value carries token as a bearer credential
    (constant-time compare; the scheme is case-insensitive, as HTTPBearer reads it)."""
    scheme, _, given = authorization.partition(" ")
    if scheme.lower() != "bearer":
        given = ""
    return secrets.compare_digest(given.encode("utf-8"), token.encode("utf-8"))


async def require_token(
    request: Request,
    credentials: Annotated[Optional[HTTPAuthorizationCredentials], Depends(_bearer)],
) -> None:
    """Let the request through if no token is configured or it carries the right one.

    This dependency is what declares a route as needing the token; limits.BodyGuard makes the
    same check (token_matches) before the body is read. `credentials` puts the bearer scheme
    in the OpenAPI document.
    """
    token: Optional[str] = request.app.state.token
    if not token:
        return
    if not token_matches(token, request.headers.get("authorization", "")):
        raise HTTPException(401, TOKEN_REFUSED, headers={"WWW-Authenticate": "Bearer"})


ApplianceDep = Annotated[Appliance, Depends(get_appliance)]
EngineDep = Annotated[KVEngine, Depends(get_engine, scope="function")]
LayoutDep = Annotated[Optional[FieldLayout], Depends(get_layout)]
TierDep = Annotated[Optional[Tier], Depends(get_tier)]
ImportsDep = Annotated[ImportJobs, Depends(get_imports)]
LatenciesDep = Annotated[dict[str, LatencyRecorder], Depends(get_latencies)]
Authorized = [Depends(require_token)]
