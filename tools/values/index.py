"""The persistent value index: the distinct values of a source's text columns, with frequencies.

It answers "which column holds a value like X?" without scanning tables, which matters on big tables
and on warehouses where every scan costs money. One SQLite file per source lives in the user cache
directory (`value_index/<source>-<hash of its URL>.sqlite`). SQLite rather than a pickle because
the index is built incrementally, table by table (a crash or timeout keeps what was done), lookups
are indexed queries that need no load step (a 2,000-table catalog opens instantly), and several
processes (an MCP server, the CLI, an agent) can read it while one writes.

What goes in: for every text column of every base table, the most frequent distinct values (at most
`CAP_PER_COLUMN`) with their counts. Free-text columns (average length over `FREE_TEXT_CHARS`) and
id-like columns (named like an id, or nearly unique code-shaped values) are recorded as skipped.
Tables too big to scan are sampled with the engine's sampling clause and marked `sampled`. A column
whose distinct values did not all fit under the cap is marked incomplete, so callers know a value
missing from the index may still exist (find_values then checks live).

Lookups: normalized exact match (casefold, accents and punctuation removed), word-order-insensitive
keys, compact keys (spaces dropped: 'North Carolina' = 'NorthCarolina'), and a token index with a
trigram index over the token vocabulary for prefixes, typos and words glued inside longer ones.

index_scan.py reads a table's values, index_file.py holds the file's layout and writes them.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from flexsql.errors import QueryError
from flexsql.tools.engines import FetchLimits, Source, TableInfo
from flexsql.tools.engines.paths import remember_paths
from flexsql.tools.engines.source import DEFAULT_TIMEOUT_S
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.values.fuzzy import edit_distance, max_edits
from flexsql.tools.values.index_file import open_index, store_table
from flexsql.tools.values.index_scan import CAP_PER_COLUMN, scan_table
from flexsql.tools.values.normalize import trigrams

Progress = Callable[[float, float, str], None]


class ValueIndexStats(BaseModel):
    """What the index covers after a build (or a check that needed no build)."""

    source: str
    path: str
    tables_in_scope: int
    tables_indexed: int
    tables_scanned: int  # scanned by this call (0: everything came from the file)
    tables_failed: int = 0
    columns_indexed: int
    columns_skipped: dict[str, int] = {}
    columns_sampled: int = 0
    columns_incomplete: int = 0
    values: int
    seconds: float
    errors: list[str] = []

    def to_text(self) -> str:
        skipped = ", ".join(f"{n} {why}" for why, n in sorted(self.columns_skipped.items())) or "none"
        text = (
            f"value index for {self.source}: {self.tables_indexed}/{self.tables_in_scope} tables, "
            f"{self.columns_indexed} columns, {self.values:,} values; scanned {self.tables_scanned} tables "
            f"in {self.seconds:.1f} s; skipped columns: {skipped}; sampled columns: {self.columns_sampled}; "
            f"incomplete (over {CAP_PER_COLUMN} distinct): {self.columns_incomplete}"
        )
        if self.tables_failed:
            text += f"; {self.tables_failed} tables failed: " + "; ".join(self.errors[:3])
        return text


@dataclass
class BuildReport:
    scanned: int = 0  # tables (re)indexed by the call
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class ColumnState:
    cid: int
    table: str
    column: str
    type: str
    status: str  # indexed | skipped | error
    reason: str | None
    sampled: bool
    complete: bool
    n_values: int


@dataclass
class ScopeView:
    """A scope's column states, worked out once until the index changes (a warehouse of 70,000 columns
    would otherwise cost tens of milliseconds a call just to sort them)."""

    states: list[ColumnState]
    indexed: dict[int, ColumnState]  # cid -> state, the indexed columns
    by_table: dict[str, dict[str, ColumnState]]  # table -> column name -> state
    uncovered: dict[str, list[ColumnState]]  # table -> the text columns the index leaves to live checks


@dataclass
class IndexedValue:
    vid: int
    cid: int
    value: str
    norm: str
    count: int


def index_path(source: Source) -> Path:
    from flexsql.paths import cache_dir, private_dir

    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", source.name)[:60] or "source"
    digest = hashlib.sha256(source.display_url.encode()).hexdigest()[:12]
    folder = private_dir(cache_dir() / "value_index")
    return folder / f"{safe}-{digest}.sqlite"


def table_signature(table: TableInfo, data_version: str = "") -> str:
    """The table's column shape and its data version: a change to either rebuilds its entry."""
    shape = repr([(c.name, c.type) for c in table.columns]) + "|" + data_version
    return hashlib.sha256(shape.encode()).hexdigest()[:16]


