"""profile_column: a column's summary (nulls, distinct count, range, lengths, frequent values, patterns).

One aggregate query over the table, sampled (and saying so) when the table is too big to scan or a
full scan runs past the timeout; the frequent values come from distinct_values' grouping query.
"""

from __future__ import annotations

from typing import Any

from flexsql.errors import QueryError, QueryTimeout
from flexsql.tools.engines import FetchLimits, Source, TableInfo
from flexsql.tools.runtime.context import SourceName, ToolContext
from flexsql.tools.runtime.registry import ToolArgs, ToolResult, tool
from flexsql.tools.runtime.render import TextBudget, cell_text, jsonable
from flexsql.tools.values.column_sql import cut_sql, cut_value, is_number_type, is_text_type, value_sql
from flexsql.tools.values.distinct import DistinctValue, group_counts
from flexsql.tools.values.patterns import ValuePattern, looks_like, value_patterns
from flexsql.tools.values.sampling import SAMPLE_ROWS, needs_sample, sample_from
from flexsql.tools.values.scope import resolve_column

APPROX_ABOVE = 5_000_000  # rows above which distinct counts use the engine's approximate aggregate
PROFILE_TOP = 10
PATTERN_VALUES = 1000  # most frequent values the pattern summary reads


class ColumnProfile(ToolResult):
    source: str
    table: str
    column: str
    type: str
    rows: int
    nulls: int
    null_fraction: float
    distinct: int
    distinct_approximate: bool = False
    min: Any = None
    max: Any = None
    avg: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    avg_length: float | None = None
    top_values: list[DistinctValue] = []
    patterns: list[ValuePattern] = []
    looks_like: dict[str, float] = {}  # e.g. {"date": 1.0, "number stored as text": 0.98}
    sampled: bool = False
    sample: str | None = None

    def to_text(self, budget: TextBudget = TextBudget()) -> str:
        approx = "~" if self.distinct_approximate else ""
        head = (
            f"{self.table}.{self.column} ({self.type}): {self.rows:,} rows, {self.nulls:,} null "
            f"({100 * self.null_fraction:.1f}%), {approx}{self.distinct:,} distinct"
        )
        if self.sampled:
            head += f" — sampled ({self.sample}): figures describe the sample"
        elif self.distinct_approximate:
            head += " (distinct is approximate)"
        lines = [head]
        if self.min is not None or self.max is not None:
            rng = f"min {cell_text(self.min, 60)!s}, max {cell_text(self.max, 60)!s}"
            if self.avg is not None:
                rng += f", avg {self.avg:.6g}"
            lines.append(rng)
        if self.avg_length is not None:
            lines.append(f"length: min {self.min_length}, max {self.max_length}, avg {self.avg_length:.1f}")
        if self.top_values:
            lines.append(
                "top: " + ", ".join(f"{cell_text(v.value, 40)} ({v.count:,})" for v in self.top_values)
            )
        if self.patterns:
            lines.append(
                "patterns: "
                + ", ".join(
                    f"{p.pattern} ({p.count:,}, e.g. {cell_text(p.example, 30)})" for p in self.patterns
                )
            )
        if self.looks_like:
            lines.append(
                "looks like: " + ", ".join(f"{k} ({100 * v:.0f}%)" for k, v in self.looks_like.items())
            )
        return "\n".join(lines)


class ProfileColumn(ToolArgs):
    table: str
    column: str
    source: SourceName = None


@tool("A column's type, NULLs, distinct count, min/max, top values, value patterns; big tables sampled.")
def profile_column(ctx: ToolContext, args: ProfileColumn) -> ColumnProfile:
    """Type, null fraction, distinct count, min/max, most frequent values, value patterns."""
    src, info, col, ctype = resolve_column(ctx, args.table, args.column, args.source)
    engine = src.engine
    timeout = ctx.limits.query_timeout_s
    raw = engine.quote(col)
    csql = value_sql(raw, ctype, engine)
    numeric = is_number_type(ctype, engine)
    textual = is_text_type(ctype, engine)
    # min/max of the first characters: the same order, and a 10 MB cell stays under the byte cap
    extreme = cut_sql(csql, ctype, engine) if textual or src.engine.dynamic_types else csql
    approx = (info.row_estimate or 0) > APPROX_ABOVE and src.engine.approx_distinct is not None
    distinct_sql = src.engine.distinct_count(csql, approx)
    aggs = ["count(*)", f"count({raw})", distinct_sql, f"min({extreme})", f"max({extreme})"]
    if numeric:  # as a double: avg over DECIMAL(38,10) overflows the engine's exact sum
        aggs.append(src.engine.average(csql))
    if textual:
        length = f"length({engine.as_text(csql)})"
        aggs += [f"min({length})", f"max({length})", f"avg({length})"]
    row, sampled, how = _summary_row(src, info, col, aggs, timeout)
    top, _total, top_sampled, top_how = group_counts(src, info, col, ctype, None, PATTERN_VALUES, timeout)
    rows_n, nonnull, distinct = int(row[0] or 0), int(row[1] or 0), int(row[2] or 0)
    profile = ColumnProfile(
        source=src.name,
        table=info.qualified,
        column=col,
        type=ctype,
        rows=rows_n,
        nulls=rows_n - nonnull,
        null_fraction=round((rows_n - nonnull) / rows_n, 4) if rows_n else 0.0,
        distinct=distinct,
        distinct_approximate=approx or sampled,
        min=cut_value(jsonable(row[3])),
        max=cut_value(jsonable(row[4])),
        top_values=[DistinctValue(value=v, count=n) for v, n in top if v is not None][:PROFILE_TOP],
        sampled=sampled or top_sampled,
        sample=how or top_how,
    )
    rest = list(row[5:])
    if numeric:
        avg = rest.pop(0)
        try:
            profile.avg = float(avg) if avg is not None else None
        except (TypeError, ValueError):  # an engine's average that is not a number (NaN text, an interval)
            profile.avg = None
    if textual and rest:
        profile.min_length = int(rest[0]) if rest[0] is not None else None
        profile.max_length = int(rest[1]) if rest[1] is not None else None
        profile.avg_length = round(float(rest[2]), 2) if rest[2] is not None else None
    if textual or not numeric:
        values = [(str(v), n) for v, n in top if v is not None]
        profile.patterns = value_patterns(values)
        profile.looks_like = looks_like(values)
    return profile


def _summary_row(
    src: Source, info: TableInfo, col: str, aggs: list[str], timeout_s: float
) -> tuple[tuple[Any, ...], bool, str | None]:
    """The aggregates' one row, from a sample when the table is too big to scan or a full scan times
    out: (row, sampled, how it was sampled)."""
    engine = src.engine
    sampled = needs_sample(info, engine)
    how: str | None = None
    for _attempt in range(2):
        if sampled:
            from_sql, how = sample_from(info, engine, SAMPLE_ROWS, [col])
        else:
            from_sql = engine.quote_table(info)
        try:
            rows = src.execute(
                f"SELECT {', '.join(aggs)} FROM {from_sql}",
                timeout_s=timeout_s,
                limits=FetchLimits(max_rows=1),
            ).rows
            if not rows:
                raise QueryError(
                    f"profile_column could not read {info.qualified}.{col}: the summary row was "
                    "dropped by the result size cap; use distinct_values or run_query instead"
                )
            return rows[0], sampled, how
        except QueryTimeout:
            if sampled:
                raise
            sampled = True
    raise AssertionError("unreachable")
