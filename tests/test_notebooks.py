"""The notebooks: each runs top to bottom on the simulated overlay, and each is committed clean.

Every notebook is executed in a real Jupyter kernel (nbclient) at the small size
(PYNQ_KV_NB_SCALE=ci); an error in any cell fails its test with the cell and the traceback.
The helpers the notebooks share (pynq_kv.notebook) are checked here too.
"""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

import httpx
import nbformat
import pytest
import redis
from nbclient import NotebookClient

from pynq_kv import notebook as nbh

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
# seconds: notebook 4 may build the Verilated kv_top (about a minute on an idle machine). Its
# geometry (288-bit keys, 256-bit values, 1024 rows, 16 rules) is the one test_net_board.py and
# test_serve.py build, so within the whole suite the build is already cached.
CELL_TIMEOUT = 300
# The five notebooks of docs/notebooks.md, by the number their file name starts with.
EXPECTED = {"01", "02", "03", "04", "05"}


def test_every_notebook_is_there():
    assert {p.name[:2] for p in NOTEBOOKS} == EXPECTED, [p.name for p in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_stripped(path: Path):
    """Committed notebooks carry no outputs and no execution counts (nothing stale in git)."""
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    dirty = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
             and (cell.outputs or cell.execution_count is not None)]
    assert not dirty, f"{path.name}: cells {dirty} have outputs or execution counts"
    assert "widgets" not in nb.metadata, f"{path.name}: saved widget state"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    nb = nbformat.read(path, as_version=4)
    assert any(c.cell_type == "code" for c in nb.cells), f"{path.name} has no code"
    monkeypatch.setenv(nbh.SCALE_ENV, "ci")
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    for name in ("PYNQ_KV_BOARD", "PYNQ_KV_CONFIG", "PYNQ_KV_STATE", "PYNQ_KV_ADMIN_TOKEN",
                 "PYNQ_KV_REQUIREPASS"):
        monkeypatch.delenv(name, raising=False)
    # the kernel is this interpreter: its environment's kernelspec comes before any user's
    monkeypatch.setenv("JUPYTER_PATH", str(Path(sys.prefix) / "share" / "jupyter"))
    client = NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # CellExecutionError (cell source and traceback) on any error
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code)
    figures = sum("image/png" in out.get("data", {}) for c in code for out in c.outputs)
    assert figures, f"{path.name} drew no figure"


# -- pynq_kv.notebook ----------------------------------------------------------------------


def test_sized_follows_the_scale(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(nbh.SCALE_ENV, raising=False)
    assert nbh.scale() == "full" and nbh.sized(1000, 10) == 1000
    monkeypatch.setenv(nbh.SCALE_ENV, "CI")
    assert nbh.scale() == "ci" and nbh.sized(1000, 10) == 10
    monkeypatch.setenv(nbh.SCALE_ENV, "huge")
    with pytest.raises(ValueError, match=nbh.SCALE_ENV):
        nbh.sized(1000, 10)


def test_free_port_is_free():
    port = nbh.free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_serve_process_starts_answers_and_stops():
    with nbh.ServeProcess(["--rows", "256", "--rules", "16"]) as served:
        assert set(served.ports) == {"resp", "udp", "admin"}
        client = redis.Redis(port=served.ports["resp"], socket_timeout=10)
        assert client.set("k", "v") and client.get("k") == b"v"
        client.close()
        assert httpx.get(served.admin_url + "/healthz", timeout=10).status_code == 200
    assert served.proc.returncode == 0  # a graceful stop


def test_serve_process_reports_a_failed_start():
    with pytest.raises(nbh.ServerError, match="did not start"):
        nbh.ServeProcess(["--rows", "3"])


def test_serve_process_gives_up_at_its_deadline():
    """No banner within startup_timeout (here far shorter than Python's own start): killed."""
    started = time.monotonic()
    with pytest.raises(nbh.ServerError, match="did not start"):
        nbh.ServeProcess(startup_timeout=0.01)
    assert time.monotonic() - started < 15


def test_redis_server_starts_and_stops():
    server = nbh.RedisServer()
    client = redis.Redis(port=server.port, socket_timeout=10)
    assert client.ping()
    client.close()
    server.stop()
    with pytest.raises(redis.ConnectionError):
        redis.Redis(port=server.port, socket_timeout=2).ping()
