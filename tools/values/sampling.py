"""Reading part of a table too big to scan: when to sample, and the FROM item that does it.

The value index, distinct_values and profile_column all read big tables through a sample and say so.
"""

from __future__ import annotations

from collections.abc import Iterable

from flexsql.tools.engines import Engine, TableInfo

# Above these row estimates a table is sampled instead of scanned: each engine's scan_above_rows,
# kept in one dict so that a test or a benchmark can lower an engine's threshold.
SAMPLE_ROWS = 1_000_000


def sample_from(
    table: TableInfo, engine: Engine, rows: int, columns: Iterable[str] | None = None
) -> tuple[str, str]:
    """A FROM item reading about `rows` rows of a big table, and how it samples (for the user).

    The engine's sampling clause where it has one (block-level where it can, so it does not read
    the whole table) and the table's size is estimated; otherwise the first rows."""
    tsql = engine.quote_table(table)
    estimate = table.row_estimate or 0
    pct = 100.0 if estimate <= 0 else min(100.0, max(0.001, 100.0 * rows / estimate))
    pct_text = f"{pct:.4f}".rstrip("0").rstrip(".")
    # a family's union or a path's subquery is no table the engine samples: their first rows instead
    samplable = estimate and not table.shards and not table.from_sql
    clause = engine.sample_clause(tsql, table.kind, pct_text) if samplable else None
    if clause:
        return clause, f"~{pct_text}% {engine.sample_label}"
    cols = ", ".join(engine.quote(c) for c in columns) if columns else "*"
    return f"(SELECT {cols} FROM {tsql} LIMIT {int(rows)}) AS sampled", f"first {int(rows):,} rows"


def needs_sample(table: TableInfo, engine: Engine) -> bool:
    return engine.needs_sample(table.row_estimate)
