"""Importing into a source's knowledge store: `learn(source, FILE)` and `learn_history(source)`.

Every question/SQL pair is parsed and read against the current schema (analyze.py): one naming a table or
column the schema lacks is stored `stale` (kept for review, never recalled as verified); one that does not
parse, is not a query, or has no question is rejected and reported. A query log's statements, and the
engine's history, add facts (join conditions, filters, literal spellings) counted per origin: importing
the same log again replaces its counts instead of adding them, so every import is idempotent. Nothing is
written until the whole file has been read; `strict` writes nothing when any item is rejected.
"""

from __future__ import annotations

import getpass
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from flexsql.errors import FlexSQLError, InvalidArgument, NotFoundError, UnavailableError
from flexsql.tools.engines import Catalog, FetchLimits, Source
from flexsql.tools.knowledge.analyze import Analysis, NotAQuery, analyze
from flexsql.tools.knowledge.formats import Imported, Pair, detect, read_file
from flexsql.tools.knowledge.store import (
    VERIFIED_ORIGIN,
    FilterFact,
    JoinFact,
    Knowledge,
    LiteralFact,
    TableNote,
    VerifiedQuery,
    locked,
    query_id,
    read_store,
    store_dir,
    write_store,
)
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.registry import ToolResult
from flexsql.tools.runtime.render import TextBudget
from flexsql.tools.sql.guard import check_sql

MAX_FILTERS = 2000  # facts of each kind kept, the most used first: a huge log must not make a huge store
MAX_LITERALS = 2000
REPORTED_ITEMS = 200  # items listed one by one in a report (the counts cover all)

Outcome = Literal["added", "known", "stale", "rejected", "skipped"]


class ItemReport(BaseModel):
    origin: str
    outcome: Outcome
    reason: str | None = None


class LearnReport(BaseModel):
    """What an import did: counts per outcome, the store's totals after it, and the items that were not
    simply added (stale, rejected, skipped), each with why."""

    source: str
    store: str
    origin: str
    format: str
    added: int = 0
    known: int = 0
    stale: int = 0
    rejected: int = 0
    skipped: int = 0
    statements: int = 0  # a log's or the history's statements read for facts
    documents: int = 0
    tables_noted: int = 0
    joins_learned: int = 0
    written: list[str] = []
    items: list[ItemReport] = []
    items_total: int = 0

    def text(self) -> str:
        lines = [f"{self.origin} ({self.format}) -> {self.store}"]
        parts = [
            f"{self.added} added",
            f"{self.known} already known",
            f"{self.stale} stale",
            f"{self.rejected} rejected",
        ]
        if self.skipped:
            parts.append(f"{self.skipped} skipped")
        lines.append("queries: " + ", ".join(parts))
        if self.statements:
            lines.append(f"statements read for facts: {self.statements}")
        if self.documents:
            lines.append(f"documents: {self.documents}")
        if self.tables_noted:
            lines.append(f"tables with synonyms or descriptions: {self.tables_noted}")
        if self.joins_learned:
            lines.append(f"join conditions known: {self.joins_learned}")
        for item in self.items:
            lines.append(f"  {item.outcome}: {item.origin}" + (f" — {item.reason}" if item.reason else ""))
        if self.items_total > len(self.items):
            lines.append(f"  … {self.items_total - len(self.items)} more items not listed")
        lines.append("written: " + (", ".join(self.written) if self.written else "nothing changed"))
        return "\n".join(lines)


@dataclass
class _Tally:
    joins: Counter[tuple[str, str]] = field(default_factory=Counter)
    filters: Counter[str] = field(default_factory=Counter)
    filter_tables: dict[str, list[str]] = field(default_factory=dict)
    literals: Counter[tuple[str, str]] = field(default_factory=Counter)

    def add(self, analysis: Analysis, times: int = 1) -> None:
        for pair in analysis.joins:
            self.joins[pair] += times
        for condition, tables in analysis.filters:
            self.filters[condition] += times
            self.filter_tables.setdefault(condition, tables)
        for lit in analysis.literals:
            self.literals[lit] += times


