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

import contextlib
import hashlib
import logging
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from flexsql import background
from flexsql.errors import FlexSQLError, QueryError
from flexsql.tools.engines import FetchLimits, Source, TableInfo, active_cancel_hooks
from flexsql.tools.engines.paths import remember_paths
from flexsql.tools.engines.source import DEFAULT_TIMEOUT_S
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.values.fuzzy import edit_distance, max_edits
from flexsql.tools.values.index_file import (
    IndexDamaged,
    commit,
    file_identity,
    file_key,
    is_damage,
    open_index,
    reset_index,
    store_table,
)
from flexsql.tools.values.index_scan import CAP_PER_COLUMN, scan_table
from flexsql.tools.values.normalize import trigrams

Progress = Callable[[float, float, str], None]
log = logging.getLogger("flexsql.values")


class ValueIndexStats(BaseModel):
    """What the index covers after a build (or a check that needed no build)."""

    source: str
    path: str
    tables_in_scope: int
    tables_indexed: int
    tables_scanned: int  # scanned by this call (0: everything came from the file)
    tables_failed: int = 0
    tables_pending: int = 0  # still being built in the background when the call answered
    columns_indexed: int
    columns_skipped: dict[str, int] = {}
    columns_sampled: int = 0
    columns_incomplete: int = 0
    values: int
    seconds: float
    errors: list[str] = []
    notes: list[str] = []

    def to_text(self) -> str:
        skipped = ", ".join(f"{n} {why}" for why, n in sorted(self.columns_skipped.items())) or "none"
        text = (
            f"value index for {self.source}: {self.tables_indexed}/{self.tables_in_scope} tables, "
            f"{self.columns_indexed} columns, {self.values:,} values; scanned {self.tables_scanned} tables "
            f"in {self.seconds:.1f} s; skipped columns: {skipped}; sampled columns: {self.columns_sampled}; "
            f"incomplete (over {CAP_PER_COLUMN} distinct): {self.columns_incomplete}"
        )
        if self.tables_pending:
            text += f"; {self.tables_pending} tables still being indexed in the background"
        if self.tables_failed:
            text += f"; {self.tables_failed} tables failed: " + "; ".join(self.errors[:3])
        return "\n".join([text, *self.notes])


@dataclass
class BuildReport:
    scanned: int = 0  # tables (re)indexed while the call waited
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    pending: int = 0  # tables of the call still to index when it stopped waiting (built in the background)
    elsewhere: bool = False  # another process holds the index's write lock (it is building it)
    notes: list[str] = field(default_factory=list)  # said once: a damaged file set aside


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


class IndexReset(FlexSQLError):
    """The index file turned out damaged while it was read: it was set aside (a fresh one is built).
    The caller answers again from the fresh index, or without it."""

    code = "value_index_reset"


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
COMMIT_EVERY_S = 1.0  # a build commits this often: readers see its progress, an interrupted one keeps it
LOCK_RETRY_S = 0.5  # how often a build waiting for another process's write lock looks again


def data_versions(source: Source, tables: list[TableInfo]) -> dict[str, str] | None:
    """A token per table that changes when its rows may have changed (Source.data_versions: a
    file's size and modification time, PostgreSQL's per-table change counters). None when the
    engine has no such signal (Snowflake): then only the age limit (INDEX_TTL_S) invalidates."""
    return source.data_versions(tables)


@dataclass
class _Queued:
    table: TableInfo
    signature: str
    forced: bool  # rebuilt even when the file holds this signature (refresh)
    timeout_s: float


