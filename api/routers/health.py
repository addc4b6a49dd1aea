"""/healthz: is the service up and does its engine answer."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException

from pynq_kv.errors import KVError

from ..deps import ApplianceDep
from ..errors import Message
from ..models import Health

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health,
            responses={503: {"model": Message, "description": "The engine does not answer"}})
async def healthz(appliance: ApplianceDep) -> Health:
    """200 when the engine answers a counter read (no lookup is counted), else 503."""
    try:
        appliance.engine.occupancy()
    except (KVError, OSError) as exc:
        raise HTTPException(503, f"the engine does not answer: {exc}") from None
    return Health(status="ok", backend=appliance.backend, uptime=appliance.uptime)
