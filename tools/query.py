"""Verification queries: run_query, fetch_rows, sample_rows (results kept as handles)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlglot
from pydantic import Field
from sqlglot import exp

from flexsql.config import LimitsConfig
from flexsql.errors import InvalidArgument, QueryTimeout
from flexsql.tools.engines import RESERVE_REFUSED, FetchLimits
from flexsql.tools.engines.paths import select_sql
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
    kept_rows: int | None = None  # rows the result keeps for fetch_rows, when fewer than total_rows
    elapsed_ms: float = 0.0
    offset: int = 0
    sql: str | None = None
    hint: str | None = None
    notes: list[str] = []  # what the call changed of its arguments (a timeout lowered to the server's)
    families: list[str] = []  # what each family reference (EVENTS_*) read: its shards
    expanded_sql: str | None = None  # the SQL that ran and the guard checked, when it named families

    def to_text(self, budget: TextBudget = TextBudget()) -> str:
        max_chars, cell_chars = budget.max_chars, budget.cell_chars
        total = f"{self.total_rows}{'+' if self.total_is_lower_bound else ''}"
        if not self.columns:
            return f"{self.result_id}: statement returned no result set ({self.elapsed_ms:g} ms)"
        # room for the head line and both notes below the table (the truncation and cells-cut lines)
        shortened: list[str] = []
        table, shown = table_text(
            self.columns, self.rows, cell_chars=cell_chars, max_chars=max_chars - 320, notes=shortened
        )
        first, last = self.offset + 1, self.offset + shown
        head = f"{self.result_id}: {total} rows, {len(self.columns)} cols, {self.elapsed_ms:g} ms"
        lines = [head, table]
        if self.total_rows == 0:
            hint = self.hint or NO_ROWS_FILTERED
            if hint.startswith(NO_ROWS_FILTERED):
                # an empty answer can be the right one: it is not called a mistake, only how to tell
                check = budget.offered("distinct_values", "find_values")
                hint += (
                    f" — if a literal is unchecked, look it up ({' / '.join(check)}); with the literals "
                    "checked, no such rows exist and the empty result stands"
                    if check
                    else " — with the literals checked, no such rows exist and the empty result stands"
                )
            elif hint == NO_ROWS_JOINED and budget.offers("sample_rows"):
                hint += " (sample_rows of each side)"
            lines.append(hint)
        elif last < self.total_rows or self.total_is_lower_bound:
            kept = self.kept_rows
            if kept is not None and last >= kept:
                more = f"rows past {kept} were not kept: narrow the query (or drop max_rows) to see them"
            elif not budget.offers("fetch_rows"):
                more = "narrow the query (filters, aggregates, LIMIT) to see the others"
            else:
                more = f"fetch_rows(result_id={self.result_id!r}, offset={last}) for more"
                more += f" (rows 1-{kept} kept)" if kept is not None else ""
            lines.append(f"truncated: true — rows {first}-{last} of {total} shown; {more}")
        if self.cells_cut:
            lines.append(
                f"cells cut: {self.cells_cut} value(s) were too big to keep whole and end in a '…' marker; "
                "select a part (substr, length) to read them"
            )
        lines += [f"note: {note}" for note in [*shortened, *self.notes]]
        lines += [f"family: {read}" for read in self.families]
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
        kept_rows=len(stored.rows) if stored.truncated else None,
        elapsed_ms=elapsed_ms,
        offset=offset,
        sql=stored.sql,
        hint=hint,
    )


def has_top_level_order(sql: str, dialect: str) -> bool:
    """Whether the result's row order is part of it (compare_results): the one definition, shared
    with the `ex` scorer and the Snowflake wrapper."""
    return orders_result(sql, dialect)


NO_ROWS_FILTERED = "no rows matched the filters"
NO_ROWS_JOINED = (
    "no rows: the joins matched nothing — check that the join keys hold the same values on both sides"
)
NO_ROWS_EMPTY = "no rows: the tables it reads are empty"


def _empty_hint(sql: str, dialect: str) -> str:
    """Why a query may have returned nothing, from what it does: a filter (the literals), else a join
    (the keys), else nothing to blame but the tables."""
    try:
        tree: exp.Expr | None = sqlglot.parse_one(sql, read=dialect)
    except sqlglot.errors.SqlglotError:
        tree = None
    if tree is None or any(tree.find_all(exp.Where, exp.Having, exp.Qualify)):
        hint = NO_ROWS_FILTERED
        if "'" in sql:
            hint += " (string comparisons are case- and spelling-sensitive)"
        return hint
    if any(j.args.get("on") or j.args.get("using") for j in tree.find_all(exp.Join)):
        return NO_ROWS_JOINED
    return NO_ROWS_EMPTY


def store_limits(
    ctx: ToolContext, rows: int, count: int | None = None, reserve: Callable[[int], bool] | None = None
) -> FetchLimits:
    """What one query may keep in the result store ([limits] store_*): run_query's and flexsql.sql()'s.
    At most `rows` rows, and never more bytes than one result may hold (the session's store, or the
    server's budget when smaller); rows are counted up to `count` (default: `rows`) + 1. `reserve`
    (ResultStore.reservation) claims the server's budget as rows are kept."""
    return FetchLimits(
        max_rows=rows,
        max_bytes=min(ctx.limits.store_mb * 1024 * 1024, ctx.results.max_result_bytes),
        count_limit=(rows if count is None else count) + 1,
        max_cell_bytes=ctx.limits.store_cell_kb * 1024,
        held=True,  # the store charges what the rows hold in Python: one result is at most store_mb of it
        reserve=reserve,
    )


def kept_rows(limits: LimitsConfig, max_rows: int | None) -> int:
    """Rows a run_query result keeps for fetch_rows: up to [limits] store_rows; given max_rows,
    max(max_rows, keep_rows) of them — a caller asking for 20 rows does not store a million."""
    if max_rows is None:
        return limits.store_rows
    return min(limits.store_rows, max(max_rows, limits.keep_rows))


def query_timeout(limits: LimitsConfig, asked: float | None) -> tuple[float, list[str]]:
    """The timeout of one query: the caller's, never above [limits] query_timeout_s (the operator's
    ceiling); a lowered one is noted."""
    ceiling = limits.query_timeout_s
    if asked is None or asked <= ceiling:
        return (ceiling if asked is None else asked), []
    return ceiling, [f"timeout_s={asked:g} was lowered to the server's limit of {ceiling:g} s"]


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
    # columns and the condition may name paths inside nested columns (trafficSource.source)
    condition = parse_condition(where, src.dialect) if where else None
    sql = select_sql(src.engine, info, args.columns, condition) + f" LIMIT {limit}"
    output = run_query(ctx, RunQuery(sql=sql, max_rows=limit, source=src.name))
    if output.total_rows == 0 and where:
        output.hint = (
            f"no rows where {where}: if a literal is unchecked, compare its spelling with real values; "
            "with the literals checked, no such rows exist"
        )
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
        f"Run one read-only SQL statement: first max_rows rows (default {s.limits.preview_rows}), the "
        f"total count, result_id. Text ≤ {s.limits.output_chars:,} characters; cancelled after "
        f"{s.limits.query_timeout_s:g} s. FROM events_2024* reads a sharded family "
        f'(≤ {s.limits.family_shards} shards). Example: sql="SELECT count(*) FROM orders".'
    )
)
def run_query(ctx: ToolContext, args: RunQuery) -> QueryOutput:
    sql = args.sql
    limit = ctx.limits.preview_rows if args.max_rows is None else args.max_rows
    timeout, notes = query_timeout(ctx.limits, args.timeout_s)
    src = ctx.source(args.source)
    keep = max(kept_rows(ctx.limits, args.max_rows), limit)
    try:
        # the rows being fetched claim the server's result budget as they come (other sessions' least
        # recently used results make room), so concurrent fetches cannot together pass it; the stored
        # result takes the claim's place in one step
        with ctx.results.reservation() as reserve:
            limits = store_limits(ctx, keep, count=max(ctx.limits.store_rows, keep), reserve=reserve)
            result = src.execute(sql, timeout_s=timeout, limits=limits)
            stored = ctx.results.put(
                reservation=reserve,
                columns=result.columns,
                types=result.types,
                rows=result.rows,
                total_rows=result.total_rows,
                total_is_lower_bound=result.total_is_lower_bound,
                truncated=result.truncated,
                kept_by_max_rows=result.truncated
                and keep < ctx.limits.store_rows
                and (result.truncated_reason or "").startswith(f"max_rows={keep}"),
                cells_cut=result.cells_cut,
                ordered=has_top_level_order(sql, src.dialect),
                sql=sql,
                source=src.name,
            )
    except QueryTimeout as exc:
        if args.timeout_s is None or notes:  # the server's limit stopped it: raising timeout_s cannot help
            raise QueryTimeout(
                f"{exc} — the server's limit of {ctx.limits.query_timeout_s:g} s ([limits] query_timeout_s)"
                + (f"; {notes[0]}" if notes else "")
            ) from None
        raise
    hint = _empty_hint(sql, src.dialect) if result.total_rows == 0 and result.columns else None
    output = _output(stored, 0, limit, result.elapsed_ms, hint)
    if (result.truncated_reason or "").startswith(RESERVE_REFUSED):
        notes.append(
            f"only {len(result.rows):,} rows were kept: the server's memory for results ([limits] "
            "server_store_mb) is taken by queries running now; run it again later to keep more"
        )
    output.notes = notes
    output.families = [read.summary() for read in result.families]
    output.expanded_sql = result.expanded_sql
    return output


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
        if stored.kept_by_max_rows:
            output.hint += " — or run it without max_rows, which keeps more rows"
    return output
