"""run_python: sandboxed Python (pandas, numpy, duckdb) over earlier results, for checks SQL makes awkward.

The results named by `result_ids` arrive as pandas DataFrames (`dfs["r1"]`, and `df` when there is one),
handed over as Arrow files rather than queried again. The value of the last expression comes back; a
DataFrame or Series becomes a new result_id (stored like a query result, so compare_results and fetch_rows
work on it). `flexsql.sql("SELECT …")` inside the code runs a read-only query through the server (the guard
and the source's limits apply). The process, its limits and its isolation are in flexsql.tools.sandbox.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from pydantic import Field

from flexsql.config import Settings
from flexsql.errors import InvalidArgument, RefusedError
from flexsql.tools.query import store_limits
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.registry import ToolArgs, ToolResult, tool
from flexsql.tools.runtime.render import TextBudget, jsonable, table_text
from flexsql.tools.runtime.results import StoredResult
from flexsql.tools.runtime.schema import unlisted
from flexsql.tools.sandbox.arrow_io import rows_from_table, sql_type, table_from_rows
from flexsql.tools.sandbox.isolation import Isolation, detect_isolation
from flexsql.tools.sandbox.limits import SandboxLimits
from flexsql.tools.sandbox.outcome import RunOutcome
from flexsql.tools.sandbox.supervisor import get_sandbox

MAX_CODE_CHARS = 200_000
MAX_INPUTS = 16
ORDERING_CALLS = ("sort_values", "sort_index", "nlargest", "nsmallest")


class PythonResult(ToolResult):
    """What one run_python call produced."""

    ok: bool
    stdout: str = ""
    stdout_chars: int = 0  # length of the whole output (characters), even when cut
    stdout_truncated: bool = False
    stderr: str = ""
    stderr_chars: int = 0
    stderr_truncated: bool = False
    max_output_chars: int = 0
    value_repr: str | None = None  # the last expression, as text
    value_type: str | None = None
    result_id: str | None = None  # when the last expression was a DataFrame or Series
    columns: list[str] = []
    types: list[str] = []
    rows: list[list[Any]] = []  # the first rows of the new result
    total_rows: int | None = None
    error: str | None = None  # the user code's traceback (its own frames only) or why the run stopped
    error_type: str | None = None
    limits_hit: list[str] = []  # "timeout", "memory", "cpu", "file size", "processes"
    refused: list[str] = []  # operations the sandbox refused (subprocess, socket, file outside the sandbox…)
    sql_calls: int = 0
    elapsed_ms: float = 0.0
    cpu_ms: float = 0.0  # CPU time of the sandboxed process
    notes: list[str] = []

    def to_text(self, budget: TextBudget = TextBudget()) -> str:
        max_chars, cell_chars = budget.max_chars, budget.cell_chars
        lines: list[str] = []
        if self.error:
            lines.append(f"error ({self.error_type}):" if self.error_type else "error:")
            lines.append(self.error)
        if self.limits_hit:
            lines.append("limits hit: " + ", ".join(self.limits_hit))
        unseen = [r for r in self.refused if r not in (self.error or "")]
        if unseen:  # refusals the code caught and went on from
            lines.append("refused by the sandbox: " + "; ".join(unseen[:3]))
        for name in ("stdout", "stderr"):
            text, chars, cut = (
                getattr(self, name),
                getattr(self, f"{name}_chars"),
                getattr(self, f"{name}_truncated"),
            )
            if not text and not chars:
                continue
            lines.append(f"{name}:")
            lines.append(text.rstrip("\n"))
            if cut:
                lines.append(
                    f"{name} truncated: true — first {len(text)} of {chars} chars shown "
                    f"(limit {self.max_output_chars})"
                )
        if self.result_id:
            total = self.total_rows or 0
            usable = budget.offered("compare_results", "fetch_rows")
            lines.append(
                f"{self.result_id}: {total} rows, {len(self.columns)} cols ({self.value_type} from "
                "run_python" + (f"; usable in {' and '.join(usable)})" if usable else ")")
            )
            used = sum(len(line) + 1 for line in lines)
            shortened: list[str] = []
            table, shown = table_text(
                self.columns,
                self.rows,
                cell_chars=cell_chars,
                max_chars=max(500, max_chars - used - 200),
                notes=shortened,
            )
            lines.append(table)
            lines += [f"note: {note}" for note in shortened]
            if shown < total:
                more = (
                    f"fetch_rows(result_id={self.result_id!r}, offset={shown}) for more"
                    if budget.offers("fetch_rows")
                    else "return fewer rows to see them all"
                )
                lines.append(f"truncated: true — {shown} of {total} rows shown; {more}")
        elif self.value_repr is not None:
            lines.append(f"value ({self.value_type}): {self.value_repr}")
        for note in self.notes:
            lines.append(f"note: {note}")
        status = "ok" if self.ok else "failed"
        tail = f"{status}, {self.elapsed_ms:g} ms"
        if self.sql_calls:
            tail += f", {self.sql_calls} flexsql.sql call{'s' if self.sql_calls != 1 else ''}"
        if not self.error and self.value_repr is None and not self.stdout and not self.stderr:
            tail += " (no output: print() something or end with an expression)"
        lines.append(tail)
        return "\n".join(lines)


def sandbox_warnings(isolation: Isolation | None = None) -> list[str]:
    """What this host cannot enforce (e.g. no Landlock): said in the tool's description."""
    return list((isolation or detect_isolation()).warnings())


