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
keys, and a token index with a trigram index over the token vocabulary for prefixes and typos.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
import time
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from flexsql.errors import QueryError, QueryTimeout
from flexsql.tools.engines.base import FetchLimits, Source, TableInfo
from flexsql.tools.engines.traits import all_traits, traits_for
from flexsql.tools.sql.build import as_text, quote_ident, quote_table

INDEX_VERSION = "2"  # 2: emoji and other symbols are tokens
CAP_PER_COLUMN = 1000  # distinct values kept per column (the most frequent ones)
FREE_TEXT_CHARS = 60  # average length above which a column is free text, not a value domain
MAX_VALUE_CHARS = 200  # longer single values are not indexed
SMALL_TABLE_ROWS = 20_000  # at most this many rows: one query for all columns, no pre-pass
STATS_ROWS = 10_000  # rows read by the pre-pass that spots free-text and id-like columns
# Above these row estimates a table is sampled instead of scanned: each engine's scan_above_rows,
# kept in one dict so that a test or a benchmark can lower an engine's threshold.
SAMPLE_ABOVE = {d: t.scan_above_rows for d, t in all_traits().items()}
SAMPLE_ROWS = 1_000_000

Progress = Callable[[float, float, str], None]

_TEXT_TYPE = re.compile(r"CHAR|TEXT|STRING|CLOB|CITEXT|ENUM|NAME\b", re.IGNORECASE)
_NON_TEXT_SQLITE = re.compile(r"INT|REAL|FLOA|DOUB|NUM|DEC|BOOL|DATE|TIME|BLOB", re.IGNORECASE)
_ID_WORDS = {"id", "ids", "uuid", "guid", "hash", "md5", "sha", "sha1", "sha256", "token", "checksum"}


# -- text normalization (shared with search.py) ------------------------------------------------------


def fold(text: str) -> str:
    """Casefolded, accents stripped (NFKD without combining marks)."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()


_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)


def normalize(text: str) -> str:
    """The comparison form of a value: folded, punctuation and whitespace runs become one space.
    Emoji and other pictographs (Unicode "So") each become a word of their own, so '🎉' finds
    '🎉🎉' and 'party 🎉'; currency and math signs stay punctuation ('$100' still matches '100')."""
    folded = fold(text)
    if folded.isascii():
        return _NON_WORD.sub(" ", folded).strip()
    parts = [
        ch if ch.isalnum() else (f" {ch} " if unicodedata.category(ch) == "So" else " ") for ch in folded
    ]
    return " ".join("".join(parts).split())


def sorted_key(norm: str) -> str:
    """Word order removed: 'lamp desk' and 'desk lamp' share a key."""
    return " ".join(sorted(norm.split()))


def trigrams(token: str) -> set[str]:
    padded = f"^{token}$"
    return {padded[i : i + 3] for i in range(max(1, len(padded) - 2))}


def split_identifier(name: str) -> list[str]:
    """camelCase, PascalCase, snake_case, digits: 'StuID' -> ['stu', 'id'], 'orderDate2' -> ['order', 'date', '2']."""
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", text)
    text = re.sub(r"([A-Za-z])([0-9])", r"\1 \2", text)
    return [w for w in _NON_WORD.split(fold(text)) if w]


# -- SQL pieces, always built by sqlglot for the source's dialect -----------------------------------


def sample_from(
    table: TableInfo, dialect: str, rows: int, columns: Iterable[str] | None = None
) -> tuple[str, str]:
    """A FROM item reading about `rows` rows of a big table, and how it samples (for the user).

    The engine's sampling clause where it has one (block-level where it can, so it does not read
    the whole table) and the table's size is estimated; otherwise the first rows."""
    traits = traits_for(dialect)
    tsql = quote_table(table, dialect)
    estimate = table.row_estimate or 0
    pct = 100.0 if estimate <= 0 else min(100.0, max(0.001, 100.0 * rows / estimate))
    pct_text = f"{pct:.4f}".rstrip("0").rstrip(".")
    clause = traits.sample_clause(tsql, table.kind, pct_text) if estimate else None
    if clause:
        return clause, f"~{pct_text}% {traits.sample_label}"
    cols = ", ".join(quote_ident(c, dialect) for c in columns) if columns else "*"
    return f"(SELECT {cols} FROM {tsql} LIMIT {int(rows)}) AS sampled", f"first {int(rows):,} rows"


def needs_sample(table: TableInfo, dialect: str) -> bool:
    return (table.row_estimate or 0) > SAMPLE_ABOVE.get(dialect, traits_for(dialect).scan_above_rows)