class _Import:
    def __init__(self, source: Source, report: LearnReport) -> None:
        self.source, self.report = source, report
        self.catalog: Catalog = source.catalog()
        self.dialect = source.dialect
        self.items: list[ItemReport] = []

    def note(self, origin: str, outcome: Outcome, reason: str | None = None) -> None:
        setattr(self.report, outcome, getattr(self.report, outcome) + 1)
        if outcome != "added" and outcome != "known":
            self.items.append(ItemReport(origin=origin, outcome=outcome, reason=reason))

    def query(
        self, pair: Pair, knowledge: Knowledge, known: set[str], defaults: tuple[str, str], tally: _Tally
    ) -> None:
        if not pair.question or not pair.question.strip():
            self.note(pair.origin, "rejected", "no question: a verified query needs the question it answers")
            return
        if not pair.sql or not pair.sql.strip():
            self.note(pair.origin, "rejected", "no SQL (give it as sql, query or SQL)")
            return
        try:
            check_sql(pair.sql.strip().rstrip(";"), self.source.engine)
            analysis = analyze(pair.sql, self.catalog, self.dialect)
        except NotAQuery as exc:
            self.note(pair.origin, "rejected", f"the SQL {exc}")
            return
        except FlexSQLError as exc:  # the guard refused it: not a read statement
            self.note(pair.origin, "rejected", str(exc))
            return
        qid = query_id(pair.question, pair.sql)
        if qid in known:
            self.note(pair.origin, "known")
            return
        known.add(qid)
        stale = analysis.stale_reason
        knowledge.queries.append(
            VerifiedQuery(
                id=qid,
                question=" ".join(pair.question.split()),
                sql=pair.sql.strip(),
                tables=analysis.tables,
                columns=analysis.columns,
                status="stale" if stale else "verified",
                stale_reason=stale,
                verified_by=pair.verified_by or defaults[0],
                verified_at=pair.verified_at or defaults[1],
                origin=pair.origin,
                evidence=pair.evidence,
            )
        )
        if stale:
            self.note(pair.origin, "stale", stale)
        else:
            self.note(pair.origin, "added")
            tally.add(analysis)

    def notes(self, notes: dict[str, TableNote], knowledge: Knowledge, origin: str) -> None:
        for name, note in notes.items():
            try:
                info = self.catalog.resolve(name)
            except NotFoundError:
                self.note(f"{origin} table {name}", "skipped", "no such table in the schema")
                continue
            held = knowledge.schema_notes.tables.setdefault(info.qualified, TableNote())
            held.synonyms = list(dict.fromkeys([*held.synonyms, *note.synonyms]))
            held.description = note.description or held.description
            for col, cnote in note.columns.items():
                match = next((c.name for c in info.columns if c.name.lower() == col.lower()), None)
                if match is None:
                    self.note(f"{origin} column {name}.{col}", "skipped", "no such column in the schema")
                    continue
                have = held.columns.setdefault(match, type(cnote)())
                have.synonyms = list(dict.fromkeys([*have.synonyms, *cnote.synonyms]))
                have.description = cnote.description or have.description

    def column(self, text: str) -> str | None:
        """`table.column` of the source, as the catalog spells it, for a `[schema.]table.column`."""
        table, _, col = text.rpartition(".")
        try:
            info = self.catalog.resolve(table)
        except NotFoundError:
            return None
        match = next((c.name for c in info.columns if c.name.lower() == col.lower()), None)
        return f"{info.qualified}.{match}" if match else None


def _merge(knowledge: Knowledge, origin: str, tally: _Tally, replace: bool) -> None:
    """Add the tally's counts under `origin`; with `replace`, its earlier counts go first."""
    facts = knowledge.facts
    joins = {(j.left, j.right): j for j in facts.joins}
    filters = {f.condition: f for f in facts.filters}
    literals = {(x.column, x.value): x for x in facts.literals}
    if replace:
        held: list[JoinFact | FilterFact | LiteralFact] = [
            *joins.values(),
            *filters.values(),
            *literals.values(),
        ]
        for fact in held:
            fact.count -= fact.by.pop(origin, 0)
    for (left, right), n in tally.joins.items():
        join = joins.setdefault((left, right), JoinFact(left=left, right=right))
        join.by[origin] = join.by.get(origin, 0) + n
        join.count += n
    for condition, n in tally.filters.items():
        fil = filters.setdefault(
            condition, FilterFact(condition=condition, tables=tally.filter_tables[condition])
        )
        fil.by[origin] = fil.by.get(origin, 0) + n
        fil.count += n
    for (column, value), n in tally.literals.items():
        lit = literals.setdefault((column, value), LiteralFact(column=column, value=value))
        lit.by[origin] = lit.by.get(origin, 0) + n
        lit.count += n
    facts.joins = [j for j in joins.values() if j.count > 0]
    facts.filters = sorted((f for f in filters.values() if f.count > 0), key=lambda f: -f.count)[:MAX_FILTERS]
    facts.literals = sorted((x for x in literals.values() if x.count > 0), key=lambda x: -x.count)[
        :MAX_LITERALS
    ]


def _defaults(verified_by: str | None) -> tuple[str, str]:
    try:
        who = verified_by or getpass.getuser()
    except (KeyError, OSError):  # no user name for this uid (a container)
        who = verified_by or "unknown"
    return who, datetime.now(UTC).strftime("%Y-%m-%d")


