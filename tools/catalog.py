"""Schema exploration tools: list_sources, list_schemas, list_tables, describe_table."""

from __future__ import annotations

import fnmatch
import re

from pydantic import BaseModel, Field

from flexsql.errors import FlexSQLError, InvalidArgument
from flexsql.tools.engines import Catalog, FetchLimits, TableInfo
from flexsql.tools.engines.families import family_of, named_families, reads_all, summed_rows, union_sql
from flexsql.tools.engines.nested_sample import NestedSample, nested_paths, spread
from flexsql.tools.engines.paths import MAX_PATHS, NestedPath
from flexsql.tools.engines.row_counts import estimate_note, rows_text
from flexsql.tools.runtime.context import SourceName, ToolContext
from flexsql.tools.runtime.registry import ToolArgs, ToolResult, tool
from flexsql.tools.runtime.render import TextBudget, cell_text
from flexsql.tools.search.keys import catalog_links


# -- list_sources ---------------------------------------------------------------------------------
class SourceEntry(BaseModel):
    name: str
    dialect: str
    url: str
    description: str = ""


class SourceList(ToolResult):
    sources: list[SourceEntry]

    def to_text(self, budget: TextBudget = TextBudget()) -> str:
        lines = [
            f"{s.name} ({s.dialect}) {s.url}" + (f" — {s.description}" if s.description else "")
            for s in self.sources
        ]
        return "\n".join(lines) or "no sources configured"


class ListSources(ToolArgs):
    pass


@tool("The configured databases: name, dialect, URL, description.")
def list_sources(ctx: ToolContext, args: ListSources) -> SourceList:
    return SourceList(
        sources=[
            SourceEntry(name=s.name, dialect=s.dialect, url=s.display_url, description=s.description)
            for s in ctx.sources
        ]
    )


# -- list_schemas ---------------------------------------------------------------------------------
class SchemaEntry(BaseModel):
    schema_name: str
    tables: int
    views: int


class SchemaList(ToolResult):
    source: str
    schemas: list[SchemaEntry]

    def to_text(self, budget: TextBudget = TextBudget()) -> str:
        return (
            "\n".join(f"{s.schema_name}: {s.tables} tables, {s.views} views" for s in self.schemas)
            or "no schemas"
        )


class ListSchemas(ToolArgs):
    source: SourceName = None


@tool("Schemas of a source with their table and view counts.")
def list_schemas(ctx: ToolContext, args: ListSchemas) -> SchemaList:
    src = ctx.source(args.source)
    counts: dict[str, list[int]] = {}
    for table in src.catalog().tables:
        key = ".".join(p for p in (table.database, table.schema_name) if p)
        entry = counts.setdefault(key, [0, 0])
        entry[1 if table.kind == "view" else 0] += 1
    return SchemaList(
        source=src.name,
        schemas=[SchemaEntry(schema_name=k, tables=v[0], views=v[1]) for k, v in counts.items()],
    )


# -- list_tables ----------------------------------------------------------------------------------


class TableEntry(BaseModel):
    name: str  # qualified; for a family, the pattern such as web.events_*
    kind: str  # table, view or family
    columns: int
    row_estimate: int | None = None
    rows_exact: bool = False  # counted; else row_estimate is the engine's estimate, from rows_from
    rows_from: str | None = None
    comment: str | None = None
    family_size: int | None = None
    family_range: str | None = None
    family_of: str | None = (
        None  # a family that is one column set of a bigger shard group: says so, naming it
    )


class TableList(ToolResult):
    source: str
    tables: list[TableEntry]
    total: int
    next_cursor: str | None = None
    truncated: bool = False

    def to_text(self, budget: TextBudget = TextBudget()) -> str:
        lines = []
        for t in self.tables:
            parts = [t.name]
            if t.kind == "family":
                parts.append(f"[{t.family_size} tables {t.family_range}, same columns]")
                if t.family_of:
                    parts.append(f"({t.family_of})")
            elif t.kind == "view":
                parts.append("[view]")
            parts.append(f"{t.columns} cols")
            if t.row_estimate is not None:
                parts.append(rows_text(t.row_estimate, t.rows_exact))
            if t.comment:
                parts.append("— " + cell_text(t.comment, 80))
            lines.append(" ".join(parts))
        note = estimate_note(
            [t.rows_from for t in self.tables if t.row_estimate is not None and not t.rows_exact]
        )
        if note:
            lines.append(note)
        shown = len(self.tables)
        if self.next_cursor:
            lines.append(
                f"truncated: true — {shown} of {self.total} entries shown; next: cursor={self.next_cursor}"
            )
        elif not lines:
            lines.append("no tables match")
        return "\n".join(lines)


