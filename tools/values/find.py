"""Value inspection tools: find_values, distinct_values, profile_column (and build_value_index).

find_values answers "which column holds a value like X?" from the persistent value index
(value_index.py), built lazily on first use, and checks live, within a time budget, only the
columns the index does not cover. distinct_values and profile_column query the table, sampling it
(and saying so) when it is too big to scan, or when a full scan runs past the timeout.

Identifiers reach SQL only quoted by sqlglot for the source's dialect, and user text only as
sqlglot string literals.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel

from flexsql.errors import InvalidArgument, NotFoundError, QueryError, QueryTimeout
from flexsql.tools.engines.base import Catalog, FetchLimits, Source, TableInfo
from flexsql.tools.engines.traits import traits_for
from flexsql.tools.runtime.args import check_limit
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.render import cell_text, jsonable
from flexsql.tools.sql.build import as_text, quote_ident, quote_literal, quote_table
from flexsql.tools.values.index import (
    SAMPLE_ROWS,
    ColumnState,
    IndexedValue,
    ValueIndex,
    ValueIndexStats,
    is_text_type,
    needs_sample,
    normalize,
    sample_from,
    sorted_key,
)

Progress = Callable[[float, float, str], None]
MatchKind = Literal[
    "exact", "case-insensitive", "normalized", "word order", "partial", "fuzzy", "contains", "one word"
]

MAX_TEXT_CHARS = 200
MAX_NAMED_TABLES = 20  # tables named one by one up to this many: their unindexed columns are checked live
MAX_LIVE_COLUMNS = 16  # columns checked live per find_values call when the index does not cover them
LIVE_BUDGET_S = 10.0  # total seconds of live checks per call (each also bounded by the query timeout)
APPROX_ABOVE = 5_000_000  # rows above which distinct counts use the engine's approximate aggregate
PROFILE_TOP = 10
PATTERN_VALUES = 1000  # most frequent values the pattern summary reads

_NUMERIC_TYPE = re.compile(r"INT|DEC|NUM|REAL|FLOAT|DOUBLE|HUGEINT", re.IGNORECASE)
_ORDERED_TYPE = re.compile(
    r"INT|DEC|NUM|REAL|FLOAT|DOUBLE|MONEY|DATE|TIME|INTERVAL|CHAR|TEXT|STRING|NAME", re.IGNORECASE
)
# names that contain INT, TIME or NUM without being numbers or ordered scalars (no avg, no min/max)
_NOT_SCALAR = re.compile(r"INTERVAL|POINT|RANGE|MULTIRANGE|TSVECTOR|TSQUERY|ENUM|INET|CIDR", re.IGNORECASE)
_UNORDERED_TYPE = re.compile(r"POINT|RANGE|TSVECTOR|TSQUERY|TIMETZ|TIME WITH TIME ZONE", re.IGNORECASE)
TEXT_VALUE_CHARS = 1000  # longer values are grouped whole but returned cut (a 10 MB cell is not a value)
_NESTED_TYPE = re.compile(r"JSON|ARRAY|\[\]|VARIANT|OBJECT|STRUCT|MAP|GEO", re.IGNORECASE)


_BINARY_TYPE = re.compile(r"BLOB|BYTEA|BINARY|BYTES", re.IGNORECASE)


def _value_sql(column_sql: str, ctype: str, dialect: str) -> str:
    """The column as something every engine can compare, group and take min/max of: itself when
    ordered (numbers, text, dates), `0x…` hex for binary (as every tool shows bytes), else its text
    (booleans, JSON, arrays, UUIDs…)."""
    traits = traits_for(dialect)
    if _BINARY_TYPE.search(ctype) and not traits.dynamic_types:
        return traits.binary_text(column_sql)
    if traits.dynamic_types or (
        _ORDERED_TYPE.search(ctype) and not _NESTED_TYPE.search(ctype) and not _UNORDERED_TYPE.search(ctype)
    ):
        return column_sql
    return as_text(column_sql, dialect)


# -- shared helpers ---------------------------------------------------------------------------------


def value_index(ctx: ToolContext, source: Source) -> ValueIndex:
    """The source's value index (one object per ToolContext; the file is shared across them)."""
    return ctx.cache(f"values:{source.name}", lambda: ValueIndex(source))