def _select_database(pairs: list[Pair], source: Source, db_id: str | None, imp: _Import) -> list[Pair]:
    """A file of several databases' questions (Spider's train.json): only this source's, by db_id."""
    ids = {p.db_id for p in pairs if p.db_id}
    if db_id is None and len(ids) <= 1:
        return pairs
    wanted = (db_id or source.name).lower()
    chosen = [p for p in pairs if (p.db_id or "").lower() == wanted]
    if not chosen:
        raise InvalidArgument(
            f"the file holds questions of {len(ids)} databases ({', '.join(sorted(ids)[:8])}"
            f"{' …' if len(ids) > 8 else ''}) and none is {wanted!r}; give --db-id NAME"
        )
    others = len(pairs) - len(chosen)
    if others:  # one line for them all: a file of 140 databases must not list 6,000 items
        imp.note(
            f"{others} items of other databases (db_id)", "skipped", f"only db_id {wanted} is this source's"
        )
        imp.report.skipped += others - 1
    return chosen


def learn(
    source: Source,
    path: Path,
    *,
    fmt: str | None = None,
    verified_by: str | None = None,
    db_id: str | None = None,
    strict: bool = False,
) -> LearnReport:
    """Import `path` into `source`'s store. InvalidArgument for a file that cannot be read (nothing is
    written); with `strict`, also when any item is rejected."""
    kind = detect(path, fmt)
    imported = read_file(path, kind, source.dialect)
    folder = store_dir(source)
    report = LearnReport(source=source.name, store=str(folder), origin=path.name, format=kind)
    return _apply(source, imported, report, path.name, verified_by, db_id, strict, replace_origin=True)


def _apply(
    source: Source,
    imported: Imported,
    report: LearnReport,
    origin: str,
    verified_by: str | None,
    db_id: str | None,
    strict: bool,
    replace_origin: bool,
    weights: list[int] | None = None,
) -> LearnReport:
    folder = store_dir(source)
    imp = _Import(source, report)
    with locked(folder):
        knowledge = read_store(folder)
        known = {q.id for q in knowledge.queries}
        verified = _Tally()
        pairs = _select_database(imported.pairs, source, db_id, imp)
        defaults = _defaults(verified_by)
        for pair in pairs:
            imp.query(pair, knowledge, known, defaults, verified)
        _merge(knowledge, VERIFIED_ORIGIN, verified, replace=False)
        if imported.statements:
            log = _Tally()
            for i, sql in enumerate(imported.statements):
                try:
                    log.add(analyze(sql, imp.catalog, imp.dialect), weights[i] if weights else 1)
                    report.statements += 1
                except NotAQuery as exc:
                    imp.note(f"{origin} statement {i + 1}", "rejected", f"the SQL {exc}")
            _merge(knowledge, origin, log, replace=replace_origin)
        if imported.relationships:
            rel = _Tally()
            for r in imported.relationships:
                a, b = imp.column(r.left), imp.column(r.right)
                if a is None or b is None:
                    imp.note(
                        f"{origin} relationship {r.left} = {r.right}", "skipped", "a column the schema lacks"
                    )
                    continue
                x, y = sorted((a, b))
                rel.joins[(x, y)] += 1
            _merge(knowledge, f"{origin} relationships", rel, replace=True)
        imp.notes(imported.notes, knowledge, origin)
        knowledge.documents.update(imported.documents)
        report.documents = len(imported.documents)
        report.tables_noted = len(knowledge.schema_notes.tables)
        report.joins_learned = len(knowledge.facts.joins)
        report.items_total = len(imp.items)
        report.items = imp.items[:REPORTED_ITEMS]
        if strict and report.rejected:
            raise InvalidArgument(
                f"{report.rejected} of the items were rejected and --strict is on: nothing was written\n"
                + report.text()
            )
        report.written = write_store(folder, knowledge)
    return report


# -- the engine's own history ------------------------------------------------------------------------

HISTORY_ROWS = 20_000


def history_statements(source: Source) -> tuple[str, list[str], list[int]]:
    """(origin, statements, times each ran) from the engine's history, read-only like every query.
    UnavailableError saying why when the engine keeps none flexsql can read."""
    limits = FetchLimits(max_rows=HISTORY_ROWS, count_limit=HISTORY_ROWS)
    history = source.engine.query_history
    if history is None:
        raise UnavailableError(
            f"{source.dialect} keeps no query history flexsql can read (--history reads PostgreSQL's "
            "pg_stat_statements and Snowflake's QUERY_HISTORY); export your queries to a .sql file and run "
            "`flexsql learn FILE --db URL`"
        )
    if history.check is not None:
        present = source.execute(history.check, timeout_s=30)
        if not present.rows or not present.rows[0][0]:
            raise UnavailableError(history.missing)
    try:
        result = source.execute(
            history.sql.format(n=HISTORY_ROWS), timeout_s=history.timeout_s, limits=limits
        )
    except FlexSQLError as exc:
        raise UnavailableError(
            f"{history.origin} cannot be read here ({exc}): {history.unreadable}"
        ) from None
    origin = history.origin
    statements = [str(row[0]) for row in result.rows if row[0]]
    weights = [int(row[1] or 1) for row in result.rows if row[0]]
    return origin, statements, weights