def is_text_type(type_name: str, dialect: str) -> bool:
    if traits_for(dialect).dynamic_types:
        # SQLite affinity: no declared type holds anything; TEXT-like names hold text
        return (
            not type_name.strip()
            or bool(_TEXT_TYPE.search(type_name))
            or not _NON_TEXT_SQLITE.search(type_name)
        )
    if re.search(r"UUID|VARIANT|OBJECT", type_name, re.IGNORECASE):
        return False
    # JSON documents and arrays are searched through their text (PostgreSQL's enums carry '(enum)')
    return bool(_TEXT_TYPE.search(type_name)) or bool(re.search(r"JSON|ARRAY|\[\]", type_name, re.IGNORECASE))


def id_like_name(name: str) -> bool:
    words = split_identifier(name)
    return bool(words) and words[-1] in _ID_WORDS


def code_like(values: list[str]) -> bool:
    """Values that look like generated codes (no spaces, with digits or hex): ids, not a domain."""
    if not values:
        return False
    shaped = sum(1 for v in values if " " not in v.strip() and re.search(r"\d", v))
    return shaped >= 0.9 * len(values)


# -- the index ------------------------------------------------------------------------------------------


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
class IndexedValue:
    vid: int
    cid: int
    value: str
    norm: str
    count: int


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS tables (tkey TEXT PRIMARY KEY, signature TEXT, row_estimate INTEGER, built_at REAL,
                                   seconds REAL, error TEXT);
CREATE TABLE IF NOT EXISTS columns (cid INTEGER PRIMARY KEY, tkey TEXT, name TEXT, type TEXT, status TEXT,
                                    reason TEXT, sampled INTEGER, complete INTEGER, n_values INTEGER);
