"""PostgreSQL (psycopg 3).

Engine-level protection, independent of the guard:
- each statement runs in its own `READ ONLY` transaction that is always rolled back;
- `statement_timeout` is set in that transaction, and the client cancels at the deadline too;
- statements are sent prepared (extended protocol), so the server refuses several at once, and
  the server describes each one before it runs: only statements that return rows run, so `DO`,
  `COPY`, `SET ROLE`, `RESET`, `DEALLOCATE`, `LOAD`, `CHECKPOINT`… never execute, whatever the
  guard thought they were;
- when connected as a superuser (or a role that can write), each transaction first drops to the
  built-in role `pg_read_all_data` (PostgreSQL 14+), so `COPY … TO PROGRAM`, `pg_read_file` and
  friends fail for lack of privilege even if the guard were fooled. A warning says so and prints
  the statements that create a dedicated read-only role;
- a session whose login role is a superuser can take any role back within one statement
  (`set_config('role', 'postgres', true)`) and then run SQL the guard never saw through
  `query_to_xml('…')` and friends. The server cannot forbid that, so the adapter refuses, by plain
  name matching that no parser trick gets around, the few functions that undo the role drop, run
  SQL from a string or keep state past the rollback (session advisory locks), and `U&"…"`
  escapes that could spell them.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import Any

from flexsql.config import LimitsConfig
from flexsql.errors import ConfigError, QueryError
from flexsql.tools.engines.cancel import Deadline, timeout_error
from flexsql.tools.engines.catalog import Catalog, Column, ForeignKey, TableInfo
from flexsql.tools.engines.engine import CellCap, Engine, QueryHistory
from flexsql.tools.engines.fetch import FetchLimits, collect, fetch_batches, plan_cells
from flexsql.tools.engines.paths import json_path, text_type
from flexsql.tools.engines.row_counts import count_rows, worth_counting
from flexsql.tools.engines.source import RunOutput, SafetyReport, Source

# Per-schema grants, not pg_read_all_data: that role can also read pg_authid (password hashes),
# pg_user_mapping and pg_subscription (connection passwords).
READ_ONLY_ROLE_SQL = """\
CREATE ROLE flexsql_reader LOGIN PASSWORD '…';
GRANT CONNECT ON DATABASE {db} TO flexsql_reader;
GRANT USAGE ON SCHEMA {schema} TO flexsql_reader;   -- repeat these three lines for each schema to expose
GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO flexsql_reader;
ALTER DEFAULT PRIVILEGES IN SCHEMA {schema} GRANT SELECT ON TABLES TO flexsql_reader;
ALTER ROLE flexsql_reader SET default_transaction_read_only = on;
-- not GRANT pg_read_all_data: it reads every schema and the password hashes in pg_authid"""

# rows by ANALYZE's statistics (a partitioned table: its partitions'), and bytes on disk (which orders the
# tables never analyzed for counting)
_CATALOG_SQL = """
SELECT n.nspname, c.relname, c.relkind, obj_description(c.oid, 'pg_class'),
       CASE WHEN c.relkind = 'p' THEN (SELECT sum(greatest(p.reltuples, 0))::bigint FROM pg_inherits i
                                       JOIN pg_class p ON p.oid = i.inhrelid WHERE i.inhparent = c.oid)
            WHEN c.reltuples >= 0 THEN c.reltuples::bigint END,
       CASE WHEN c.relkind = 'p' THEN (SELECT sum(pg_relation_size(i.inhrelid)) FROM pg_inherits i
                                       WHERE i.inhparent = c.oid)
            WHEN c.relkind IN ('r', 'm') THEN pg_relation_size(c.oid) END
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r','p','v','m','f')
  AND n.nspname NOT IN ('pg_catalog','information_schema') AND n.nspname NOT LIKE 'pg_toast%'
  AND n.nspname NOT LIKE 'pg_temp%' AND NOT c.relispartition
ORDER BY 1, 2
"""
_COLUMNS_SQL = """
SELECT n.nspname, c.relname, a.attname,
       format_type(a.atttypid, a.atttypmod) || CASE WHEN t.typtype = 'e' THEN ' (enum)' ELSE '' END, NOT a.attnotnull,
       col_description(c.oid, a.attnum)
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_type t ON t.oid = a.atttypid
WHERE a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r','p','v','m','f')
  AND n.nspname NOT IN ('pg_catalog','information_schema') AND n.nspname NOT LIKE 'pg_toast%'
