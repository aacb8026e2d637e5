"""DuckDB: the embedded default engine.

Opened `read_only` (files) with external access off and configuration locked, so the engine
itself refuses writes, file and network readers and `SET` even if the guard were fooled.
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from sqlglot import exp

from flexsql import background
from flexsql.config import LimitsConfig
from flexsql.errors import ConfigError, QueryError, QueryTimeout, UnavailableError
from flexsql.tools.engines.cancel import Deadline, timeout_error
from flexsql.tools.engines.catalog import Catalog, Column, ForeignKey, TableInfo
from flexsql.tools.engines.engine import CellCap, Engine
from flexsql.tools.engines.fetch import FetchLimits, collect, fetch_batches, plan_cells
from flexsql.tools.engines.paths import json_path, text_type
from flexsql.tools.engines.row_counts import count_rows, worth_counting
from flexsql.tools.engines.source import EngineMemory, RunOutput, SafetyReport, Source, file_data_versions
from flexsql.tools.engines.urls import file_path_of


class DuckDB(Engine):
    name = dialect = "duckdb"
    url_schemes = ("duckdb",)
    file_suffixes = (".duckdb",)
    notes = (
        "DuckDB: double quotes are identifiers, single quotes are strings; ILIKE, regexp_matches, "
        "strftime(date, '%Y'), date_trunc('month', d), list/struct columns (unnest, s.field), QUALIFY."
    )
    nested_notes = (
        "JSON_EXTRACT_STRING(col, '$.key') reads a JSON key, struct_col.field a STRUCT field, and UNNEST(col) "
        "unnests a list."
    )
    double_type = "DOUBLE"
    approx_distinct = "approx_count_distinct({expr})"
    sample_table = sample_view = "{table} TABLESAMPLE SYSTEM ({pct} PERCENT)"
    sample_label = "block sample"
    scan_above_rows = 50_000_000  # DuckDB scans tens of millions of rows a second
    regex_match = "regexp_matches({expr}, {pattern})"
    # PIVOT and SUMMARIZE are statements of their own that only read
    read_roots = tuple(getattr(exp, n) for n in ("Pivot", "Summarize") if hasattr(exp, n))
    simple_show = True
    show_forms = "SHOW TABLES, SHOW <table>, SHOW ALL TABLES"
    show_hint = "a quoted name or path is refused because DuckDB reads it as a file — query the table with SELECT instead"
    # INTERVAL becomes a timedelta in Python (1 month -> 30 days), TIMESTAMP_NS drops its nanoseconds
    lossy_types = ("INTERVAL", "TIMESTAMP_NS")

    def cap_cell(self, expr: str, type_name: str, chars: int) -> CellCap | None:
        import duckdb

        return _cap(expr, duckdb.sqltype(type_name), chars, top=True)

    def infinite_flag(self, expr: str, type_name: str) -> str | None:
        # the driver hands 'infinity' over as date.max / datetime.max: the same as 9999-12-31
        return f"isinf({expr})" if type_name.upper() in _TIME_TYPES else None

    # paths: json_extract_string over the JSON (STRUCT and MAP values turned to JSON first)
    def json_text(self, expr: str, column_type: str) -> str:
        return f"CAST({_json(expr, column_type)} AS VARCHAR)"

    def path_value(self, column_sql: str, column_type: str, keys: Sequence[str]) -> str:
        # a JSON pointer (/a/b): any key spells in it, the empty key too, which `$.""` cannot
        return f"json_extract_string({_json(column_sql, column_type)}, {self.literal(_pointer(keys))})"

    def path_elements(
        self,
        table_sql: str,
        column_sql: str,
        column_type: str,
        before: Sequence[str],
        after: Sequence[str],
        alias: str,
    ) -> str:
        doc = _json(column_sql, column_type)
        if "" not in before and "" not in after:
            path = self.literal(json_path(before, array=True, after=after))
            return f"SELECT unnest(json_extract_string({doc}, {path})) AS {alias} FROM {table_sql}"
        # an empty key: the array by pointer, each element's value by pointer
        array = f"json_extract({doc}, {self.literal(_pointer(before))})" if before else doc
        value = f"json_extract_string(flexsql_e, {self.literal(_pointer(after))})" if after else "flexsql_e"
        elements = f"SELECT unnest(CAST({array} AS JSON[])) AS flexsql_e FROM {table_sql}"
        return f"SELECT {value} AS {alias} FROM ({elements}) AS flexsql_u"


def _pointer(keys: Sequence[str]) -> str:
    """A JSON pointer (RFC 6901) to `keys`: '~' and '/' inside a key escaped as ~0 and ~1."""
    return "".join("/" + k.replace("~", "~0").replace("/", "~1") for k in keys)


class DuckDBSource(Source):
    engine = DuckDB()

    # A read-only handle still takes DuckDB's file lock, which keeps every writer (a loader, dbt, a
    # notebook) out. So the handle is released once no statement has used it for this long, and
    # reopened (a few milliseconds) on the next one.
    IDLE_RELEASE_S: float | None = 2.0
    # Statements that keep coming (less than IDLE_RELEASE_S apart, or overlapping) would hold it for
    # ever: once the handle has been open [limits] lock_hold_s, new statements wait (DRAIN_S at most)
    # for the running ones to finish, the handle is closed and the file left free for [limits]
    # lock_yield_s, so that a writer retrying in that window gets it. While a writer holds the file,
    # statements wait for it (within their timeout) instead of failing.
    OPEN_RETRY_S = 0.05  # how often a statement tries the file again while a writer holds it
    DRAIN_S = 2.0  # the most new statements wait for running ones so that the handle can be let go
    CATALOG_WAIT_S = 5.0  # how long a catalog read waits for a writer to let go of the file

    def __init__(
        self, name: str, url: str, description: str = "", limits: LimitsConfig | None = None
    ) -> None:
        super().__init__(name, url, description, limits)
        self.path = file_path_of(url)
        self._conn: Any = None
        self._open_lock = threading.Condition()
        self._users = 0
        self._cursors: set[Any] = set()  # open cursors, interrupted at interpreter exit
        self._idle_timer: threading.Timer | None = None
        self._opened_at = 0.0  # when the handle was opened (monotonic)
        self._free_until = 0.0  # the file is left free for writers until then (monotonic)
        _SOURCES.add(self)

    # -- connection -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def _cursor(self, timeout_s: float | None = None) -> Iterator[Any]:
        """A cursor on the shared handle, opening it if needed and scheduling its release; waits at most
        `timeout_s` while the handle is let go for writers or a writer holds the file."""
        deadline = time.monotonic() + (self.CATALOG_WAIT_S if timeout_s is None else timeout_s)
        with self._open_lock:
            if background.exiting():
                raise UnavailableError("the process is shutting down; no new statements start")
            if self._idle_timer is not None:
                self._idle_timer.cancel()
                self._idle_timer = None
            self._yield_if_held(deadline)
            if self._conn is None:
                self._conn = self._open_when_free(deadline, timeout_s)
                self._opened_at = time.monotonic()
            self._users += 1
            cur = self._conn.cursor()
            self._cursors.add(cur)
        try:
            yield cur
        finally:
            self._done_with(cur)

    def _yield_if_held(self, deadline: float) -> None:
        """Let go of a handle open for [limits] lock_hold_s: wait (DRAIN_S at most) for the statements on
        it to finish, close it, and leave the file free for [limits] lock_yield_s. When they do not
        finish in time, keep the handle and try again after another lock_hold_s: quick reads never wait
        behind a long query for a writer that may not be there. Called holding _open_lock."""
        if self._conn is None or self.path == ":memory:":
            return
        now = time.monotonic()
        if now - self._opened_at < self.limits.lock_hold_s:
            return
        until = min(deadline, now + self.DRAIN_S)
        while self._users and self._conn is not None and time.monotonic() < until:
            self._open_lock.wait(min(until - time.monotonic(), 0.1))
        if self._conn is None:
            return  # let go meanwhile by another statement that waited too
        if self._users:
            self._opened_at = time.monotonic()  # busy with long statements: not this time
            return
        self._conn.close()
        self._conn = None
        self._free_until = time.monotonic() + self.limits.lock_yield_s

    def _open_when_free(self, deadline: float, timeout_s: float | None) -> Any:
        """Open the handle once the window left to writers is over, retrying while a writer holds the
        file, until `deadline`. Called holding _open_lock (released while waiting)."""
        while True:
            now = time.monotonic()
            if now < self._free_until:
                self._open_lock.wait(min(self._free_until, deadline) - now)
            elif self._conn is not None:  # opened by another statement while this one waited
                return self._conn
            else:
                try:
                    return self._open()
                except _FileLocked as exc:
                    if time.monotonic() + self.OPEN_RETRY_S >= deadline:
                        raise _FileLocked(
                            f"{exc}; waited for it {self.CATALOG_WAIT_S if timeout_s is None else timeout_s:g} s "
                            "— retry when that program has finished writing, or close it"
                        ) from None
                    self._open_lock.wait(self.OPEN_RETRY_S)
            if time.monotonic() >= deadline and self._conn is None:
                raise QueryTimeout(
                    "the query waited for the DuckDB file, left free for other programs to write "
                    f"([limits] lock_yield_s = {self.limits.lock_yield_s:g} s), until its timeout; retry"
                )

    def _done_with(self, cur: Any) -> None:
        """Close a cursor; the last one out schedules the handle's release (unless one is pending)."""
        cur.close()
        with self._open_lock:
            self._users -= 1
            self._cursors.discard(cur)
            self._open_lock.notify_all()
            if background.exiting():
                pass  # the exit hook closes the handle
            elif (
                self._users == 0
                and self._idle_timer is None
                and self.IDLE_RELEASE_S is not None
                and self.path != ":memory:"
            ):
                self._idle_timer = threading.Timer(self.IDLE_RELEASE_S, self._release_if_idle)
                self._idle_timer.daemon = True
                self._idle_timer.start()

    def engine_memory(self) -> EngineMemory:
        """DuckDB's own count of what it holds (duckdb_memory(): the file's blocks it caches, operators'
        buffers — what memory_limit bounds), read on the open handle; a released handle holds nothing.
        It neither opens the handle nor postpones its release: /healthz may poll it."""
        limit = self.limits.engine_memory_mb * 1024 * 1024
        with self._open_lock:
            if self._conn is None or background.exiting():
                return EngineMemory(used_bytes=0, limit_bytes=limit)
            self._users += 1  # the handle stays open under this cursor, the idle timer keeps running
            cur = self._conn.cursor()
            self._cursors.add(cur)
        try:
            row = cur.execute("SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory()").fetchone()
        finally:
            self._done_with(cur)
        return EngineMemory(used_bytes=int(row[0]) if row else 0, limit_bytes=limit)

    def _release_if_idle(self) -> None:
        with self._open_lock:
            if self._users == 0 and self._conn is not None and not background.exiting():
                self._conn.close()
                self._conn = None
            self._idle_timer = None

    def _stop_at_exit(self, seconds: float) -> None:
        """Interrupt the statements still running (a worker thread whose tool call was abandoned) and
        wait for them to leave DuckDB, then close the handle here: a thread that CPython ends inside
        DuckDB's C++ at shutdown aborts the whole process (exit 134)."""
        deadline = time.monotonic() + seconds
        with self._open_lock:
            if self._idle_timer is not None:
                self._idle_timer.cancel()
                self._idle_timer = None
            while self._users and time.monotonic() < deadline:
                for cur in list(self._cursors):
                    with contextlib.suppress(Exception):
                        cur.interrupt()
                self._open_lock.wait(min(0.1, max(deadline - time.monotonic(), 0.0)))
            if self._users == 0 and self._conn is not None:
                with contextlib.suppress(Exception):
                    self._conn.close()
                self._conn = None

    def _open(self) -> Any:
        import duckdb

        from flexsql.paths import cache_dir, private_dir

        # the engine's memory follows [limits], not the query: beyond it DuckDB spills to a private
        # temp folder (bounded too) or fails the query with an out-of-memory error
        config: dict[str, str | bool | int | float | list[str]] = {
            "enable_external_access": False,
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "memory_limit": f"{self.limits.engine_memory_mb}MB",
            "temp_directory": str(private_dir(cache_dir() / "duckdb_tmp")),
            "max_temp_directory_size": f"{self.limits.engine_temp_mb}MB",
        }
        in_memory = self.path == ":memory:"
        if not in_memory and not Path(self.path).exists():
            raise ConfigError(f"DuckDB file not found: {self.path}; check the path in the source URL")
        if not in_memory and _file_head(self.path).startswith(b"SQLite format 3\0"):
            raise ConfigError(
                f"{self.path} is a SQLite file, not DuckDB: use sqlite:///{self.path.lstrip('/')}"
            )
        try:
            conn = duckdb.connect(self.path, read_only=not in_memory, config=config)
        except duckdb.Error as exc:
            text = str(exc)
            hint = ""
            if "lock" in text.lower():  # first: the lock holder's path may contain "version"
                raise _FileLocked(
                    f"cannot open DuckDB database {self.path}: another process holds a write lock on it "
                    f"({text.splitlines()[0]})"
                ) from None
            if "version" in text.lower() or "serializ" in text.lower():
                hint = (
                    f" — the file was written by a different DuckDB version (this is {duckdb.__version__}); "
                    "open it with the version that wrote it and EXPORT/IMPORT it, or upgrade duckdb"
                )
            raise ConfigError(
                f"cannot open DuckDB database {self.path}: {text.splitlines()[0]}{hint}"
            ) from None
        # DuckDB shares one database instance between the connections a process opens on the same
        # file (a second Source on it, a checksum): that instance may already be locked by us.
        current = conn.execute(
            "SELECT current_setting('enable_external_access'), current_setting('lock_configuration')"
        ).fetchone()
        assert current is not None  # a SELECT without FROM returns one row
        external, locked = current
        if external:
            conn.close()
            raise ConfigError(
                f"cannot open DuckDB database {self.path} read-only: this process already has it open "
                "with external access enabled; close that connection first"
            )
        if not locked:
            conn.execute("SET lock_configuration = true")
        return conn

    def close(self) -> None:
        with self._open_lock:
            if self._idle_timer is not None:
                self._idle_timer.cancel()
                self._idle_timer = None
            if self._conn is not None:
                conn, self._conn = self._conn, None
                try:
                    conn.interrupt()  # a query cancelled a moment ago may still be unwinding
                    conn.close()
                except (
                    Exception
                ):  # duckdb "connection is busy": the handle goes with the process; nothing to save
                    pass

    # -- catalog --------------------------------------------------------------------------------
    def _load_catalog(self) -> Catalog:
        with self._cursor() as cur:
            tables: dict[tuple[str, str], TableInfo] = {}
            for schema, name, comment, estimate in cur.execute(
                "SELECT schema_name, table_name, comment, estimated_size FROM duckdb_tables() "
                "WHERE NOT internal AND NOT temporary ORDER BY schema_name, table_name"
            ).fetchall():
                tables[(schema, name)] = TableInfo(
                    schema_name=schema,
                    name=name,
                    kind="table",
                    comment=comment,
                    row_estimate=estimate,
                    # rows ever stored: deleted ones count until the file is vacuumed
                    rows_from="DuckDB's table metadata",
                )
            for schema, name, comment in cur.execute(
                "SELECT schema_name, view_name, comment FROM duckdb_views() "
                "WHERE NOT internal AND NOT temporary ORDER BY schema_name, view_name"
            ).fetchall():
                tables[(schema, name)] = TableInfo(
                    schema_name=schema, name=name, kind="view", comment=comment
                )
            pk_cols: dict[tuple[str, str], set[str]] = {}
            for schema, name, ctype, cols, ref_table, ref_cols in cur.execute(
                "SELECT schema_name, table_name, constraint_type, constraint_column_names, "
                "referenced_table, referenced_column_names FROM duckdb_constraints() "
                "WHERE constraint_type IN ('PRIMARY KEY', 'FOREIGN KEY')"
            ).fetchall():
                info = tables.get((schema, name))
                if info is None:
                    continue
                if ctype == "PRIMARY KEY":
                    pk_cols.setdefault((schema, name), set()).update(cols)
                else:
                    info.foreign_keys.append(
                        ForeignKey(
                            columns=list(cols),
                            ref_schema=schema,
                            ref_table=ref_table,
                            ref_columns=list(ref_cols or []),
                        )
                    )
            for schema, name, col, dtype, nullable, comment in cur.execute(
                "SELECT schema_name, table_name, column_name, data_type, is_nullable, comment FROM duckdb_columns() "
                "WHERE NOT internal ORDER BY schema_name, table_name, column_index"
            ).fetchall():
                info = tables.get((schema, name))
                if info is not None:
                    info.columns.append(
                        Column(
                            name=col,
                            type=dtype,
                            nullable=bool(nullable),
                            comment=comment,
                            primary_key=col in pk_cols.get((schema, name), ()),
                        )
                    )
            default, current = cur.execute("SELECT current_schema(), current_database()").fetchone()
            catalogs = {
                r[0].lower() for r in cur.execute("SELECT database_name FROM duckdb_databases()").fetchall()
            }
            for info in tables.values():  # "sales"."orders" is ambiguous when a catalog is named sales too
                if info.schema_name.lower() in catalogs:
                    info.sql_catalog = current

            def run(sql: str, timeout_s: float) -> list[tuple[Any, ...]]:
                with Deadline(timeout_s, cur.interrupt):
                    rows: list[tuple[Any, ...]] = cur.execute(sql).fetchall()
                    return rows

            listed = list(tables.values())
            count_rows(worth_counting(listed, lambda t: t.row_estimate), self.engine, run)
            return Catalog(tables=listed, default_schema=default)

    # -- execution ------------------------------------------------------------------------------
    def _run(self, sql: str, timeout_s: float, limits: FetchLimits) -> RunOutput:
        import duckdb

        started = time.monotonic()
        with self._cursor(timeout_s) as cur:
            # the wait for the file (let go for writers, or held by one) counts against the timeout
            left = max(timeout_s - (time.monotonic() - started), 0.001)
            try:
                # DuckDB's own parser, independent of the guard's: one statement per call, always.
                count = len(cur.extract_statements(sql))
            except duckdb.Error as exc:
                raise QueryError(self._clean_error(exc)) from None
            if count != 1:
                raise QueryError(
                    f"refused by the engine: {count} statements in one call — send exactly one statement"
                )
            deadline = Deadline(left, cur.interrupt)
            with deadline:
                try:
                    # the query's columns and types, bound but not run: the engine then cuts big cells,
                    # reads lossy types as text and flags infinities (CellPlan) before Python sees them
                    described = _describe(cur, sql)
                    plan = None
                    if described is not None:
                        plan = plan_cells(self.engine, sql, described[1], limits.max_cell_bytes)
                    if plan is not None:
                        try:
                            cur.execute(plan.sql)
                        except (duckdb.ParserException, duckdb.BinderException):
                            plan = None  # a statement that cannot be a subquery (EXPLAIN): small output
                    if plan is None:
                        cur.execute(sql)
                    if cur.description is None:
                        return [], [], [], 0, False, None
                    if described is not None and plan is not None:
                        columns, types = described
                    else:
                        columns = [d[0] for d in cur.description]
                        types = [str(d[1]) for d in cur.description]
                    batches = fetch_batches(cur)
                    rows, counted, more, cut = collect(plan.rows(batches) if plan else batches, limits)
                except duckdb.InterruptException:
                    raise timeout_error(timeout_s) from None
                except duckdb.Error as exc:
                    if deadline.fired:
                        raise timeout_error(timeout_s) from None
                    raise QueryError(self._clean_error(exc)) from None
            return columns, types, rows, counted, more, cut

    def data_versions(self, tables: list[TableInfo]) -> dict[str, str] | None:
        return file_data_versions(self.path, tables)

    def safety(self) -> SafetyReport:
        in_memory = self.path == ":memory:"
        measures = [
            "sqlglot guard (one read statement, dangerous functions refused)",
            "enable_external_access=false (no file or network readers)",
            "lock_configuration=true (SET refused by the engine)",
        ]
        warnings = []
        if in_memory:
            warnings.append(
                "in-memory database: it cannot be opened read_only; writes would only touch memory"
            )
        else:
            measures.insert(1, "opened read_only")
        return SafetyReport(read_only_engine=not in_memory, measures=measures, warnings=warnings)


