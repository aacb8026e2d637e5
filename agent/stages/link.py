"""link: the tables (and notes on columns, keys, values) that matter for the question, found with
the schema tools. The pipeline first runs search_schema itself, so the model starts from the
ranked candidates instead of spending a round on it."""

from __future__ import annotations

from flexsql.agent.contract import Linking
from flexsql.agent.stages.chat import Run, converse, system_message
from flexsql.errors import FlexSQLError
from flexsql.tools import toolbox
from flexsql.tools.catalog import SchemaList
from flexsql.tools.runtime.registry import expect, result_text

ROLE = (
    "You are the schema-linking step of a text-to-SQL agent. Find every table the question needs (facts, "
    "dimensions, bridge tables for joins), with the columns, join keys and notable values. On a warehouse "
    "look at schemas first, then tables. Bias towards inclusion; name tables exactly as the catalog does."
)
TOOLS = ["search_schema", "list_schemas", "list_tables", "describe_table", "find_join_path", "find_values"]


def search_hits(run: Run, limit: int = 10) -> str:
    try:
        result = toolbox.TOOLS.call(
            run.tools, "search_schema", {"query": run.question, "limit": limit, "source": run.source}
        )
        return result_text(result, run.settings)
    except FlexSQLError as exc:
        return f"(search_schema failed: {exc})"


def schema_overview(run: Run) -> str | None:
    """On a multi-schema warehouse, the schemas with their sizes (FlexSQL links schemas first)."""
    try:
        listing = expect(toolbox.TOOLS.call(run.tools, "list_schemas", {"source": run.source}), SchemaList)
    except FlexSQLError:
        return None
    if len(listing.schemas) < 2:
        return None
    return result_text(listing, run.settings)


def known_tables(run: Run, names: list[str]) -> tuple[list[str], list[str]]:
    """Split the model's table names into ones the catalog resolves (canonical names) and unknown ones."""
    catalog = run.tools.source(run.source).catalog()
    found, unknown = [], []
    for name in names:
        try:
            found.append(catalog.resolve(name).qualified)
        except FlexSQLError:
            unknown.append(name)
    return list(dict.fromkeys(found)), unknown


async def link(run: Run) -> Linking:
    hits = search_hits(run)
    schemas = schema_overview(run)
    user = (
        f"Question: {run.question}\n\n"
        + (f"External knowledge (summary):\n{run.knowledge}\n\n" if run.knowledge else "")
        + (
            f"Schemas (decide which matter first, then list_tables(schema=…)):\n{schemas}\n\n"
            if schemas
            else ""
        )
        + f"search_schema found (ranked):\n{hits}\n\n"
        "Check the candidates with describe_table / find_join_path, then answer with the tables and notes."
    )
    out = await converse(run, "link", system_message("link", ROLE, run), user, TOOLS)
    assert isinstance(out, Linking)
    tables, unknown = known_tables(run, out.tables)
    if unknown:
        run.trace.event("unknown_tables", stage="link", tables=unknown)
        out.notes = (out.notes + f"\n(not in the catalog, dropped: {', '.join(unknown)})").strip()
    out.tables = tables
    return out
