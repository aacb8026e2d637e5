"""SQLite: opened `mode=ro` with an authorizer that denies every write, ATTACH, PRAGMA writes
and extension loading, and a progress handler that cancels a query at its deadline."""

from __future__ import annotations

import contextlib
import os
import random
import re
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from flexsql.config import LimitsConfig
from flexsql.errors import ConfigError, QueryError
from flexsql.tools.engines.cancel import Deadline, timeout_error
from flexsql.tools.engines.catalog import Catalog, Column, ForeignKey, TableInfo
from flexsql.tools.engines.engine import CellCap, Engine
from flexsql.tools.engines.fetch import FetchLimits, collect, fetch_batches, plan_cells
from flexsql.tools.engines.paths import json_path
from flexsql.tools.engines.row_counts import count_rows, worth_counting
from flexsql.tools.engines.source import RunOutput, SafetyReport, Source, file_data_versions
from flexsql.tools.engines.urls import file_path_of

# Pragmas whose argument names a table or index (they only read).
SQLITE_MAX_VALUE_BYTES = 64 * 1024 * 1024
_TABLE_PRAGMAS = {"table_info", "table_xinfo", "index_list", "index_info", "index_xinfo", "foreign_key_list"}
# Pragmas that only read when called without a value; given a value they write, so that is denied.
_READ_PRAGMAS = {
    "database_list",
    "table_list",
    "collation_list",
    "function_list",
    "module_list",
    "pragma_list",
    "compile_options",
    "encoding",
    "page_count",
    "page_size",
    "user_version",
    "schema_version",
    "application_id",
    "freelist_count",
    "data_version",
    "foreign_keys",
}
_ALLOWED_ACTIONS = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    sqlite3.SQLITE_RECURSIVE,
}
_SCHEMA_TABLES = {"sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_temp_schema"}
_DENIED_FUNCTIONS = {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer", "zipfile"}


def _authorizer(
    action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None
) -> int:
    if action == sqlite3.SQLITE_FUNCTION:
        return sqlite3.SQLITE_DENY if (arg2 or "").lower() in _DENIED_FUNCTIONS else sqlite3.SQLITE_OK
    if action in _ALLOWED_ACTIONS:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_UPDATE and (arg1 or "").lower() in _SCHEMA_TABLES and _trigger is None:
        # SQLite asks this while it (re)reads its own schema; mode=ro still refuses any real write.
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_PRAGMA:
        pragma = (arg1 or "").lower()
        if pragma in _TABLE_PRAGMAS or (pragma in _READ_PRAGMAS and arg2 is None):
            return sqlite3.SQLITE_OK
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_DENY


class SQLite(Engine):
    name = dialect = "sqlite"
    url_schemes = ("sqlite", "sqlite3")
    file_suffixes = (".sqlite", ".sqlite3", ".db")
    notes = (
        "SQLite: dates are TEXT (strftime('%Y', d), date(d)); no ILIKE (LIKE is case-insensitive for ASCII); "
        "|| concatenates; integer division truncates (CAST(x AS REAL))."
    )
    nested_notes = "JSON_EXTRACT(col, '$.key') reads a key, and json_each(col) unnests an array."
    text_type = "TEXT"
    explain_prefix = "EXPLAIN QUERY PLAN "
    schema_in_names = False
    dynamic_types = True
    ilike = False
    double_quoted_strings = True
    harmless_functions = frozenset({"glob"})  # glob() matches a pattern against a string here
    statement_hints = {
        "Pragma": "read a pragma as a table instead, e.g. SELECT * FROM pragma_table_info('t')"
    }

    def prefix(self, expr: str, chars: int) -> str:
        # substr counts bytes of BLOBs and characters of text; numbers pass through untouched
        return f"CASE WHEN typeof({expr}) IN ('text', 'blob') THEN substr({expr}, 1, {chars}) ELSE {expr} END"

    def cap_cell(self, expr: str, type_name: str, chars: int) -> CellCap | None:
        # values carry their own type, whatever the column says: every column may hold a long one
        return CellCap(
            f"CASE WHEN typeof({expr}) IN ('text', 'blob') AND length({expr}) > {chars} "
            f"THEN substr({expr}, 1, {chars + 1}) ELSE {expr} END"
        )

    def wrap_cells(self, sql: str, width: int, exprs: list[str]) -> str:
        # a subquery's columns cannot be renamed here; a common table expression's can
        names = ", ".join(f"c{i}" for i in range(width))
        return f"WITH flexsql_cells({names}) AS (\n{sql}\n) SELECT {', '.join(exprs)} FROM flexsql_cells"

    # paths: JSON is text in SQLite, read by json_extract and json_each
    def path_value(self, column_sql: str, column_type: str, keys: Sequence[str]) -> str:
        return _json_get(self, _valid(column_sql), keys)

    def path_elements(
        self,
        table_sql: str,
        column_sql: str,
        column_type: str,
        before: Sequence[str],
        after: Sequence[str],
        alias: str,
    ) -> str:
        array = _json_get(self, _valid(column_sql), before) if before else _valid(column_sql)
        value = _json_get(self, "flexsql_e.value", after) if after else "flexsql_e.value"
        return f"SELECT {value} AS {alias} FROM {table_sql}, json_each({array}) AS flexsql_e"


_PLAIN_KEY = re.compile(
    r"[ !#-\[\]-~]*"
)  # printable ASCII but '"' and '\': a JSON path matches it as written


def _valid(column_sql: str) -> str:
    """The column where it holds JSON, else NULL: one row of other text (or JSON nested deeper than
    SQLite parses) would fail the whole statement as malformed JSON."""
    return f"CASE WHEN json_valid({column_sql}) THEN {column_sql} END"


def _json_get(engine: Engine, doc: str, keys: Sequence[str]) -> str:
    """The value at `keys` inside JSON text `doc`. json_extract compares a path's key with the key as it
    is stored, escapes and all (json.dumps stores ünï as \\u00fcn\\u00ef) and its path syntax cannot
    hold a '"'; json_each's key column is the key unescaped, so any other key is looked up through it."""
    if all(_PLAIN_KEY.fullmatch(k) for k in keys):
        return f"json_extract({doc}, {engine.literal(json_path(keys))})"
    items: list[str] = []
    conditions: list[str] = []
    inner = doc
    for n, key in enumerate(keys):
        alias = f"flexsql_k{n}"
        items.append(f"json_each({inner}) AS {alias}")
        conditions.append(f"{alias}.key = {engine.literal(key)}")
        # only an object or array is walked further: json_each of a text leaf would be malformed JSON
        inner = f"CASE WHEN {alias}.type IN ('object', 'array') THEN {alias}.value END"
    last = f"flexsql_k{len(keys) - 1}"
    return f"(SELECT {last}.value FROM {', '.join(items)} WHERE {' AND '.join(conditions)})"


class SQLiteSource(Source):
    engine = SQLite()

    def __init__(
        self, name: str, url: str, description: str = "", limits: LimitsConfig | None = None
    ) -> None:
        super().__init__(name, url, description, limits)
        self.path = file_path_of(url)
        self._local = threading.local()
        self._all_conns: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._unnameable: dict[str, bytes] = {}  # tables whose names are not UTF-8: lower shown name -> bytes

    def _connection(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._open()
            self._local.conn = conn
            with self._lock:
                self._all_conns.append(conn)
        return conn

    def _open(self) -> sqlite3.Connection:
        if self.path == ":memory:":
            uri = "file::memory:?mode=ro"
        else:
            if not Path(self.path).exists():
                raise ConfigError(f"SQLite file not found: {self.path}; check the path in the source URL")
            uri = f"file:{quote(str(Path(self.path).resolve()))}?mode=ro"
            problem = sqlite_file_problem(self.path)
            if problem:
                raise ConfigError(problem)
        try:
            conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
        except sqlite3.Error as exc:
            raise ConfigError(f"cannot open SQLite database {self.path}: {exc}") from None
        conn.set_authorizer(_authorizer)
        # No string or BLOB over this size is ever built (zeroblob(500000000) fails instead of
        # taking gigabytes): the engine refuses with "string or blob too big".
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, SQLITE_MAX_VALUE_BYTES)
        # Keep bytes that are not UTF-8 readable instead of failing the whole query.
        conn.text_factory = lambda b: b.decode("utf-8", errors="replace")
        return conn

    def close(self) -> None:
        with self._lock:
            for conn in self._all_conns:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            self._all_conns.clear()
        self._local = threading.local()

    def _load_catalog(self) -> Catalog:
        try:
            return self._read_catalog()
        except sqlite3.DatabaseError as exc:  # "database disk image is malformed", "file is not a database"
            if _damage(exc):
                raise ConfigError(damaged_text(self.path, exc)) from None
            raise

    def _read_catalog(self) -> Catalog:
        conn = self._connection()
        tables: list[TableInfo] = []
        # names as stored (bytes): a name that is not UTF-8 is still described, by its bytes
        rows = conn.execute(
            "SELECT CAST(name AS BLOB), type FROM sqlite_master WHERE type IN ('table','view') "
            "AND name NOT LIKE 'sqlite_%' ORDER BY name"
        ).fetchall()
        unnameable: dict[str, bytes] = {}
        for raw, kind in rows:
            raw = bytes(raw)
            try:
                name = raw.decode("utf-8")
            except UnicodeDecodeError:
                name = _shown(raw)
                unnameable[name.lower()] = raw
            info = TableInfo(schema_name="main", name=name, kind="view" if kind == "view" else "table")
            if name.lower() in unnameable:
                info.comment = _not_utf8(name, raw)
            try:
                with _bytes_named(conn, name.lower() in unnameable):
                    described = conn.execute(
                        "SELECT * FROM pragma_table_info(CAST(? AS TEXT))", (raw,)
                    ).fetchall()
                    links = conn.execute(
                        "SELECT * FROM pragma_foreign_key_list(CAST(? AS TEXT))", (raw,)
                    ).fetchall()
            except sqlite3.Error as exc:  # a view over a dropped table: report it, keep the rest usable
                info.comment = f"broken view ({exc}): querying it fails until the missing table exists again"
                tables.append(info)
                continue
            for _cid, col, ctype, notnull, _default, pk in described:
                info.columns.append(
                    Column(name=col, type=ctype or "", nullable=not notnull, primary_key=bool(pk))
                )
            fks: dict[int, ForeignKey] = {}
            for fid, _seq, ref_table, from_col, to_col, *_ in links:
                fk = fks.setdefault(
                    fid, ForeignKey(columns=[], ref_schema="main", ref_table=ref_table, ref_columns=[])
                )
                fk.columns.append(from_col)
                if to_col:
                    fk.ref_columns.append(to_col)
            for fk in fks.values():
                if not fk.ref_columns:  # REFERENCES t without columns means t's primary key
                    fk.ref_columns = [
                        r[1]
                        for r in conn.execute("SELECT * FROM pragma_table_info(?)", (fk.ref_table,))
                        if r[5]
                    ]
            info.foreign_keys = list(fks.values())
            tables.append(info)
        self._unnameable = unnameable
        self._estimate_rows(conn, [t for t in tables if t.name.lower() not in unnameable])
        return Catalog(tables=tables, default_schema="main")

    def _estimate_rows(self, conn: sqlite3.Connection, tables: list[TableInfo]) -> None:
        """Row counts: sqlite_stat1's figure where ANALYZE ran, else an estimate from a sample of the
        table's B-tree pages; then every table they put at row_counts.COUNT_UP_TO rows or fewer is
        counted, smallest first, within the counting budget."""
        stats: dict[str, int] = {}
        try:
            for tbl, _idx, stat in conn.execute("SELECT tbl, idx, stat FROM sqlite_stat1"):
                if stat:
                    stats[tbl] = max(stats.get(tbl, 0), int(str(stat).split()[0]))
        except (sqlite3.Error, ValueError):
            pass
        roots = dict(conn.execute("SELECT name, rootpage FROM sqlite_master WHERE type = 'table'").fetchall())
        pages = btree_estimates(self.path, {n: r for n, r in roots.items() if n not in stats})
        for info in tables:
            if info.kind != "table":
                continue
            if info.name in stats:
                info.row_estimate, info.rows_from = stats[info.name], "sqlite_stat1"
            elif pages.get(info.name) is not None:
                info.row_estimate, info.rows_from = pages[info.name], "a sample of the table's pages"

        def run(sql: str, timeout_s: float) -> list[tuple[Any, ...]]:
            with Deadline(timeout_s, conn.interrupt):
                return conn.execute(sql).fetchall()

        count_rows(worth_counting(tables, lambda t: t.row_estimate), self.engine, run)

    def _run(self, sql: str, timeout_s: float, limits: FetchLimits) -> RunOutput:
        conn = self._connection()
        # The progress handler is how SQLite stops a statement from its own thread: it returns 1
        # once the deadline passed or the tool call was cancelled (the Deadline sets the flag).
        state = {"stop": False}
        watchdog = Deadline(timeout_s, lambda: state.__setitem__("stop", True))
        conn.set_progress_handler(lambda: 1 if state["stop"] else 0, 2000)
        try:
            with watchdog:
                cur = conn.cursor()
                # the query's columns, without running it (LIMIT 0 stops at once), so that SQLite cuts
                # big values (up to 64 MB each) before Python builds them
                names = _column_names(conn, sql)
                plan = (
                    plan_cells(self.engine, sql, [""] * len(names), limits.max_cell_bytes) if names else None
                )
                cur.execute(plan.sql if plan else sql)
                if cur.description is None:
                    return [], [], [], 0, False, None
                columns = names if plan is not None and names else [d[0] for d in cur.description]
                batches = fetch_batches(cur)
                rows, counted, more, cut = collect(plan.rows(batches) if plan else batches, limits)
            types = [_sqlite_type(rows, i) for i in range(len(columns))]
            return columns, types, rows, counted, more, cut
        except sqlite3.OperationalError as exc:
            if watchdog.fired or "interrupted" in str(exc):
                raise timeout_error(timeout_s) from None
            raise QueryError(self._explain(exc, self._names_not_utf8(exc))) from None
        except (sqlite3.DatabaseError, sqlite3.Warning) as exc:  # Warning: several statements (Python < 3.12)
            if isinstance(exc, sqlite3.DatabaseError) and _damage(exc):
                raise QueryError(damaged_text(self.path, exc)) from None
            raise QueryError(self._explain(exc, self._names_not_utf8(exc))) from None
        finally:
            conn.set_progress_handler(None, 0)

    def _names_not_utf8(self, exc: Exception) -> dict[str, bytes]:
        """The tables whose names are not UTF-8, when a statement named a table that is not there (the
        catalog, read once, knows them)."""
        if "no such table" in str(exc):
            self.catalog()
        return self._unnameable

    @staticmethod
    def _explain(exc: Exception, unnameable: dict[str, bytes] | None = None) -> str:
        text = str(exc)
        missing = re.match(r"no such table: (?:main\.)?(.+)$", text)
        if missing and unnameable and missing.group(1).lower() in unnameable:
            name = missing.group(1)
            return f"{text}: {_not_utf8(name, unnameable[name.lower()])}"
        if "one statement at a time" in text:
            return "refused by the engine: several statements in one call — send exactly one statement"
        if "not authorized" in text or "prohibited" in text or "authorization denied" in text:
            return f"refused by the engine: {text} — this server is read-only"
        if "readonly" in text or "read-only" in text:
            return f"refused by the engine: {text} — this server is read-only"
        if "too big" in text:
            return (
                f"{text}: a value (or an intermediate one) would exceed {SQLITE_MAX_VALUE_BYTES:,} bytes, the "
                "largest flexsql lets SQLite build — select substr(col, 1, n) or length(col) instead"
            )
        return text

    def data_versions(self, tables: list[TableInfo]) -> dict[str, str] | None:
        return file_data_versions(self.path, tables)

    def safety(self) -> SafetyReport:
        return SafetyReport(
            read_only_engine=True,
            measures=[
                "sqlglot guard (one read statement, dangerous functions refused)",
                "opened mode=ro",
                "authorizer denies writes, ATTACH, PRAGMA writes and extension loading",
                "progress handler cancels at the timeout",
            ],
        )


@contextlib.contextmanager
def _bytes_named(conn: sqlite3.Connection, needed: bool) -> Iterator[None]:
    """Describe a table whose name is not UTF-8: Python cannot hand such a name to the authorizer (it
    fails to decode it, and SQLite denies), so the authorizer is off for the block's two fixed pragmas
    (read-only, their one argument bound); the connection is this thread's own."""
    if not needed:
        yield
        return
    conn.set_authorizer(None)
    try:
        yield
    finally:
        conn.set_authorizer(_authorizer)


def _shown(raw: bytes) -> str:
    """A name that is not UTF-8 as text: each byte that is not part of a character as <E9>."""
    text = raw.decode("utf-8", errors="surrogateescape")
    return re.sub("[\udc80-\udcff]", lambda m: f"<{ord(m.group()) - 0xDC00:02X}>", text)


def _not_utf8(name: str, raw: bytes) -> str:
    """Why a table whose name is not UTF-8 cannot be queried, and what to do."""
    return (
        f"its name is not UTF-8 (bytes {raw.hex(' ')}; shown as {name}): SQL reaches SQLite as UTF-8 text, "
        "so no statement can name it — its columns are listed, its rows cannot be read; rename it with a "
        "tool that writes the name's bytes (the sqlite3 shell: ALTER TABLE … RENAME TO …)"
    )


def _column_names(conn: sqlite3.Connection, sql: str) -> list[str] | None:
    """The statement's result column names, from a run that stops before the first row; None when
    it cannot be a subquery (EXPLAIN, PRAGMA) or returns nothing. SQLite renames a repeated name of
    a subquery `a:1`: given back as `a`."""
    try:
        cur = conn.execute(f"SELECT * FROM (\n{sql}\n) LIMIT 0")
    except sqlite3.Error:
        return None
    names: list[str] = []
    for d in cur.description or ():
        name = d[0]
        base, _, number = name.rpartition(":")
        names.append(base if number.isdigit() and base in names else name)
    return names or None


def _sqlite_type(rows: list[tuple[Any, ...]], index: int) -> str:
    for row in rows:
        value = row[index]
        if value is not None:
            return {int: "INTEGER", float: "REAL", str: "TEXT", bytes: "BLOB"}.get(
                type(value), type(value).__name__
            )
    return ""


PAGE_PROBES = 16  # random root-to-leaf walks per table


def btree_estimates(path: str, roots: dict[str, int]) -> dict[str, int | None]:
    """Rows of each table (name -> root page) estimated without reading it: walks from the root to a
    leaf, each child picked at random, the product of the fan-outs on the way times the leaf's cells
    (Knuth's estimate of a tree's size), averaged over PAGE_PROBES walks. Reads the file's pages
    directly (a few per table); None for a table whose pages do not read as a B-tree (a write-ahead
    log not checkpointed yet), {} for a database in memory."""
    if not path or path == ":memory:" or not roots:
        return {}
    out: dict[str, int | None] = {}
    try:
        with open(path, "rb") as handle:
            header = handle.read(100)
            if len(header) < 100:
                return {}
            size = int.from_bytes(header[16:18], "big")
            size = 65536 if size == 1 else size
            pages = max(os.fstat(handle.fileno()).st_size // max(size, 1), 1)
            cache: dict[int, bytes] = {}

            def page(number: int) -> bytes:
                if number not in cache:
                    if not 1 <= number <= pages:
                        raise ValueError(f"page {number} is past the file")
                    handle.seek((number - 1) * size)
                    cache[number] = handle.read(size)
                return cache[number]

            for name, root in roots.items():
                try:
                    out[name] = _walks(page, int(root), random.Random(int(root)))
                except (ValueError, IndexError, TypeError):
                    out[name] = None
                if len(cache) > 4096:
                    cache.clear()
    except OSError:
        return {}
    return out


def _walks(page: Any, root: int, rng: random.Random) -> int:
    data = page(root)
    at = 100 if root == 1 else 0
    if data[at] in (10, 13):  # the root is the only leaf: its cells are the rows, no walk to average
        return int.from_bytes(data[at + 3 : at + 5], "big")
    total = 0
    for _ in range(PAGE_PROBES):
        number, factor = root, 1
        for _depth in range(32):
            data = page(number)
            at = 100 if number == 1 else 0
            kind = data[at]
            cells = int.from_bytes(data[at + 3 : at + 5], "big")
            if kind in (10, 13):  # a leaf of an index (WITHOUT ROWID table) or of a table
                total += factor * cells
                break
            if kind not in (2, 5):
                raise ValueError(f"page {number} is no B-tree page")
            pick = rng.randrange(cells + 1)
            if pick == cells:  # the right-most child
                number = int.from_bytes(data[at + 8 : at + 12], "big")
            else:
                pointer = int.from_bytes(data[at + 12 + 2 * pick : at + 14 + 2 * pick], "big")
                number = int.from_bytes(data[pointer : pointer + 4], "big")
            factor *= cells + 1
        else:
            raise ValueError("no leaf within 32 levels")
    return total // PAGE_PROBES


HEADER = b"SQLite format 3\0"


def sqlite_file_problem(path: str) -> str | None:
    """What makes `path` no usable SQLite database, read from its 100-byte header, or None: a DuckDB
    file, another kind of file, or a file cut short (a copy or download that did not finish), which
    SQLite itself reports only at the first page it cannot read ("database disk image is malformed")."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(100)
        size = Path(path).stat().st_size
    except OSError:
        return None  # opening it says what is wrong
    if head[8:12] == b"DUCK":
        return f"{path} is a DuckDB file, not SQLite: use duckdb:///{path.lstrip('/')}"
    if not head:
        return None  # an empty file is an empty database to SQLite
    if not head.startswith(HEADER[: len(head)]) or (len(head) >= 16 and not head.startswith(HEADER)):
        return (
            f"{path} is not a SQLite database file (it does not start with the SQLite header); check the "
            "path in the source URL"
        )
    if len(head) < 100:
        return damaged_text(path, f"the file ends after {len(head)} bytes, inside its 100-byte header")
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    header_valid = head[24:28] == head[92:96]  # the page count is kept only when these agree
    if header_valid and pages and size < pages * page_size:
        return damaged_text(
            path, f"the file has {size:,} bytes of the {pages * page_size:,} its header announces"
        )
    return None


def damaged_text(path: str, cause: object) -> str:
    return (
        f"the SQLite file {path} is damaged ({cause}), as a copy, download or disk write that did not "
        "finish leaves it. Copy it again or restore it from a backup; "
        f"`sqlite3 {path} 'PRAGMA integrity_check'` shows what is wrong"
    )


def _damage(exc: sqlite3.DatabaseError) -> bool:
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text or "corrupt" in text
