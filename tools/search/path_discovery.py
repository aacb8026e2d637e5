"""The nested paths search ranks as columns, found before the first search of a catalog.

A question that names a key inside a JSON or VARIANT column ("the name and quantity of the items
bought") must reach `ITEMS[].item_name` whether or not describe_table ran on its table first. So the
first search samples the nested columns of every table and family (tools/engines/nested_sample.py,
shared with describe_table) within SEARCH_PATHS_BUDGET_S; what the budget leaves out, describe_table and
the value index add later (the search index is rebuilt when paths are added). Text columns are probed
for JSON only where reading is free and the catalog small enough; a warehouse types its nested columns.
"""

from __future__ import annotations

import threading
import time

from flexsql.tools.engines import Source, TableInfo
from flexsql.tools.engines.families import families
from flexsql.tools.engines.nested_sample import nested_paths
from flexsql.tools.engines.paths import nested_type, text_type

SEARCH_PATHS_BUDGET_S = 5.0  # the first search of a catalog spends at most this sampling nested columns
TEXT_PROBE_COLUMNS = 2000  # text columns probed for JSON at most (over the catalog, a family's once)


class _Done:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done = False


def units(tables: list[TableInfo]) -> list[list[TableInfo]]:
    """The tables search ranks as one entry: each family's shards (oldest first), each other table alone."""
    grouped: set[int] = set()
    out: list[list[TableInfo]] = []
    for fam in families(tables):
        out.append([tables[i] for i in fam.members])
        grouped.update(fam.members)
    out += [[t] for i, t in enumerate(tables) if i not in grouped]
    return out


def discover_paths(source: Source, budget_s: float = SEARCH_PATHS_BUDGET_S) -> None:
    """Sample the nested columns of every table and family of the source's catalog, once per catalog
    load (a concurrent first search waits for it), within `budget_s`."""
    catalog = source.catalog()
    state = catalog.derived("search.path_discovery", _Done)
    with state.lock:
        if state.done:
            return
        try:
            _discover(source, catalog.tables, budget_s)
        finally:
            state.done = True


def _discover(source: Source, tables: list[TableInfo], budget_s: float) -> None:
    groups = units(tables)
    texts = sum(sum(1 for c in g[-1].columns if text_type(c.type)) for g in groups)
    probe_text = not source.engine.cloud and texts <= TEXT_PROBE_COLUMNS
    deadline = time.monotonic() + budget_s
    for members in groups:
        has = any(nested_type(c.type) or (probe_text and text_type(c.type)) for c in members[-1].columns)
        if not has:
            continue
        left = deadline - time.monotonic()
        if left <= 0:
            return
        nested_paths(source, members, left, probe_text=probe_text)


__all__ = ["SEARCH_PATHS_BUDGET_S", "discover_paths", "units"]
