"""find_values (and build_value_index): which column holds a value like X?

It answers from the persistent value index (index.py), built lazily on first use, and checks live,
within a time budget, only the columns the index does not cover.

Identifiers reach SQL only quoted by sqlglot for the source's dialect, and user text only as
sqlglot string literals.
"""

from __future__ import annotations

import difflib
import math
import re
import time
from collections.abc import Callable, Iterable
from typing import Literal

from pydantic import BaseModel, Field

from flexsql.errors import InvalidArgument, QueryError
from flexsql.tools.engines import Catalog, FetchLimits, Source, TableInfo
from flexsql.tools.engines.families import named_families
from flexsql.tools.runtime.context import SourceName, ToolContext
from flexsql.tools.runtime.registry import NO_ENV, ToolArgs, ToolEnv, ToolResult, tool
from flexsql.tools.runtime.render import TextBudget, cell_text
from flexsql.tools.runtime.schema import unlisted
from flexsql.tools.values.column_sql import is_text_type, like_pattern
from flexsql.tools.values.index import (
    BuildReport,
    ColumnState,
    IndexedValue,
    IndexReset,
    Progress,
    ScopeView,
    ValueIndex,
    ValueIndexStats,
    value_index,
)
from flexsql.tools.values.normalize import compact, normalize, number_forms, sorted_key, spaced
from flexsql.tools.values.scope import MAX_TEXT_CHARS, in_schema, resolve_scope

MatchKind = Literal[
    "exact",
    "case-insensitive",
    "normalized",  # accents, punctuation
    "spacing",  # spaces, hyphens: 'North Carolina' for 'NorthCarolina', 'email' for 'e-mail'
    "word order",
    "plural",  # the other number: 'Dogs' for 'Dog'
    "partial",  # the text's words among the value's: 'Casey' in 'Todd Casey'
    "compound",  # a word glued inside the value: 'Carolina' in 'NorthCarolina'
    "fuzzy",
    "contains",
    "one word",
]

MAX_LIVE_COLUMNS = 16  # columns checked live per find_values call when the index does not cover them
LIVE_BUDGET_S = 10.0  # total seconds of live checks per call (each also bounded by the query timeout)


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
    shards: int = 0  # for a family (table names it): how many of its shards hold such values


class Coverage(BaseModel):
    """What the value index holds of the text columns searched: told with an empty answer, so that "no
    value like it" is read as far as it goes."""

    text_columns: int = 0
    whole: int = 0  # every distinct value indexed
    partial: int = 0  # the most frequent values only, or those of a sample of a big table
    not_indexed: int = 0  # free text, unique ids, or a column that failed
    partial_columns: list[str] = []  # a few of the partial ones, table.column


def coverage(view: ScopeView, live: Iterable[str] = (), shown: int = 3) -> Coverage:
    """The text columns of the scope by what the index holds of them; those checked live (`live`,
    table.column) count as whole: the query read every value."""
    out = Coverage()
    checked = set(live)
    for c in view.states:
        if c.reason == "not text":
            continue
        out.text_columns += 1
        if f"{c.table}.{c.column}" in checked:
            out.whole += 1
        elif c.status != "indexed":
            out.not_indexed += 1
        elif c.complete and not c.sampled:
            out.whole += 1
        else:
            out.partial += 1
            if len(out.partial_columns) < shown:
                out.partial_columns.append(f"{c.table}.{c.column}")
    return out


