"""link: the tables (and notes on columns, keys, values) that matter for the question, found with
the schema tools. The pipeline first runs search_schema itself, so the model starts from the
ranked candidates instead of spending a round on it."""

from __future__ import annotations

import re

from flexsql.agent.contract import Linking
from flexsql.agent.stages.chat import Run, converse, system_message
from flexsql.errors import FlexSQLError
from flexsql.tools import toolbox
from flexsql.tools.catalog import SchemaList
from flexsql.tools.runtime.registry import expect
from flexsql.tools.runtime.render import TextBudget

ROLE = (
    "You are the schema-linking step of a text-to-SQL agent. Find every table the question needs (facts, "
    "dimensions, bridge tables for joins), with the columns, join keys and notable values. On a warehouse "
    "look at schemas first, then tables. Bias towards inclusion; name tables exactly as the catalog does."
)
TOOLS = ["search_schema", "list_schemas", "list_tables", "describe_table", "find_join_path", "find_values"]


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
            tools=frozenset(run.offered(TOOLS, "link")),
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


async def link(run: Run) -> Linking:
    hits, ranked = search_hits(run)
    # the tables earlier stages looked at rank first: classify found them for this question
    looked_at, _ = known_tables(run, list(run.notebook.described))
    schemas = schema_overview(run, [*looked_at, *ranked])
    offered = run.offered(TOOLS, "link")
    found = run.notebook.render()
    described = run.notebook.described_text()
    check = [t for t in ("describe_table", "find_join_path") if t in offered]
    user = (
        f"Question: {run.question}\n\n"
        + (f"External knowledge (summary):\n{run.knowledge}\n\n" if run.knowledge else "")
        + (f"Found so far (already checked: do not look it up again):\n{found}\n\n" if found else "")
        + (
            f"Tables already described (their columns are here: do not describe them again for "
            f"their columns):\n{described}\n\n"
            if described
            else ""
        )
        + (
            "Schemas, the ones holding the tables found so far first (decide which matter first"
            + (", then list_tables(schema=…)" if "list_tables" in offered else "")
            + f"):\n{schemas}\n\n"
            if schemas
            else ""
        )
        + f"search_schema found (ranked):\n{hits}\n\n"
        + (f"Check the other candidates with {' / '.join(check)}, then answer" if check else "Answer")
        + " with the tables and notes (columns, join keys, stored spellings of the values the question "
        "names); put in `findings` what you verified, one short line each."
    )
    system = system_message("link", ROLE, run, tools=TOOLS)
    out = await converse(run, "link", system, user, TOOLS)
    assert isinstance(out, Linking)
    tables, unknown = known_tables(run, out.tables)
    if unknown:
        run.trace.event("unknown_tables", stage="link", tables=unknown)
        out.notes = (out.notes + f"\n(not in the catalog, dropped: {', '.join(unknown)})").strip()
    out.tables = tables
    return out
