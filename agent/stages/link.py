"""link: the tables (and notes on columns, keys, values) that matter for the question, found with
the schema tools. The pipeline runs search_schema itself before classify (search_hits), so the
model starts from the ranked candidates instead of spending a round on it."""

from __future__ import annotations

import re

from flexsql.agent.context import Thread
from flexsql.agent.contract import Linking
from flexsql.agent.stages.chat import Run, converse
from flexsql.errors import FlexSQLError
from flexsql.prompts import tool_conditional
from flexsql.tools import toolbox
from flexsql.tools.catalog import SchemaList
from flexsql.tools.runtime.registry import expect
from flexsql.tools.runtime.render import TextBudget

SCHEMA_CHARS = 4_000  # of the schema overview in link's request
HITS_CHARS = 8_000  # of the search hits in link's request (its main input: twice a tool result)


QUERY_CHARS = 1_500  # of the search query (search_schema takes 2,000)
# names in a document that look like columns: `backticked`, or words joined by underscores
_IDENTIFIER = re.compile(r"`([^`\n]{2,80})`|\b([A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+)\b")


def search_query(run: Run) -> str:
    """The question, then the names the knowledge summary gives (a question such as "the details
    listed in the info document" names no column itself; its document names them all)."""
    if not run.knowledge:
        return run.question
    names = [a or b for a, b in _IDENTIFIER.findall(run.knowledge)]
    names = [n for n in dict.fromkeys(names) if n.lower() not in run.question.lower()]
    if not names:
        return run.question
    query = run.question + " " + " ".join(names)
    return query if len(query) <= QUERY_CHARS else query[:QUERY_CHARS].rsplit(" ", 1)[0]


def search_hits(run: Run, limit: int = 10) -> tuple[str, list[str]]:
    """search_schema's ranked hits for the question (and its knowledge's names): their text, and
    the tables in rank order."""
    try:
        result = toolbox.TOOLS.call(
            run.tools, "search_schema", {"query": search_query(run), "limit": limit, "source": run.source}
        )
        tables = [t.table for t in getattr(result, "tables", [])]
        budget = TextBudget(
            max_chars=HITS_CHARS,
            cell_chars=run.settings.limits.cell_chars,
            tools=frozenset(run.tool_names),
        )
        text = result.to_text(budget)
        if len(text) > HITS_CHARS:
            text = text[:HITS_CHARS].rsplit("\n", 1)[0] + "\n… (more hits cut)"
        return text, tables
    except FlexSQLError as exc:
        return f"(search_schema failed: {exc})", []


def _schema_of(table: str, schemas: list[str]) -> str | None:
    """The longest schema name that `table` (as search_schema names it) sits in."""
    inside = [s for s in schemas if table.lower().startswith(s.lower() + ".")]
    return max(inside, key=len) if inside else None


def schema_overview(
    run: Run, ranked_tables: list[str] | None = None, max_chars: int = SCHEMA_CHARS
) -> str | None:
    """On a multi-schema warehouse, the schemas with their sizes (FlexSQL links schemas first):
    those holding `ranked_tables` (the tables earlier stages described, then search_schema's hits)
    first, in that order, then the rest; past `max_chars` the
    rest are named only, so the relevant schemas are never the ones cut."""
    try:
        listing = expect(toolbox.TOOLS.call(run.tools, "list_schemas", {"source": run.source}), SchemaList)
    except FlexSQLError:
        return None
    if len(listing.schemas) < 2:
        return None
    names = [s.schema_name for s in listing.schemas]
    order: list[str] = []
    for table in ranked_tables or []:
        schema = _schema_of(table, names)
        if schema and schema not in order:
            order.append(schema)
    by_name = {s.schema_name: s for s in listing.schemas}
    ranked = order + [n for n in names if n not in order]
    lines: list[str] = []
    used = 0
    rest: list[str] = []
    for i, name in enumerate(ranked):
        entry = by_name[name]
        mark = " (holds tables found so far)" if i < len(order) else ""
        line = f"{name}: {entry.tables} tables, {entry.views} views{mark}"
        if rest or (used + len(line) + 1 > max_chars and i >= len(order)):
            rest.append(name)
            continue
        lines.append(line)
        used += len(line) + 1
    if rest:
        names_text = ", ".join(rest)
        room = max(200, max_chars // 2)
        if len(names_text) > room:
            names_text = names_text[:room].rsplit(", ", 1)[0] + ", …"
        lines.append(f"({len(rest)} more schemas, less related to the question: {names_text})")
    return "\n".join(lines)


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


INSTRUCTION = (
    "[link] Name every table the question needs: facts, dimensions and bridge tables for joins, exactly as "
    "the catalog names them.{+describe_table} Use what is above; describe_table or find_join_path the "
    "candidates you have not looked at yet.{/+describe_table} In `notes`, the columns, join keys and stored "
    "spellings that matter. Answer with the link object."
)


async def link(run: Run, thread: Thread, ranked: list[str] | None = None) -> tuple[Linking, list[str]]:
    """The tables (as the catalog names them) and the names the model gave that the catalog lacks.
    `ranked`: search_schema's tables for the question (classify's instruction showed the hits); on a
    warehouse of several schemas, the schemas holding them are listed first."""
    text = tool_conditional(INSTRUCTION, frozenset(run.tool_names))
    # the tables classify looked at rank first: it found them for this question
    looked_at, _ = known_tables(run, list(run.notebook.described))
    schemas = schema_overview(run, [*looked_at, *(ranked or [])])
    if schemas:
        text = (
            "[link] This warehouse has several schemas; the ones holding the tables found so far come first"
            + (" (list_tables(schema=…) shows a schema's tables)" if "list_tables" in run.tool_names else "")
            + f":\n{schemas}\n\n"
            + text.removeprefix("[link] ")
        )
    out = await converse(run, "link", thread, text)
    assert isinstance(out, Linking)
    tables, unknown = known_tables(run, out.tables)
    if unknown:
        run.trace.event("unknown_tables", stage="link", tables=unknown)
    out.tables = tables
    return out, unknown