def _resolve_column(
    ctx: ToolContext, table: str, column: str, source: str | None
) -> tuple[Source, TableInfo, str, str]:
    if not isinstance(table, str) or not table.strip():
        raise InvalidArgument("table is required: give a table name such as 'orders' or 'sales.orders'")
    if not isinstance(column, str) or not column.strip():
        raise InvalidArgument(
            "column is required: give a column name of the table (describe_table lists them)"
        )
    src = ctx.source(source)
    info = src.catalog().resolve(table)
    col = info.column(column.strip())
    return src, info, col.name, col.type


def _resolve_scope(catalog: Catalog, tables: list[str] | None) -> tuple[list[TableInfo], bool]:
    """The tables to search: the named ones (`schema.*` for a whole schema), or every base table;
    and whether the caller named a few tables one by one (then every column of them is checked)."""
    if tables is None or tables == []:
        return [t for t in catalog.tables if t.kind == "table"], False
    if isinstance(tables, str):
        tables = [tables]
    if len(tables) > 100:
        raise InvalidArgument(
            f"tables lists {len(tables)} names; give at most 100 (or a schema as 'schema.*')"
        )
    chosen: dict[str, TableInfo] = {}
    wildcard = False
    for name in tables:
        if not isinstance(name, str) or not name.strip():
            raise InvalidArgument(
                "tables must be a list of table names such as ['orders', 'sales.customers']"
            )
        if name.strip().endswith(".*"):
            schema = name.strip()[:-2].split(".")[-1].strip('"').lower()
            hits = [t for t in catalog.tables if t.schema_name.lower() == schema]
            if not hits:
                raise NotFoundError(
                    f"schema {schema!r} not found; schemas: {', '.join(catalog.schemas()[:20])}"
                )
            wildcard = True
            for t in hits:
                chosen[t.qualified] = t
        else:
            info = catalog.resolve(name)
            chosen[info.qualified] = info
    return list(chosen.values()), not wildcard and len(chosen) <= MAX_NAMED_TABLES


def _in_schema(catalog: Catalog, scope: list[TableInfo], schema: str) -> list[TableInfo]:
    if not isinstance(schema, str) or not schema.strip():
        raise InvalidArgument("schema must be a schema name such as 'sales' (list_schemas lists them)")
    wanted = schema.strip().strip('"').lower()
    kept = [
        t
        for t in scope
        if t.schema_name.lower() == wanted
        or ".".join(p for p in (t.database, t.schema_name) if p).lower() == wanted
    ]
    if not kept:
        if not any(t.schema_name.lower() == wanted for t in catalog.tables):
            close = difflib.get_close_matches(wanted, [s.lower() for s in catalog.schemas()], n=5, cutoff=0.5)
            hint = (
                f"did you mean: {', '.join(close)}?"
                if close
                else f"schemas: {', '.join(catalog.schemas()[:20])}"
            )
            raise NotFoundError(f"schema {schema!r} not found; {hint}")
        raise InvalidArgument(f"none of the tables named is in schema {schema!r}: drop tables= or schema=")
    return kept


def _like_pattern(text: str) -> str:
    escaped = text.lower().replace("!", "!!").replace("%", "!%").replace("_", "!_")
    return f"%{escaped}%"


def _large(table: TableInfo, dialect: str) -> bool:
    return needs_sample(table, dialect)


# -- find_values ------------------------------------------------------------------------------------