CREATE INDEX IF NOT EXISTS columns_tkey ON columns (tkey);
CREATE TABLE IF NOT EXISTS vals (vid INTEGER PRIMARY KEY, cid INTEGER, value TEXT, norm TEXT, skey TEXT, count INTEGER);
CREATE INDEX IF NOT EXISTS vals_norm ON vals (norm);
CREATE INDEX IF NOT EXISTS vals_skey ON vals (skey);
CREATE INDEX IF NOT EXISTS vals_cid ON vals (cid);
CREATE TABLE IF NOT EXISTS postings (tok TEXT, vid INTEGER, PRIMARY KEY (tok, vid)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS postings_vid ON postings (vid);
CREATE TABLE IF NOT EXISTS vocab (tok TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS grams (gram TEXT, tok TEXT, PRIMARY KEY (gram, tok)) WITHOUT ROWID;
"""


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
        self._signatures: dict[int, tuple[TableInfo, str, str]] = {}
        self._versions: dict[str, str] = {}  # table -> data version, read at each ensure()

    # -- storage ------------------------------------------------------------------------------------
    def _db(self) -> sqlite3.Connection:
        with self._lock:
            if self._conn is None:
                from flexsql.paths import private_file

                # SQLite gives the -wal and -shm files the database file's mode: 0600 for all three
                for extra in (
                    self.path.with_name(self.path.name + "-wal"),
                    self.path.with_name(self.path.name + "-shm"),
                ):
                    if extra.exists():  # left by an older flexsql with the umask's mode
                        private_file(extra)
                conn = sqlite3.connect(str(private_file(self.path)), check_same_thread=False, timeout=30)
                conn.isolation_level = None  # transactions are explicit: many tables per commit
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.executescript(_SCHEMA)
                version = conn.execute("SELECT value FROM meta WHERE key='version'").fetchone()
                if version is None or version[0] != INDEX_VERSION:
                    # an older layout: start over (it is a cache)
                    conn.execute("BEGIN IMMEDIATE")
                    for name in ("tables", "columns", "vals", "postings", "vocab", "grams"):
                        conn.execute(f"DELETE FROM {name}")
                    conn.execute("INSERT OR REPLACE INTO meta VALUES ('version', ?)", (INDEX_VERSION,))
                    conn.execute(
                        "INSERT OR REPLACE INTO meta VALUES ('source', ?)", (self.source.display_url,)
                    )
                    conn.execute("COMMIT")
                self._conn = conn
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
        timeout_s: float = 30.0,
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
        dialect = self.source.dialect
        started = time.perf_counter()
        columns: list[dict[str, Any]] = []
        candidates = []
        for col in table.columns:
            entry = {
                "name": col.name,
                "type": col.type,
                "status": "skipped",
                "reason": None,
                "sampled": False,
                "complete": False,
                "values": [],
            }
            columns.append(entry)
            if not is_text_type(col.type, dialect):
                entry["reason"] = "not text"
            elif id_like_name(col.name):
                entry["reason"] = "id-like"
            else:
                candidates.append(entry)
        if candidates:
            small = table.row_estimate is not None and table.row_estimate <= SMALL_TABLE_ROWS
            if small:
                self._scan_small(table, candidates, timeout_s)
            else:
                self._scan_large(table, candidates, timeout_s)
        self._store(table, columns, vocab, time.perf_counter() - started)

    def _scan_small(self, table: TableInfo, candidates: list[dict[str, Any]], timeout_s: float) -> None:
        """Every candidate column's distinct values from one short GROUP BY over all of them (small
        tables only; the counts per column are summed here). Falls back to per-column scans when the
        table turns out bigger than its estimate."""
        dialect = self.source.dialect
        idents = [quote_ident(e["name"], dialect) for e in candidates]
        sql = (
            f"SELECT {', '.join(as_text(c, dialect) for c in idents)}, count(*) "
            f"FROM {quote_table(table, dialect)} GROUP BY {', '.join(idents)}"
        )
        budget = 2 * (table.row_estimate or 0) + 1000
        rows = self._run(sql, timeout_s, budget)
        if len(rows) >= budget:
            self._scan_large(table, candidates, timeout_s)
            return
        grouped: list[dict[str, int]] = [{} for _ in candidates]
        for row in rows:
            n = int(row[-1])
            for bucket, v in zip(grouped, row[:-1], strict=False):
                if v is not None:
                    key = str(v)
                    bucket[key] = bucket.get(key, 0) + n
        for entry, values in zip(candidates, grouped, strict=True):
            self._accept(
                entry,
                sorted(values.items(), key=lambda kv: (-kv[1], kv[0])),
                sampled=False,
                unique_ratio=None,
            )

    def _scan_large(self, table: TableInfo, candidates: list[dict[str, Any]], timeout_s: float) -> None:
        dialect = self.source.dialect
        tsql = quote_table(table, dialect)
        # pre-pass on the first rows: free text and nearly-unique columns are spotted without a scan
        ratios: dict[str, float] = {}
        try:
            aggs = []
            for entry in candidates:
                csql = quote_ident(entry["name"], dialect)
                aggs.append(f"count({csql}), count(DISTINCT {csql}), avg(length({as_text(csql, dialect)}))")
            inner = ", ".join(quote_ident(e["name"], dialect) for e in candidates)
            row = self._run(
                f"SELECT {', '.join(aggs)} FROM (SELECT {inner} FROM {tsql} LIMIT {STATS_ROWS}) AS head",
                timeout_s,
                1,
            )[0]
            for i, entry in enumerate(candidates):
                nonnull, distinct, avg_len = row[3 * i], row[3 * i + 1], row[3 * i + 2]
                if avg_len is not None and float(avg_len) > FREE_TEXT_CHARS:
                    entry["reason"] = f"free text (avg {float(avg_len):.0f} chars)"
                elif nonnull:
                    ratios[entry["name"]] = int(distinct) / int(nonnull)
        except QueryError:
            pass  # the per-column scans below still decide
        for entry in candidates:
            if entry["reason"]:
                continue
            csql = quote_ident(entry["name"], dialect)
            sampled = needs_sample(table, dialect)
            for attempt in range(2):
                if sampled:
                    from_sql, _how = sample_from(table, dialect, SAMPLE_ROWS, [entry["name"]])
                else:
                    from_sql = tsql
                sql = (
                    f"SELECT {as_text(csql, dialect)} AS v, count(*) AS n FROM {from_sql} "
                    f"WHERE {csql} IS NOT NULL GROUP BY {csql} ORDER BY 2 DESC, 1 LIMIT {CAP_PER_COLUMN + 1}"
                )
                try:
                    rows = self._run(sql, timeout_s, CAP_PER_COLUMN + 1)
                except QueryTimeout:
                    if sampled or attempt:
                        entry["status"], entry["reason"] = "error", f"timed out after {timeout_s:g} s"
                        break
                    sampled = True  # too big to scan in time: sample it instead
                    continue
                except QueryError as exc:
                    entry["status"], entry["reason"] = "error", str(exc).splitlines()[0][:200]
                    break
                merged: dict[str, int] = {}
                for v, n in rows:
                    if v is not None:
                        merged[str(v)] = merged.get(str(v), 0) + int(n)
                self._accept(
                    entry,
                    sorted(merged.items(), key=lambda kv: (-kv[1], kv[0])),
                    sampled=sampled,
                    unique_ratio=ratios.get(entry["name"]),
                    over_cap=len(rows) > CAP_PER_COLUMN,
                )
                break

    @staticmethod
    def _accept(
        entry: dict[str, Any],
        values: list[tuple[str, int]],
        *,
        sampled: bool,
        unique_ratio: float | None,
        over_cap: bool | None = None,
    ) -> None:
        """Keep a column's values unless they are free text or generated codes."""
        over = len(values) > CAP_PER_COLUMN if over_cap is None else over_cap
        kept = values[:CAP_PER_COLUMN]
        total = sum(n for _, n in kept)
        if total and sum(len(v) * n for v, n in kept) / total > FREE_TEXT_CHARS:
            entry["reason"] = f"free text (avg {sum(len(v) * n for v, n in kept) / total:.0f} chars)"
            return
        nearly_unique = (unique_ratio is not None and unique_ratio > 0.95) or (
            over and kept and kept[0][1] == 1
        )
        if nearly_unique and over and code_like([v for v, _ in kept[:200]]):
            entry["reason"] = "id-like (unique codes)"
            return
        entry["status"] = "indexed"
        entry["sampled"] = sampled
        entry["complete"] = not over and not sampled
        entry["values"] = [(v, n) for v, n in kept if len(v) <= MAX_VALUE_CHARS]

    def _forget(self) -> None:
        self._column_map = self._by_table = self._known = None

    def _record_failure(self, table: TableInfo, error: str) -> None:
        self._forget()
        self._db().execute(
            "INSERT OR REPLACE INTO tables VALUES (?, ?, ?, ?, ?, ?)",
            (table.qualified, self._signature(table), table.row_estimate, time.time(), 0.0, error),
        )

    def _store(
        self, table: TableInfo, columns: list[dict[str, Any]], vocab: set[str], seconds: float
    ) -> None:
        db = self._db()
        key = table.qualified
        self._forget()
        added: set[str] = set()
        db.execute("SAVEPOINT one_table")
        try:
            old = [r[0] for r in db.execute("SELECT cid FROM columns WHERE tkey = ?", (key,))]
            if old:
                marks = ",".join("?" * len(old))
                db.execute(
                    f"DELETE FROM postings WHERE vid IN (SELECT vid FROM vals WHERE cid IN ({marks}))", old
                )
                db.execute(f"DELETE FROM vals WHERE cid IN ({marks})", old)
                db.execute("DELETE FROM columns WHERE tkey = ?", (key,))
            for entry in columns:
                values = entry["values"]
                cur = db.execute(
                    "INSERT INTO columns (tkey, name, type, status, reason, sampled, complete, n_values) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        key,
                        entry["name"],
                        entry["type"],
                        entry["status"],
                        entry["reason"],
                        int(entry["sampled"]),
                        int(entry["complete"]),
                        len(values),
                    ),
                )
                cid = cur.lastrowid
                if not values:
                    continue
                rows = []
                for value, count in values:
                    norm = normalize(value)
                    rows.append((cid, value, norm, sorted_key(norm), count))
                first = db.execute("SELECT coalesce(max(vid), 0) + 1 FROM vals").fetchone()[0]
                db.executemany(
                    "INSERT INTO vals (vid, cid, value, norm, skey, count) VALUES (?, ?, ?, ?, ?, ?)",
                    [(first + i, *r) for i, r in enumerate(rows)],
                )
                postings = []
                new_tokens = set()
                for i, (_, _, norm, _, _) in enumerate(rows):
                    for tok in set(norm.split()):
                        postings.append((tok, first + i))
                        if tok not in vocab and tok not in added:
                            new_tokens.add(tok)
                db.executemany("INSERT OR IGNORE INTO postings VALUES (?, ?)", postings)
                if new_tokens:
                    db.executemany("INSERT OR IGNORE INTO vocab VALUES (?)", [(t,) for t in new_tokens])
                    db.executemany(
                        "INSERT OR IGNORE INTO grams VALUES (?, ?)",
                        [(g, t) for t in new_tokens for g in trigrams(t)],
                    )
                    added.update(new_tokens)
            db.execute(
                "INSERT OR REPLACE INTO tables VALUES (?, ?, ?, ?, ?, NULL)",
                (key, self._signature(table), table.row_estimate, time.time(), round(seconds, 3)),
            )
            vocab.update(added)
        except BaseException:
            db.execute("ROLLBACK TO one_table")
            raise
        finally:
            db.execute("RELEASE one_table")

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
        self, token: str, *, prefix: bool = True, fuzzy: bool = True, limit: int = 60
    ) -> dict[str, str]:
        """Vocabulary tokens like `token`: itself, tokens it is a prefix of, and near spellings
        (trigram candidates checked by edit distance). Returns token -> kind ('exact'|'prefix'|'fuzzy')."""
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
            if fuzzy and len(token) >= 4:
                grams = sorted(trigrams(token))
                allowed = max_edits(len(token))
                need = max(1, len(grams) - 3 * allowed)
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


def max_edits(length: int) -> int:
    return 1 if length <= 7 else 2


def edit_distance(a: str, b: str, bound: int) -> int:
    """Damerau-Levenshtein (adjacent transpositions) distance, cut off just above `bound`."""
    if abs(len(a) - len(b)) > bound:
        return bound + 1
    prev2: list[int] | None = None
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if prev2 is not None and i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > bound:
            return bound + 1
        prev2, prev = prev, cur
    return prev[-1]
