"""Every tool flexsql offers, declared once: arguments, result, the function, the description.

Descriptions say what a tool is for, its limits (from the configured settings) and one example;
argument descriptions are a few words. `benchmarks/tool_list_size.py` measures what this costs a
client on every turn, and tests/test_registry.py snapshots it.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from flexsql.config import Settings
from flexsql.tools import catalog, compare, joins, python_tool, query, validate
from flexsql.tools.runtime.registry import ToolArgs, ToolEnv, ToolSpec
from flexsql.tools.search import ranking as search
from flexsql.tools.values import find as values

Source = str | None  # the server's instructions say the default: the first source


def _rows(n: int) -> str:
    return f"{n:,}"


# -- catalog -------------------------------------------------------------------------------------


class NoArgs(ToolArgs):
    pass


class SchemaArgs(ToolArgs):
    source: Source = None


class ListTablesArgs(ToolArgs):
    schema_: Annotated[str | None, Field(alias="schema", description="only this schema")] = None
    pattern: Annotated[str | None, Field(description="substring or glob")] = None
    limit: Annotated[int, Field(description="1-1000")] = 50
    cursor: str | None = None
    refresh: Annotated[bool, Field(description="re-read the catalog")] = False
    source: Source = None


def _list_tables(ctx, a: ListTablesArgs, env: ToolEnv):  # type: ignore[no-untyped-def]
    if a.refresh:
        ctx.source(a.source).catalog(refresh=True)
    return catalog.list_tables(ctx, a.schema_, a.pattern, a.limit, a.cursor, a.source)


class TableArgs(ToolArgs):
    table: str
    source: Source = None


class JoinArgs(ToolArgs):
    tables: Annotated[list[str], Field(description="2-20 table names")]
    source: Source = None


# -- queries -------------------------------------------------------------------------------------


class SampleArgs(ToolArgs):
    table: str
    columns: Annotated[list[str] | None, Field(description="default all")] = None
    where: Annotated[str | None, Field(description="SQL condition")] = None
    limit: Annotated[int, Field(description="1-1000")] = 10
    source: Source = None


class QueryArgs(ToolArgs):
    sql: str
    max_rows: Annotated[int | None, Field(description="0-100000")] = None
    timeout_s: float | None = None
    source: Source = None


class FetchArgs(ToolArgs):
    result_id: str
    offset: int = 0
    limit: Annotated[int, Field(description="1-100000")] = 100


class SqlArgs(ToolArgs):
    sql: str
    source: Source = None


# -- analysis ------------------------------------------------------------------------------------


class SearchArgs(ToolArgs):
    query: Annotated[str, Field(description="question or keywords")]
    limit: Annotated[int, Field(description="1-100")] = 10
    source: Source = None


class FindValuesArgs(ToolArgs):
    text: str
    tables: Annotated[list[str] | None, Field(description="only these tables")] = None
    schema_: Annotated[str | None, Field(alias="schema", description="only this schema")] = None
    context: Annotated[str | None, Field(description="the question")] = None
    limit: Annotated[int, Field(description="1-100")] = 10
    refresh: Annotated[bool, Field(description="rebuild the index")] = False
    source: Source = None


def _find_values(ctx, a: FindValuesArgs, env: ToolEnv):  # type: ignore[no-untyped-def]
    if a.refresh:
        values.build_value_index(ctx, a.source, progress=env.progress, refresh=True)
    return values.find_values(
        ctx, a.text, a.tables, a.limit, a.source, progress=env.progress, schema=a.schema_, context=a.context
    )


class DistinctArgs(ToolArgs):
    table: str
    column: str
    contains: Annotated[str | None, Field(description="case-insensitive substring")] = None
    limit: Annotated[int, Field(description="1-100")] = 20
    source: Source = None


class ColumnArgs(ToolArgs):
    table: str
    column: str
    source: Source = None


class ResultIdsArgs(ToolArgs):
    result_ids: list[str]


class PythonArgs(ToolArgs):
    code: str
    result_ids: list[str] | None = None
    timeout_s: float | None = None


def _python_description(s: Settings) -> str:
    sb = s.sandbox
    text = (
        f"Sandboxed Python for logic awkward in SQL: result_ids arrive as DataFrames dfs['r1'] (df when one); "
        f'flexsql.sql("SELECT …") queries. The last expression is returned (a DataFrame becomes a '
        f"result_id). {sb.timeout_s:g} s, {sb.memory_mb:,} MB, output ≤ {sb.max_output_chars:,} characters. "
        "Example: code=\"df.groupby('country').size()\"."
    )
    warnings = python_tool.sandbox_warnings()
    return text + ("".join(f" Warning: {w}" for w in warnings))


class SelectArgs(ToolArgs):
    result_ids: Annotated[list[str], Field(description="1-20 candidates")]
    question: str | None = None


class AskArgs(ToolArgs):
    question: str
    source: Source = None
    conversation_id: str | None = None
    external_knowledge: Annotated[str | None, Field(description="a document defining its terms")] = None


def _select_result(ctx, a: SelectArgs, env: ToolEnv):  # type: ignore[no-untyped-def]
    from flexsql.agent.select import select_result

    return select_result(ctx, a.result_ids, a.question)


async def _ask(ctx, a: AskArgs, env: ToolEnv):  # type: ignore[no-untyped-def]
    from flexsql.agent.service import ask_tool

    return await ask_tool(ctx, a, env)


def _agent_declarations() -> list[ToolSpec]:
    """select_result and ask live with the agent; their result models come from there."""
    try:
        from flexsql.agent.answer import Answer
        from flexsql.agent.select import Selection
    except ImportError:  # the agent package is being built; the server still serves the other tools
        return []
    return [
        ToolSpec(
            "select_result",
            SelectArgs,
            Selection,
            _select_result,
            lambda s: (
                "Pick the best of candidate results for one question by execution evidence, and say "
                'why. Example: result_ids=["r1","r2"].'
            ),
        ),
        ToolSpec(
            "ask",
            AskArgs,
            Answer,
            _ask,
            is_async=True,
            agent_tool=False,
            describe=lambda s: (
                f"Answer a question with the FlexSQL agent ({s.agent.plans} plans, repair, "
                "selection by execution): status, SQL, result, candidates. Needs [model] or "
                "client sampling."
            ),
        ),
    ]


DECLARATIONS: list[ToolSpec] = [
    ToolSpec(
        "list_sources",
        NoArgs,
        catalog.SourceList,
        lambda c, a, e: catalog.list_sources(c),
        lambda s: "The configured databases: name, SQL dialect, URL, description.",
    ),
    ToolSpec(
        "list_schemas",
        SchemaArgs,
        catalog.SchemaList,
        lambda c, a, e: catalog.list_schemas(c, a.source),
        lambda s: "Schemas of a source with their table and view counts.",
    ),
    ToolSpec(
        "list_tables",
        ListTablesArgs,
        catalog.TableList,
        _list_tables,
        lambda s: (
            "Tables and views with row estimates and comments, 50 per page; sharded families "
            '(EVENTS_2024…) are one entry. Example: pattern="order*".'
        ),
    ),
    ToolSpec(
        "describe_table",
        TableArgs,
        catalog.TableDescription,
        lambda c, a, e: catalog.describe_table(c, a.table, a.source),
        lambda s: (
            "One table's columns: type, nullability, keys, comment, 3 example values each; row "
            'estimate. Example: table="sales.orders".'
        ),
    ),
    ToolSpec(
        "find_join_path",
        JoinArgs,
        joins.JoinPath,
        lambda c, a, e: joins.find_join_path(c, a.tables, a.source),
        lambda s: (
            "Join conditions connecting tables: declared foreign keys first, inferred ones marked. "
            'Example: tables=["orders","customers"].'
        ),
    ),
    ToolSpec(
        "sample_rows",
        SampleArgs,
        query.QueryOutput,
        lambda c, a, e: query.sample_rows(c, a.table, a.columns, a.where, a.limit, a.source),
        lambda s: (
            f"A few rows of a table; cells cut at {s.limits.cell_chars} characters. "
            'Example: table="orders", where="status = \'S\'".'
        ),
    ),
    ToolSpec(
        "run_query",
        QueryArgs,
        query.QueryOutput,
        lambda c, a, e: query.run_query(c, a.sql, a.max_rows, a.timeout_s, a.source),
        lambda s: (
            f"Run one read-only SQL statement: the first max_rows rows (default "
            f"{s.limits.preview_rows}), the total count and a result_id for the other tools. Text ≤ "
            f"{s.limits.output_chars:,} characters; cancelled after {s.limits.query_timeout_s:g} s. "
            'Example: sql="SELECT count(*) FROM orders".'
        ),
    ),
    ToolSpec(
        "fetch_rows",
        FetchArgs,
        query.QueryOutput,
        lambda c, a, e: query.fetch_rows(c, a.result_id, a.offset, a.limit),
        lambda s: (
            'More rows of an earlier result, without running it again. Example: result_id="r1", offset=20.'
        ),
    ),
    ToolSpec(
        "validate_sql",
        SqlArgs,
        validate.Validation,
        lambda c, a, e: validate.validate_sql(c, a.sql, a.source),
        lambda s: (
            "Check SQL without running it: syntax, the read-only guard, names (did-you-mean), the "
            "engine's EXPLAIN."
        ),
    ),
    ToolSpec(
        "search_schema",
        SearchArgs,
        search.SchemaSearchResult,
        lambda c, a, e: search.search_schema(c, a.query, a.limit, a.source),
        lambda s: (
            "Rank tables and columns for a question or keywords; each hit says why it matched. "
            'Example: query="revenue per country".'
        ),
    ),
    ToolSpec(
        "find_values",
        FindValuesArgs,
        values.FindValuesResult,
        _find_values,
        lambda s: (
            "Which table.column holds values like text (exact, case-insensitive, fuzzy) and their "
            'stored spelling: ground codes, names, IDs. Example: text="Frnace".'
        ),
    ),
    ToolSpec(
        "distinct_values",
        DistinctArgs,
        values.DistinctValuesResult,
        lambda c, a, e: values.distinct_values(c, a.table, a.column, a.contains, a.limit, a.source),
        lambda s: (
            "A column's values by frequency with counts; big tables sampled (said so). Example: "
            'table="orders", column="status".'
        ),
    ),
    ToolSpec(
        "profile_column",
        ColumnArgs,
        values.ColumnProfile,
        lambda c, a, e: values.profile_column(c, a.table, a.column, a.source),
        lambda s: (
            "A column's type, NULL fraction, distinct count, min/max, top values and value patterns; "
            "big tables sampled (said so)."
        ),
    ),
    ToolSpec(
        "compare_results",
        ResultIdsArgs,
        compare.Comparison,
        lambda c, a, e: compare.compare_results(c, a.result_ids),
        lambda s: (
            "Whether 2-10 results are equivalent (row order ignored unless ordered, columns matched "
            "by content) and how they differ."
        ),
    ),
    ToolSpec(
        "run_python",
        PythonArgs,
        python_tool.PythonResult,
        lambda c, a, e: python_tool.run_python(c, a.code, a.result_ids, a.timeout_s),
        _python_description,
        needs_python=True,
    ),
    *_agent_declarations(),
]
