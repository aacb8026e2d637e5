"""distinct_values: a column's values by frequency, with counts.

It queries the table, sampling it (and saying so) when it is too big to scan, or when a full scan
runs past the timeout. profile_column reads its most frequent values through the same query.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from flexsql.errors import QueryTimeout
from flexsql.tools.engines import FetchLimits, Source, TableInfo
from flexsql.tools.runtime.context import SourceName, ToolContext
from flexsql.tools.runtime.registry import ToolArgs, ToolResult, tool
from flexsql.tools.runtime.render import TextBudget, cell_text, jsonable
from flexsql.tools.runtime.schema import unlisted
from flexsql.tools.values.column_sql import cut_sql, cut_value, is_text_type, like_pattern, value_sql
from flexsql.tools.values.sampling import SAMPLE_ROWS, needs_sample, sample_from
from flexsql.tools.values.scope import MAX_TEXT_CHARS, resolve_column


class DistinctValue(BaseModel):
    value: Any
    count: int


class DistinctValuesResult(ToolResult):
    source: str
    table: str
    column: str
    type: str
    contains: str | None = None
    values: list[DistinctValue]
    distinct_total: int  # distinct values (matching `contains`) in what was read
    truncated: bool
    sampled: bool = False
    sample: str | None = None  # how it was sampled

    def to_text(self, budget: TextBudget = TextBudget()) -> str:
        where = f" containing {self.contains!r}" if self.contains else ""
        head = f"{self.table}.{self.column} ({self.type}): {self.distinct_total:,} distinct values{where}"
        if self.sampled:
            head += f" in a sample ({self.sample}; counts are sample counts)"
        if self.truncated:
            head += f", top {len(self.values)} by frequency (truncated: true)"
        lines = [head, "value | count"]
        lines += [f"{cell_text(v.value, 120)} | {v.count:,}" for v in self.values]
        return "\n".join(lines)


def group_counts(
    src: Source, table: TableInfo, column: str, ctype: str, contains: str | None, limit: int, timeout_s: float
) -> tuple[list[tuple[Any, int]], int, bool, str | None]:
    """Values by frequency: ((value, count)…, distinct total, sampled, how)."""
    engine = src.engine
    csql = value_sql(engine.quote(column), ctype, engine)
    where = ""
    if contains:
        pattern = engine.literal(like_pattern(contains))
        where = f" WHERE lower({engine.as_text(csql)}) LIKE {pattern} ESCAPE '!'"
    sampled = needs_sample(table, engine)
    for _attempt in range(2):
        if sampled:
            from_sql, how = sample_from(table, engine, SAMPLE_ROWS, [column])
        else:
            from_sql, how = engine.quote_table(table), None
        shown = csql
        if is_text_type(ctype, engine) or csql != engine.quote(column) or src.engine.dynamic_types:
            shown = cut_sql(csql, ctype, engine)
        sql = (
            f"SELECT v, n, count(*) OVER () AS groups FROM (SELECT {shown} AS v, count(*) AS n FROM {from_sql}"
            f"{where} GROUP BY {csql}) AS g ORDER BY n DESC, v LIMIT {int(limit)}"
        )
        try:
            rows = src.execute(sql, timeout_s=timeout_s, limits=FetchLimits(max_rows=limit)).rows
        except QueryTimeout:
            if sampled:
                raise
            sampled = True
            continue
        total = int(rows[0][2]) if rows else 0
        return [(cut_value(jsonable(v)), int(n)) for v, n, _ in rows], total, sampled, how
    raise AssertionError("unreachable")


class DistinctValues(ToolArgs):
    table: str
    column: str
    contains: str | None = Field(
        None,
        max_length=MAX_TEXT_CHARS,
        description="case-insensitive substring",
        json_schema_extra=unlisted("maxLength"),
    )
    limit: int = Field(20, ge=1, le=100)
    source: SourceName = None


@tool(
    "A column's values by frequency with counts; big tables sampled. Example: "
    'table="orders", column="status".'
)
def distinct_values(ctx: ToolContext, args: DistinctValues) -> DistinctValuesResult:
    """A column's values by frequency, with counts; `contains` filters case-insensitively."""
    table, column, contains, limit = args.table, args.column, args.contains, args.limit
    src, info, col, ctype = resolve_column(ctx, table, column, args.source)
    rows, total, sampled, how = group_counts(
        src, info, col, ctype, contains or None, limit, ctx.limits.query_timeout_s
    )
    return DistinctValuesResult(
        source=src.name,
        table=info.qualified,
        column=col,
        type=ctype,
        contains=contains or None,
        values=[DistinctValue(value=v, count=n) for v, n in rows],
        distinct_total=total,
        truncated=total > len(rows),
        sampled=sampled,
        sample=how,
    )
