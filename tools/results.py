"""Result handles: query (and Python) results kept per session so that fetch_rows,
compare_results and run_python use them without running the query again."""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from typing import Any

from pydantic import BaseModel

from flexsql.errors import NotFoundError
from flexsql.tools.sources.base import estimate_size


class StoredResult(BaseModel):
    result_id: str
    columns: list[str]
    types: list[str] = []
    rows: list[tuple[Any, ...]]
    total_rows: int
    total_is_lower_bound: bool = False
    truncated: bool = False
    ordered: bool = False  # the producing query had a top-level ORDER BY
    sql: str | None = None
    source: str | None = None
    origin: str = "query"  # "query" or "python"
    size_bytes: int = 0


_DEFAULTS = {name: field.default for name, field in StoredResult.model_fields.items() if not field.is_required()}


class ResultStore:
    """A bounded LRU of results, by total approximate memory; ids are short (`r1`, `r2`, …)."""

    def __init__(self, max_bytes: int = 512 * 1024 * 1024, prefix: str = "r") -> None:
        self.max_bytes = max_bytes
        self._prefix = prefix
        self._items: OrderedDict[str, StoredResult] = OrderedDict()
        self._bytes = 0
        self._counter = itertools.count(1)
        self._lock = threading.Lock()

    def put(self, **fields: Any) -> StoredResult:
        rows = fields.get("rows", [])
        size = estimate_size(rows) + 64 * len(fields.get("columns", []))
        # the fields come from our own sources and tools: validating a million rows again costs seconds
        with self._lock:
            result_id = f"{self._prefix}{next(self._counter)}"
            stored = StoredResult.model_construct(**{**_DEFAULTS, **fields, "result_id": result_id,
                                                     "size_bytes": size})
            self._items[result_id] = stored
            self._bytes += size
            while self._bytes > self.max_bytes and len(self._items) > 1:
                _, evicted = self._items.popitem(last=False)
                self._bytes -= evicted.size_bytes
            return stored

    def get(self, result_id: str) -> StoredResult:
        with self._lock:
            stored = self._items.get(result_id.strip())
            if stored is None:
                known = ", ".join(list(self._items)[-10:]) or "none yet"
                raise NotFoundError(f"result_id {result_id!r} is unknown or was evicted to save memory "
                                    f"(kept now: {known}); run the query again with run_query")
            self._items.move_to_end(stored.result_id)
            return stored

    @property
    def bytes_used(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)