class ValueMatch(BaseModel):
    table: str
    column: str
    value: str  # the stored spelling
    count: int  # rows holding it (in the sample when `sampled`)
    match: MatchKind
    score: float
    via: Literal["index", "live"] = "index"
    sampled: bool = False
    others: list[str] = []  # other close values in the same column
    word: str | None = None  # for match "one word": the word of the text this value equals
    context_words: list[str] = []  # words of `context` the column, its table or schema share


class FindValuesResult(BaseModel):
    text: str
    source: str
    matches: list[ValueMatch]
    columns_matched: int
    truncated: bool
    tables_searched: int
    index_tables_built: int  # tables this call had to index first
    live_checked: list[str] = []  # table.column checked with a live query (not covered by the index)
    not_checked: int = 0  # uncovered columns left unchecked (budget)
    notes: list[str] = []
    index_age_s: float | None = None  # age of the oldest index entry searched (rebuilt on data changes)

    def to_text(self) -> str:
        head = f"find_values {self.text!r} in {self.source}: {self.columns_matched} column(s) matched"
        if self.truncated:
            head += f", showing {len(self.matches)} (truncated: true)"
        lines = [head]
        for m in self.matches:
            extra = f"; also {', '.join(repr(o) for o in m.others)}" if m.others else ""
            sample = ", sampled" if m.sampled else ""
            rows = "row" if m.count == 1 else "rows"
            kind = f"word {m.word!r}" if m.word else m.match
            lines.append(
                f"{m.table}.{m.column} = {cell_text(m.value, 120)!r} ({m.count:,} {rows}; {kind}"
                f"{'' if m.match in ('exact',) else f' {m.score:.2f}'}{', live' if m.via == 'live' else ''}"
                f"{sample}){extra}"
                + (f" — context: {', '.join(repr(w) for w in m.context_words)}" if m.context_words else "")
            )
        if not self.matches:
            lines.append(
                "no column holds a value like it; try another spelling, fewer words, or distinct_values"
            )
        info = [f"searched {self.tables_searched} tables"]
        if self.index_tables_built:
            info.append(f"indexed {self.index_tables_built} tables first")
        if self.live_checked:
            info.append(f"checked {len(self.live_checked)} unindexed columns live")
        if self.not_checked:
            info.append(f"{self.not_checked} unindexed columns not checked (name them in tables= to check)")
        if self.index_age_s is not None:
            info.append(f"value index built {_age_text(self.index_age_s)} ago")
        lines.append("(" + "; ".join(info) + ")")
        lines += self.notes
        return "\n".join(lines)