class FindValuesResult(ToolResult):
    text: str
    source: str
    matches: list[ValueMatch]
    columns_matched: int
    truncated: bool
    tables_searched: int
    index_tables_built: int  # tables this call had to index first
    index_tables_pending: int = 0  # tables of the scope not indexed yet (being built in the background)
    live_checked: list[str] = []  # table.column checked with a live query (not covered by the index)
    not_checked: int = 0  # uncovered columns left unchecked (budget)
    notes: list[str] = []
    index_age_s: float | None = None  # age of the oldest index entry searched (rebuilt on data changes)
    coverage: Coverage | None = None  # with no match: what was searched

    def to_text(self, budget: TextBudget = TextBudget()) -> str:
        head = f"find_values {self.text!r} in {self.source}: {self.columns_matched} column(s) matched"
        if self.truncated:
            head += f", showing {len(self.matches)} (truncated: true)"
        lines = [head]
        for m in self.matches:
            extra = f"; also {', '.join(repr(o) for o in m.others)}" if m.others else ""
            sample = ", sampled" if m.sampled else ""
            rows = "row" if m.count == 1 else "rows"
            if m.shards:
                rows += f" in {m.shards} shard{'s' if m.shards > 1 else ''}"
            kind = f"word {m.word!r}" if m.word else m.match
            lines.append(
                f"{m.table}.{m.column} = {cell_text(m.value, 120)!r} ({m.count:,} {rows}; {kind}"
                f"{'' if m.match in ('exact',) else f' {m.score:.2f}'}{', live' if m.via == 'live' else ''}"
                f"{sample}){extra}"
                + (f" — context: {', '.join(repr(w) for w in m.context_words)}" if m.context_words else "")
            )
        if not self.matches and self.index_tables_pending:
            lines.append(
                f"no value like it in the {self.tables_searched - self.index_tables_pending:,} tables indexed "
                f"so far; {self.index_tables_pending:,} tables are not indexed yet (see below)"
            )
        elif not self.matches:
            lines.append(self._nothing_found(budget))
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

    def _nothing_found(self, budget: TextBudget) -> str:
        return _nothing_found_text(self, budget)


class FindValues(ToolArgs):
    text: str = Field(max_length=MAX_TEXT_CHARS, json_schema_extra=unlisted("maxLength"))
    tables: list[str] | None = Field(None, description="only these tables")
    schema_: str | None = Field(None, alias="schema", description="only this schema")
    context: str | None = Field(
        None, max_length=2000, description="the question", json_schema_extra=unlisted("maxLength")
    )
    limit: int = Field(10, ge=1, le=100)
    refresh: bool = Field(False, description="rebuild the index")
    source: SourceName = None


@tool(
    "Which table.column holds values like text (any case, spacing, typos) and their stored "
    'spelling. Example: text="Frnace".'
)
def find_values(ctx: ToolContext, args: FindValues, env: ToolEnv = NO_ENV) -> FindValuesResult:
    """Which table.column holds values like `text` (exact, case-insensitive, accents/punctuation,
    spacing ('NorthCarolina' for 'North Carolina'), word order, plural, partial ('Todd Casey' for
    'Casey'), compound ('NorthCarolina' for 'Carolina'), typos), with the stored spelling and row
    count. `schema` keeps one schema; `context` (the question, or the words around the literal) ranks
    the columns by relevance to it. The index is built first where it lacks tables, for at most
    [limits] value_index_wait_s: past it the answer comes from the tables indexed so far and says so,
    while the build goes on in the background."""
    text, tables, progress = args.text, args.tables, env.progress
    if not text.strip():
        raise InvalidArgument("text is required: the value to look for, e.g. 'France' or 'Desk Lamp'")
    notes: list[str] = []
    if args.refresh:
        rebuilt = build_value_index(ctx, args.source, progress=progress, refresh=True, wait_s=_wait(ctx))
        notes += rebuilt.notes
        if rebuilt.tables_pending:
            notes.append(
                f"the refresh goes on in the background ({rebuilt.tables_pending:,} tables to go); until "
                "then those tables answer from their previous entries"
            )
    src = ctx.source(args.source)
    catalog = src.catalog()
    scope, explicit = resolve_scope(catalog, tables)
    if args.schema_ is not None:
        scope = in_schema(catalog, scope, args.schema_)
    index = value_index(ctx, src)
    for attempt in range(2):
        built = index.ensure(
            scope, progress=progress, timeout_s=ctx.limits.query_timeout_s, ttl_s=_ttl(ctx), wait_s=_wait(ctx)
        )
        try:
            with index.snapshot():
                result = _answer(ctx, src, catalog, index, scope, explicit, args, built)
        except IndexReset:  # the file was damaged under this call: it was set aside, build it again
            if attempt:
                raise
            notes += index.take_notes()
            continue
        result.notes = [*notes, *built.notes, *index.take_notes(), *result.notes]
        return result
    raise AssertionError("unreachable")  # the loop returns or raises


