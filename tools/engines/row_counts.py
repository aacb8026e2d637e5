"""Table sizes in the catalog: counted where counting is cheap, the engine's statistics elsewhere.

A model plans joins and sampling on these figures, so they must be right to a factor of two, never a
key's maximum (SQLite's max(rowid) said 83,814,225 rows for a 15-row table). Each engine loads its
statistics (sqlite_stat1 or a sample of the B-tree's pages, pg_class.reltuples, DuckDB's table
metadata; Snowflake keeps exact counts) and then counts exactly, smallest tables first, every table
its statistics put at COUNT_UP_TO rows or fewer, for at most COUNT_BUDGET_S seconds in all. A table
left uncounted keeps its estimate, marked as one and saying where it came from.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flexsql.tools.engines.catalog import TableInfo
    from flexsql.tools.engines.engine import Engine

COUNT_UP_TO = 5_000_000  # tables estimated at most this big are counted (DuckDB/SQLite: milliseconds)
COUNT_BUDGET_S = 2.0  # seconds one catalog load spends counting, over all its tables
BATCH = 64  # tables counted by one statement (a UNION ALL of count(*))

RunCount = Callable[[str, float], Sequence[Sequence[Any]]]
"""Runs one counting statement with a timeout in seconds, returning its rows; raises on failure."""


def count_rows(
    tables: Sequence[TableInfo], engine: Engine, run: RunCount, budget_s: float = COUNT_BUDGET_S
) -> int:
    """Count the rows of `tables` (already chosen and ordered, smallest first) exactly, in batches, until
    `budget_s` is spent; a counted table's estimate becomes its count (rows_exact). A batch that fails
    (a table this role may not read) is counted table by table. Returns how many were counted."""
    deadline = time.monotonic() + budget_s
    counted = 0
    for start in range(0, len(tables), BATCH):
        batch = tables[start : start + BATCH]
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            found = run(_count_sql(engine, batch), left)
        except Exception:  # one table refused or too slow: the others of the batch one by one
            found = []
            for i, table in enumerate(batch):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    found += [(i, n) for _, n in run(_count_sql(engine, [table]), left)]
                except Exception:
                    continue
        for i, n in found:
            table = batch[int(i)]
            table.row_estimate, table.rows_exact, table.rows_from = int(n), True, None
            counted += 1
    return counted


def _count_sql(engine: Engine, tables: Sequence[TableInfo]) -> str:
    return "\nUNION ALL\n".join(
        f"SELECT {i} AS i, count(*) AS n FROM {engine.quote_table(t)}" for i, t in enumerate(tables)
    )


def worth_counting(tables: Sequence[TableInfo], size: Callable[[TableInfo], int | None]) -> list[TableInfo]:
    """The base tables whose size (an estimate of rows, or of anything that orders them alike) is at
    most COUNT_UP_TO or unknown, smallest first (unknown last)."""
    chosen = [t for t in tables if t.kind == "table" and (size(t) or 0) <= COUNT_UP_TO]
    return sorted(chosen, key=lambda t: (size(t) is None, size(t) or 0))


def rows_text(rows: int | None, exact: bool) -> str:
    """'15 rows' for a count, '≈2,003 rows' for an estimate; '' when there is neither."""
    if rows is None:
        return ""
    return f"{'' if exact else '≈'}{rows:,} row{'' if rows == 1 and exact else 's'}"


def estimate_note(sources: Sequence[str | None]) -> str:
    """One line saying where the '≈' figures came from (each source once), or '' when every figure
    shown is a count."""
    named = list(dict.fromkeys(s for s in sources if s))
    if not named:
        return ""
    return f"≈: an estimate ({'; '.join(named)}); a figure without ≈ is a count"


__all__ = ["COUNT_BUDGET_S", "COUNT_UP_TO", "count_rows", "estimate_note", "rows_text", "worth_counting"]
