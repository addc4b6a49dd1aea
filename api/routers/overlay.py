"""/v1/overlay: what is loaded (the overlay: kind, source, board, manifest, front-end; the
engine: backend, geometry, layout) and reloading it."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request

from pynq_kv.errors import KVError

from ..deps import ApplianceDep, Authorized
from ..errors import UNAUTHORIZED, Message
from ..models import OverlayPublic, ReloadResult

router = APIRouter(prefix="/v1/overlay", tags=["overlay"])


@router.get("", response_model=OverlayPublic)
async def overlay(appliance: ApplianceDep, request: Request) -> OverlayPublic:
    """The overlay pynq_kv.load() opened (kind, source, board, manifest, front-end), the
    engine's backend, geometry, encodings, occupancy, field layout and the serve settings."""
    info = appliance.engine.info()
    info.pop("counters")  # /v1/stats has them
    loaded = (appliance.overlay.info() if appliance.overlay is not None else
              dict.fromkeys(("kind", "source", "board", "manifest", "frontend")))
    return OverlayPublic(
        **info, **loaded,
        layout=appliance.layout.to_dict() if appliance.layout else None,
        state_path=str(appliance.state_path) if appliance.state_path else None,
        host_tier=appliance.host_tier.describe() if appliance.host_tier else None,
        uptime=appliance.uptime, reloads=appliance.reloads, config=request.app.state.config)


@router.post("/reload", response_model=ReloadResult, dependencies=Authorized,
             responses={**UNAUTHORIZED,
                        503: {"model": Message, "description": "Reload failed; the old engine serves on"}})
async def reload(appliance: ApplianceDep) -> ReloadResult:
    """Re-open the overlay through pynq_kv.load() (a board loads its bitstream again) and put
    every entry and rule back (with a host tier: its rules file and its hottest keys, from Redis).

    Counters start again from zero. The reload waits for admin requests holding the engine to
    finish (and holds new ones back), so none acknowledges a write the copy misses. If the new
    engine cannot be made or refuses the tables, the old engine stays in service and the answer
    is 503.
    """
    try:
        restored = await appliance.reload_when_idle()
    except (KVError, OSError) as exc:
        raise HTTPException(503, f"reload failed, the old engine is still serving: {exc}") from None
    return ReloadResult(restored=restored, reloads=appliance.reloads, backend=appliance.backend)
