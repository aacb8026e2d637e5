"""Values as evidence for join links (tools/search/keys.py infers them from names): how many of a
column's sampled distinct values the column it points at holds. A link whose values are found is
confirmed, one whose values are mostly missing is demoted, and between tables no name connects, a
column whose values another table's key holds is offered as a link of its own. Sampling is bounded
(100 distinct values, a big table read through a sample, a deadline per call, a timeout per query)
and its results are kept with the catalog, so a refresh drops them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import replace

from flexsql.errors import QueryTimeout
from flexsql.tools.engines import FetchLimits, Source, TableInfo
from flexsql.tools.search import keys
from flexsql.tools.search.keys import CatalogLinks, KeyLink, compatible, type_family
from flexsql.tools.values.sampling import sample_from

VALUE_SAMPLE = 100  # distinct values of the referencing column checked against the referenced one
VALUE_READ_ROWS = 100_000  # rows read from a big table to find them
VALUE_QUERY_TIMEOUT_S = 1.0  # a query given less time than this and timing out may be tried again
VALUE_MIN_SAMPLED = 3  # fewer distinct values than this prove nothing
VALUE_CONFIRM = 0.9  # this share of sampled values found: the link is confirmed
VALUE_DENY = 0.5  # under this share: the link is demoted
_FLOAT = re.compile(r"real|floa|doub")  # measures, not keys


def _overlap_sql(source: Source, table: TableInfo, column: str, ref: TableInfo, ref_column: str) -> str:
    engine = source.engine
    col, ref_col = engine.quote(column), engine.quote(ref_column)
    from_item = engine.quote_table(table)
    if engine.needs_sample(table.row_estimate):
        from_item, _ = sample_from(table, engine, VALUE_READ_ROWS, [column])
    return (
        f"SELECT count(*), count(CASE WHEN v IN (SELECT {ref_col} FROM {engine.quote_table(ref)}) THEN 1 END) "
        f"FROM (SELECT DISTINCT {col} AS v FROM {from_item} WHERE {col} IS NOT NULL LIMIT {VALUE_SAMPLE}) AS picked"
    )


def value_overlap(
    source: Source, table: TableInfo, column: str, ref: TableInfo, ref_column: str, timeout_s: float
) -> tuple[int, float] | None:
    """(values sampled, share of them found in `ref.ref_column`), remembered with the catalog; None when
    the query failed or ran out of time."""
    cache: dict[tuple[str, str, str, str], tuple[int, float] | None] = source.catalog().derived(
        "key_values", dict
    )
    key = (table.qualified, column, ref.qualified, ref_column)
    if key in cache:
        return cache[key]
    try:
        sql = _overlap_sql(source, table, column, ref, ref_column)
        row = source.execute(sql, timeout_s=timeout_s, limits=FetchLimits(max_rows=1, count_limit=1)).rows[0]
        sampled, found = int(row[0] or 0), int(row[1] or 0)
        result: tuple[int, float] | None = (sampled, found / sampled if sampled else 0.0)
    except QueryTimeout:  # kept only when the query had its full time: a shorter try may be retried
        if timeout_s >= VALUE_QUERY_TIMEOUT_S:
            cache[key] = None
        return None
    except Exception:  # evidence is optional: an odd column leaves the names to decide
        result = None
    cache[key] = result
    return result


def weigh_by_values(link: KeyLink, sampled: int, share: float) -> KeyLink:
    """An inferred link re-weighted by how many of its sampled values the referenced column holds."""
    if not sampled:
        return link
    w = link.weight
    if share >= VALUE_CONFIRM and sampled >= VALUE_MIN_SAMPLED:
        w = w + (1.0 - w) * keys.RULES.confirmed
    elif share < VALUE_DENY:
        w = w * keys.RULES.denied
    evidence = f"{link.evidence}; values overlap {share:.0%} (sampled)"
    return replace(link, weight=round(min(w, 0.97), 4), evidence=evidence)


def discover_by_values(
    source: Source, graph: CatalogLinks, a: int, b: int, deadline: float, timeout_s: float
) -> list[KeyLink]:
    """Links between two tables no name connects, found by values alone: a column of one whose sampled
    values the other's key holds (`wedding.male_id` -> `people.people_id`). Only columns that reference
    nothing by name are tried, against key columns, until `deadline`."""
    tables = source.catalog().tables
    out: list[KeyLink] = []
    if keys.RULES.value_only <= 0:
        return out
    for x, y in ((a, b), (b, a)):
        for key, _sure in graph.keys.get(y, []):
            ref = tables[y].column(key)
            for col in tables[x].columns:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return out
                if (x, col.name.lower()) in graph.referencing or not compatible(col, ref):
                    continue
                if _FLOAT.search(col.type.lower()) or type_family(col.type) == "time":
                    continue
                found = value_overlap(source, tables[x], col.name, tables[y], key, min(timeout_s, remaining))
                if found and found[0] >= VALUE_MIN_SAMPLED and found[1] >= VALUE_CONFIRM:
                    why = f"values overlap {found[1]:.0%} (sampled)"
                    weight = keys.RULES.value_only * found[1]
                    out.append(KeyLink(x, (col.name,), y, (key,), "inferred", why, round(weight, 4)))
    out.sort(key=lambda link: -link.weight)
    return out


def confirm_by_values(
    source: Source, links: Sequence[KeyLink], deadline: float, timeout_s: float
) -> list[KeyLink]:
    """The links of one pair of tables with values sampled as evidence for the inferred ones (declared
    keys are trusted as they are), best first. Stops sampling at `deadline` (time.monotonic())."""
    tables = source.catalog().tables
    out: list[KeyLink] = []
    for link in links:
        remaining = deadline - time.monotonic()
        if link.declared or len(link.columns) != 1 or remaining <= 0 or "(sampled)" in link.evidence:
            out.append(link)
            continue
        found = value_overlap(
            source,
            tables[link.table],
            link.columns[0],
            tables[link.ref_table],
            link.ref_columns[0],
            min(timeout_s, remaining),
        )
        out.append(weigh_by_values(link, *found) if found else link)
    out.sort(key=lambda link: -link.weight)
    return out


__all__ = ["confirm_by_values", "discover_by_values", "value_overlap", "weigh_by_values"]
