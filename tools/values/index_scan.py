"""What the value index reads from a table (index.py says what goes in and why): each text
column's most frequent values, or the reason it is skipped (not text, free text, id-like).

Small tables are read in one GROUP BY over all their columns; bigger ones column by column after a
pre-pass on their first rows, sampled when too big to scan (or when a scan times out).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from flexsql.errors import QueryError, QueryTimeout
from flexsql.tools.engines import Engine, TableInfo
from flexsql.tools.engines.paths import as_document
from flexsql.tools.values.column_sql import is_text_type
from flexsql.tools.values.nested import nested_entries
from flexsql.tools.values.normalize import split_identifier
from flexsql.tools.values.sampling import SAMPLE_ROWS, needs_sample, sample_from

CAP_PER_COLUMN = 1000  # distinct values kept per column (the most frequent ones)
FREE_TEXT_CHARS = 60  # average length above which a column is free text, not a value domain
MAX_VALUE_CHARS = 200  # longer single values are not indexed
SMALL_TABLE_ROWS = 20_000  # at most this many rows: one query for all columns, no pre-pass
STATS_ROWS = 10_000  # rows read by the pre-pass that spots free-text and id-like columns

Run = Callable[[str, float, int], list[tuple[Any, ...]]]  # (sql, timeout_s, max_rows) -> rows

_ID_WORDS = {"id", "ids", "uuid", "guid", "hash", "md5", "sha", "sha1", "sha256", "token", "checksum"}


def id_like_name(name: str) -> bool:
    words = split_identifier(name)
    return bool(words) and words[-1] in _ID_WORDS


def code_like(values: list[str]) -> bool:
    """Values that look like generated codes (no spaces, with digits or hex): ids, not a domain."""
    if not values:
        return False
    shaped = sum(1 for v in values if " " not in v.strip() and re.search(r"\d", v))
    return shaped >= 0.9 * len(values)


def scan_table(table: TableInfo, engine: Engine, run: Run, timeout_s: float) -> list[dict[str, Any]]:
    """Every column of the table as an index entry (name, type, status, reason, sampled, complete,
    values): text columns read with their most frequent values, the others marked skipped and why."""
    columns: list[dict[str, Any]] = []
    candidates = []
    for col in table.columns:
        entry: dict[str, Any] = {
            "name": col.name,
            "type": col.type,
            "status": "skipped",
            "reason": None,
            "sampled": False,
            "complete": False,
            "values": [],
        }
        columns.append(entry)
        if not is_text_type(col.type, engine):
            entry["reason"] = "not text"
        elif id_like_name(col.name):
            entry["reason"] = "id-like"
        else:
            candidates.append(entry)
    if candidates:
        small = table.row_estimate is not None and table.row_estimate <= SMALL_TABLE_ROWS
        if small:
            _scan_small(table, engine, candidates, timeout_s, run)
        else:
            _scan_large(table, engine, candidates, timeout_s, run)
    # the text leaves inside nested columns, each an entry named by its path (traffic.source)
    # JSON kept as text: long values (free text?), or values that are JSON documents however short
    blobs = {e["name"] for e in columns if (e["reason"] or "").startswith("free text") or _holds_json(e)}
    for entry, values, sampled in nested_entries(table, engine, run, timeout_s, CAP_PER_COLUMN, blobs):
        _accept(entry, values, sampled=sampled, unique_ratio=None, over_cap=len(values) > CAP_PER_COLUMN)
        columns.append(entry)
    return columns


def _holds_json(entry: dict[str, Any]) -> bool:
    return any(v[:1] in ("{", "[") and as_document(v) for v, _n in entry["values"][:20])


def _scan_small(
    table: TableInfo, engine: Engine, candidates: list[dict[str, Any]], timeout_s: float, run: Run
) -> None:
    """Every candidate column's distinct values from one short GROUP BY over all of them (small
    tables only; the counts per column are summed here). Falls back to per-column scans when the
    table turns out bigger than its estimate."""
    idents = [engine.quote(e["name"]) for e in candidates]
    sql = (
        f"SELECT {', '.join(engine.as_text(c) for c in idents)}, count(*) "
        f"FROM {engine.quote_table(table)} GROUP BY {', '.join(idents)}"
    )
    budget = 2 * (table.row_estimate or 0) + 1000
    rows = run(sql, timeout_s, budget)
    if len(rows) >= budget:
        _scan_large(table, engine, candidates, timeout_s, run)
        return
    grouped: list[dict[str, int]] = [{} for _ in candidates]
    for row in rows:
        n = int(row[-1])
        for bucket, v in zip(grouped, row[:-1], strict=False):
            if v is not None:
                key = str(v)
                bucket[key] = bucket.get(key, 0) + n
    for entry, values in zip(candidates, grouped, strict=True):
        _accept(
            entry,
            sorted(values.items(), key=lambda kv: (-kv[1], kv[0])),
            sampled=False,
            unique_ratio=None,
        )


def _scan_large(
    table: TableInfo, engine: Engine, candidates: list[dict[str, Any]], timeout_s: float, run: Run
) -> None:
    tsql = engine.quote_table(table)
    # pre-pass on the first rows: free text and nearly-unique columns are spotted without a scan
    ratios: dict[str, float] = {}
    try:
        aggs = []
        for entry in candidates:
            csql = engine.quote(entry["name"])
            aggs.append(f"count({csql}), count(DISTINCT {csql}), avg(length({engine.as_text(csql)}))")
        inner = ", ".join(engine.quote(e["name"]) for e in candidates)
        row = run(
            f"SELECT {', '.join(aggs)} FROM (SELECT {inner} FROM {tsql} LIMIT {STATS_ROWS}) AS head",
            timeout_s,
            1,
        )[0]
        for i, entry in enumerate(candidates):
            nonnull, distinct, avg_len = row[3 * i], row[3 * i + 1], row[3 * i + 2]
            if avg_len is not None and float(avg_len) > FREE_TEXT_CHARS:
                entry["reason"] = f"free text (avg {float(avg_len):.0f} chars)"
            elif nonnull:
                ratios[entry["name"]] = int(distinct) / int(nonnull)
    except QueryError:
        pass  # the per-column scans below still decide
    for entry in candidates:
        if entry["reason"]:
            continue
        csql = engine.quote(entry["name"])
        sampled = needs_sample(table, engine)
        for attempt in range(2):
            if sampled:
                from_sql, _how = sample_from(table, engine, SAMPLE_ROWS, [entry["name"]])
            else:
                from_sql = tsql
            sql = (
                f"SELECT {engine.as_text(csql)} AS v, count(*) AS n FROM {from_sql} "
                f"WHERE {csql} IS NOT NULL GROUP BY {csql} ORDER BY 2 DESC, 1 LIMIT {CAP_PER_COLUMN + 1}"
            )
            try:
                rows = run(sql, timeout_s, CAP_PER_COLUMN + 1)
            except QueryTimeout:
                if sampled or attempt:
                    entry["status"], entry["reason"] = "error", f"timed out after {timeout_s:g} s"
                    break
                sampled = True  # too big to scan in time: sample it instead
                continue
            except QueryError as exc:
                entry["status"], entry["reason"] = "error", str(exc).splitlines()[0][:200]
                break
            merged: dict[str, int] = {}
            for v, n in rows:
                if v is not None:
                    merged[str(v)] = merged.get(str(v), 0) + int(n)
            _accept(
                entry,
                sorted(merged.items(), key=lambda kv: (-kv[1], kv[0])),
                sampled=sampled,
                unique_ratio=ratios.get(entry["name"]),
                over_cap=len(rows) > CAP_PER_COLUMN,
            )
            break


def _accept(
    entry: dict[str, Any],
    values: list[tuple[str, int]],
    *,
    sampled: bool,
    unique_ratio: float | None,
    over_cap: bool | None = None,
) -> None:
    """Keep a column's values unless they are free text or generated codes."""
    over = len(values) > CAP_PER_COLUMN if over_cap is None else over_cap
    kept = values[:CAP_PER_COLUMN]
    total = sum(n for _, n in kept)
    if total and sum(len(v) * n for v, n in kept) / total > FREE_TEXT_CHARS:
        entry["reason"] = f"free text (avg {sum(len(v) * n for v, n in kept) / total:.0f} chars)"
        return
    nearly_unique = (unique_ratio is not None and unique_ratio > 0.95) or (over and kept and kept[0][1] == 1)
    if nearly_unique and over and code_like([v for v, _ in kept[:200]]):
        entry["reason"] = "id-like (unique codes)"
        return
    entry["status"] = "indexed"
    entry["sampled"] = sampled
    entry["complete"] = not over and not sampled
    entry["values"] = [(v, n) for v, n in kept if len(v) <= MAX_VALUE_CHARS]
