"""Result handles: query (and Python) results kept per session so that fetch_rows,
compare_results and run_python use them without running the query again.

A store belongs to one client (a stdio server, one HTTP session, one agent run), so what it keeps
(rows, and the Arrow copy run_python hands over) never needs a session in its key. The one store
that several clients share — stateless HTTP requests carry no session id — hands out random,
unguessable ids instead of a counter: there a result id is a capability, and a client reaches only
the results whose ids it was given."""

from __future__ import annotations

import itertools
import secrets
import threading
from collections import OrderedDict
from typing import Any, Literal

from pydantic import BaseModel, PrivateAttr

from flexsql.errors import NotFoundError
from flexsql.tools.engines.fetch import estimate_size


class StoredResult(BaseModel):
    result_id: str
    columns: list[str]
    types: list[str] = []
    rows: list[tuple[Any, ...]]
    total_rows: int
    total_is_lower_bound: bool = False
    truncated: bool = False  # rows were dropped: `rows` holds fewer than total_rows
    cells_cut: int = 0  # cells kept as prefixes (over store_cell_kb), each ending in a cut marker
    ordered: bool = False  # the producing query had a top-level ORDER BY
    sql: str | None = None
    source: str | None = None
    origin: str = "query"  # "query" or "python"
    size_bytes: int = 0
    # the Arrow table run_python last handed over for these rows: kept with the result (not in a cache
    # keyed by id, which collides across stores), evicted with it, counted in the store's bytes
    _arrow: Any = PrivateAttr(default=None)


_DEFAULTS = {
    name: field.default for name, field in StoredResult.model_fields.items() if not field.is_required()
}


class ResultStore:
    """A bounded LRU of results, by total approximate memory.

    `ids="sequential"` (`r1`, `r2`, …: short, and easy for a model to repeat) suits a store owned by
    one client; `ids="random"` (`r_` + 10 URL-safe characters, 60 bits) suits a store shared by
    clients that must not reach each other's results, and then errors never list the ids kept."""

    RANDOM_ID_CHARS = 10

    def __init__(
        self,
        max_bytes: int = 512 * 1024 * 1024,
        prefix: str = "r",
        ids: Literal["sequential", "random"] = "sequential",
    ) -> None:
        self.max_bytes = max_bytes
        self._prefix = prefix
        self.ids = ids
        self._items: OrderedDict[str, StoredResult] = OrderedDict()
        self._bytes = 0
        self._counter = itertools.count(1)
        self._lock = threading.Lock()

    def _new_id(self) -> str:
        if self.ids == "sequential":
            return f"{self._prefix}{next(self._counter)}"
        while True:  # a collision is ~never; checking costs nothing
            # token_urlsafe(8) gives 11 chars; 10 of them still carry 60 random bits
            candidate = f"{self._prefix}_{secrets.token_urlsafe(8)[: self.RANDOM_ID_CHARS]}"
            if candidate not in self._items:
                return candidate

    def put(self, **fields: Any) -> StoredResult:
        rows = fields.get("rows", [])
        size = estimate_size(rows) + 64 * len(fields.get("columns", []))
        # the fields come from our own sources and tools: validating a million rows again costs seconds
        with self._lock:
            result_id = self._new_id()
            stored = StoredResult.model_construct(
                **{**_DEFAULTS, **fields, "result_id": result_id, "size_bytes": size}
            )
            self._items[result_id] = stored
            self._bytes += size
            self._evict()
            return stored

    def _evict(self) -> None:
        while self._bytes > self.max_bytes and len(self._items) > 1:
            _, evicted = self._items.popitem(last=False)
            self._bytes -= evicted.size_bytes

    def arrow(self, stored: StoredResult, build: Any) -> Any:
        """The result's rows as an Arrow table, built by `build()` once and kept with the result."""
        table = stored._arrow
        if table is not None:
            return table
        table = build()
        self.attach_arrow(stored, table)
        return table

    def attach_arrow(self, stored: StoredResult, table: Any) -> None:
        with self._lock:
            if stored._arrow is not None:
                return
            if self._items.get(stored.result_id) is not stored:  # evicted meanwhile: nothing to account
                stored._arrow = table
                return
            extra = int(getattr(table, "nbytes", 0))
            stored._arrow = table
            stored.size_bytes += extra
            self._bytes += extra
            self._evict()

    def get(self, result_id: str) -> StoredResult:
        with self._lock:
            stored = self._items.get(result_id.strip())
            if stored is None:
                if self.ids == "random":  # the ids kept are other clients' capabilities: never list them
                    raise NotFoundError(
                        f"result_id {result_id!r} is unknown or was evicted to save memory; "
                        "use an id this session was given, or run the query again with run_query"
                    )
                known = ", ".join(list(self._items)[-10:]) or "none yet"
                raise NotFoundError(
                    f"result_id {result_id!r} is unknown or was evicted to save memory "
                    f"(kept now: {known}); run the query again with run_query"
                )
            self._items.move_to_end(stored.result_id)
            return stored

    @property
    def bytes_used(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)
