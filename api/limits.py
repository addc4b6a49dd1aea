"""Refusing a request before its body is read: the size limit and the token (docs/api.md, "Limits").

FastAPI reads and parses a route's body before it runs the route's dependencies, so on its own a
500 MB PUT without a token is read into memory (and parsed, on the event loop every front-end
shares) before `require_token` says 401. `BodyGuard` sits in front of the app and, before a byte
of the body is read:

- refuses a route that needs the token when the request does not carry it (401);
- refuses a declared Content-Length over the route's limit (413);

and for a body of no declared length (chunked) counts bytes as the route reads them, answering
413 at the first chunk past the limit, so nothing beyond the limit plus one chunk is held.
Refusals of a request with a body close the connection (`Connection: close`): the client's
unread body is not drained by the server.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

from fastapi import FastAPI, HTTPException
from fastapi.responses import JSONResponse
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .deps import TOKEN_REFUSED, require_token, token_matches

# The defaults (serve's admin_max_body / admin_max_import, when set, replace them).
MAX_BODY_BYTES = 1 << 20  # any request: JSON bodies are an entry or a rule
MAX_IMPORT_BYTES = 256 << 20  # a bulk import file (POST /v1/entries), read as a stream

LimitOf = Callable[[Optional[BaseRoute]], int]


def too_large(limit: int) -> HTTPException:
    return HTTPException(413, f"the request body is larger than this route's limit of {limit} bytes",
                         headers={"Connection": "close"})


def needs_token(route: Optional[BaseRoute]) -> bool:
    """Whether the route is declared with require_token (Authorized): the one place that says so."""
    return any(getattr(dep, "dependency", None) is require_token
               for dep in getattr(route, "dependencies", ()))


class BodyGuard:
    """ASGI middleware: token and size checks that must come before the body is read.

    routes: the API's routes (the routers' own, with their full paths; a request matching none
    gets the default limit and no token check, as no route will take its body).
    """

    def __init__(self, app: ASGIApp, *, api: FastAPI, routes: Sequence[BaseRoute],
                 limit_of: LimitOf) -> None:
        self.app = app
        self.api = api
        self.routes = list(routes)
        self.limit_of = limit_of

    def _route(self, scope: Scope) -> Optional[BaseRoute]:
        for route in self.routes:
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return route
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])  # ASGI header names are lower-case already
        declared = headers.get(b"content-length", b"")
        route = self._route(scope)
        token: Optional[str] = self.api.state.token
        if token and needs_token(route) and not token_matches(
                token, headers.get(b"authorization", b"").decode("latin-1")):
            unread = declared.strip(b"0") != b"" or b"transfer-encoding" in headers
            await self._refuse(scope, receive, send, 401, TOKEN_REFUSED,
                               {"WWW-Authenticate": "Bearer",
                                **({"Connection": "close"} if unread else {})})
            return
        limit = self.limit_of(route)
        if declared.isdigit() and int(declared) > limit:
            refusal = too_large(limit)
            await self._refuse(scope, receive, send, 413, refusal.detail, refusal.headers)
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise too_large(limit)
            return message

        await self.app(scope, counted, send)

    @staticmethod
    async def _refuse(scope: Scope, receive: Receive, send: Send, status: int, detail: str,
                      headers: Optional[dict[str, str]]) -> None:
        await JSONResponse({"detail": detail}, status, headers=headers)(scope, receive, send)