def _answer(
    ctx: ToolContext,
    src: Source,
    catalog: Catalog,
    index: ValueIndex,
    scope: list[TableInfo],
    explicit: bool,
    args: FindValues,
    built: BuildReport,
) -> FindValuesResult:
    """find_values on one committed state of the index (the caller holds its snapshot)."""
    from flexsql.tools.values.context import rank_bonus, spread_schemas

    text, limit, context = args.text, args.limit, args.context
    view = index.scope_view(t.qualified for t in scope)
    built_at = index.built_at(t.qualified for t in scope)
    indexed = view.indexed
    found = match_values(index, text.strip(), set(indexed))

    by_column: dict[int, list[tuple[IndexedValue, MatchKind, float]]] = {}
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
    live_checked: list[str] = []
    not_checked = 0
    strong = any(m.match in WHOLE_SCORES for m in matches)
    if explicit or not strong:
        only = None
        if any(m.match != "one word" for m in matches) and not explicit:
            only = {(m.table, m.column) for m in matches if m.match in ("partial", "compound", "fuzzy")}
            only = {(t, c) for t, c in only if not view.by_table[t][c].complete}
        if only is None or only:
            live, live_checked, not_checked = _live_check(
                ctx, src, scope, view, text.strip(), free_text=explicit, only=only
            )
            replaced = {(m.table, m.column) for m in live}
            matches = [m for m in matches if (m.table, m.column) not in replaced] + live
    distinct: dict[tuple[str, str], int] = {}
    for m in matches:
        held = view.by_table.get(m.table, {}).get(m.column)
        if held is not None and held.status == "indexed" and held.complete:
            distinct[(m.table, m.column)] = held.n_values
    bonus = rank_bonus(catalog, matches, text.strip(), context, distinct)
    matches.sort(key=lambda m: (-(m.score + bonus[id(m)]), -m.count, m.table, m.column))
    if context is None and args.schema_ is None:
        matches = spread_schemas(matches, bonus)
    matches = _by_family(catalog, matches)
    notes = []
    if built.errors:
        notes.append(f"{len(built.errors)} tables could not be indexed: " + "; ".join(built.errors[:2]))
    known = index.known_tables()  # failed tables too: they are done, and checked live
    pending = sum(1 for t in scope if t.qualified not in known)
    if pending:
        who = (
            "another flexsql process is building it"
            if built.elsewhere
            else "it is being built in the background"
        )
        notes.append(
            f"value index partial: {len(scope) - pending:,} of {len(scope):,} tables indexed ({who}); "
            "values of the others are not found yet unless checked live — ask again shortly, or name the "
            "tables to check them live"
        )
    return FindValuesResult(
        text=text,
        source=src.name,
        matches=matches[:limit],
        columns_matched=len(matches),
        truncated=len(matches) > limit,
        tables_searched=len(scope),
        index_tables_built=built.scanned,
        index_tables_pending=pending,
        live_checked=live_checked,
        not_checked=not_checked,
        notes=notes,
        index_age_s=None if built_at is None else round(max(0.0, time.time() - built_at), 1),
        coverage=None if matches else coverage(view, live_checked),
    )


def _nothing_found_text(result: FindValuesResult, budget: TextBudget) -> str:
    cov = result.coverage
    if cov is None or not cov.text_columns:
        return "no value like it in the columns searched; try another spelling or fewer words"
    parts = [f"{cov.whole} with every distinct value (indexed or read live)"]
    if cov.partial:
        parts.append(f"{cov.partial} with their most frequent (or sampled) values only")
    if cov.not_indexed:
        parts.append(f"{cov.not_indexed} not indexed (free text, ids)")
    text = f"no value like it among {cov.text_columns} text columns searched: " + ", ".join(parts)
    if cov.whole == cov.text_columns:
        return text + " — no column holds it; try another spelling or fewer words"
    # a partial column may still hold it: say how to look for a rare value there
    if budget.offers("distinct_values") and cov.partial_columns:
        table, _, column = cov.partial_columns[0].rpartition(".")
        text += (
            f" — a rarer value may sit in those ({', '.join(cov.partial_columns)}"
            + (", …" if cov.partial > len(cov.partial_columns) else "")
            + f"): distinct_values(table={table!r}, column={column!r}, contains=…) reads one whole"
        )
    elif cov.not_indexed:
        text += " — name a table in tables= to check its unindexed columns live"
    return text