def find_values(
    ctx: ToolContext,
    text: str,
    tables: list[str] | None = None,
    limit: int = 10,
    source: str | None = None,
    progress: Progress | None = None,
    schema: str | None = None,
    context: str | None = None,
) -> FindValuesResult:
    """Which table.column holds values like `text` (exact, case-insensitive, accents/punctuation,
    word order, partial, typos), with the stored spelling and row count. `schema` keeps one schema;
    `context` (the question, or the words around the literal) ranks the columns by relevance to it."""
    from flexsql.tools.values.context import rank_bonus, spread_schemas

    if not isinstance(text, str) or not text.strip():
        raise InvalidArgument("text is required: the value to look for, e.g. 'France' or 'Desk Lamp'")
    if len(text) > MAX_TEXT_CHARS:
        raise InvalidArgument(
            f"text is {len(text)} characters; give at most {MAX_TEXT_CHARS} (a value, not a sentence)"
        )
    check_limit("limit", limit, 1, 100)
    src = ctx.source(source)
    catalog = src.catalog()
    scope, explicit = _resolve_scope(catalog, tables)
    if schema is not None:
        scope = _in_schema(catalog, scope, schema)
    if context is not None and (not isinstance(context, str) or len(context) > 2000):
        raise InvalidArgument(
            "context must be text of at most 2000 characters: the question or the words around the literal"
        )
    index = value_index(ctx, src)
    built = index.ensure(scope, progress=progress, timeout_s=ctx.limits.query_timeout_s, ttl_s=_ttl(ctx))
    states = index.columns([t.qualified for t in scope])
    built_at = index.built_at(t.qualified for t in scope)
    indexed = {c.cid: c for c in states if c.status == "indexed"}
    found = match_values(index, text.strip(), set(indexed))

    by_column: dict[int, list[tuple[IndexedValue, str, float]]] = {}
    for value, kind, score in found:
        by_column.setdefault(value.cid, []).append((value, kind, score))
    matches: list[ValueMatch] = []
    for cid, items in by_column.items():
        items.sort(key=lambda x: (-x[2], -x[0].count))
        best, kind, score = items[0]
        state = indexed[cid]
        matches.append(
            ValueMatch(
                table=state.table,
                column=state.column,
                value=best.value,
                count=best.count,
                match=kind,
                score=round(score, 3),
                sampled=state.sampled,
                others=[v.value for v, _, _ in items[1:4]],
            )
        )

    if not matches:
        matches = _word_matches(index, text.strip(), indexed)

    # Live checks cost a scan: all uncovered columns of tables the caller named; the uncovered columns
    # of the whole scope when the index found nothing; else only the incomplete columns where the index
    # found something close but not the value itself (the value may sit past the cap).
    live_checked, not_checked = [], 0
    strong = any(m.match in ("exact", "case-insensitive", "normalized", "word order") for m in matches)
    if explicit or not strong:
        only = None
        if any(m.match != "one word" for m in matches) and not explicit:
            only = {(m.table, m.column) for m in matches if m.match in ("partial", "fuzzy")}
            complete = {(c.table, c.column) for c in states if c.complete}
            only = only - complete
        if only is None or only:
            live, live_checked, not_checked = _live_check(
                ctx, src, scope, states, text.strip(), free_text=explicit, only=only
            )
            replaced = {(m.table, m.column) for m in live}
            matches = [m for m in matches if (m.table, m.column) not in replaced] + live
    distinct = {(c.table, c.column): c.n_values for c in states if c.status == "indexed" and c.complete}
    bonus = rank_bonus(catalog, matches, text.strip(), context, distinct)
    matches.sort(key=lambda m: (-(m.score + bonus[id(m)]), -m.count, m.table, m.column))
    if context is None and schema is None:
        matches = spread_schemas(matches, bonus)
    notes = []
    if built.errors:
        notes.append(f"{len(built.errors)} tables could not be indexed: " + "; ".join(built.errors[:2]))
    return FindValuesResult(
        text=text,
        source=src.name,
        matches=matches[:limit],
        columns_matched=len(matches),
        truncated=len(matches) > limit,
        tables_searched=len(scope),
        index_tables_built=built.scanned,
        live_checked=live_checked,
        not_checked=not_checked,
        notes=notes,
        index_age_s=None if built_at is None else round(max(0.0, time.time() - built_at), 1),
    )


def _ttl(ctx: ToolContext) -> float:
    """How old an index entry may get before it is rebuilt whatever the change signal ([limits] value_index_ttl_s)."""
    return float(ctx.limits.value_index_ttl_s)


