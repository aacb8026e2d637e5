"""The keys inside a table's nested columns, found by samples that look for values.

The first rows of one shard are a poor sample of a sharded family: a day whose events carry no items
showed `ITEMS JSON e.g. []` and no key, while the keys (`ITEMS[].item_name`, `ECOMMERCE.transaction_id`)
sat in other shards. So the paths of a family (or of one column set of it) are the union over its
shards — up to SHARDS_SAMPLED of them, spread over its range — and each nested column is read where it
holds something: rows whose value is a non-empty object or array, not the first rows. Text columns are
first probed for JSON (on engines where reading is free; a warehouse types its nested columns).

One discovery per set of shards and catalog load (cached); describe_table and search_schema share it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from flexsql.errors import FlexSQLError
from flexsql.tools.engines.fetch import FetchLimits
from flexsql.tools.engines.paths import NestedPath, as_document, infer_paths, nested_type, text_type

if TYPE_CHECKING:
    from flexsql.tools.engines.catalog import Column, TableInfo
    from flexsql.tools.engines.source import Source

SHARDS_SAMPLED = 24  # shards of a family read, spread over its range (first and last included)
VALUES_PER_COLUMN = 96  # non-empty values read per nested column, over the shards read
PROBE_ROWS = 50  # first rows read (over the shards read) to find the text columns that hold JSON
PATHS_KEPT = 400  # paths kept per column: search indexes them all, describe_table lists the first ones
BRANCHES = 48  # (shard, column) reads per statement
PROBE_MAX_COLUMNS = 400  # text columns probed for JSON per set of shards
VALUE_BYTES = 256 * 1024  # a sampled value's longest text kept (a cut document still yields its keys)


@dataclass
class NestedSample:
    """The paths found inside each nested column of a set of shards (or one table)."""

    paths: dict[str, list[NestedPath]] = field(default_factory=dict)  # column -> paths, most often first
    shards_read: int = 0
    shards: int = 0
    empty: int = 0  # shards counted empty (nothing to read there)
    complete: bool = True  # False: the time budget ran out (or a read failed) before every read ran


def spread(items: Sequence[TableInfo], most: int) -> list[TableInfo]:
    """At most `most` of `items`, evenly spread, the first and the last included."""
    if len(items) <= most:
        return list(items)
    if most <= 1:
        return [items[-1]]
    step = (len(items) - 1) / (most - 1)
    picked = sorted({round(i * step) for i in range(most)})
    return [items[i] for i in picked]


def _columns(shards: Sequence[TableInfo]) -> dict[str, Column]:
    """Every column of the shards by lower-cased name (the first spelling and type seen)."""
    out: dict[str, Column] = {}
    for t in shards:
        for c in t.columns:
            out.setdefault(c.name.lower(), c)
    return out


def sample_nested(
    source: Source, shards: Sequence[TableInfo], budget_s: float, probe_text: bool = True
) -> NestedSample:
    """The paths inside the nested columns of `shards` (one table, one column set, or a family), over up
    to SHARDS_SAMPLED shards: their first rows first (which also find the text columns that hold JSON,
    when `probe_text`), then, for each shard and column whose first rows held no non-empty document,
    rows that hold one. Reads stop when `budget_s` is spent."""
    deadline = time.monotonic() + budget_s
    # shards counted empty hold no key: the sample spreads over the others
    holding = [t for t in shards if not (t.rows_exact and t.row_estimate == 0)] or list(shards[-1:])
    picked = spread(holding, SHARDS_SAMPLED)
    columns = _columns(picked)
    result = NestedSample(shards=len(shards), empty=len(shards) - len(holding))
    nested = {k: c for k, c in columns.items() if nested_type(c.type)}
    texts = {k: c for k, c in columns.items() if k not in nested and text_type(c.type)} if probe_text else {}
    probed = list(nested.values()) + list(texts.values())[:PROBE_MAX_COLUMNS]
    if not probed:
        return result
    values: dict[str, list[str]] = {c.name.lower(): [] for c in probed}
    held: set[tuple[str, str]] = set()  # (shard, column) whose first rows held a non-empty document
    read: set[str] = set()
    exhausted: set[str] = set()  # shards whose first rows were all their rows: nothing more to look for
    _probe(source, picked, probed, deadline, result, values, held, read, exhausted)
    # text columns that held no document in any first row are no JSON
    nested.update({k: c for k, c in texts.items() if values.get(k)})
    gaps = [
        (k, shard)
        for shard in picked
        if shard.qualified not in exhausted
        for k in nested
        if (shard.qualified, k) not in held
    ]
    _fill(source, gaps, nested, deadline, result, values, read)
    result.shards_read = len(read)
    for key, col in nested.items():
        found = infer_paths(col.name, values[key], limit=PATHS_KEPT)
        if found:
            result.paths[col.name] = found
    return result


def _nonempty(text: str) -> str:
    return f"{text} IS NOT NULL AND length({text}) > 2 AND {text} NOT IN ('null', '{{}}', '[]')"


def _fill(
    source: Source,
    gaps: Sequence[tuple[str, TableInfo]],
    nested: dict[str, Column],
    deadline: float,
    result: NestedSample,
    values: dict[str, list[str]],
    read: set[str],
) -> None:
    """For each (column, shard) whose first rows held nothing, rows whose value is a non-empty document."""
    engine = source.engine
    per_shard = max(2, VALUES_PER_COLUMN // max(len({s.qualified for _k, s in gaps}), 1))
    branches: list[tuple[str, TableInfo, Column]] = []
    for key, shard in gaps:
        col = next((c for c in shard.columns if c.name.lower() == key), None)
        if col is not None:
            branches.append((key, shard, col))
    for start in range(0, len(branches), BRANCHES):
        left = deadline - time.monotonic()
        if left <= 0:
            result.complete = False
            return
        chunk = branches[start : start + BRANCHES]
        selects = []
        for i, (key, shard, col) in enumerate(chunk):
            text = engine.json_text(engine.quote(col.name), col.type)
            condition = _nonempty(text)
            if not nested_type(nested[key].type):  # JSON kept as text: values that look like a document
                condition += f" AND ({text} LIKE '{{%' OR {text} LIKE '[%')"
            selects.append(
                f"SELECT * FROM (SELECT {i} AS b, {text} AS v FROM {_sampled(source, shard)} WHERE {condition} "
                f"LIMIT {per_shard}) AS flexsql_b{i}"
            )
        try:
            rows = source.execute(
                "\nUNION ALL\n".join(selects),
                timeout_s=max(left, 0.05),
                limits=FetchLimits(
                    max_rows=per_shard * len(chunk),
                    count_limit=per_shard * len(chunk) + 1,
                    max_cell_bytes=VALUE_BYTES,
                ),
            ).rows
        except FlexSQLError:
            result.complete = False
            continue
        for b, v in rows:
            if isinstance(v, str):
                values[chunk[int(b)][0]].append(v)
        read.update(shard.qualified for _k, shard, _c in chunk)


def _sampled(source: Source, shard: TableInfo) -> str:
    """The shard's FROM item: a big one through the engine's block sample, so that a column empty in
    every row is not looked for through the whole table."""
    engine = source.engine
    table_sql = engine.quote_table(shard)
    if engine.needs_sample(shard.row_estimate) and shard.row_estimate:
        pct = max(0.001, min(100.0, 100.0 * 200_000 / shard.row_estimate))
        clause = engine.sample_clause(table_sql, shard.kind, f"{pct:.4f}".rstrip("0").rstrip("."))
        if clause:
            return clause
    return table_sql


def _probe(
    source: Source,
    shards: Sequence[TableInfo],
    columns: Sequence[Column],
    deadline: float,
    result: NestedSample,
    values: dict[str, list[str]],
    held: set[tuple[str, str]],
    read: set[str],
    exhausted: set[str],
) -> None:
    """The first rows of each shard (PROBE_ROWS over them all): the documents of `columns` (nested ones
    as JSON text), which (shard, column) held a non-empty one, and which shards had no more rows."""
    engine = source.engine
    per_shard = max(3, PROBE_ROWS // len(shards))
    for start in range(0, len(shards), BRANCHES):
        left = deadline - time.monotonic()
        if left <= 0:
            result.complete = False
            return
        chunk = shards[start : start + BRANCHES]
        selects = []
        for i, shard in enumerate(chunk):
            have = {c.name.lower(): c for c in shard.columns}
            items = [
                engine.json_text(engine.quote(have[k].name), have[k].type) if k in have else "NULL"
                for k in (c.name.lower() for c in columns)
            ]
            selects.append(
                f"SELECT * FROM (SELECT {i} AS s, {', '.join(items)} FROM {engine.quote_table(shard)} "
                f"LIMIT {per_shard}) AS flexsql_p{i}"
            )
        try:
            rows = source.execute(
                "\nUNION ALL\n".join(selects),
                timeout_s=max(left, 0.05),
                limits=FetchLimits(max_rows=per_shard * len(selects), max_cell_bytes=VALUE_BYTES),
            ).rows
        except FlexSQLError:
            result.complete = False
            continue
        read.update(t.qualified for t in chunk)
        per: dict[int, int] = {}
        for row in rows:
            per[int(row[0])] = per.get(int(row[0]), 0) + 1
        exhausted.update(t.qualified for i, t in enumerate(chunk) if per.get(i, 0) < per_shard)
        for row in rows:
            shard = chunk[int(row[0])]
            for col, value in zip(columns, row[1:], strict=False):
                if isinstance(value, str) and value[:1] in ("{", "["):
                    doc = as_document(value)
                    if doc:  # a non-empty object or array
                        key = col.name.lower()
                        values[key].append(value)
                        held.add((shard.qualified, key))


# -- cached per catalog -------------------------------------------------------------------------------


class _Samples:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_shards: dict[tuple[str, ...], NestedSample] = {}
        self.building: dict[tuple[str, ...], threading.Event] = {}


def nested_paths(
    source: Source, shards: Sequence[TableInfo], budget_s: float, probe_text: bool = True
) -> NestedSample:
    """sample_nested, once per set of shards and catalog load (a concurrent caller waits for it)."""
    from flexsql.tools.engines.paths import remember_paths

    catalog = source.catalog()
    cache = catalog.derived("engines.nested_sample", _Samples)
    names = tuple(t.qualified for t in shards)
    key = (*names, "text" if probe_text else "typed")
    while True:
        with cache.lock:
            # a sample that probed text columns answers one that would not have
            for have in (key, (*names, "text")):
                if have in cache.by_shards:
                    return cache.by_shards[have]
            event = cache.building.get(key)
            if event is None:
                event = cache.building[key] = threading.Event()
                break
        event.wait(budget_s + 1)
    try:
        sample = sample_nested(source, shards, budget_s, probe_text)
        with cache.lock:
            cache.by_shards[key] = sample
        if shards:  # search indexes the paths by table: a family's under its first shard
            remember_paths(
                catalog,
                shards[0].qualified,
                [(p.path, p.type) for found in sample.paths.values() for p in found],
                typed=True,
            )
        return sample
    finally:
        with cache.lock:
            cache.building.pop(key, None)
        event.set()


__all__ = ["NestedSample", "SHARDS_SAMPLED", "nested_paths", "sample_nested", "spread"]