def _by_family(catalog: Catalog, matches: list[ValueMatch]) -> list[ValueMatch]:
    """One line per column of a sharded family, not per shard, at the rank of its best shard: daily
    shards holding the same key would take every slot from the other columns. The line names the
    family as list_tables does when its shards all belong to one column set, else the group's pattern
    (which reads every column set)."""

    def build() -> dict[str, tuple[str, str]]:
        out: dict[str, tuple[str, str]] = {}
        for fam in named_families(catalog.tables):
            first = catalog.tables[fam.members[0]]
            prefix = first.qualified[: -len(first.name)]
            for i in fam.members:
                out[catalog.tables[i].qualified] = (prefix + fam.name, prefix + fam.group)
        return out

    family = catalog.derived("values.find.families", build)
    groups: dict[tuple[str, str], list[ValueMatch]] = {}
    order: list[ValueMatch | tuple[str, str]] = []
    for m in matches:
        named = family.get(m.table)
        if named is None:
            order.append(m)
            continue
        key = (named[1], m.column)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(m)
    out: list[ValueMatch] = []
    for item in order:
        if isinstance(item, ValueMatch):
            out.append(item)
            continue
        shards = groups[item]
        best = shards[0]
        if len({m.table for m in shards}) == 1:  # one shard holds it: its name says more than the family's
            out.append(best)
            continue
        holding = {m.table for m in shards if m.value == best.value}
        names = {family[m.table][0] for m in shards}
        seen = [best.value]
        for m in shards:
            for v in (m.value, *m.others):
                if v not in seen:
                    seen.append(v)
        out.append(
            best.model_copy(
                update={
                    "table": names.pop() if len(names) == 1 else item[0],
                    "count": sum(m.count for m in shards if m.value == best.value),
                    "sampled": any(m.sampled for m in shards),
                    "others": seen[1:4],
                    "shards": len(holding),  # of the value shown, as the count is
                }
            )
        )
    return out


def _ttl(ctx: ToolContext) -> float:
    """How old an index entry may get before it is rebuilt whatever the change signal ([limits] value_index_ttl_s)."""
    return float(ctx.limits.value_index_ttl_s)


def _wait(ctx: ToolContext) -> float:
    """How long a call waits for the value index to build ([limits] value_index_wait_s)."""
    return float(ctx.limits.value_index_wait_s)


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


# how much each way of matching the whole value is worth (partial, compound and fuzzy matches score
# by how much of the value the text covers, below these)
WHOLE_SCORES: dict[str, float] = {
    "exact": 1.0,
    "case-insensitive": 0.97,
    "normalized": 0.94,
    "spacing": 0.92,
    "word order": 0.9,
    "plural": 0.9,
}
# shortest word looked up by near spellings (3, not 4: better on both halves of value_variants.py)
MIN_FUZZY = 3
MIN_PART = 4  # shortest word looked for inside longer ones ('carolina' in 'NorthCarolina')
MIN_GLUED = 3  # shortest piece of a glued word split against the index's vocabulary
# taken off a typo match for a word the index holds as it is ('Casey' is no typo of 'Carey'); 0.15 over
# 0.1 and 0: better on both halves of value_variants.py
REAL_WORD_FUZZY = 0.15


def _glued_splits(index: ValueIndex, tokens: list[str]) -> dict[str, str]:
    """Words typed glued that the index holds apart: token -> its pieces joined by a space, for tokens
    the vocabulary lacks that split into two of its words ('northcarolina' -> 'north carolina')."""
    todo = [t for t in tokens if len(t) >= 2 * MIN_GLUED and not t.isdigit()]
    if not todo:
        return {}
    known = index.in_vocabulary(todo)
    pieces = {
        piece
        for t in todo
        if t not in known
        for i in range(MIN_GLUED, len(t) - MIN_GLUED + 1)
        for piece in (t[:i], t[i:])
    }
    vocab = index.in_vocabulary(pieces)
    out: dict[str, str] = {}
    for t in todo:
        if t in known:
            continue
        splits = [(t[:i], t[i:]) for i in range(MIN_GLUED, len(t) - MIN_GLUED + 1)]
        good = [s for s in splits if s[0] in vocab and s[1] in vocab]
        if good:  # the most even split: 'northcarolina' is 'north carolina', not 'northcar olina'
            a, b = max(good, key=lambda s: min(len(s[0]), len(s[1])))
            out[t] = f"{a} {b}"
    return out