INDEX_TTL_S = 24 * 3600.0  # entries older than this are rebuilt where the engine gives no change signal


def data_versions(source: Source, tables: list[TableInfo]) -> dict[str, str] | None:
    """A token per table that changes when its rows may have changed (Source.data_versions: a
    file's size and modification time, PostgreSQL's per-table change counters). None when the
    engine has no such signal (Snowflake): then only the age limit (INDEX_TTL_S) invalidates."""
    return source.data_versions(tables)


class ValueIndex:
    """One source's value index file. Thread-safe; cheap to open (nothing is loaded up front)."""

    def __init__(self, source: Source, path: Path | None = None) -> None:
        self.source = source
        self.path = path or index_path(source)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self.queries_sent = 0  # statements this object ran on the source (tests check reuse)
        # in-memory views of the file, dropped whenever this object writes to it
        self._column_map: dict[int, tuple[str, str]] | None = None
        self._by_table: dict[str, list[ColumnState]] | None = None
        self._known: dict[str, str] | None = None
        self._views: dict[tuple[str, ...], ScopeView] = {}
        self._signatures: dict[int, tuple[TableInfo, str, str]] = {}
        self._versions: dict[str, str] = {}  # table -> data version, read at each ensure()

    # -- storage ------------------------------------------------------------------------------------
    # -- storage ------------------------------------------------------------------------------------
    def _db(self) -> sqlite3.Connection:
        with self._lock:
            if self._conn is None:
                self._conn = open_index(self.path, self.source.display_url)
            return self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def is_empty(self) -> bool:
        if not self.path.exists():
            return True
        return not self._known_tables()

    def _known_tables(self) -> dict[str, str]:
        """tkey -> signature of every table in the file (failed ones too: they wait for a refresh)."""
        with self._lock:
            if self._known is None:
                self._known = dict(self._db().execute("SELECT tkey, signature FROM tables"))
            return self._known

    def indexed_tables(self) -> dict[str, str]:
        """tkey -> signature of every table indexed without error."""
        with self._lock:
            return dict(self._db().execute("SELECT tkey, signature FROM tables WHERE error IS NULL"))

    def column_map(self, reload: bool = False) -> dict[int, tuple[str, str]]:
        """cid -> (table key, column name) of every indexed column, cached until the index changes."""
        with self._lock:
            if self._column_map is None or reload:
                self._column_map = {
                    cid: (tkey, name)
                    for cid, tkey, name in self._db().execute(
                        "SELECT cid, tkey, name FROM columns WHERE status = 'indexed'"
                    )
                }
            return self._column_map

    def columns(self, tkeys: Iterable[str] | None = None) -> list[ColumnState]:
        with self._lock:
            if self._by_table is None:
                by_table: dict[str, list[ColumnState]] = {}
                for cid, t, n, ty, st, r, s, c, nv in self._db().execute(
                    "SELECT cid, tkey, name, type, status, reason, sampled, complete, n_values FROM columns "
                    "ORDER BY cid"
                ):
                    by_table.setdefault(t, []).append(
                        ColumnState(cid, t, n, ty, st, r, bool(s), bool(c), nv or 0)
                    )
                self._by_table = by_table
            if tkeys is None:
                return [c for cols in self._by_table.values() for c in cols]
            return [c for key in tkeys for c in self._by_table.get(key, ())]

    def scope_view(self, tkeys: Iterable[str]) -> ScopeView:
        """The column states of these tables, grouped for find_values (cached until the index changes)."""
        key = tuple(tkeys)
        with self._lock:
            view = self._views.get(key)
            if view is None:
                states = self.columns(key)
                by_table: dict[str, dict[str, ColumnState]] = {}
                uncovered: dict[str, list[ColumnState]] = {}
                for c in states:
                    by_table.setdefault(c.table, {})[c.column] = c
                    if c.reason != "not text" and not (c.status == "indexed" and c.complete):
                        uncovered.setdefault(c.table, []).append(c)
                indexed = {c.cid: c for c in states if c.status == "indexed"}
                view = ScopeView(states, indexed, by_table, uncovered)
                if len(self._views) >= 16:
                    self._views.clear()
                self._views[key] = view
            return view

    def _signature(self, table: TableInfo) -> str:
        version = self._versions.get(table.qualified, "")
        memo = self._signatures.get(id(table))
        if memo is None or memo[0] is not table or memo[2] != version:
            memo = (table, table_signature(table, version), version)
            self._signatures[id(table)] = memo
        return memo[1]

    def built_at(self, tkeys: Iterable[str]) -> float | None:
        """When the oldest of these tables' entries was built (epoch seconds), None if none is."""
        keys = list(tkeys)
        oldest: float | None = None
        with self._lock:
            db = self._db()
            for i in range(0, len(keys), 400):
                chunk = keys[i : i + 400]
                (value,) = db.execute(
                    f"SELECT min(built_at) FROM tables WHERE tkey IN ({','.join('?' * len(chunk))})", chunk
                ).fetchone()
                if value is not None and (oldest is None or value < oldest):
                    oldest = value
        return oldest

    # -- building -----------------------------------------------------------------------------------
    def ensure(
        self,
        tables: list[TableInfo],
        *,
        refresh: bool = False,
        progress: Progress | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        ttl_s: float | None = INDEX_TTL_S,
    ) -> BuildReport:
        """Index the tables that are missing (or whose columns changed); all of them with refresh."""
        started = time.perf_counter()
        with self._lock:
            versions = data_versions(self.source, tables)
            self._versions = versions or {}
            known = self._known_tables()
            todo = [t for t in tables if refresh or known.get(t.qualified) != self._signature(t)]
            if ttl_s is not None:  # and entries past their age limit, whatever the change signal says
                expired = self._expired({t.qualified for t in tables} - {t.qualified for t in todo}, ttl_s)
                todo += [t for t in tables if t.qualified in expired]
            errors: list[str] = []
            if todo:
                db = self._db()
                vocab = {row[0] for row in db.execute("SELECT tok FROM vocab")}
                committed = time.monotonic()
                try:
                    db.execute("BEGIN IMMEDIATE")
                except sqlite3.OperationalError as exc:
                    raise QueryError(
                        f"the value index {self.path} is busy ({exc}): another flexsql process is "
                        "building it; retry in a moment"
                    ) from None
                try:
                    for i, table in enumerate(todo):
                        if progress is not None:
                            progress(i, len(todo), f"indexing values of {table.qualified}")
                        try:
                            self._index_table(table, vocab, timeout_s)
                        except Exception as exc:  # one bad table must not stop the rest
                            errors.append(f"{table.qualified}: {str(exc).splitlines()[0][:200]}")
                            self._record_failure(table, errors[-1])
                        if time.monotonic() - committed > 2.0:  # keep work done if interrupted
                            db.execute("COMMIT")
                            db.execute("BEGIN IMMEDIATE")
                            committed = time.monotonic()
                finally:
                    db.execute("COMMIT")
                if progress is not None:
                    progress(len(todo), len(todo), "value index ready")
            return BuildReport(scanned=len(todo), errors=errors, seconds=time.perf_counter() - started)

    def _expired(self, tkeys: set[str], ttl_s: float) -> set[str]:
        if not tkeys:
            return set()
        cutoff = time.time() - ttl_s
        with self._lock:
            rows = self._db().execute("SELECT tkey, built_at FROM tables").fetchall()
        return {k for k, built in rows if k in tkeys and (built or 0) < cutoff}

    def stats(self, tables: list[TableInfo], report: BuildReport | None = None) -> ValueIndexStats:
        report = report or BuildReport()
        keys = [t.qualified for t in tables]
        cols = self.columns(keys)
        known = self.indexed_tables()
        skipped: dict[str, int] = {}
        for c in cols:
            if c.status != "indexed":
                label = (c.reason or c.status).split(" (")[0]
                skipped[label] = skipped.get(label, 0) + 1
        return ValueIndexStats(
            source=self.source.name,
            path=str(self.path),
            tables_in_scope=len(keys),
            tables_indexed=sum(1 for k in keys if k in known),
            tables_scanned=report.scanned,
            tables_failed=len(report.errors),
            columns_indexed=sum(1 for c in cols if c.status == "indexed"),
            columns_skipped=skipped,
            columns_sampled=sum(1 for c in cols if c.sampled),
            columns_incomplete=sum(1 for c in cols if c.status == "indexed" and not c.complete),
            values=sum(c.n_values for c in cols if c.status == "indexed"),
            seconds=round(report.seconds, 3),
            errors=report.errors,
        )

    def _run(self, sql: str, timeout_s: float, max_rows: int) -> list[tuple[Any, ...]]:
        self.queries_sent += 1
        result = self.source.execute(
            sql,
            timeout_s=timeout_s,
            limits=FetchLimits(max_rows=max_rows, max_bytes=256_000_000, count_limit=max_rows + 1),
        )
        return result.rows

    def _index_table(self, table: TableInfo, vocab: set[str], timeout_s: float) -> None:
        started = time.perf_counter()
        columns = scan_table(table, self.source.engine, self._run, timeout_s)
        real = {
            c.name for c in table.columns
        }  # the others are paths inside nested columns: search indexes them
        remember_paths(
            self.source.catalog(),
            table.qualified,
            [(c["name"], c["type"]) for c in columns if c["name"] not in real],
        )
        db = self._db()
        self._forget()
        store_table(db, table, self._signature(table), columns, vocab, time.perf_counter() - started)

    def _forget(self) -> None:
        self._column_map = self._by_table = self._known = None
        self._views = {}

    def _record_failure(self, table: TableInfo, error: str) -> None:
        self._forget()
        self._db().execute(
            "INSERT OR REPLACE INTO tables VALUES (?, ?, ?, ?, ?, ?)",
            (table.qualified, self._signature(table), table.row_estimate, time.time(), 0.0, error),
        )

    # -- lookups ------------------------------------------------------------------------------------
    def _values_where(
        self, where: str, params: list[Any], cids: set[int] | None, limit: int
    ) -> list[IndexedValue]:
        with self._lock:
            rows = (
                self._db()
                .execute(
                    f"SELECT vid, cid, value, norm, count FROM vals WHERE {where} LIMIT ?", [*params, limit]
                )
                .fetchall()
            )
        out = [IndexedValue(*r) for r in rows]
        return out if cids is None else [v for v in out if v.cid in cids]

    def by_norm(
        self, norms: list[str], cids: set[int] | None = None, limit: int = 5000
    ) -> list[IndexedValue]:
        norms = [n for n in dict.fromkeys(norms) if n]
        out: list[IndexedValue] = []
        for i in range(0, len(norms), 400):
            chunk = norms[i : i + 400]
            out += self._values_where(f"norm IN ({','.join('?' * len(chunk))})", chunk, cids, limit)
        return out

    def by_sorted_key(self, key: str, cids: set[int] | None = None, limit: int = 2000) -> list[IndexedValue]:
        return self._values_where("skey = ?", [key], cids, limit)

    def by_compact(self, key: str, cids: set[int] | None = None, limit: int = 2000) -> list[IndexedValue]:
        """Values equal to `key` once spaces are dropped (normalize.compact): 'northcarolina' finds
        'North Carolina', 'NorthCarolina' and 'north-carolina'."""
        if not key:
            return []
        return self._values_where("norm = ? OR ckey = ?", [key, key], cids, limit)

    def in_vocabulary(self, tokens: Iterable[str]) -> set[str]:
        """The tokens that some indexed value holds as a word."""
        toks = [t for t in dict.fromkeys(tokens) if t]
        out: set[str] = set()
        with self._lock:
            db = self._db()
            for i in range(0, len(toks), 400):
                chunk = toks[i : i + 400]
                out.update(
                    r[0]
                    for r in db.execute(
                        f"SELECT tok FROM vocab WHERE tok IN ({','.join('?' * len(chunk))})", chunk
                    )
                )
        return out

    def tokens_containing(self, token: str, limit: int = 200) -> list[str]:
        """Longer vocabulary tokens holding `token` inside them ('carolina' -> 'northcarolina',
        'southcarolina'): candidates for a word glued into a compound. Tokens under four characters
        have none (too many words hold them)."""
        if len(token) < 4:
            return []
        grams = sorted({token[i : i + 3] for i in range(len(token) - 2)})
        with self._lock:
            rows = (
                self._db()
                .execute(
                    f"SELECT tok FROM grams WHERE gram IN ({','.join('?' * len(grams))}) "
                    "GROUP BY tok HAVING count(*) >= ? LIMIT 5000",
                    [*grams, len(grams)],
                )
                .fetchall()
            )
        found = [tok for (tok,) in rows if token in tok and tok != token]
        return sorted(found, key=len)[:limit]

    def by_vids(self, vids: Iterable[int]) -> list[IndexedValue]:
        ids = list(vids)
        out: list[IndexedValue] = []
        with self._lock:
            db = self._db()
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                out += [
                    IndexedValue(*r)
                    for r in db.execute(
                        f"SELECT vid, cid, value, norm, count FROM vals WHERE vid IN ({','.join('?' * len(chunk))})",
                        chunk,
                    )
                ]
        return out

    def similar_tokens(
        self, token: str, *, prefix: bool = True, fuzzy: bool = True, limit: int = 60, fuzzy_min: int = 4
    ) -> dict[str, str]:
        """Vocabulary tokens like `token`: itself, tokens it is a prefix of, and near spellings
        (trigram candidates checked by edit distance; tokens of `fuzzy_min` characters or more).
        Returns token -> kind ('exact'|'prefix'|'fuzzy')."""
        found: dict[str, str] = {}
        with self._lock:
            db = self._db()
            if db.execute("SELECT 1 FROM vocab WHERE tok = ?", (token,)).fetchone():
                found[token] = "exact"
            if prefix and len(token) >= 3:
                for (tok,) in db.execute(
                    "SELECT tok FROM vocab WHERE tok > ? AND tok < ? LIMIT ?",
                    (token, token + "\U0010ffff", limit),
                ):
                    found.setdefault(tok, "prefix")
            if fuzzy and len(token) >= fuzzy_min:
                grams = sorted(trigrams(token))
                allowed = max_edits(len(token))
                # an edit breaks up to three trigrams, a transposition four ('frnace': 2 of 'france''s 6 left)
                need = max(1, len(grams) - 4 * allowed)
                rows = db.execute(
                    f"SELECT tok, count(*) AS c FROM grams WHERE gram IN ({','.join('?' * len(grams))}) "
                    "GROUP BY tok HAVING c >= ? ORDER BY c DESC LIMIT 400",
                    [*grams, need],
                ).fetchall()
                for tok, _ in rows:
                    if (
                        tok not in found
                        and abs(len(tok) - len(token)) <= allowed
                        and edit_distance(token, tok, allowed) <= allowed
                    ):
                        found[tok] = "fuzzy"
        return found

    def vids_with_tokens(self, tokens: Iterable[str], limit: int = 20000) -> set[int]:
        toks = list(tokens)
        out: set[int] = set()
        with self._lock:
            db = self._db()
            for i in range(0, len(toks), 400):
                chunk = toks[i : i + 400]
                out.update(
                    r[0]
                    for r in db.execute(
                        f"SELECT vid FROM postings WHERE tok IN ({','.join('?' * len(chunk))}) LIMIT ?",
                        [*chunk, limit],
                    )
                )
        return out

    def token_frequency(self, tokens: Iterable[str]) -> dict[str, int]:
        """How many indexed values contain each token (common words weigh less)."""
        out: dict[str, int] = {}
        with self._lock:
            db = self._db()
            for tok in dict.fromkeys(tokens):
                out[tok] = db.execute(
                    "SELECT count(*) FROM (SELECT 1 FROM postings WHERE tok = ? LIMIT 5000)", (tok,)
                ).fetchone()[0]
        return out


def value_index(ctx: ToolContext, source: Source) -> ValueIndex:
    """The source's value index (one object per ToolContext; the file is shared across them)."""
    return ctx.cache(f"values:{source.name}", lambda: ValueIndex(source))
