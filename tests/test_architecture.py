"""The import graph of `pynq_kv` and the admin service `api/` keeps the layers of
docs/architecture.md: no import loop anywhere, and every dependency points the documented way.

The graph is read from the source with `ast` (nothing is imported), and counts every import:
module level, inside functions (lazy imports) and under TYPE_CHECKING alike, since each is a
dependency of the module's meaning. `api/` installs as `pynq_kv_api`; both names map to `api`.
The optional C extensions (`pynq_kv/_*.c`) are modules too, leaves that import nothing.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"pynq_kv": ROOT / "pynq_kv", "api": ROOT / "api"}
ALIASES = {"pynq_kv_api": "api"}


def _module_name(package: str, base: Path, path: Path) -> str:
    parts = [package, *path.relative_to(base).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {}
    for package, base in PACKAGES.items():
        for path in sorted([*base.rglob("*.py"), *base.rglob("*.c")]):
            found[_module_name(package, base, path)] = path
    return found


MODULES = _modules()


def _canonical(name: str) -> str:
    head, _, rest = name.partition(".")
    head = ALIASES.get(head, head)
    return f"{head}.{rest}" if rest else head


def _target(name: str) -> str | None:
    """The project module an imported name lives in (the longest known prefix), else None."""
    name = _canonical(name)
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str, path: Path) -> set[str]:
    if path.suffix == ".c":
        return set()
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            # "from pkg import name": name is a submodule or something defined in pkg
            names = [f"{origin}.{alias.name}" if _target(f"{origin}.{alias.name}") == _canonical(
                f"{origin}.{alias.name}") else origin for alias in node.names]
        else:
            continue
        for name in names:
            target = _target(name)
            if target is not None and target != module:
                out.add(target)
    return out


GRAPH = {module: _imports(module, path) for module, path in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (as a path back to its start) per strongly connected component of size > 1;
    the other members of a component each lie on some cycle too."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan; the graph is small, recursion is fine
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_path_in(graph, set(component)) for component in components]


def _path_in(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A cycle through the component's first module, found breadth-first."""
    start = min(component)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & component):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [start, *reversed(path[:-1]), start] if node != start else [start, start]
                if nxt not in parents:
                    parents[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle in {component}")  # pragma: no cover


def _in(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _violations(rule: str, sources: list[str], forbidden: tuple[str, ...]) -> list[str]:
    return [f"{rule}: {m} imports {t}" for m in sources for t in sorted(GRAPH[m])
            if _in(t, *forbidden)]


def test_the_graph_is_read() -> None:
    """The reader finds the modules and the edges it must (a broken reader would pass all)."""
    assert {"pynq_kv", "pynq_kv.engine", "pynq_kv.serve.runner", "api.main"} <= set(GRAPH)
    assert "pynq_kv.engine" in GRAPH["pynq_kv"]  # from .engine import KVEngine
    assert "pynq_kv.serve.resp.errors" in GRAPH["pynq_kv.serve.resp.server"]  # from . import errors
    assert "api.main" in GRAPH["pynq_kv.serve.runner"]  # a lazy import of pynq_kv_api.main
    assert "pynq_kv._h3" in GRAPH["pynq_kv.hashing"]  # an optional C extension
    assert "pynq_kv._slots" in GRAPH["pynq_kv.model"]  # another
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]


def test_no_import_loops() -> None:
    cycles = _cycles(GRAPH)
    assert not cycles, "import loops:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_loops_between_the_wings() -> None:
    """Folded into core, net, serve, api and the CLI, the graph is a chain: nothing reaches back."""
    def wing(module: str) -> str:
        for name, prefixes in (("cli", TOP), ("serve", FRONT), ("net", ("pynq_kv.net",)),
                               ("api", ("api",))):
            if _in(module, *prefixes):
                return name
        return "core"

    folded: dict[str, set[str]] = {}
    for module, targets in GRAPH.items():
        folded.setdefault(wing(module), set()).update(wing(t) for t in targets if wing(t) != wing(module))
    cycles = _cycles(folded)
    assert not cycles, "loops between wings:\n" + "\n".join(" -> ".join(c) for c in cycles)


FRONT = ("pynq_kv.serve",)
TOP = ("pynq_kv.cli", "pynq_kv.__main__")


def test_layers() -> None:
    net = [m for m in GRAPH if _in(m, "pynq_kv.net")]
    api = [m for m in GRAPH if _in(m, "api")]
    core = [m for m in GRAPH if _in(m, "pynq_kv") and not _in(m, *FRONT, *TOP)]
    serve = [m for m in GRAPH if _in(m, *FRONT)]
    problems = (
        # net: what needs no engine (codecs, frames, the client) imports only net itself
        [f"net is a leaf: {m} imports {t}" for m in net for t in sorted(GRAPH[m])
         if not _in(t, "pynq_kv.net")]
        + _violations("api administers the appliance it is given", api, (*FRONT, *TOP))
        + _violations("the core does not know its front-ends", core, (*FRONT, *TOP, "api"))
        + _violations("front-ends do not start the CLI", serve, TOP)
    )
    assert not problems, "\n".join(problems)


def _imported_by_import_pynq_kv() -> set[str]:
    code = "import sys, pynq_kv; print('\\n'.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=ROOT)
    return set(done.stdout.split())


def test_import_pynq_kv_leaves_out_the_web_stack() -> None:
    loaded = _imported_by_import_pynq_kv()
    assert "pynq_kv.engine" in loaded  # the probe sees the package's own imports
    assert not {name for name in loaded
                if name.partition(".")[0] in ("fastapi", "starlette", "uvicorn", "pynq_kv_api")}


def test_import_pynq_kv_leaves_out_the_verilator_harness() -> None:
    loaded = _imported_by_import_pynq_kv()
    assert "pynq_kv.engine" in loaded
    assert "pynq_kv.sim" not in loaded