def _families(tables: list[TableInfo]) -> list[tuple[str, list[TableInfo], str | None]]:
    """Group tables into entries: each sharded family (tools/engines/families.py) is one entry named as
    every tool and SQL name it; the other tables are entries of their own. The third item names, for a
    family that is one column set of a bigger shard group, the group (its pattern reads them all)."""
    entries: list[tuple[str, list[TableInfo], str | None]] = []
    grouped: set[int] = set()
    for fam in named_families(tables):
        first = tables[fam.members[0]]
        prefix = first.qualified[: -len(first.name)]
        split = reads_all(prefix + fam.group, len(fam.group_members)) if fam.name != fam.group else None
        entries.append((prefix + fam.name, [tables[i] for i in fam.members], split))
        grouped.update(fam.members)
    entries += [(t.qualified, [t], None) for i, t in enumerate(tables) if i not in grouped]
    entries.sort(key=lambda e: e[0].lower())
    return entries


class ListTables(ToolArgs):
    schema_: str | None = Field(None, alias="schema", description="only this schema")
    pattern: str | None = Field(None, description="substring or glob")
    limit: int = Field(50, ge=1, le=1000)
    cursor: str | None = None
    refresh: bool = Field(False, description="re-read the catalog")
    source: SourceName = None


@tool(
    lambda s: (
        f"Tables and views with row estimates and comments, {ListTables.default('limit')} per page; sharded "
        "families are one entry."
    )
)
def list_tables(ctx: ToolContext, args: ListTables) -> TableList:
    schema, pattern, limit, cursor = args.schema_, args.pattern, args.limit, args.cursor
    src = ctx.source(args.source)
    if args.refresh:
        src.catalog(refresh=True)
    offset = 0
    if cursor:
        if not re.fullmatch(r"o\d{1,9}", cursor.strip()):
            raise InvalidArgument(
                f"cursor {cursor!r} is not one this tool returned; omit it to start from the first page"
            )
        offset = int(cursor.strip()[1:])
    catalog = src.catalog()
    tables = catalog.tables
    if schema:
        wanted = schema.lower()
        tables = [
            t for t in tables if wanted in (t.schema_name.lower(), f"{t.database}.{t.schema_name}".lower())
        ]
        if not tables:
            raise InvalidArgument(
                f"schema {schema!r} has no tables; schemas: {', '.join(catalog.schemas()[:20])}"
            )
    if pattern:
        glob = pattern.lower().replace("%", "*")
        if "*" not in glob and "?" not in glob:
            glob = f"*{glob}*"
        tables = [
            t
            for t in tables
            if fnmatch.fnmatchcase(t.qualified.lower(), glob) or fnmatch.fnmatchcase(t.name.lower(), glob)
        ]
    entries = _families(tables)
    page = entries[offset : offset + limit]
    items: list[TableEntry] = []
    for name, members, group in page:
        first = members[0]
        if len(members) == 1:
            items.append(
                TableEntry(
                    name=name,
                    kind=first.kind,
                    columns=len(first.columns),
                    row_estimate=first.row_estimate,
                    rows_exact=first.rows_exact,
                    rows_from=None if first.rows_exact else first.rows_from,
                    comment=first.comment,
                )
            )
        else:
            rows, exact, source = summed_rows(members)
            items.append(
                TableEntry(
                    name=name,
                    kind="family",
                    columns=len(first.columns),
                    row_estimate=rows,
                    rows_exact=exact,
                    rows_from=source,
                    comment=first.comment,
                    family_size=len(members),
                    family_range=f"{members[0].name} … {members[-1].name}",
                    family_of=group,
                )
            )
    more = offset + limit < len(entries)
    return TableList(
        source=src.name,
        tables=items,
        total=len(entries),
        next_cursor=f"o{offset + limit}" if more else None,
        truncated=more,
    )


# -- describe_table -------------------------------------------------------------------------------
def _paths_hint(paths: list[str], budget: TextBudget) -> str:
    """How the listed paths are read, naming only the tools the reader has: the value tools take a path
    as a column (a path through an array too), sample_rows one without []."""
    if not paths:
        return ""
    through = next((p for p in paths if "[]" in p), paths[0])
    plain = next((p for p in paths if "[]" not in p), None)
    uses = [f"{name}(column={through!r})" for name in budget.offered("distinct_values", "profile_column")]
    if plain and budget.offers("sample_rows"):
        uses.append(f'sample_rows(columns=[{plain!r}], where="{plain} = …")')
    return ("paths read as columns: " + ", ".join(uses)) if uses else ""


