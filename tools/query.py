"""Verification queries: run_query, fetch_rows, sample_rows (results kept as handles)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from flexsql.errors import InvalidArgument
from flexsql.tools.engines import FetchLimits
from flexsql.tools.runtime.context import SourceName, ToolContext
from flexsql.tools.runtime.registry import ToolArgs, ToolResult, tool
from flexsql.tools.runtime.render import TextBudget, jsonable, table_text
from flexsql.tools.runtime.results import StoredResult
from flexsql.tools.runtime.schema import unlisted
from flexsql.tools.sql.conditions import parse_condition
from flexsql.tools.sql.order import orders_result

MAX_RETURN_ROWS = 100_000


class QueryOutput(ToolResult):
    """One result: the first rows, the true total (or a lower bound) and a handle for more."""

    result_id: str
    columns: list[str]
    types: list[str] = []
    rows: list[list[Any]]
    row_count: int  # rows in `rows`
    total_rows: int
    total_is_lower_bound: bool = False
    truncated: bool
    cells_cut: int = 0  # cells over the store's cell cap, kept as their first part with a cut marker
    elapsed_ms: float = 0.0
    offset: int = 0
    sql: str | None = None
    hint: str | None = None

    def to_text(self, budget: TextBudget = TextBudget()) -> str:
        max_chars, cell_chars = budget.max_chars, budget.cell_chars
        total = f"{self.total_rows}{'+' if self.total_is_lower_bound else ''}"
        if not self.columns:
            return f"{self.result_id}: statement returned no result set ({self.elapsed_ms:g} ms)"
        # room for the head line and both notes below the table (the truncation and cells-cut lines)
        table, shown = table_text(self.columns, self.rows, cell_chars=cell_chars, max_chars=max_chars - 320)
        first, last = self.offset + 1, self.offset + shown
        head = f"{self.result_id}: {total} rows, {len(self.columns)} cols, {self.elapsed_ms:g} ms"
        lines = [head, table]
        if self.total_rows == 0:
            lines.append(self.hint or "no rows matched")
        elif last < self.total_rows or self.total_is_lower_bound:
            lines.append(
                f"truncated: true — rows {first}-{last} of {total} shown; "
                f"fetch_rows(result_id={self.result_id!r}, offset={last}) for more"
            )
        if self.cells_cut:
            lines.append(
                f"cells cut: {self.cells_cut} value(s) were too big to keep whole and end in a '…' marker; "
                "select a part (substr, length) to read them"
            )
        return "\n".join(lines)


def _output(
    stored: StoredResult, offset: int, limit: int, elapsed_ms: float = 0.0, hint: str | None = None
) -> QueryOutput:
    rows = stored.rows[offset : offset + limit]
    shown_to = offset + len(rows)
    return QueryOutput(
        result_id=stored.result_id,
        columns=stored.columns,
        types=stored.types,
        rows=[[jsonable(v) for v in row] for row in rows],
        row_count=len(rows),
        total_rows=stored.total_rows,
        total_is_lower_bound=stored.total_is_lower_bound,
        truncated=shown_to < stored.total_rows or stored.total_is_lower_bound,
        cells_cut=stored.cells_cut,
        elapsed_ms=elapsed_ms,
        offset=offset,
        sql=stored.sql,
        hint=hint,
    )


def has_top_level_order(sql: str, dialect: str) -> bool:
    """Whether the result's row order is part of it (compare_results): the one definition, shared
    with the `ex` scorer and the Snowflake wrapper."""
    return orders_result(sql, dialect)


def _empty_hint(sql: str) -> str:
    hint = "no rows matched: check filter literals against real values (distinct_values / find_values)"
    if "'" in sql:
        hint += "; string comparisons are case- and spelling-sensitive"
    return hint


def store_limits(ctx: ToolContext, rows: int) -> FetchLimits:
    """What one query may keep in the result store ([limits] store_*): run_query's and flexsql.sql()'s."""
    return FetchLimits(
        max_rows=rows,
        max_bytes=ctx.limits.store_mb * 1024 * 1024,
        count_limit=rows + 1,
        max_cell_bytes=ctx.limits.store_cell_kb * 1024,
    )


class SampleRows(ToolArgs):
    table: str
    columns: list[str] | None = Field(None, description="default all")
    where: str | None = Field(None, description="SQL condition")
    limit: int = Field(10, ge=1, le=1000)
    source: SourceName = None


@tool(
    lambda s: (
        f"A few rows of a table; cells cut at {s.limits.cell_chars} characters. "
        'Example: table="orders", where="status = \'S\'".'
    )
)
def sample_rows(ctx: ToolContext, args: SampleRows) -> QueryOutput:
    where, limit = args.where, args.limit
    src = ctx.source(args.source)
    info = src.catalog().resolve(args.table)
    engine = src.engine
    selected = ", ".join(engine.quote(info.column(c).name) for c in args.columns) if args.columns else "*"
    sql = f"SELECT {selected} FROM {engine.quote_table(info)}"
    if where:
        sql += f" WHERE {parse_condition(where, src.dialect)}"
    sql += f" LIMIT {limit}"
    output = run_query(ctx, RunQuery(sql=sql, max_rows=limit, source=src.name))
    if output.total_rows == 0 and where:
        output.hint = f"no rows where {where}: check the literal's spelling with distinct_values"
    return output


class RunQuery(ToolArgs):
    sql: str
    max_rows: int | None = Field(None, ge=0, le=MAX_RETURN_ROWS)
    timeout_s: float | None = Field(
        None, gt=0, le=3600, json_schema_extra=unlisted("exclusiveMinimum", "maximum")
    )
    source: SourceName = None


@tool(
    lambda s: (
        f"Run one read-only SQL statement: the first max_rows rows (default {s.limits.preview_rows}), the "
        f"total count and a result_id for the other tools. Text ≤ {s.limits.output_chars:,} characters; cancelled "
        f'after {s.limits.query_timeout_s:g} s. Example: sql="SELECT count(*) FROM orders".'
    )
)
def run_query(ctx: ToolContext, args: RunQuery) -> QueryOutput:
    sql = args.sql
    limit = ctx.limits.preview_rows if args.max_rows is None else args.max_rows
    timeout = ctx.limits.query_timeout_s if args.timeout_s is None else args.timeout_s
    src = ctx.source(args.source)
    store_rows = max(ctx.limits.store_rows, limit)
    result = src.execute(sql, timeout_s=timeout, limits=store_limits(ctx, store_rows))
    stored = ctx.results.put(
        columns=result.columns,
        types=result.types,
        rows=result.rows,
        total_rows=result.total_rows,
        total_is_lower_bound=result.total_is_lower_bound,
        truncated=result.truncated,
        cells_cut=result.cells_cut,
        ordered=has_top_level_order(sql, src.dialect),
        sql=sql,
        source=src.name,
    )
    hint = _empty_hint(sql) if result.total_rows == 0 and result.columns else None
    return _output(stored, 0, limit, result.elapsed_ms, hint)


class FetchRows(ToolArgs):
    result_id: str
    offset: int = Field(0, ge=0, le=10**9, json_schema_extra=unlisted("maximum"))
    limit: int = Field(100, ge=1, le=MAX_RETURN_ROWS)


@tool('More rows of an earlier result, without running it again. Example: result_id="r1", offset=20.')
def fetch_rows(ctx: ToolContext, args: FetchRows) -> QueryOutput:
    result_id, offset, limit = args.result_id, args.offset, args.limit
    stored = ctx.results.get(result_id)
    if offset > len(stored.rows):
        raise InvalidArgument(f"offset={offset} is past the end: {result_id} keeps {len(stored.rows)} rows")
    output = _output(stored, offset, limit)
    if offset + limit > len(stored.rows) and stored.truncated:
        output.hint = (
            f"only the first {len(stored.rows)} rows were kept (of {stored.total_rows}"
            f"{'+' if stored.total_is_lower_bound else ''}); narrow the query to see the rest"
        )
    return output