def _readings(index: ValueIndex, text: str) -> dict[str, MatchKind | None]:
    """The ways the text may be meant, in normalized form: as typed (None: kind by spelling), with
    CamelCase and glued words split ('spacing')."""
    qnorm = normalize(text)
    out: dict[str, MatchKind | None] = {qnorm: None}
    split = spaced(text)
    if split and split != qnorm:
        out[split] = "spacing"
    for reading in list(out):
        glued = _glued_splits(index, reading.split())
        if glued:
            out.setdefault(" ".join(glued.get(t, t) for t in reading.split()), "spacing")
    return out


def _parts(index: ValueIndex, token: str) -> dict[str, str]:
    """Vocabulary tokens holding `token` glued to other words: token -> 'part' where the rest splits
    into words of the vocabulary or digits ('carolina' in 'northcarolina', 'north' being a word of the
    index), 'part?' where only the stored spelling can tell (CamelCase: 'NorthCarolina')."""
    out: dict[str, str] = {}
    containing = index.tokens_containing(token) if len(token) >= MIN_PART and not token.isdigit() else []
    if not containing:
        return out
    rests: dict[str, list[str]] = {}
    for tok in containing:
        at = tok.find(token)
        rests[tok] = [r for r in (tok[:at], tok[at + len(token) :]) if r]
    vocab = index.in_vocabulary(r for rs in rests.values() for r in rs if len(r) >= 2 and not r.isdigit())
    for tok, rs in rests.items():
        out[tok] = "part" if all(r.isdigit() or r in vocab for r in rs) else "part?"
    return out


def match_values(index: ValueIndex, text: str, cids: set[int]) -> list[tuple[IndexedValue, MatchKind, float]]:
    """Index values like `text`, each with its match kind and a score in (0, 1]: the whole value in
    another case, spacing, word order or number, or the text's words among the value's words (or
    glued inside them), or a near spelling."""
    qnorm = normalize(text)
    if not qnorm or not cids:
        return []
    out: dict[int, tuple[IndexedValue, MatchKind, float]] = {}

    def add(value: IndexedValue, kind: MatchKind, score: float) -> None:
        score += min(0.009, math.log10(1 + value.count) / 1000)  # frequent spellings first among equals
        if value.vid not in out or out[value.vid][2] < score:
            out[value.vid] = (value, kind, score)

    folded = text.casefold()
    readings = _readings(index, text)
    for reading, how in readings.items():
        for value in index.by_norm([reading], cids):
            if how is not None:
                add(value, how, WHOLE_SCORES[how])
            elif value.value == text:
                add(value, "exact", 1.0)
            elif value.value.casefold() == folded:
                add(value, "case-insensitive", WHOLE_SCORES["case-insensitive"])
            else:
                add(value, "normalized", WHOLE_SCORES["normalized"])
    for value in index.by_compact(compact(qnorm), cids):
        if value.vid not in out:
            add(value, "spacing", WHOLE_SCORES["spacing"])
    for reading in readings:
        words = reading.split()
        if len(words) > 1:
            for value in index.by_sorted_key(sorted_key(reading), cids):
                if value.vid not in out:
                    add(value, "word order", WHOLE_SCORES["word order"])
        other = [" ".join([*words[:-1], form]) for form in number_forms(words[-1])] if words else []
        for value in index.by_norm(other, cids):
            if value.vid not in out:
                add(value, "plural", WHOLE_SCORES["plural"])

    seen_tokens: set[tuple[str, ...]] = set()
    for reading in readings:
        tokens = tuple(dict.fromkeys(reading.split()))[:8]
        if tokens in seen_tokens:
            continue
        seen_tokens.add(tokens)
        _token_matches(index, reading, list(tokens), cids, out, add)
    return sorted(out.values(), key=lambda x: -x[2])