def _age_text(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def _word_matches(index: ValueIndex, text: str, indexed: dict[int, ColumnState]) -> list[ValueMatch]:
    """No value is like the whole text: the columns holding its words, one by one (a first and a
    last name kept in two columns, a city and a country)."""
    words = [w for w in dict.fromkeys(normalize(text).split()) if len(w) >= 2][:6]
    if len(words) < 2:
        return []
    best: dict[int, ValueMatch] = {}
    for value in index.by_norm(words, set(indexed)):
        state = indexed[value.cid]
        current = best.get(value.cid)
        if current is None or value.count > current.count:
            best[value.cid] = ValueMatch(
                table=state.table,
                column=state.column,
                value=value.value,
                count=value.count,
                match="one word",
                score=0.4,
                sampled=state.sampled,
                word=value.norm,
            )
    return list(best.values())


def match_values(index: ValueIndex, text: str, cids: set[int]) -> list[tuple[IndexedValue, str, float]]:
    """Index values like `text`, each with its match kind and a score in (0, 1]."""
    qnorm = normalize(text)
    if not qnorm or not cids:
        return []
    out: dict[int, tuple[IndexedValue, str, float]] = {}

    def add(value: IndexedValue, kind: str, score: float) -> None:
        score += min(0.009, math.log10(1 + value.count) / 1000)  # frequent spellings first among equals
        if value.vid not in out or out[value.vid][2] < score:
            out[value.vid] = (value, kind, score)

    folded = text.casefold()
    for value in index.by_norm([qnorm], cids):
        if value.value == text:
            add(value, "exact", 1.0)
        elif value.value.casefold() == folded:
            add(value, "case-insensitive", 0.97)
        else:
            add(value, "normalized", 0.94)
    if " " in qnorm:
        for value in index.by_sorted_key(sorted_key(qnorm), cids):
            if value.vid not in out:
                add(value, "word order", 0.9)

    tokens = list(dict.fromkeys(qnorm.split()))[:8]
    per_token: list[tuple[str, dict[str, str], set[int]]] = []
    for tok in tokens:
        similar = index.similar_tokens(tok)
        vids = index.vids_with_tokens(similar) if similar else set()
        per_token.append((tok, similar, vids))
    usable = [p for p in per_token if p[2]]
    # every word must match, except one word of a long text (a stray 'the', a word the data lacks)
    if usable and len(usable) >= len(tokens) - (1 if len(tokens) >= 3 else 0):
        usable.sort(key=lambda p: len(p[2]))
        common = set(usable[0][2])
        for _, _, vids in usable[1:]:
            common &= vids
        common -= set(out)
        candidates = [v for v in index.by_vids(list(common)[:5000]) if v.cid in cids]
        missing = len(tokens) - len(usable)
        for value in candidates:
            vtoks = value.norm.split()
            fuzzy = False
            for tok, similar, _ in usable:
                if tok in vtoks:
                    continue
                kinds = {similar.get(v) for v in vtoks}
                if "exact" not in kinds and "prefix" not in kinds:
                    fuzzy = True
            coverage = min(1.0, len(qnorm) / max(1, len(value.norm)))
            if fuzzy or missing:
                ratio = difflib.SequenceMatcher(None, qnorm, value.norm).ratio()
                add(value, "fuzzy", 0.5 + 0.3 * ratio + 0.1 * coverage - 0.1 * missing)
            else:
                add(value, "partial", 0.6 + 0.25 * coverage)
    return sorted(out.values(), key=lambda x: -x[2])


def _live_check(
    ctx: ToolContext,
    src: Source,
    scope: list[TableInfo],
    states: list[ColumnState],
    text: str,
    free_text: bool,
    only: set[tuple[str, str]] | None = None,
) -> tuple[list[ValueMatch], list[str], int]:
    """Query the text columns the index does not cover (over the cap, id-like, failed; free text
    only when asked, being the costliest scan): one aggregate query per table, smallest tables
    first, at most MAX_LIVE_COLUMNS columns and LIVE_BUDGET_S seconds in all."""
    by_table: dict[str, dict[str, ColumnState]] = {}
    for state in states:
        by_table.setdefault(state.table, {})[state.column] = state
    dialect = src.dialect
    work: list[tuple[TableInfo, list[tuple[str, bool]]]] = []  # (table, [(column, free text)])
    for table in sorted(scope, key=lambda t: t.row_estimate or 0):
        known = by_table.get(table.qualified, {})
        todo = []
        for col in table.columns:
            state = known.get(col.name)
            if only is not None and (table.qualified, col.name) not in only:
                continue
            if state is None:
                if known or not is_text_type(col.type, dialect):
                    continue  # indexed table without this column state, or not text: nothing to check
                todo.append((col.name, False))
            elif state.reason == "not text" or (state.status == "indexed" and state.complete):
                continue
            elif (state.reason or "").startswith("free text"):
                if free_text:
                    todo.append((col.name, True))
            else:
                todo.append((col.name, False))
        if todo:
            work.append((table, todo))
    uncovered = sum(len(cols) for _, cols in work)
    deadline = time.monotonic() + min(LIVE_BUDGET_S, ctx.limits.query_timeout_s)
    exact_sql = quote_literal(text.lower(), dialect)
    like_sql = quote_literal(_like_pattern(text), dialect)
    like_op = src.traits.like_operator
    matches: list[ValueMatch] = []
    checked: list[str] = []
    for table, columns in work:
        columns = columns[: MAX_LIVE_COLUMNS - len(checked)]
        remaining = deadline - time.monotonic()
        if not columns or remaining < 0.05:
            break
        conds, aggs = [], []
        for name, contains in columns:
            ctext = as_text(quote_ident(name, dialect), dialect)
            cond = f"{ctext} {like_op} {like_sql} ESCAPE '!'" if contains else f"lower({ctext}) = {exact_sql}"
            conds.append(cond)
            aggs += [f"count(CASE WHEN {cond} THEN 1 END)", f"min(CASE WHEN {cond} THEN {ctext} END)"]
        sql = f"SELECT {', '.join(aggs)} FROM {quote_table(table, dialect)} WHERE {' OR '.join(conds)}"
        try:
            row = src.execute(
                sql, timeout_s=min(remaining, ctx.limits.query_timeout_s), limits=FetchLimits(max_rows=1)
            ).rows[0]
        except (QueryError, IndexError):
            continue
        for i, (name, contains) in enumerate(columns):
            checked.append(f"{table.qualified}.{name}")
            count, value = int(row[2 * i] or 0), row[2 * i + 1]
            if not count or value is None:
                continue
            value = str(value)
            if contains:
                kind, score = "contains", 0.55
            elif value == text:
                kind, score = "exact", 1.0
            else:
                kind, score = "case-insensitive", 0.97
            matches.append(
                ValueMatch(
                    table=table.qualified,
                    column=name,
                    value=value,
                    count=count,
                    match=kind,
                    score=score,
                    via="live",
                )
            )
    return matches, checked, max(0, uncovered - len(checked))


def build_value_index(
    ctx: ToolContext, source: str | None = None, progress: Progress | None = None, refresh: bool = False
) -> ValueIndexStats:
    """Index the values of every base table of a source (only what is missing, unless `refresh`)."""
    src = ctx.source(source)
    catalog = src.catalog(refresh=refresh)
    scope = [t for t in catalog.tables if t.kind == "table"]
    index = value_index(ctx, src)
    report = index.ensure(
        scope, refresh=refresh, progress=progress, timeout_s=ctx.limits.query_timeout_s, ttl_s=_ttl(ctx)
    )
    return index.stats(scope, report)


# -- distinct_values --------------------------------------------------------------------------------


class DistinctValue(BaseModel):
    value: Any
    count: int


class DistinctValuesResult(BaseModel):
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

    def to_text(self) -> str:
        where = f" containing {self.contains!r}" if self.contains else ""
        head = f"{self.table}.{self.column} ({self.type}): {self.distinct_total:,} distinct values{where}"
        if self.sampled:
            head += f" in a sample ({self.sample}; counts are sample counts)"
        if self.truncated:
            head += f", top {len(self.values)} by frequency (truncated: true)"
        lines = [head, "value | count"]
        lines += [f"{cell_text(v.value, 120)} | {v.count:,}" for v in self.values]
        return "\n".join(lines)


def _group_counts(
    src: Source, table: TableInfo, column: str, ctype: str, contains: str | None, limit: int, timeout_s: float
) -> tuple[list[tuple[Any, int]], int, bool, str | None]:
    """Values by frequency: ((value, count)…, distinct total, sampled, how)."""
    dialect = src.dialect
    csql = _value_sql(quote_ident(column, dialect), ctype, dialect)
    where = ""
    if contains:
        pattern = quote_literal(_like_pattern(contains), dialect)
        where = f" WHERE lower({as_text(csql, dialect)}) LIKE {pattern} ESCAPE '!'"
    sampled = _large(table, dialect)
    for _attempt in range(2):
        if sampled:
            from_sql, how = sample_from(table, dialect, SAMPLE_ROWS, [column])
        else:
            from_sql, how = quote_table(table, dialect), None
        shown = csql
        if is_text_type(ctype, dialect) or csql != quote_ident(column, dialect) or src.traits.dynamic_types:
            shown = _cut_sql(csql, ctype, dialect)
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
        return [(_cut_value(jsonable(v)), int(n)) for v, n, _ in rows], total, sampled, how
    raise AssertionError("unreachable")


def _cut_sql(csql: str, ctype: str, dialect: str) -> str:
    """The first TEXT_VALUE_CHARS + 1 characters of a value (text, or the text of a BLOB/other type),
    so one huge cell cannot push a result past the fetch's byte cap."""
    return traits_for(dialect).prefix(csql, TEXT_VALUE_CHARS + 1)


def _cut_value(value: Any) -> Any:
    if isinstance(value, str) and len(value) > TEXT_VALUE_CHARS:
        return value[:TEXT_VALUE_CHARS] + "…"
    return value


def distinct_values(
    ctx: ToolContext,
    table: str,
    column: str,
    contains: str | None = None,
    limit: int = 20,
    source: str | None = None,
) -> DistinctValuesResult:
    """A column's values by frequency, with counts; `contains` filters case-insensitively."""
    check_limit("limit", limit, 1, 100)
    if contains is not None and (not isinstance(contains, str) or len(contains) > MAX_TEXT_CHARS):
        raise InvalidArgument(f"contains must be a text of at most {MAX_TEXT_CHARS} characters")
    src, info, col, ctype = _resolve_column(ctx, table, column, source)
    rows, total, sampled, how = _group_counts(
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


# -- profile_column ---------------------------------------------------------------------------------


class ValuePattern(BaseModel):
    pattern: str  # 9 digit, A upper, a lower; '+' a run of the previous class
    count: int
    example: str


class ColumnProfile(BaseModel):
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

    def to_text(self) -> str:
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


def profile_column(ctx: ToolContext, table: str, column: str, source: str | None = None) -> ColumnProfile:
    """Type, null fraction, distinct count, min/max, most frequent values, value patterns."""
    src, info, col, ctype = _resolve_column(ctx, table, column, source)
    dialect = src.dialect
    timeout = ctx.limits.query_timeout_s
    raw = quote_ident(col, dialect)
    csql = _value_sql(raw, ctype, dialect)
    numeric = (
        bool(_NUMERIC_TYPE.search(ctype))
        and not is_text_type(ctype, dialect)
        and not _NESTED_TYPE.search(ctype)
        and not _NOT_SCALAR.search(ctype)
    )
    textual = is_text_type(ctype, dialect)
    # min/max of the first characters: the same order, and a 10 MB cell stays under the byte cap
    extreme = _cut_sql(csql, ctype, dialect) if textual or src.traits.dynamic_types else csql
    approx = (info.row_estimate or 0) > APPROX_ABOVE and src.traits.approx_distinct is not None
    distinct_sql = src.traits.distinct_count(csql, approx)
    aggs = ["count(*)", f"count({raw})", distinct_sql, f"min({extreme})", f"max({extreme})"]
    if numeric:  # as a double: avg over DECIMAL(38,10) overflows the engine's exact sum
        aggs.append(src.traits.average(csql))
    if textual:
        length = f"length({as_text(csql, dialect)})"
        aggs += [f"min({length})", f"max({length})", f"avg({length})"]
    sampled = _large(info, dialect)
    how: str | None = None
    row: tuple[Any, ...] = ()
    for _attempt in range(2):
        if sampled:
            from_sql, how = sample_from(info, dialect, SAMPLE_ROWS, [col])
        else:
            from_sql = quote_table(info, dialect)
        try:
            rows = src.execute(
                f"SELECT {', '.join(aggs)} FROM {from_sql}", timeout_s=timeout, limits=FetchLimits(max_rows=1)
            ).rows
            if not rows:
                raise QueryError(
                    f"profile_column could not read {info.qualified}.{col}: the summary row was "
                    "dropped by the result size cap; use distinct_values or run_query instead"
                )
            row = rows[0]
            break
        except QueryTimeout:
            if sampled:
                raise
            sampled = True
    top, _total, top_sampled, top_how = _group_counts(src, info, col, ctype, None, PATTERN_VALUES, timeout)
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
        min=_cut_value(jsonable(row[3])),
        max=_cut_value(jsonable(row[4])),
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


def shape(value: str) -> str:
    """'AB-1234' -> 'AA-9999'; long or spaced values collapse runs: 'Alice Martin' -> 'Aa+ Aa+'."""
    classes = []
    for ch in value:
        if ch.isdigit():
            classes.append("9")
        elif ch.isalpha():
            classes.append("A" if ch.isupper() else "a")
        elif ch.isspace():
            classes.append(" ")
        else:
            classes.append(ch)
    if len(value) <= 12 and " " not in value:
        return "".join(classes)
    out: list[str] = []
    for c in classes:
        if out and (out[-1] == c or (out[-1] == "+" and len(out) > 1 and out[-2] == c)):
            if out[-1] != "+":
                out.append("+")
            continue
        out.append(c)
    text = "".join(out)
    return text if len(text) <= 40 else text[:39] + "…"


def value_patterns(values: list[tuple[str, int]], top: int = 5) -> list[ValuePattern]:
    counts: Counter[str] = Counter()
    examples: dict[str, str] = {}
    for value, n in values:
        key = shape(value)
        counts[key] += n
        examples.setdefault(key, value)
    return [ValuePattern(pattern=p, count=c, example=examples[p]) for p, c in counts.most_common(top)]


_DATE = re.compile(
    r"^\d{4}-\d{1,2}-\d{1,2}([ T]\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?$|"
    r"^\d{1,2}[/.]\d{1,2}[/.]\d{2,4}( \d{1,2}:\d{2}(:\d{2})?)?$"
)
_TIME = re.compile(r"^\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$")
_URL = re.compile(r"^https?://", re.IGNORECASE)
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_BOOL = {"true", "false", "yes", "no", "y", "n", "t", "f"}


def _kind_of(value: str) -> str | None:
    v = value.strip()
    if not v:
        return "empty string"
    if _DATE.match(v):
        return "date"
    if _TIME.match(v):
        return "time"
    if _UUID.match(v):
        return "uuid"
    if _EMAIL.match(v):
        return "email"
    if _URL.match(v):
        return "url"
    if v.lower() in _BOOL:
        return "boolean"
    try:
        float(v)
        return "number stored as text"
    except ValueError:
        pass
    if v[0] in "{[" and v[-1] in "}]":
        try:
            json.loads(v)
            return "json"
        except ValueError:
            return None
    return None


def looks_like(values: list[tuple[str, int]]) -> dict[str, float]:
    """Kinds that at least 20% of the (weighted) values share."""
    total = sum(n for _, n in values)
    if not total:
        return {}
    kinds: Counter[str] = Counter()
    for value, n in values:
        kind = _kind_of(value)
        if kind:
            kinds[kind] += n
    return {k: round(c / total, 3) for k, c in kinds.most_common() if c / total >= 0.2}