# element types of a list that print short: such a list is cut to its first elements in the engine
_SMALL_TYPES = frozenset(
    "boolean tinyint smallint integer bigint hugeint utinyint usmallint uinteger ubigint uhugeint float "
    "double decimal date time timestamp timestamp_s timestamp_ms timestamp_ns time_tz timestamp_tz "
    "interval uuid enum".split()
)


def _cap(expr: str, kind: Any, chars: int, top: bool = False) -> CellCap | None:
    """DuckDB's cut of one value of type `kind` (a DuckDBPyType): text and binary to chars + 1, a
    list of short elements to its first chars // 2 + 1 (more than could ever fit: every element
    prints in 2 bytes or more), a struct field by field; anything else (maps, lists of text, arrays)
    as its text when that is over the cap — only at the top, where an extra column can carry it."""
    type_id = kind.id
    if type_id == "varchar" and str(kind) == "JSON":
        # a cut document is no JSON: cast back to JSON it fails the query ("Malformed JSON"), so its
        # prefix comes as text beside it, the value itself NULL — a struct field of JSON has no room
        # for that: the struct is cut as text at the top
        if not top:
            return None
        text = f"CAST({expr} AS VARCHAR)"
        over = f"strlen({text}) > {chars}"
        return CellCap(
            f"CASE WHEN {over} THEN NULL ELSE {expr} END",
            text=f"CASE WHEN {over} THEN substr({text}, 1, {chars + 1}) END",
        )
    if type_id == "varchar":  # strlen counts bytes (cheap), substr characters
        return CellCap(
            f"CASE WHEN strlen({expr}) > {chars} THEN substr({expr}, 1, {chars + 1}) ELSE {expr} END"
        )
    if type_id == "blob":
        return CellCap(
            f"CASE WHEN octet_length({expr}) > {chars} THEN array_slice({expr}, 1, {chars + 1}) ELSE {expr} END"
        )
    if type_id == "list" and dict(kind.children)["child"].id in _SMALL_TYPES:
        most = chars // 2 + 1
        value = f"CASE WHEN len({expr}) > {most} THEN {expr}[1:{most}] ELSE {expr} END"
        return CellCap(value, length=f"CASE WHEN len({expr}) > {most} THEN len({expr}) END" if top else None)
    if type_id == "struct":
        fields = []
        for name, child in kind.children:
            field = f"struct_extract({expr}, {_string(name)})"
            cap = _cap(field, child, chars)
            if cap is not None:
                fields.append(f"{_identifier(name)} := {cap.value}")
            elif child.id in _SMALL_TYPES:
                fields.append(f"{_identifier(name)} := {field}")
            else:
                break  # a field only its text could cut (a map, a list of text): the struct as text
        else:
            return CellCap(f"CASE WHEN {expr} IS NULL THEN NULL ELSE struct_pack({', '.join(fields)}) END")
    if not top or type_id not in ("list", "array", "struct", "map", "union", "bit"):
        return None
    text = f"CAST({expr} AS VARCHAR)"
    over = f"strlen({text}) > {chars}"
    return CellCap(
        f"CASE WHEN {over} THEN NULL ELSE {expr} END",
        text=f"CASE WHEN {over} THEN substr({text}, 1, {chars + 1}) END",
    )


def _string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


_TIME_TYPES = ("DATE", "TIMESTAMP", "TIMESTAMP WITH TIME ZONE", "TIMESTAMP_S", "TIMESTAMP_MS")


def _describe(cur: Any, sql: str) -> tuple[list[str], list[str]] | None:
    """The statement's result columns and types, bound without running it (a relation is lazy); None
    when it returns no relation."""
    relation = cur.sql(sql)
    if relation is None:
        return None
    return list(relation.columns), [str(t) for t in relation.types]


def _file_head(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read(16)
    except OSError:
        return b""


def _json(column_sql: str, column_type: str) -> str:
    """A nested column as JSON: JSON and JSON text as they are, STRUCT, MAP and lists through to_json."""
    if "JSON" in column_type.upper() or text_type(column_type):
        return column_sql
    return f"to_json({column_sql})"


class _FileLocked(ConfigError):
    """Another process holds the DuckDB file's write lock (a writer): a statement waits for it."""


_SOURCES: weakref.WeakSet[DuckDBSource] = weakref.WeakSet()


def _stop_all_at_exit(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    for source in list(_SOURCES):
        source._stop_at_exit(max(deadline - time.monotonic(), 0.0))


background.on_exit(_stop_all_at_exit)