_KIND_RANK = {"exact": 0, "plural": 1, "prefix": 2, "part": 3, "fuzzy": 4}


def _token_matches(
    index: ValueIndex,
    qnorm: str,
    tokens: list[str],
    cids: set[int],
    out: dict[int, tuple[IndexedValue, MatchKind, float]],
    add: Callable[[IndexedValue, MatchKind, float], None],
) -> None:
    """Values holding every word of the text (one may be missing from a text of three or more), each
    word as it is, in the other number, as the start of a longer word, glued inside a compound, or
    misspelt: partial, compound or fuzzy matches."""
    per_token: list[tuple[str, dict[str, str], dict[str, str], set[int]]] = []
    for tok in tokens:
        similar = index.similar_tokens(tok, fuzzy_min=MIN_FUZZY)
        for form in index.in_vocabulary(number_forms(tok)):
            if similar.get(form) != "exact":
                similar[form] = "plural"
        parts = _parts(index, tok)
        vids = index.vids_with_tokens([*similar, *parts]) if similar or parts else set()
        per_token.append((tok, similar, parts, vids))
    usable = [p for p in per_token if p[3]]
    # every word must match, except one word of a long text (a stray 'the', a word the data lacks)
    if not usable or len(usable) < len(tokens) - (1 if len(tokens) >= 3 else 0):
        return
    usable.sort(key=lambda p: len(p[3]))
    common = set(usable[0][3])
    for *_, vids in usable[1:]:
        common &= vids
    common -= set(out)
    candidates = [v for v in index.by_vids(list(common)[:5000]) if v.cid in cids]
    missing = len(tokens) - len(usable)
    for value in candidates:
        vtoks = value.norm.split()
        camel: set[str] | None = None
        worst = "exact"
        real_word_typo = False
        for tok, similar, parts, _ in usable:
            if tok in vtoks:
                continue
            best: str | None = None
            for vt in vtoks:
                for how in (similar.get(vt), parts.get(vt)):
                    if how == "part?":  # glued without a vocabulary word beside it: CamelCase must show it
                        if camel is None:
                            camel = set(spaced(value.value).split())
                        how = "part" if tok in camel else None
                    if how is not None and (best is None or _KIND_RANK[how] < _KIND_RANK[best]):
                        best = how
            if best is None:  # held only inside a word, not as a part of it ('casey' in 'mccaseyson')
                break
            if best == "fuzzy" and similar.get(tok) == "exact":
                real_word_typo = True
            if _KIND_RANK[best] > _KIND_RANK[worst]:
                worst = best
        else:
            _score_tokens(value, qnorm, worst, missing, real_word_typo, add)


def _score_tokens(
    value: IndexedValue,
    qnorm: str,
    worst: str,
    missing: int,
    real_word_typo: bool,
    add: Callable[[IndexedValue, MatchKind, float], None],
) -> None:
    """Score a value that holds the text's words, by the weakest way one of them matched."""
    coverage = min(1.0, len(qnorm) / max(1, len(value.norm)))
    if worst == "fuzzy" or missing:
        ratio = difflib.SequenceMatcher(None, qnorm, value.norm).ratio()
        score = 0.5 + 0.3 * ratio + 0.1 * coverage - 0.1 * missing
        add(value, "fuzzy", score - (REAL_WORD_FUZZY if real_word_typo else 0.0))
    elif worst == "part":
        add(value, "compound", 0.55 + 0.25 * coverage)
    else:
        add(value, "partial", 0.6 + 0.25 * coverage)


def _code_shaped(text: str) -> bool:
    """Could the text be a code or an id ('TCK-000042', 'US', 'a1b2')? One token with a digit, code
    punctuation or no lower-case letter; not a phrase or a plain word ('North Carolina', 'Texas')."""
    text = text.strip()
    if not text or any(ch.isspace() for ch in text):
        return False
    return bool(re.search(r"[\d_\-.:/#]", text)) or not any(ch.islower() for ch in text)