class ValueIndex:
    """One source's value index file. Thread-safe; cheap to open (nothing is loaded up front).

    Readers and the builder never wait for each other. Each thread reads through a connection of its
    own, and a call's lookups run in one read transaction (`snapshot`), so they see one committed state
    of the file: a table's entry is replaced whole inside a commit, so a reader sees it before or
    after a rebuild, never half-way. What is cached in memory (column states, scope views) is keyed by
    the file's id and generation (every commit makes a new one), so a build by another thread, another
    server or the CLI is seen at the next call. Building runs in one background thread per index
    (`ensure` queues tables and waits for them at most `wait_s`), on a connection of its own; another
    process holding the write lock makes it wait in the background, never the caller.

    A damaged file (not SQLite, truncated, a directory or FIFO in its place, part of its layout gone)
    is set aside and built again; the next result says so once (`take_notes`)."""

    def __init__(self, source: Source, path: Path | None = None) -> None:
        self.source = source
        self.path = path or index_path(source)
        self._lock = threading.RLock()  # the in-memory state below
        self._local = threading.local()  # per thread: its reader connection and snapshot
        self._readers: list[sqlite3.Connection] = []
        self._epoch = 0  # bumped when the file is set aside: every connection reopens
        self._cache_key: tuple[str, int] | None = None
        self._cache: dict[str, Any] = {}
        self._signatures: dict[int, tuple[TableInfo, str, str]] = {}
        self._notes: list[str] = []
        self.queries_sent = 0  # statements this object ran on the source (tests check reuse)
        # the builder: what it is to index, what it did, and its thread
        self._build = threading.Condition(self._lock)
        self._queue: dict[str, _Queued] = {}
        self._current: str | None = None
        self._finished: dict[str, str | None] = {}  # tkey -> None (built) or its error, since queued
        self._builder: threading.Thread | None = None
        self._writer: sqlite3.Connection | None = None
        self._writer_epoch = -1
        self._elsewhere = False
        self._closed = False

    # -- storage ------------------------------------------------------------------------------------
    def _open(self) -> sqlite3.Connection:
        """A connection to the file, setting a damaged file aside first (and saying so once)."""
        try:
            return open_index(self.path, self.source.display_url)
        except IndexDamaged as exc:
            self._reset(str(exc), file_identity(self.path))
        try:
            return open_index(self.path, self.source.display_url)
        except IndexDamaged as exc:  # a fresh file fails too: the folder, not the file, is the trouble
            raise QueryError(
                f"the value index {self.path} cannot be created ({exc}): check that the cache folder can "
                "be written and has room, or point FLEXSQL_CACHE_DIR at one that can"
            ) from None

    def _reset(self, why: str, seen: tuple[int, int] | None) -> None:
        """Set the damaged file aside (unless someone did already) and make every connection reopen."""
        moved = reset_index(self.path, seen)
        with self._lock:
            self._epoch += 1
            self._cache, self._cache_key = {}, None
            if moved:
                note = (
                    f"the value index file {self.path} was damaged ({why}); it was set aside "
                    f"({self.path.name}.damaged) and is being built again"
                )
                log.warning("%s", note)
                self._notes.append(note)

    def take_notes(self) -> list[str]:
        """What to tell the user once (a damaged file set aside), cleared as it is read."""
        with self._lock:
            notes, self._notes = self._notes, []
            return notes

    def _reader(self) -> sqlite3.Connection:
        """This thread's connection, reopened when the file was set aside or replaced."""
        local = self._local
        conn: sqlite3.Connection | None = getattr(local, "conn", None)
        if conn is not None and local.epoch == self._epoch:
            return conn
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
            with self._lock:
                if conn in self._readers:
                    self._readers.remove(conn)
        epoch = self._epoch
        conn = self._open()
        local.conn, local.epoch, local.identity = conn, epoch, file_identity(self.path)
        with self._lock:
            self._readers.append(conn)
        return conn

    def _db(self) -> sqlite3.Connection:
        """The connection reads use (in this thread)."""
        return self._reader()

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Run the block's lookups on one committed state of the file (re-entrant per thread). A file
        found damaged raises IndexReset, after setting it aside."""
        local = self._local
        if getattr(local, "depth", 0):
            local.depth += 1
            try:
                yield
            finally:
                local.depth -= 1
            return
        with self._guard():
            conn = self._reader()
            if file_identity(self.path) != local.identity:  # replaced by another process: read the new one
                with self._lock:
                    self._epoch += 1
                conn = self._reader()
            conn.execute("BEGIN")
            try:
                local.key = file_key(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        local.depth = 1
        try:
            with self._guard():
                yield
        finally:
            local.depth, local.key = 0, None
            with contextlib.suppress(sqlite3.Error):
                conn.execute("COMMIT")

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        """SQLite errors of reads as flexsql errors: a damaged file is set aside (IndexReset)."""
        try:
            yield
        except IndexDamaged as exc:
            raise IndexReset(f"the value index file was damaged ({exc}) and was reset") from None
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise QueryError(f"the value index {self.path} could not be read: {exc}") from None
            self._reset(str(exc).splitlines()[0], getattr(self._local, "identity", None))
            raise IndexReset(f"the value index file was damaged ({exc}) and was reset") from None

    def _key(self) -> tuple[str, int]:
        key: tuple[str, int] | None = getattr(self._local, "key", None)
        if key is None:  # outside a snapshot: the state as of now
            with self._guard():
                key = file_key(self._reader())
        return key

    def _cached(self, name: str, build: Callable[[], Any]) -> Any:
        """A view of the file cached for the state this thread reads; built again once it changes."""
        key = self._key()
        with self._lock:
            if self._cache_key == key and name in self._cache:
                return self._cache[name]
        with self._guard():
            value = build()
        with self._lock:
            current = self._cache_key
            if current != key and (current is None or current[0] != key[0] or current[1] < key[1]):
                self._cache, self._cache_key = {}, key  # newer than what is cached (or another file)
            if self._cache_key == key:
                self._cache[name] = value
        return value

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._queue.clear()
            self._build.notify_all()
            builder = self._builder
        if builder is not None and builder is not threading.current_thread():
            builder.join(10)
        with self._lock:
            for conn in [*self._readers, *([self._writer] if self._writer is not None else [])]:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            self._readers.clear()
            self._writer = None
            self._epoch += 1
            self._closed = False

    def is_empty(self) -> bool:
        if not self.path.exists():
            return True
        try:
            return not self.known_tables()
        except IndexReset:
            return True

    def known_tables(self) -> dict[str, str]:
        """tkey -> signature of every table in the file (failed ones too: they wait for a refresh)."""
        known: dict[str, str] = self._cached(
            "known", lambda: dict(self._db().execute("SELECT tkey, signature FROM tables"))
        )
        return known

    def indexed_tables(self) -> dict[str, str]:
        """tkey -> signature of every table indexed without error."""
        with self._guard():
            return dict(self._db().execute("SELECT tkey, signature FROM tables WHERE error IS NULL"))

    def column_map(self, reload: bool = False) -> dict[int, tuple[str, str]]:
        """cid -> (table key, column name) of every indexed column, cached until the index changes."""

        def build() -> dict[int, tuple[str, str]]:
            return {
                cid: (tkey, name)
                for cid, tkey, name in self._db().execute(
                    "SELECT cid, tkey, name FROM columns WHERE status = 'indexed'"
                )
            }

        if reload:
            with self._guard():
                return build()
        out: dict[int, tuple[str, str]] = self._cached("column_map", build)
        return out

    def columns(self, tkeys: Iterable[str] | None = None) -> list[ColumnState]:
        def build() -> dict[str, list[ColumnState]]:
            by_table: dict[str, list[ColumnState]] = {}
            for cid, t, n, ty, st, r, s, c, nv in self._db().execute(
                "SELECT cid, tkey, name, type, status, reason, sampled, complete, n_values FROM columns "
                "ORDER BY cid"
            ):
                by_table.setdefault(t, []).append(
                    ColumnState(cid, t, n, ty, st, r, bool(s), bool(c), nv or 0)
                )
            return by_table

        by_table: dict[str, list[ColumnState]] = self._cached("by_table", build)
        if tkeys is None:
            return [c for cols in by_table.values() for c in cols]
        return [c for key in tkeys for c in by_table.get(key, ())]

    def scope_view(self, tkeys: Iterable[str]) -> ScopeView:
        """The column states of these tables, grouped for find_values (cached until the index changes)."""
        key = tuple(tkeys)

        def build() -> ScopeView:
            states = self.columns(key)
            by_table: dict[str, dict[str, ColumnState]] = {}
            uncovered: dict[str, list[ColumnState]] = {}
            for c in states:
                by_table.setdefault(c.table, {})[c.column] = c
                if c.reason != "not text" and not (c.status == "indexed" and c.complete):
                    uncovered.setdefault(c.table, []).append(c)
            indexed = {c.cid: c for c in states if c.status == "indexed"}
            return ScopeView(states, indexed, by_table, uncovered)

        views: dict[tuple[str, ...], ScopeView] = self._cached("views", dict)
        view = views.get(key)
        if view is None:
            view = build()
            if len(views) >= 16:
                views.clear()
            views[key] = view
        return view

    def _signature(self, table: TableInfo, version: str) -> str:
        memo = self._signatures.get(id(table))
        if memo is None or memo[0] is not table or memo[2] != version:
            memo = (table, table_signature(table, version), version)
            self._signatures[id(table)] = memo
        return memo[1]

    def built_at(self, tkeys: Iterable[str]) -> float | None:
        """When the oldest of these tables' entries was built (epoch seconds), None if none is."""
        keys = list(tkeys)
        oldest: float | None = None
        with self._guard():
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
        wait_s: float | None = None,
    ) -> BuildReport:
        """Index the tables that are missing (or whose columns or data changed, or past `ttl_s`); all
        of them with `refresh`. The work goes to the index's builder thread; this call waits for it at
        most `wait_s` seconds (None: until it is done) and reports what is still pending — the builder
        goes on in the background, and later calls see its progress."""
        started = time.perf_counter()
        versions = data_versions(self.source, tables) or {}
        try:
            known = self.known_tables()
        except IndexReset:
            known = self.known_tables()
        todo = [
            t
            for t in tables
            if refresh or known.get(t.qualified) != self._signature(t, versions.get(t.qualified, ""))
        ]
        forced = {t.qualified for t in todo} if refresh else set()
        if ttl_s is not None:  # and entries past their age limit, whatever the change signal says
            expired = self._expired({t.qualified for t in tables} - {t.qualified for t in todo}, ttl_s)
            todo += [t for t in tables if t.qualified in expired]
            forced |= expired
        report = BuildReport(notes=self.take_notes())
        if not todo:
            report.seconds = time.perf_counter() - started
            return report
        keys = [t.qualified for t in todo]
        with self._build:
            for t in todo:
                sig = self._signature(t, versions.get(t.qualified, ""))
                held = self._queue.get(t.qualified)
                again = t.qualified in forced or (held is not None and held.forced)
                self._queue[t.qualified] = _Queued(t, sig, again, timeout_s)
                self._finished.pop(t.qualified, None)
            if self._builder is None or not self._builder.is_alive():
                self._builder = background.start(self._build_loop, name="flexsql-value-index")
            self._build.notify_all()
        self._wait(keys, wait_s, progress, report)
        report.notes += self.take_notes()
        report.seconds = time.perf_counter() - started
        return report

    def _wait(
        self, keys: list[str], wait_s: float | None, progress: Progress | None, report: BuildReport
    ) -> None:
        """Wait until the builder is done with `keys`, at most `wait_s`, or until the tool call is
        cancelled; fills `report` (scanned, errors, pending), reporting progress meanwhile."""
        deadline = None if wait_s is None else time.monotonic() + wait_s
        hooks = active_cancel_hooks.get()
        cancelled = threading.Event()

        def wake() -> None:
            cancelled.set()
            with self._build:
                self._build.notify_all()

        if hooks is not None:
            hooks.add(wake)
        try:
            with self._build:
                while True:
                    left = [k for k in keys if k not in self._finished]
                    done = len(keys) - len(left)
                    if not left or cancelled.is_set() or self._builder is None:
                        break
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        break
                    if progress is not None:
                        doing = self._current or left[0]
                        what = (
                            "waiting for another flexsql process building the value index"
                            if self._elsewhere
                            else f"indexing values of {doing}"
                        )
                        progress(done, len(keys), what)
                    self._build.wait(0.25 if remaining is None else min(0.25, remaining))
                report.scanned = sum(1 for k in keys if k in self._finished and self._finished[k] != "")
                report.errors = [self._finished[k] or "" for k in keys if self._finished.get(k)]
                report.pending = len(left)
                report.elsewhere = self._elsewhere
        finally:
            if hooks is not None:
                hooks.discard(wake)
        if progress is not None and not report.pending:
            progress(len(keys), len(keys), "value index ready")

    def _build_loop(self) -> None:
        """The builder thread: index the queued tables under the file's write lock, committing every
        COMMIT_EVERY_S; while another process holds the lock, drop what it has built meanwhile."""
        me = threading.current_thread()
        try:
            while True:
                with self._build:
                    if not self._queue or self._closed or background.exiting():
                        # decided under the lock ensure() queues under: a table queued after this
                        # starts a new builder, because this one is no longer the builder
                        self._builder = None if self._builder is me else self._builder
                        return
                try:
                    db = self._writer_conn()
                    if not self._begin(db):
                        self._drop_built_elsewhere(db)
                        time.sleep(LOCK_RETRY_S)
                        continue
                    self._build_batch(db)
                except IndexDamaged as exc:
                    self._reset(str(exc), file_identity(self.path))
                except sqlite3.DatabaseError as exc:
                    if not is_damage(exc):
                        raise
                    self._reset(str(exc).splitlines()[0], self._writer_identity)
        except Exception as exc:  # a bug must not leave callers waiting: they report what is pending
            log.exception("the value index build of %s stopped", self.source.name)
            with self._build:
                for key in list(self._queue):
                    self._finished[key] = (
                        f"{key}: the value index build stopped ({type(exc).__name__}: {exc})"
                    )
                self._queue.clear()
        finally:
            with self._build:
                self._builder = None if self._builder is me else self._builder
                self._current = None
                self._elsewhere = False
                self._build.notify_all()

    def _writer_conn(self) -> sqlite3.Connection:
        """The builder's connection, reopened when the file was set aside, here or by another process."""
        with self._lock:
            current = self._writer is not None and self._writer_epoch == self._epoch
            if current and file_identity(self.path) == self._writer_identity:
                assert self._writer is not None
                return self._writer
            if self._writer is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._writer.close()
            epoch = self._epoch
        conn = self._open()
        with self._lock:
            self._writer, self._writer_epoch = conn, epoch
            self._writer_identity = file_identity(self.path)
        return conn

    _writer_identity: tuple[int, int] | None = None

    def _begin(self, db: sqlite3.Connection) -> bool:
        """Take the file's write lock, waiting LOCK_RETRY_S at most; False while another process holds it."""
        db.execute(f"PRAGMA busy_timeout = {int(LOCK_RETRY_S * 1000)}")
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                with self._build:
                    self._elsewhere = True
                    self._build.notify_all()
                return False
            raise
        with self._build:
            self._elsewhere = False
        return True

    def _drop_built_elsewhere(self, db: sqlite3.Connection) -> None:
        """Another process is building: what it committed meanwhile is done for this one's callers."""
        have = dict(db.execute("SELECT tkey, signature FROM tables WHERE error IS NULL").fetchall())
        with self._build:
            for key, queued in list(self._queue.items()):
                if not queued.forced and have.get(key) == queued.signature:
                    del self._queue[key]
                    self._finished[key] = ""  # done, by another process: not scanned here
            self._build.notify_all()

    def _build_batch(self, db: sqlite3.Connection) -> None:
        """Index queued tables inside the write transaction `db` holds, committing every COMMIT_EVERY_S
        (and at the end); returns when the queue is empty, the process exits, or the lock is lost."""
        known = dict(db.execute("SELECT tkey, signature FROM tables").fetchall())
        vocab = {row[0] for row in db.execute("SELECT tok FROM vocab")}
        committed = time.monotonic()
        done: dict[str, str | None] = {}  # built since the last commit: told to callers once committed

        def publish() -> None:
            commit(db)
            with self._build:
                self._finished.update(done)
                self._build.notify_all()
            done.clear()

        try:
            while True:
                with self._build:
                    if not self._queue or self._closed or background.exiting():
                        return
                    key = next(iter(self._queue))
                    queued = self._queue.pop(key)
                    self._current = key
                if not queued.forced and known.get(key) == queued.signature:
                    outcome: str | None = ""  # built meanwhile by another process
                else:
                    outcome = None
                    try:
                        self._index_table(db, queued, vocab)
                    except sqlite3.DatabaseError as exc:
                        if is_damage(exc):
                            raise
                        outcome = f"{key}: {str(exc).splitlines()[0][:200]}"
                        self._record_failure(db, queued, outcome)
                    except Exception as exc:  # one bad table must not stop the rest
                        if background.exiting() or self._closed:
                            return  # its scan was interrupted on the way out: no failure to record
                        outcome = f"{key}: {str(exc).splitlines()[0][:200]}"
                        self._record_failure(db, queued, outcome)
                    known[key] = queued.signature
                done[key] = outcome
                with self._build:
                    self._current = None
                if time.monotonic() - committed > COMMIT_EVERY_S:  # readers see it; an interruption keeps it
                    publish()
                    if not self._begin(db):
                        return
                    committed = time.monotonic()
        finally:
            if db.in_transaction:
                publish()
            with self._build:
                self._current = None
                self._build.notify_all()

    def _expired(self, tkeys: set[str], ttl_s: float) -> set[str]:
        if not tkeys:
            return set()
        cutoff = time.time() - ttl_s
        with self._guard():
            rows = self._db().execute("SELECT tkey, built_at FROM tables").fetchall()
        return {k for k, built in rows if k in tkeys and (built or 0) < cutoff}

    def stats(self, tables: list[TableInfo], report: BuildReport | None = None) -> ValueIndexStats:
        report = report or BuildReport()
        keys = [t.qualified for t in tables]
        with self.snapshot():
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
            tables_pending=report.pending,
            columns_indexed=sum(1 for c in cols if c.status == "indexed"),
            columns_skipped=skipped,
            columns_sampled=sum(1 for c in cols if c.sampled),
            columns_incomplete=sum(1 for c in cols if c.status == "indexed" and not c.complete),
            values=sum(c.n_values for c in cols if c.status == "indexed"),
            seconds=round(report.seconds, 3),
            errors=report.errors,
            notes=report.notes,
        )

    def _run(self, sql: str, timeout_s: float, max_rows: int) -> list[tuple[Any, ...]]:
        self.queries_sent += 1
        result = self.source.execute(
            sql,
            timeout_s=timeout_s,
            limits=FetchLimits(max_rows=max_rows, max_bytes=256_000_000, count_limit=max_rows + 1),
        )
        return result.rows

    def _index_table(self, db: sqlite3.Connection, queued: _Queued, vocab: set[str]) -> None:
        started = time.perf_counter()
        table = queued.table
        columns = scan_table(table, self.source.engine, self._run, queued.timeout_s)
        real = {
            c.name for c in table.columns
        }  # the others are paths inside nested columns: search indexes them
        remember_paths(
            self.source.catalog(),
            table.qualified,
            [(c["name"], c["type"]) for c in columns if c["name"] not in real],
        )
        store_table(db, table, queued.signature, columns, vocab, time.perf_counter() - started)

    def _record_failure(self, db: sqlite3.Connection, queued: _Queued, error: str) -> None:
        table = queued.table
        db.execute(
            "INSERT OR REPLACE INTO tables VALUES (?, ?, ?, ?, ?, ?)",
            (table.qualified, queued.signature, table.row_estimate, time.time(), 0.0, error),
        )

    # -- lookups ------------------------------------------------------------------------------------
    def _values_where(
        self, where: str, params: list[Any], cids: set[int] | None, limit: int
    ) -> list[IndexedValue]:
        with self._guard():
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
        with self._guard():
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
        with self._guard():
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
        with self._guard():
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
        with self._guard():
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
        with self._guard():
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
        with self._guard():
            db = self._db()
            for tok in dict.fromkeys(tokens):
                out[tok] = db.execute(
                    "SELECT count(*) FROM (SELECT 1 FROM postings WHERE tok = ? LIMIT 5000)", (tok,)
                ).fetchone()[0]
        return out


def value_index(ctx: ToolContext, source: Source) -> ValueIndex:
    """The source's value index (one object per ToolContext; the file is shared across them)."""
    return ctx.cache(f"values:{source.name}", lambda: ValueIndex(source))
