"""Every notebook's code cells run top to bottom on the simulated overlay."""

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path):
    cells = json.loads(path.read_text())["cells"]
    code = [("".join(c["source"]), i) for i, c in enumerate(cells) if c["cell_type"] == "code"]
    assert code, f"{path.name} has no code"
    namespace: dict = {}
    for source, index in code:
        exec(compile(source, f"{path.name}[cell {index}]", "exec"), namespace)


def test_notebooks_exist():
    assert NOTEBOOKS
