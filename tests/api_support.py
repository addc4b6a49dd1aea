"""Shared pieces of the admin API tests (tests/test_api_*.py).

The app is made without an appliance and given a small one through dependency_overrides, as
the routers would see it under `pynq-kv serve`.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Iterator, Optional

from pynq_kv import FieldLayout, KVEngine
from pynq_kv.appliance import Appliance
from pynq_kv_api.deps import get_appliance
from pynq_kv_api.main import create_app

with warnings.catch_warnings():  # Starlette's note that TestClient will move to httpx2
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

TOKEN = "t0ken-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LAYOUT = FieldLayout(288, [("src_ip", "ipv4"), ("dst_port", "port")])


def small_appliance(layout: Optional[FieldLayout] = LAYOUT, **engine_kwargs) -> Appliance:
    """An appliance over a 4 x 64-row model engine with 16 rule entries."""
    kwargs = {"rows": 64, "rules": 16, **engine_kwargs}
    return Appliance(lambda: KVEngine(**kwargs), layout=layout)


@contextlib.contextmanager
def client_for(appliance: Appliance, token: Optional[str] = TOKEN, **app_kwargs) -> Iterator[TestClient]:
    """A TestClient (lifespan entered, so import jobs run) over appliance via dependency_overrides."""
    app = create_app(token=token, **app_kwargs)
    app.dependency_overrides[get_appliance] = lambda: appliance
    with TestClient(app) as client:
        yield client


def loc_of(response) -> list:
    """The loc of a 422's first error."""
    assert response.status_code == 422, response.text
    return response.json()["detail"][0]["loc"]