def _arrow_of(ctx: ToolContext, stored: StoredResult) -> pa.Table:
    """The stored rows as Arrow, converted once and kept with the result in the session's store: a
    cache keyed by result id would hand session B the table of session A's `r1`."""
    return ctx.results.arrow(stored, lambda: table_from_rows(stored.columns, stored.rows))


SqlRunner = Callable[
    ..., Any
]  # runner(sql) or runner(sql, source), maybe timeout_s=: a QueryResult-like object


def _default_sql_runner(ctx: ToolContext, default_source: str | None) -> SqlRunner:
    def run(sql: str, source: str | None = None, timeout_s: float | None = None) -> Any:
        src = ctx.source(source or default_source)
        timeout = (
            ctx.limits.query_timeout_s if timeout_s is None else min(timeout_s, ctx.limits.query_timeout_s)
        )
        return src.execute(sql, timeout_s=timeout, limits=store_limits(ctx, ctx.limits.store_rows))

    return run


def _sql_handler(runner: SqlRunner) -> Callable[..., tuple[pa.Table, dict[str, Any]]]:
    """`handle(sql, source, timeout_s=time the program has left)` for the sandbox; a runner that takes no
    timeout_s gets none (its own limits apply)."""
    try:
        takes_timeout = "timeout_s" in inspect.signature(runner).parameters
    except (TypeError, ValueError):
        takes_timeout = False

    def handle(
        sql: str, source: str | None = None, timeout_s: float | None = None
    ) -> tuple[pa.Table, dict[str, Any]]:
        args = (sql,) if source is None else (sql, source)
        result = runner(*args, timeout_s=timeout_s) if takes_timeout else runner(*args)
        table = table_from_rows(list(result.columns), result.rows)
        meta = {
            "total_rows": int(getattr(result, "total_rows", len(result.rows))),
            "total_is_lower_bound": bool(getattr(result, "total_is_lower_bound", False)),
            "truncated": bool(getattr(result, "truncated", False)),
            "cells_cut": int(getattr(result, "cells_cut", 0)),
            "elapsed_ms": float(getattr(result, "elapsed_ms", 0.0)),
        }
        return table, meta

    return handle


def _source_of(inputs: list[StoredResult]) -> str | None:
    """The source flexsql.sql() queries by default: that of the results given (a Python result carries
    the source of its own inputs), or the server's default when they name none. Results from two
    different sources make the default ambiguous, so flexsql.sql() then needs source=."""
    named = list(dict.fromkeys(s.source for s in inputs if s.source))
    if len(named) > 1:
        return None
    return named[0] if named else None


