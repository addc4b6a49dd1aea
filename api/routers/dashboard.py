"""/: the dashboard page (its script and style are served from /static)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse

STATIC = Path(__file__).resolve().parent.parent / "static"

router = APIRouter(include_in_schema=False)


@router.get("/")
async def dashboard() -> FileResponse:
    return FileResponse(STATIC / "index.html", media_type="text/html")