def _live_check(
    ctx: ToolContext,
    src: Source,
    scope: list[TableInfo],
    view: ScopeView,
    text: str,
    free_text: bool,
    only: set[tuple[str, str]] | None = None,
) -> tuple[list[ValueMatch], list[str], int]:
    """Query the text columns the index does not cover (over the cap, id-like, failed; free text
    only when asked, being the costliest scan): one aggregate query per table, smallest tables
    first, at most MAX_LIVE_COLUMNS columns and LIVE_BUDGET_S seconds in all."""
    engine = src.engine
    work: list[tuple[TableInfo, list[tuple[str, bool]]]] = []  # (table, [(column, free text)])
    code = _code_shaped(text)
    for table in sorted(scope, key=lambda t: t.row_estimate or 0):
        todo: list[tuple[str, bool]] = []
        candidates: list[tuple[str, ColumnState | None]]
        if table.qualified in view.by_table:  # indexed: only the columns it left uncovered
            candidates = [(s.column, s) for s in view.uncovered.get(table.qualified, [])]
        else:  # not in the index (failed): every text column
            candidates = [(c.name, None) for c in table.columns if is_text_type(c.type, engine)]
        real = {c.name for c in table.columns}
        for name, col_state in candidates:
            if only is not None and (table.qualified, name) not in only:
                continue
            if name not in real:
                continue  # a path inside a nested column (traffic.source): the index holds what it has
            if col_state is None:
                todo.append((name, False))
            elif (col_state.reason or "").startswith("free text"):
                if free_text:
                    todo.append((name, True))
            elif (col_state.reason or "").startswith("id-like") and not code and not free_text:
                continue  # a phrase or a plain word is a name or a label, not a code: ids are not scanned
            else:
                todo.append((name, False))
        if todo:
            work.append((table, todo))
    uncovered = sum(len(cols) for _, cols in work)
    deadline = time.monotonic() + min(LIVE_BUDGET_S, ctx.limits.query_timeout_s)
    # spacing-insensitive: 'YaleUniversity' finds 'Yale University' (spaces and hyphens dropped on both sides)
    compact_sql = engine.literal(re.sub(r"[\s-]+", "", text.lower()))
    like_sql = engine.literal(like_pattern(text))
    like_op = src.engine.like_operator
    matches: list[ValueMatch] = []
    checked: list[str] = []
    for table, columns in work:
        columns = columns[: MAX_LIVE_COLUMNS - len(checked)]
        remaining = deadline - time.monotonic()
        if not columns or remaining < 0.05:
            break
        conds, aggs = [], []
        for name, contains in columns:
            ctext = engine.as_text(engine.quote(name))
            cond = (
                f"{ctext} {like_op} {like_sql} ESCAPE '!'"
                if contains
                else f"replace(replace(lower({ctext}), ' ', ''), '-', '') = {compact_sql}"
            )
            conds.append(cond)
            aggs += [f"count(CASE WHEN {cond} THEN 1 END)", f"min(CASE WHEN {cond} THEN {ctext} END)"]
        sql = f"SELECT {', '.join(aggs)} FROM {engine.quote_table(table)} WHERE {' OR '.join(conds)}"
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
            kind: MatchKind
            if contains:
                kind, score = "contains", 0.55
            elif value == text:
                kind, score = "exact", 1.0
            elif value.casefold() == text.casefold():
                kind, score = "case-insensitive", WHOLE_SCORES["case-insensitive"]
            else:
                kind, score = "spacing", WHOLE_SCORES["spacing"]
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
    ctx: ToolContext,
    source: str | None = None,
    progress: Progress | None = None,
    refresh: bool = False,
    wait_s: float | None = None,
) -> ValueIndexStats:
    """Index the values of every base table of a source (only what is missing, unless `refresh`),
    waiting for the build at most `wait_s` seconds (None: until it is done)."""
    src = ctx.source(source)
    catalog = src.catalog(refresh=refresh)
    scope = [t for t in catalog.tables if t.kind == "table"]
    index = value_index(ctx, src)
    report = index.ensure(
        scope,
        refresh=refresh,
        progress=progress,
        timeout_s=ctx.limits.query_timeout_s,
        ttl_s=_ttl(ctx),
        wait_s=wait_s,
    )
    return index.stats(scope, report)