class ColumnDescription(BaseModel):
    name: str
    type: str
    nullable: bool | None = None
    primary_key: bool = False
    references: str | None = None
    inferred_reference: str | None = None  # no declared key: where the column's name says it points
    inferred_why: str | None = None
    comment: str | None = None
    examples: list[str] = []
    paths: list[NestedPath] = []  # keys inside a nested column, from samples of its values
    more_paths: int = 0  # paths found past those listed (search_schema indexes them all)


class TableDescription(ToolResult):
    source: str
    table: str
    kind: str
    comment: str | None = None
    row_estimate: int | None = None
    rows_exact: bool = False  # counted; else row_estimate is the engine's estimate, from rows_from
    rows_from: str | None = None
    columns: list[ColumnDescription]
    total_columns: int
    truncated: bool = False
    family: str | None = None
    paths_from: str | None = None  # where a family's nested paths were found: "values of 32 of 92 tables"

    def to_text(self, budget: TextBudget = TextBudget()) -> str:
        """Every column, fitted to the budget: a wide warehouse table (91 columns with long
        comments) cut at the character bound lost the columns past it, so its comments are
        shortened, then left out, then its examples, before any column is."""
        text = self._text(budget, *FIT_STEPS[0])
        if len(text) <= budget.max_chars:
            return text
        room = budget.max_chars - FIT_NOTE_CHARS
        for comment_chars, examples, why, path_examples, paths in FIT_STEPS[1:]:
            text = self._text(budget, comment_chars, examples, why, path_examples, paths)
            if len(text) <= room:
                break
        left_out = "comments shortened" if comment_chars else "comments left out"
        if not examples:
            left_out += ", examples left out"
        if paths < MAX_PATHS and any(len(c.paths) > paths for c in self.columns):
            left_out += f", {paths} paths a column"
        if len(text) > room:  # still too long: the last columns by name only
            lines = text.splitlines()
            kept: list[str] = []
            names: list[str] = []
            used = 0
            for line in lines:
                column = line.startswith("- ")
                if names or (column and used + len(line) + 1 > room * 0.7):
                    if column:
                        names.append(line[2:].split(" ", 1)[0])
                    elif not line.startswith("  - "):  # a footer, not a nested path
                        kept.append(line)
                    continue
                kept.append(line)
                used += len(line) + 1
            text = "\n".join(kept)
            shown = names
            while shown and len(text) + len(", ".join(shown)) + FIT_NOTE_CHARS * 2 > budget.max_chars:
                shown = shown[: len(shown) * 9 // 10]
            text += f"\n({len(names)} more columns, names only: {', '.join(shown)}"
            if len(shown) < len(names):
                text += f", … {len(names) - len(shown)} not named here" + (
                    "; search_schema finds them" if budget.offers("search_schema") else ""
                )
                return text + f")\n({left_out})"
            return text + f")\n({left_out} to show every column's name)"
        return text + f"\n({left_out} to show every column)"

    def _text(
        self,
        budget: TextBudget,
        comment_chars: int,
        examples: bool,
        why: bool = True,
        path_examples: int = 3,
        paths: int = MAX_PATHS,
    ) -> str:
        head = f"{self.table} ({self.kind}"
        if self.row_estimate is not None:
            head += ", " + rows_text(self.row_estimate, self.rows_exact)
            if not self.rows_exact and self.rows_from:
                head += f" estimated from {self.rows_from}"
        head += ")"
        if self.comment:
            head += " — " + cell_text(self.comment, 200)
        lines = [head]
        if self.family:
            lines.append(f"{'family' if self.kind == 'family' else 'member of family'} {self.family}")
        for c in self.columns:
            flags = []
            if c.primary_key:
                flags.append("PK")
            if c.references:
                flags.append(f"FK→{c.references}")
            elif c.inferred_reference:
                flags.append(
                    f"FK?→{c.inferred_reference}" + (f" (inferred: {c.inferred_why})" if why else "")
                )
            if c.nullable is False and not c.primary_key:
                flags.append("NOT NULL")
            line = f"- {c.name} {c.type}"
            if flags:
                line += " " + " ".join(flags)
            if c.comment and comment_chars:
                line += " — " + cell_text(c.comment, comment_chars)
            if c.examples and examples:
                line += " e.g. " + ", ".join(c.examples)
            lines.append(line)
            lines += [
                f"  - {p.path} {p.type}"
                + (" e.g. " + ", ".join(p.examples[:path_examples]) if p.examples and path_examples else "")
                for p in c.paths[:paths]
            ]
            more = c.more_paths + max(len(c.paths) - paths, 0)
            if more:
                lines.append(
                    f"  - … {more} more paths"
                    + (" (search_schema finds them)" if budget.offers("search_schema") else "")
                )
        hint = _paths_hint([p.path for c in self.columns for p in c.paths], budget)
        if hint:
            if self.paths_from:
                hint += f" (paths from {self.paths_from})"
            lines.append(hint)
        if self.truncated:
            lines.append(
                f"truncated: true — {len(self.columns)} of {self.total_columns} columns shown"
                + ("; search_schema finds the others" if budget.offers("search_schema") else "")
            )
        return "\n".join(lines)


MAX_DESCRIBE_COLUMNS = 300
# (comment characters, examples, why a key is inferred, examples a nested path, paths a column) tried in
# turn until every column fits: a nested warehouse table's paths (40 a column, with examples) would
# otherwise push its last columns past the cut
FIT_STEPS: tuple[tuple[int, bool, bool, int, int], ...] = (
    (120, True, True, 3, MAX_PATHS),
    (60, True, True, 1, MAX_PATHS),
    (60, True, True, 1, 20),
    (0, True, True, 1, 12),
    (0, True, True, 0, 12),
    (0, False, True, 0, 8),
    (0, False, False, 0, 5),
)
FIT_NOTE_CHARS = 80  # room kept for the note that says what was left out
EXAMPLE_CHARS = 1500  # the examples of all columns together, before each is cut at 40-160 characters
EXAMPLE_SHARDS = 8  # shards of a family whose first rows give its examples


def example_values(
    ctx: ToolContext, table: TableInfo, source_name: str, per_column: int = 3
) -> tuple[dict[str, list[str]], dict[str, list[NestedPath]], NestedSample]:
    """A few distinct non-NULL values per column from the first rows, and the paths inside nested
    columns: those of every shard of the table's column set (or family), found where values are
    (nested_sample.py). Cached per table."""
    src = ctx.source(source_name)
    # kept with the catalog object, so a refresh (a new catalog) never serves the old examples
    cache: dict[str, tuple[dict[str, list[str]], dict[str, list[NestedPath]], NestedSample]] = (
        src.catalog().derived("describe_examples", dict)
    )
    key = table.qualified
    if key in cache:
        return cache[key]
    budget = min(ctx.limits.query_timeout_s, 10.0)
    # text columns too: JSON kept as text is nested all the same (their first rows tell it)
    sample = nested_paths(src, path_shards(src.catalog(), table), budget, probe_text=True)
    by_name = {name.lower(): found for name, found in sample.paths.items()}
    columns = table.columns[:MAX_DESCRIBE_COLUMNS]
    examples: dict[str, list[str]] = {c.name: [] for c in columns}
    paths: dict[str, list[NestedPath]] = {
        c.name: by_name[c.name.lower()] for c in columns if c.name.lower() in by_name
    }
    # a family's examples from a few of its shards (spread over its range, empty ones left out): the union
    # of hundreds of shards cost a second to build and check for the first 50 rows of one of them
    from_sql = src.engine.quote_table(table)
    if table.shards:
        holding = [t for t in table.shards if not (t.rows_exact and t.row_estimate == 0)] or table.shards
        from_sql = f"({union_sql(src.engine, spread(holding, EXAMPLE_SHARDS))}) AS flexsql_family"
    try:
        result = src.execute(
            f"SELECT * FROM {from_sql} LIMIT 50",
            timeout_s=min(ctx.limits.query_timeout_s, 10.0),
            limits=FetchLimits(max_rows=50, count_limit=50),
        )
    except Exception:  # examples are a nicety: a slow or odd table still gets described
        cache[key] = examples, paths, sample
        return cache[key]
    index = {name: i for i, name in enumerate(result.columns)}
    # a narrow table (a code table: code, description) shows its texts whole up to 160 characters; a
    # wide one keeps each example short so the description stays readable
    example_chars = max(40, min(160, EXAMPLE_CHARS // max(len(columns) * per_column, 1)))
    for col in columns:
        i = index.get(col.name)
        if i is None or col.name in paths:  # the paths carry the examples that matter, not a blob's start
            continue
        seen: list[str] = []
        for row in result.rows:
            value = row[i]
            if value is None:
                continue
            text = cell_text(value, example_chars)
            if text not in seen:
                seen.append(text)
            if len(seen) >= per_column:
                break
        examples[col.name] = seen
    cache[key] = examples, paths, sample
    return cache[key]


def path_shards(catalog: Catalog, table: TableInfo) -> list[TableInfo]:
    """The tables whose nested values describe `table`'s paths: a family's shards, a shard's column set
    (a warehouse's schema does not depend on which rows a sample hit), else the table itself."""
    if table.shards:
        return list(table.shards)
    label = family_of(catalog, table)
    if label is not None:
        try:
            family = catalog.resolve(label.name)
        except FlexSQLError:
            return [table]
        if family.shards:
            return list(family.shards)
    return [table]


DESCRIBE_MIN_WEIGHT = 0.5  # weaker inferred links (a shared plain name) are left to find_join_path


def _inferred_references(catalog: Catalog, info: TableInfo, declared: set[str]) -> dict[str, tuple[str, str]]:
    """column -> (table.column it points at, why) for the surest link inferred from each column that
    has no declared foreign key."""
    position = next((i for i, t in enumerate(catalog.tables) if t is info), None)
    if position is None:
        return {}
    out: dict[str, tuple[str, str]] = {}
    for link in catalog_links(catalog).of_table(position):
        col = link.columns[0]
        if link.declared or len(link.columns) != 1 or col in declared or col in out:
            continue
        if link.weight >= DESCRIBE_MIN_WEIGHT:
            ref = catalog.tables[link.ref_table]
            out[col] = (f"{ref.name}.{link.ref_columns[0]}", link.evidence)
    return out


class DescribeTable(ToolArgs):
    table: str
    source: SourceName = None


@tool(
    'One table\'s columns: type, keys, comment, example values; row estimate. Example: table="sales.orders".'
)
def describe_table(ctx: ToolContext, args: DescribeTable) -> TableDescription:
    table = args.table
    src = ctx.source(args.source)
    catalog = src.catalog()
    info = catalog.resolve(table)
    fk_by_col: dict[str, str] = {}
    for fk in info.foreign_keys:
        for col, ref in zip(fk.columns, fk.ref_columns or [""] * len(fk.columns), strict=False):
            fk_by_col[col] = f"{fk.ref_table}.{ref}" if ref else fk.ref_table
    inferred = _inferred_references(catalog, info, set(fk_by_col))
    examples, paths, sample = example_values(ctx, info, src.name)
    family = None
    if info.shards:  # a family read as one table
        family = (
            f"{info.name} ({len(info.shards)} tables {info.shards[0].name} … {info.shards[-1].name}; "
            "columns of every shard, NULL where a shard lacks one; SQL reads it by this name)"
        )
    elif (member := family_of(catalog, info)) is not None:
        family = f"{member.name} ({member.size} tables" + (
            f"; {member.reads_all()})" if member.group else ")"
        )
    columns = [
        ColumnDescription(
            name=c.name,
            type=c.type,
            nullable=c.nullable,
            primary_key=c.primary_key,
            references=fk_by_col.get(c.name),
            inferred_reference=inferred.get(c.name, (None, None))[0],
            inferred_why=inferred.get(c.name, (None, None))[1],
            comment=c.comment,
            examples=examples.get(c.name, []),
            paths=paths.get(c.name, [])[:MAX_PATHS],
            more_paths=max(len(paths.get(c.name, [])) - MAX_PATHS, 0),
        )
        for c in info.columns[:MAX_DESCRIBE_COLUMNS]
    ]
    paths_from = None
    if paths and (sample.shards > 1 or not sample.complete):
        paths_from = (
            f"values of {sample.shards_read} of {sample.shards} tables"
            + (f", {sample.empty} empty" if sample.empty else "")
            + ("" if sample.complete else "; time ran out before the others")
        )
    return TableDescription(
        source=src.name,
        table=info.qualified,
        kind="family" if info.shards else info.kind,
        comment=info.comment,
        row_estimate=info.row_estimate,
        rows_exact=info.rows_exact,
        rows_from=None if info.rows_exact else info.rows_from,
        columns=columns,
        total_columns=len(info.columns),
        truncated=len(info.columns) > MAX_DESCRIBE_COLUMNS,
        family=family,
        paths_from=paths_from,
    )