ORDER BY n.nspname, c.relname, a.attnum
"""
_KEYS_SQL = """
SELECT n.nspname, c.relname, con.contype,
       ARRAY(SELECT a.attname FROM unnest(con.conkey) WITH ORDINALITY k(num, ord)
             JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.num ORDER BY k.ord),
       rn.nspname, rc.relname,
       ARRAY(SELECT a.attname FROM unnest(con.confkey) WITH ORDINALITY k(num, ord)
             JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.num ORDER BY k.ord)
FROM pg_constraint con
JOIN pg_class c ON c.oid = con.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_class rc ON rc.oid = con.confrelid LEFT JOIN pg_namespace rn ON rn.oid = rc.relnamespace
WHERE con.contype IN ('p','f') AND n.nspname NOT IN ('pg_catalog','information_schema')
"""


# See the module docstring: names refused on the engine side, whatever the guard decided. Beside
# the role-undoing and SQL-from-a-string functions: those whose effect a rollback does not undo
# and that the server lets a plain reader call (session advisory locks, transaction ids, logical
# WAL messages, signalling other sessions of the same role).
_ENGINE_DENIED = re.compile(
    r"\b(set_config|query_to_xml\w*|cursor_to_xml\w*|ts_stat|ts_rewrite|dblink\w*|crosstab\d?|connectby"
    r"|xpath_table|pg_(?:try_)?advisory\w*|txid_current\w*|pg_current_xact_id\w*|pg_logical_\w+"
    r"|pg_terminate_backend|pg_cancel_backend"
    r"|pg_authid|pg_shadow|pg_user_mappings?|pg_subscription|pg_statistic(?:_ext_data)?|pg_largeobject"
    r"|pg_db_role_setting)\b|\bu&['\"]",
    re.IGNORECASE,
)


_CREDENTIAL_CATALOG_PREFIXES = (
    "pg_authid",
    "pg_shadow",
    "pg_user_mapping",
    "pg_subscription",
    "pg_statistic",
    "pg_largeobject",
    "pg_db_role_setting",
)


def engine_refusal(sql: str) -> str | None:
    """The engine-side refusal message for `sql`, or None when it may be sent to the server."""
    match = _ENGINE_DENIED.search(sql)
    if match is None:
        return None
    name = match.group(1)
    if name and name.lower().startswith(_CREDENTIAL_CATALOG_PREFIXES):
        return (
            f"refused by the engine: the catalog {name.lower()} is not read on PostgreSQL — it holds credentials "
            "or raw column values; read pg_roles, pg_user or pg_stats instead"
        )
    what = f"{name.lower()}()" if name else 'a U&"…" escape'
    return (
        f"refused by the engine: {what} is not run on PostgreSQL — it can undo the read-only role, run SQL the "
        "guard never saw, or have effects a rollback does not undo; this server is read-only"
    )


_CHANGES_SQL = (
    "SELECT schemaname, relname, n_tup_ins + n_tup_upd + n_tup_del, n_live_tup, "
    "coalesce(extract(epoch FROM greatest(last_vacuum, last_autovacuum, last_analyze, "
    "last_autoanalyze)), 0) FROM pg_stat_user_tables"
)


class Postgres(Engine):
    name = "postgresql"
    dialect = "postgres"
    url_schemes = ("postgresql", "postgres", "postgresql+psycopg")
    password_env = "PGPASSWORD"
    notes = (
        "PostgreSQL: identifiers fold to lower case unless quoted; ILIKE; date_trunc, EXTRACT; "
        "::type casts; integer division truncates."
    )
    nested_notes = "col->>'key' reads a key, and jsonb_array_elements(col) unnests an array."
    query_history = QueryHistory(
        origin="pg_stat_statements",
        check="SELECT count(*) > 0 FROM pg_extension WHERE extname = 'pg_stat_statements'",
        missing=(
            "pg_stat_statements is not installed in this database, so PostgreSQL keeps no query history "
            "flexsql can read. Ask an administrator to add pg_stat_statements to shared_preload_libraries "
            "and run CREATE EXTENSION pg_stat_statements; or export a query log to a .sql file and run "
            "`flexsql learn FILE --db URL`"
        ),
        sql=(
            "SELECT query, calls FROM pg_stat_statements "
            "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND query ~* '^\\s*(select|with)\\s' ORDER BY calls DESC LIMIT {n}"
        ),
        unreadable=(
            "pg_stat_statements is installed but must be loaded at server start (shared_preload_libraries = "
            "'pg_stat_statements', then a restart), and reading other users' statements needs the "
            "pg_read_all_stats role; or import a query log file instead"
        ),
    )
    text_type = "TEXT"
    double_type = "DOUBLE PRECISION"
    # TABLESAMPLE takes no view: views are read by their first rows
    sample_table = "{table} TABLESAMPLE SYSTEM ({pct})"
    sample_label = "block sample"
    unquoted_case = "lower"
    regex_match = "{expr} ~ {pattern}"
    binary_hex = "encode({expr}, 'hex')"
    harmless_functions = frozenset({"glob"})
    # Catalogs that hold credentials or raw values of any column: password hashes (pg_authid,
    # pg_shadow), foreign-server passwords (pg_user_mapping[s]), replication connection strings
    # (pg_subscription), unfiltered column statistics (pg_statistic*) and large objects.
    # pg_read_all_data, which superuser connections drop to, can read them all; pg_roles, pg_user
    # and pg_stats are the masked views an agent may use instead.
    credential_names = frozenset(
        {
            "pg_authid",
            "pg_shadow",
            "pg_user_mapping",
            "pg_user_mappings",
            "pg_subscription",
            "pg_statistic",
            "pg_statistic_ext_data",
            "pg_largeobject",
            "pg_db_role_setting",
            "pg_hba_file_rules",
            "pg_ident_file_mappings",
            "pg_file_settings",
        }
    )
    credential_hint = "read pg_roles, pg_user or pg_stats instead, which mask these values"
    simple_show = True

    def cap_cell(self, expr: str, type_name: str, chars: int) -> CellCap | None:
        # PostgresSource passes the type's OID: array types share their element's name in psycopg
        oid = int(type_name) if type_name.isdigit() else 0
        if oid in _SMALL_OIDS:
            return None
        if oid in _TEXT_OIDS or oid == _BYTEA_OID:  # octet_length reads the size header: no detoasting
            return CellCap(
                f"CASE WHEN octet_length({expr}) > {chars} THEN substr({expr}, 1, {chars + 1}) ELSE {expr} END"
            )
        # json, jsonb, xml, arrays, records, ranges, enums, anything else: measured by its text
        text = f"({expr})::text"
        over = f"octet_length({text}) > {chars}"
        return CellCap(
            f"CASE WHEN {over} THEN NULL ELSE {expr} END",
            text=f"CASE WHEN {over} THEN substr({text}, 1, {chars + 1}) END",
        )

    # paths: #>> over json/jsonb (JSON kept as text cast to jsonb), jsonb_path_query through arrays
    def json_text(self, expr: str, column_type: str) -> str:
        # json/jsonb print as JSON; arrays and composite types through to_jsonb
        return (
            f"({expr})::text"
            if text_type(column_type) or "json" in column_type.lower()
            else f"to_jsonb({expr})::text"
        )

    def path_value(self, column_sql: str, column_type: str, keys: Sequence[str]) -> str:
        doc = column_sql if "json" in column_type.lower() else f"{column_sql}::jsonb"
        return f"({doc} #>> ARRAY[{', '.join(self.literal(k) for k in keys)}]::text[])"

    def path_elements(
        self,
        table_sql: str,
        column_sql: str,
        column_type: str,
        before: Sequence[str],
        after: Sequence[str],
        alias: str,
    ) -> str:
        path = self.literal(json_path(before, array=True, after=after))
        return f"SELECT jsonb_path_query({column_sql}::jsonb, {path}) #>> '{{}}' AS {alias} FROM {table_sql}"


class PostgresSource(Source):
    engine = Postgres()

    def __init__(
        self, name: str, url: str, description: str = "", limits: LimitsConfig | None = None
    ) -> None:
        super().__init__(name, url, description, limits)
        self._conninfo = url.replace("postgresql+psycopg://", "postgresql://", 1)
        self._pool: list[Any] = []
        self._pool_lock = threading.Lock()
        self._privileges: dict[str, Any] | None = None

    # -- connections ----------------------------------------------------------------------------
    def _connect(self) -> Any:
        import psycopg

        try:
            conn = psycopg.connect(
                self._conninfo, autocommit=False, connect_timeout=10, application_name="flexsql"
            )
        except psycopg.Error as exc:
            raise ConfigError(
                f"cannot connect to PostgreSQL at {self.display_url}: "
                f"{self._clean_error(exc).splitlines()[0]}"
            ) from None
        conn.read_only = True
        from flexsql.tools.engines.postgres_values import register

        register(conn)  # infinity timestamps, 24:00, numeric NaN and intervals load as what they are
        return conn

    def _acquire(self) -> Any:
        with self._pool_lock:
            while self._pool:
                conn = self._pool.pop()
                if not conn.closed:
                    return conn
        return self._connect()

    def _release(self, conn: Any) -> None:
        if conn.closed:
            return
        with self._pool_lock:
            if len(self._pool) < 8:
                self._pool.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._pool_lock:
            for conn in self._pool:
                conn.close()
            self._pool.clear()

    def privileges(self) -> dict[str, Any]:
        """Who we are connected as, and whether that role could write if the guard were fooled."""
        if self._privileges is None:
            conn = self._acquire()
            try:
                with conn.cursor() as cur:
                    cur.execute(
                        "SELECT current_user, r.rolsuper, r.rolcreaterole, r.rolcreatedb, "
                        "EXISTS (SELECT 1 FROM information_schema.table_privileges p WHERE p.grantee = current_user "
                        "AND p.privilege_type IN ('INSERT','UPDATE','DELETE','TRUNCATE')), "
                        "current_setting('server_version_num')::int, current_database(), "
                        "pg_has_role(current_user, 'pg_read_all_data', 'MEMBER'), current_schema() "
                        "FROM pg_roles r WHERE r.rolname = current_user"
                    )
                    user, superuser, createrole, createdb, writes, version, db, reader, schema = (
                        cur.fetchone()
                    )
                conn.rollback()
            finally:
                self._release(conn)
            self._privileges = {
                "user": user,
                "superuser": superuser,
                "can_write": bool(writes or createrole or createdb),
                "version": version,
                "database": db,
                "schema": schema or "public",
                "reader": bool(reader) and not superuser,
                "drop_to": "pg_read_all_data"
                if (superuser or writes) and version >= 140000 and reader
                else None,
            }
        return self._privileges

    # -- catalog --------------------------------------------------------------------------------
    def _load_catalog(self) -> Catalog:
        conn = self._acquire()
        try:
            with conn.cursor() as cur:
                tables: dict[tuple[str, str], TableInfo] = {}
                sizes: dict[tuple[str, str], int | None] = {}
                cur.execute(_CATALOG_SQL)
                for schema, name, kind, comment, estimate, size in cur.fetchall():
                    tables[(schema, name)] = TableInfo(
                        schema_name=schema,
                        name=name,
                        kind="view" if kind in "vm" else "table",
                        comment=comment,
                        row_estimate=estimate,
                        rows_from="pg_class.reltuples, ANALYZE's statistics"
                        if estimate is not None
                        else None,
                    )
                    # a table never analyzed is ordered by its bytes (rows of at least 32 bytes)
                    sizes[(schema, name)] = (
                        estimate if estimate is not None else (None if size is None else size // 32)
                    )
                cur.execute(_COLUMNS_SQL)
                for schema, name, col, dtype, nullable, comment in cur.fetchall():
                    info = tables.get((schema, name))
                    if info is not None:
                        info.columns.append(Column(name=col, type=dtype, nullable=nullable, comment=comment))
                cur.execute(_KEYS_SQL)
                for schema, name, ctype, cols, rschema, rtable, rcols in cur.fetchall():
                    info = tables.get((schema, name))
                    if info is None:
                        continue
                    if ctype == "p":
                        for col in info.columns:
                            col.primary_key = col.primary_key or col.name in cols
                    else:
                        info.foreign_keys.append(
                            ForeignKey(
                                columns=list(cols),
                                ref_schema=rschema,
                                ref_table=rtable,
                                ref_columns=list(rcols),
                            )
                        )
                cur.execute("SELECT current_schema()")
                default = cur.fetchone()[0]

                def run(sql: str, timeout_s: float) -> list[tuple[Any, ...]]:
                    try:
                        cur.execute(
                            "SELECT set_config('statement_timeout', %s, true)",
                            (f"{max(int(timeout_s * 1000), 1)}ms",),
                        )
                        cur.execute(sql)
                        rows: list[tuple[Any, ...]] = cur.fetchall()
                        return rows
                    except Exception:
                        conn.rollback()  # the next statement starts a new (read-only) transaction
                        raise

                listed = list(tables.values())
                size_of = {id(t): sizes[key] for key, t in tables.items()}
                count_rows(worth_counting(listed, lambda t: size_of[id(t)]), self.engine, run)
            conn.rollback()
        finally:
            self._release(conn)
        return Catalog(tables=list(tables.values()), default_schema=default)

    # -- execution ------------------------------------------------------------------------------
    def _begin(self, conn: Any, timeout_s: float, drop_to: str | None) -> None:
        with conn.cursor() as cur:
            cur.execute("BEGIN READ ONLY")
            cur.execute("SELECT set_config('statement_timeout', %s, true)", (f"{int(timeout_s * 1000)}ms",))
            if drop_to:
                cur.execute(f'SET LOCAL ROLE "{drop_to}"')

    def _fresh_transaction(self, timeout_s: float, drop_to: str | None) -> Any:
        """A connection inside a new read-only transaction. A pooled connection whose server went
        away (a restart, pg_terminate_backend) fails its first statement: it is dropped and the
        transaction is retried once on a new connection."""
        import psycopg

        conn = self._acquire()
        try:
            self._begin(conn, timeout_s, drop_to)
            return conn
        except psycopg.OperationalError:
            conn.close()
        conn = self._connect()
        try:
            self._begin(conn, timeout_s, drop_to)
        except psycopg.OperationalError as exc:
            conn.close()
            raise QueryError(
                f"lost the connection to PostgreSQL at {self.display_url} and could not start a new "
                f"one: {self._clean_error(exc).splitlines()[0]} — check that the server is up"
            ) from None
        return conn

    def _run(self, sql: str, timeout_s: float, limits: FetchLimits) -> RunOutput:
        import psycopg

        refusal = engine_refusal(sql)
        if refusal:
            raise QueryError(refusal)
        drop_to = self.privileges()["drop_to"]
        conn = self._fresh_transaction(timeout_s, drop_to)
        deadline = Deadline(
            timeout_s + 0.5, conn.cancel_safe if hasattr(conn, "cancel_safe") else conn.cancel
        )
        try:
            with deadline:
                try:
                    fields = self._require_rows(conn, sql)
                    # Queries go through a server-side cursor, so the client holds one batch at a time and
                    # memory follows max_rows, not the result; SHOW / EXPLAIN (small, not declarable) do not.
                    # Both use the extended protocol, which refuses several statements in one text.
                    named = _DECLARABLE.match(sql) is not None
                    # a query is wrapped so that the server cuts big cells (a string_agg of a gigabyte)
                    # before they cross the wire: the described types say which columns need it
                    plan = None
                    if named:
                        plan = plan_cells(
                            self.engine, sql, [str(oid) for _, oid in fields], limits.max_cell_bytes
                        )
                    cursor = conn.cursor(name="flexsql_fetch") if named else conn.cursor()
                    with cursor as cur:
                        if named:
                            cur.execute((plan.sql if plan else sql).encode("utf-8"))
                        else:
                            cur.execute(sql.encode("utf-8"), prepare=True)
                        if cur.description is None:
                            return [], [], [], 0, False, None
                        if plan is not None:
                            columns = [name for name, _ in fields]
                            types = [_type_name(conn, oid) for _, oid in fields]
                        else:
                            columns = [d.name for d in cur.description]
                            types = [_type_name(conn, d.type_code) for d in cur.description]
                        batches = fetch_batches(cur)
                        rows, counted, more, cut = collect(plan.rows(batches) if plan else batches, limits)
                except psycopg.errors.QueryCanceled:
                    raise timeout_error(timeout_s) from None
                except psycopg.OperationalError:
                    raise
                except psycopg.Error as exc:
                    raise QueryError(self._explain(exc)) from None
            return columns, types, rows, counted, more, cut
        except psycopg.OperationalError:
            conn.close()
            raise
        finally:
            if not conn.closed:
                try:
                    conn.rollback()
                except psycopg.Error:
                    conn.close()
            self._release(conn)

    def _require_rows(self, conn: Any, sql: str) -> list[tuple[str, int]]:
        """Have the server parse and describe the statement before it runs: only statements that
        return rows (queries, SHOW, EXPLAIN) may run. PostgreSQL's own parser decides, so no guard
        misreading can get a DO block, COPY, SET/RESET ROLE or DEALLOCATE executed. Returns the
        result's columns: (name, type OID)."""
        from psycopg import pq

        pgconn = conn.pgconn
        result = pgconn.prepare(b"", sql.encode("utf-8"))  # the unnamed statement: parsed, not run
        if result.status == pq.ExecStatus.COMMAND_OK:
            result = pgconn.describe_prepared(b"")
        if result.status != pq.ExecStatus.COMMAND_OK:
            text = (
                (result.error_message or b"")
                .decode("utf-8", "replace")
                .strip()
                .removeprefix("ERROR:")
                .strip()
            )
            raise QueryError(self._explain(Exception(text or "the server could not prepare the statement")))
        if result.nfields == 0:
            words = sql.strip().split(None, 1)
            what = words[0].upper() if words else "this statement"
            raise QueryError(
                f"refused by the engine: {what} returns no rows, and flexsql only runs queries on "
                "PostgreSQL — this server is read-only"
            )
        encoding = conn.info.encoding
        return [
            ((result.fname(i) or b"").decode(encoding, "replace"), result.ftype(i))
            for i in range(result.nfields)
        ]

    def _explain(self, exc: Exception) -> str:
        text = self._clean_error(exc)
        lowered = text.lower()
        if (
            "read-only transaction" in lowered
            or "permission denied" in lowered
            or "must be superuser" in lowered
        ):
            return f"refused by the engine: {text.splitlines()[0]} — this server is read-only"
        return text

    def data_versions(self, tables: list[TableInfo]) -> dict[str, str] | None:
        """Per-table counters of inserted, updated and deleted rows, live rows and the last
        vacuum/analyze time; None when the statistics view cannot be read."""
        try:
            rows = self.execute(_CHANGES_SQL, timeout_s=10.0, limits=FetchLimits(max_rows=1_000_000)).rows
        except QueryError:
            return None
        counters = {
            f"{schema}.{name}": f"{changes}:{live}:{stamp}" for schema, name, changes, live, stamp in rows
        }
        return {t.qualified: counters.get(t.qualified, "") for t in tables}

    def safety(self) -> SafetyReport:
        measures = [
            "sqlglot guard (one read statement, dangerous functions refused)",
            "READ ONLY transaction per statement, always rolled back",
            "statement_timeout and client-side cancel",
            "prepared statements (one statement per call)",
            "the server describes each statement first: only statements that return rows run",
            "functions that could undo the role drop or run SQL from a string refused by name",
        ]
        warnings: list[str] = []
        try:
            priv = self.privileges()
        except ConfigError as exc:
            return SafetyReport(read_only_engine=False, measures=measures, warnings=[str(exc)])
        if priv["drop_to"]:
            measures.append(f"each transaction runs as role {priv['drop_to']} (SET LOCAL ROLE)")
        if priv["superuser"] or priv["can_write"]:
            who = "a superuser" if priv["superuser"] else "a role with write or create privileges"
            warnings.append(
                f"connected as {priv['user']!r}, {who}: a READ ONLY transaction alone does not stop a superuser "
                "(COPY … TO PROGRAM, pg_read_file, SET ROLE back to itself). flexsql refuses those and drops "
                "privileges per transaction, but connect as a dedicated read-only role:\n"
                + READ_ONLY_ROLE_SQL.format(db=priv["database"], schema=priv["schema"])
            )
        elif priv["reader"]:
            warnings.append(
                f"connected as {priv['user']!r}, a member of pg_read_all_data: that role can read the password hashes "
                "in pg_authid and connection passwords in pg_user_mapping. flexsql refuses those catalogs, but grant "
                "SELECT per schema instead:\n"
                + READ_ONLY_ROLE_SQL.format(db=priv["database"], schema=priv["schema"])
            )
        return SafetyReport(read_only_engine=True, measures=measures, warnings=warnings)


# Statements DECLARE … CURSOR accepts: queries (after comments and parentheses), not SHOW / EXPLAIN.
_DECLARABLE = re.compile(
    r"^(?:\s+|--[^\n]*\n|/\*.*?\*/|\()*(SELECT|WITH|VALUES|TABLE)\b", re.IGNORECASE | re.DOTALL
)

_TYPE_NAMES: dict[int, str] = {}

# built-in types whose values print short: no cut (numeric is at most ~130 KB)
_SMALL_OIDS = frozenset(
    {16, 18, 20, 21, 23, 24, 26, 27, 28, 650, 700, 701, 774, 790, 829, 869, 1082, 1083, 1114, 1184, 1186}
    | {1266, 1700, 2202, 2205, 2206, 3220, 2950, 5069}
)
_TEXT_OIDS = frozenset({25, 1043, 1042, 19})  # text, varchar, bpchar, name: substr keeps them text
_BYTEA_OID = 17


def _type_name(conn: Any, oid: int) -> str:
    if oid not in _TYPE_NAMES:
        info = conn.adapters.types.get(oid)  # built-in types only: never a catalog round trip
        _TYPE_NAMES[oid] = info.name if info is not None else str(oid)
    return _TYPE_NAMES[oid]
