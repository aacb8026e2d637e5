"""Leaf values of nested columns for the value index: the text keys found inside JSON, VARIANT,
STRUCT and MAP columns (and inside arrays of objects) are indexed like columns, named by their path
(`traffic.source`, `hits[].page.pagePath`), so find_values('(direct)') names the path that holds it.

The paths come from the column's first rows (tools/engines/paths.py infers them); each text leaf is then
grouped like a text column (index_scan.py), through the engine's own path syntax.
"""

from __future__ import annotations

from typing import Any

from flexsql.errors import InvalidArgument, QueryError, QueryTimeout
from flexsql.tools.engines import Engine, TableInfo
from flexsql.tools.engines.paths import as_document, infer_paths, nested_type, parse_path, path_sql, text_type
from flexsql.tools.values.sampling import SAMPLE_ROWS, needs_sample, sample_from

PATH_SAMPLE_ROWS = 200  # rows read to find the paths of a table's nested columns
MAX_TABLE_PATHS = 30  # text leaves indexed per table


def nested_entries(
    table: TableInfo, engine: Engine, run: Any, timeout_s: float, cap: int, blobs: set[str]
) -> list[tuple[dict[str, Any], list[tuple[str, int]], bool]]:
    """(index entry, values by frequency, sampled) for each text leaf of the table's nested columns:
    those of a nested type, and the text columns in `blobs` (long values: JSON kept as text?).
    `run(sql, timeout_s, max_rows)` runs a query; a failure leaves the leaf out (the columns stay)."""
    nested = [c for c in table.columns if nested_type(c.type) or (text_type(c.type) and c.name in blobs)]
    if not nested:
        return []
    tsql = engine.quote_table(table)
    try:
        rows = run(
            f"SELECT {', '.join(engine.quote(c.name) for c in nested)} FROM {tsql} LIMIT {PATH_SAMPLE_ROWS}",
            timeout_s,
            PATH_SAMPLE_ROWS,
        )
    except QueryError:
        return []
    leaves = []
    for i, col in enumerate(nested):
        values = [row[i] for row in rows]
        if not nested_type(col.type) and not any(as_document(v) is not None for v in values[:20]):
            continue  # a text column that holds no JSON
        leaves += [(col, p.path) for p in infer_paths(col.name, values) if p.type == "VARCHAR"]
    sampled = needs_sample(table, engine)
    from_sql = sample_from(table, engine, SAMPLE_ROWS)[0] if sampled else tsql
    out = []
    for col, path in leaves[:MAX_TABLE_PATHS]:
        try:
            spec = parse_path(path)
        except InvalidArgument:  # through two arrays: listed by describe_table, not read by value tools
            continue
        if spec is None:
            continue
        inner = path_sql(engine, from_sql, col, spec, "v")
        sql = f"SELECT v, count(*) AS n FROM ({inner}) AS p WHERE v IS NOT NULL GROUP BY v ORDER BY 2 DESC, 1 LIMIT {cap + 1}"
        try:
            found = run(sql, timeout_s, cap + 1)
        except (QueryError, QueryTimeout):
            continue
        entry: dict[str, Any] = {
            "name": path,
            "type": "VARCHAR",
            "status": "skipped",
            "reason": None,
            "sampled": False,
            "complete": False,
            "values": [],
        }
        out.append((entry, [(str(v), int(n)) for v, n in found if v is not None], sampled))
    return out


__all__ = ["nested_entries"]