def learn_history(source: Source, *, strict: bool = False) -> LearnReport:
    """Facts from the engine's query history (its counts replace the last import's)."""
    origin, statements, weights = history_statements(source)
    report = LearnReport(source=source.name, store=str(store_dir(source)), origin=origin, format="history")
    imported = Imported("sql", statements=statements)
    return _apply(source, imported, report, origin, None, None, strict, replace_origin=True, weights=weights)


def learn_pairs(
    source: Source, pairs: Iterable[tuple[str, str]], origin: str, verified_by: str | None = None
) -> LearnReport:
    """Import (question, SQL) pairs given in memory (a conversation's confirmed turns, a script), checked
    like a file's; `origin` names where they came from ("conversation 3f2a")."""
    items = [Pair(f"{origin}#{i}", question, sql) for i, (question, sql) in enumerate(pairs)]
    report = LearnReport(source=source.name, store=str(store_dir(source)), origin=origin, format="pairs")
    return _apply(source, Imported("jsonl", pairs=items), report, origin, verified_by, None, False, False)


# -- remember: one confirmed question and SQL ---------------------------------------------------------


class RememberResult(ToolResult):
    source: str
    stored: bool  # False: the same question and SQL were already stored
    id: str
    question: str
    tables: list[str]
    result_columns: list[str]
    result_rows: int | None = None
    store: str

    def to_text(self, budget: TextBudget = TextBudget()) -> str:
        head = "stored" if self.stored else "already stored"
        return (
            f"{head} as verified ({self.id}) in {self.store}: {self.question!r} reads {', '.join(self.tables) or 'no table'}; "
            f"its result has columns {', '.join(self.result_columns)}"
            + (
                f" and {self.result_rows} row{'' if self.result_rows == 1 else 's'}"
                if self.result_rows is not None
                else ""
            )
        )


REMEMBER_ROWS = 1000  # rows a confirmed query is run for (its shape is kept, not its rows)


def remember_query(
    ctx: ToolContext, question: str, sql: str, *, source: str | None = None, verified_by: str | None = None
) -> RememberResult:
    """Store `question` with `sql` as verified, after running the SQL read-only: one that fails, is not
    a query, or names what the schema lacks is refused (QueryError / InvalidArgument) and nothing is stored."""
    src = ctx.source(source)
    question = " ".join(question.split())
    if not question:
        raise InvalidArgument("question is empty: give the question the SQL answers")
    try:
        analysis = analyze(sql, src.catalog(), src.dialect)
    except NotAQuery as exc:
        raise InvalidArgument(f"remember refused: the SQL {exc}; nothing was stored") from None
    if analysis.stale_reason:
        raise InvalidArgument(
            f"remember refused: the SQL names what the schema lacks ({analysis.stale_reason}); nothing was stored"
        )
    try:
        result = src.execute(
            sql.strip().rstrip(";"),
            timeout_s=ctx.limits.query_timeout_s,
            limits=FetchLimits(max_rows=REMEMBER_ROWS, count_limit=REMEMBER_ROWS),
        )
    except FlexSQLError as exc:
        raise type(exc)(f"remember refused: the SQL failed when run ({exc}); nothing was stored") from None
    folder = store_dir(src)
    qid = query_id(question, sql)
    with locked(folder):
        knowledge = read_store(folder)
        stored = qid not in {q.id for q in knowledge.queries}
        if stored:
            knowledge.queries.append(
                VerifiedQuery(
                    id=qid,
                    question=question,
                    sql=sql.strip(),
                    tables=analysis.tables,
                    columns=analysis.columns,
                    verified_by=verified_by,
                    verified_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    origin="remember",
                    result_columns=list(result.columns),
                    result_rows=None if result.total_is_lower_bound else result.total_rows,
                )
            )
            tally = _Tally()
            tally.add(analysis)
            _merge(knowledge, VERIFIED_ORIGIN, tally, replace=False)
            write_store(folder, knowledge)
    return RememberResult(
        source=src.name,
        stored=stored,
        id=qid,
        question=question,
        tables=analysis.tables,
        result_columns=list(result.columns),
        result_rows=None if result.total_is_lower_bound else result.total_rows,
        store=str(folder),
    )


__all__ = [
    "ItemReport",
    "LearnReport",
    "RememberResult",
    "history_statements",
    "learn",
    "learn_history",
    "learn_pairs",
    "remember_query",
]
