"""One batching design for every front-end: parse, plan, run on the engine, render.

A front-end parses what its clients sent, then plans it into a `Pipeline`: each request that
the engine answers in bulk (GET, SET, DELETE, MATCH) joins the current *run* of its kind with
its keys (and values); a request answered without the engine (an error, NOOP, VERSION) joins
the run as a ready item; a request of another kind first *flushes* the run: one engine batch
(`run`), then every item of the run in order (`render`). The engine contract (docs/engine.md
§7) says a batch means the same as its operations one after another, so this is sequential
execution at batch cost. Requests that are not batched at all (RESP's MSET, KV.RULE.ADD, ...)
flush the pipeline and run on their own.

`Limits` (pynq_kv.limits, shared with the host tier's restore) is the one check of keys and values
both servers make before anything is planned; it is imported here so the servers find it with the
rest of the batching.
"""

from __future__ import annotations

from typing import Any, Callable, Generic, Optional, TypeVar

from ..limits import Limits

__all__ = ["Limits", "Pipeline"]

Item = TypeVar("Item")
# run(kind, keys, values) -> the engine's answer for the run (whatever render expects)
Run = Callable[[Any, list, list], Any]
# render(kind, items, answer of run)
Render = Callable[[Any, list, Any], None]


class Pipeline(Generic[Item]):
    """The current run of one kind: its items in order and the keys/values of its engine batch."""

    __slots__ = ("kind", "items", "keys", "values", "_run", "_render")

    def __init__(self, run: Run, render: Render) -> None:
        self._run = run
        self._render = render
        self.kind: Any = None
        self.items: list[Item] = []
        self.keys: list[Any] = []
        self.values: list[Any] = []

    def add(self, kind: Any, item: Item, key: Any, value: Any = None) -> None:
        """One request of kind with one key (and value): a run of another kind flushes first."""
        if kind != self.kind:
            self.flush()
            self.kind = kind
        self.items.append(item)
        self.keys.append(key)
        if value is not None:
            self.values.append(value)

    def extend(self, kind: Any, item: Item, keys: list[Any],
               values: Optional[list[Any]] = None) -> None:
        """One item standing for several keys (MGET, EXISTS, a block of pipelined commands)."""
        if kind != self.kind:
            self.flush()
            self.kind = kind
        self.items.append(item)
        self.keys += keys
        if values is not None:
            self.values += values

    def ready(self, item: Item, kind: Any = None) -> None:
        """An item answered without the engine, rendered in its place; it joins the current run
        unless a kind is given (then a run of another kind flushes first, as add does)."""
        if kind is not None and kind != self.kind:
            self.flush()
            self.kind = kind
        self.items.append(item)

    def flush(self) -> None:
        """Run the pending batch on the engine and render its items; the pipeline is then empty.

        The three lists are emptied in place, not replaced, so a planner may hold their append
        methods across flushes (run and render must not keep them)."""
        items = self.items
        if not items:
            return
        keys = self.keys
        try:
            self._render(self.kind, items, self._run(self.kind, keys, self.values) if keys else None)
        finally:
            items.clear()
            keys.clear()
            self.values.clear()