def _ordered(code: str) -> bool:
    """Whether the last expression sorts (then the row order is part of the answer for compare_results)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        return False
    return any(
        isinstance(node, ast.Attribute) and node.attr in ORDERING_CALLS for node in ast.walk(tree.body[-1])
    )


def _check_arguments(ctx: ToolContext, args: RunPython) -> tuple[list[str], float, list[str]]:
    """The arguments' checks beyond their declaration: the server's switch, empty code, and the
    caller's timeout lowered to the server's (the operator's limit is a ceiling)."""
    if ctx.sandbox.enabled is False:
        raise RefusedError(
            "run_python is disabled on this server ([sandbox] enabled = false in flexsql.toml); "
            "use run_query, or ask the operator to enable it"
        )
    if not args.code.strip():
        raise InvalidArgument("code is empty: pass Python source, e.g. \"df.groupby('country').size()\"")
    ids = list(dict.fromkeys(r.strip() for r in args.result_ids or []))
    notes: list[str] = []
    limit = ctx.sandbox.timeout_s
    timeout = limit
    if args.timeout_s is not None:
        if args.timeout_s > limit:
            notes.append(f"timeout_s={args.timeout_s:g} was lowered to the server's limit of {limit:g} s")
        timeout = min(args.timeout_s, limit)
    return ids, timeout, notes


class RunPython(ToolArgs):
    code: str = Field(max_length=MAX_CODE_CHARS, json_schema_extra=unlisted("maxLength"))
    result_ids: list[str] | None = Field(None, max_length=MAX_INPUTS, json_schema_extra=unlisted("maxItems"))
    timeout_s: float | None = Field(None, gt=0, json_schema_extra=unlisted("exclusiveMinimum"))


def _description(settings: Settings) -> str:
    sb = settings.sandbox
    text = (
        "Sandboxed Python for logic awkward in SQL: result_ids arrive as DataFrames dfs['r1'] (df when one); "
        'flexsql.sql("SELECT …") queries. The last expression is returned (a DataFrame becomes a '
        f"result_id). {sb.timeout_s:g} s, {sb.memory_mb:,} MB, output ≤ {sb.max_output_chars:,} characters. "
        "Example: code=\"df.groupby('country').size()\"."
    )
    return text + "".join(f" Warning: {w}" for w in sandbox_warnings())


@tool(_description, needs_python=True)
def run_python(ctx: ToolContext, args: RunPython) -> PythonResult:
    """Run `code` in a fresh sandboxed process with the named results as DataFrames; see the module
    docstring. flexsql.sql() calls run the guarded query, with the store's row caps, on the source the
    given results came from (else the default source)."""
    code = args.code
    ids, timeout, notes = _check_arguments(ctx, args)
    given = [ctx.results.get(result_id) for result_id in ids]
    inputs = {stored.result_id: _arrow_of(ctx, stored) for stored in given}
    source = _source_of(given)
    if len({s.source for s in given if s.source}) > 1:
        notes.append(
            "the results come from different sources: flexsql.sql() uses the default source "
            "unless you pass source='…'"
        )
    limits = SandboxLimits.from_config(ctx.sandbox, timeout)
    handler = _sql_handler(_default_sql_runner(ctx, source))
    sb = ctx.sandbox
    outcome = get_sandbox().run(
        code,
        inputs,
        limits,
        sql_handler=handler,
        max_concurrent=sb.max_concurrent,
        queue_wait_s=sb.queue_wait_s,
    )
    return _result(ctx, code, outcome, limits, notes, source)


def _result(
    ctx: ToolContext,
    code: str,
    outcome: RunOutcome,
    limits: SandboxLimits,
    notes: list[str],
    source: str | None = None,
) -> PythonResult:
    report = outcome.report or {}
    error = report.get("error") if isinstance(report.get("error"), str) else None
    error_type = report.get("error_type") if isinstance(report.get("error_type"), str) else None
    if outcome.crash:
        error = outcome.crash if not error else f"{error}\n{outcome.crash}"
        error_type = error_type or ("SandboxLimit" if outcome.limits_hit else "SandboxCrash")
    result = PythonResult(
        ok=error is None,
        stdout=outcome.stdout.text,
        stdout_chars=outcome.stdout.chars,
        stdout_truncated=outcome.stdout.truncated,
        stderr=outcome.stderr.text,
        stderr_chars=outcome.stderr.chars,
        stderr_truncated=outcome.stderr.truncated,
        max_output_chars=limits.max_output_chars,
        value_repr=_str_or_none(report.get("value_repr")),
        value_type=_str_or_none(report.get("value_type")),
        error=error,
        error_type=error_type,
        limits_hit=outcome.limits_hit,
        refused=[str(r) for r in report.get("refused") or []][:20],
        sql_calls=outcome.sql_calls,
        elapsed_ms=outcome.elapsed_ms,
        cpu_ms=round(outcome.cpu_s * 1000, 1),
        notes=notes,
    )
    table = outcome.table
    if table is not None and error is None:
        kept = table if table.num_rows <= ctx.limits.store_rows else table.slice(0, ctx.limits.store_rows)
        rows = rows_from_table(kept)
        types = [sql_type(t) for t in kept.schema.types]
        stored = ctx.results.put(
            columns=list(kept.column_names),
            types=types,
            rows=rows,
            total_rows=table.num_rows,
            truncated=kept.num_rows < table.num_rows,
            ordered=_ordered(code),
            origin="python",
            source=source,
        )
        ctx.results.attach_arrow(stored, kept)  # a follow-up run_python over it needs no conversion
        result.result_id = stored.result_id
        result.columns = stored.columns
        result.types = types
        result.total_rows = table.num_rows
        result.rows = [[jsonable(v) for v in row] for row in rows[: ctx.limits.preview_rows]]
        if kept.num_rows < table.num_rows:
            result.notes.append(f"only the first {kept.num_rows} of {table.num_rows} rows were stored")
    return result


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None
