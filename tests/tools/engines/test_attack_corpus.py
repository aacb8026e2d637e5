"""The attack corpus, on all four engines, through both layers.

Every attack is sent twice: through the guard (`source.execute(sql)`), which must refuse it with a
message that names what was refused, and straight to the engine-level read-only connection
(`source.execute(sql, guarded=False)`), where it must be harmless: refused by the engine, or run
without writing, reading a file outside the database, reaching the network or changing
configuration. After the whole corpus the database content (tables and, for file databases, the
file bytes) is unchanged, sequences have not moved, no target file exists, the secret tokens never
appeared in any result or error text, and the source still answers queries.

Each secret is proven reachable first (a "positive control" on a plain, unprotected connection),
so a layer that let an attack through would show the token: the corpus cannot pass by accident.
On PostgreSQL the test connects as the `postgres` superuser, the hardest case: a READ ONLY
transaction alone does not stop a superuser.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import socket
import sqlite3
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from flexsql.errors import QueryError, RefusedError
from flexsql.tools.engines import open_source
from tests.support.engines import (
    ENGINES,
    content_checksum,
    ddl,
    fakesnow_server,
    make_duckdb,
    make_snowflake,
    make_sqlite,
    require_pg,
)


@dataclass(frozen=True)
class Attack:
    id: str
    kind: str  # the class of attack, for the per-layer summary
    refusal: str  # regex: what the guard's message must name
    sql: dict[str, str]  # engine -> SQL template; "*" applies to every engine without its own entry


def attack(id: str, kind: str, refusal: str, **sql: str) -> Attack:
    return Attack(id, kind, refusal, sql)


DELETE, INSERT, UPDATE = r"DELETE is not allowed", r"INSERT is not allowed", r"UPDATE is not allowed"
MULTI = r"(2|3|several) statements in one call is not allowed"
UNPARSABLE = r"^refused: .*(could not be parsed|is not allowed)"

# Placeholders: {canary} a secret file, {canary_csv} the same secret as CSV, {canary_dir} the
# folder holding them and a file whose *name* is secret, {canary_db} a database file holding the
# secret, {out} a path that must never be created, {port} a loopback port that counts every
# connection, {seq} a sequence, {db} the database name.
ATTACKS: list[Attack] = [
    # -- writes -----------------------------------------------------------------------------------
    attack("delete", "write", DELETE, **{"*": "DELETE FROM orders"}),
    attack("update", "write", UPDATE, **{"*": "UPDATE orders SET quantity = 0"}),
    attack("insert", "write", INSERT, **{"*": "INSERT INTO orders (order_id, quantity) VALUES (999, 1)"}),
    attack(
        "merge",
        "write",
        r"(MERGE|INSERT|REPLACE) is not allowed",
        **{
            "*": "MERGE INTO orders o USING customers c ON o.customer_id = c.customer_id WHEN MATCHED THEN DELETE",
            "sqlite": "REPLACE INTO orders (order_id, quantity) VALUES (100, 0)",
        },
    ),
    attack(
        "upsert",
        "write",
        INSERT,
        duckdb="INSERT OR REPLACE INTO orders (order_id, quantity) VALUES (100, 0)",
        sqlite="INSERT INTO orders (order_id, quantity) VALUES (100, 0) ON CONFLICT (order_id) DO UPDATE SET quantity = 0",
        postgres="INSERT INTO orders (order_id, quantity) VALUES (100, 0) ON CONFLICT (order_id) DO UPDATE SET quantity = 0",
    ),
    # -- DDL --------------------------------------------------------------------------------------
    attack("drop", "ddl", r"DROP is not allowed", **{"*": "DROP TABLE orders"}),
    attack(
        "create-as", "ddl", r"CREATE is not allowed", **{"*": "CREATE TABLE pwned AS SELECT * FROM orders"}
    ),
    attack("alter", "ddl", r"ALTER is not allowed", **{"*": "ALTER TABLE orders ADD COLUMN pwned INTEGER"}),
    attack(
        "truncate",
        "ddl",
        r"TRUNCATE is not allowed",
        duckdb="TRUNCATE orders",
        postgres="TRUNCATE orders CASCADE",
        snowflake="TRUNCATE TABLE orders",
    ),
    attack(
        "shadow-view",
        "ddl",
        r"CREATE is not allowed",
        **{
            "*": "CREATE TEMP VIEW orders AS SELECT 1 AS order_id",
            "snowflake": "CREATE OR REPLACE VIEW shipped_orders AS SELECT 1 AS order_id",
        },
    ),
    attack("index", "ddl", r"CREATE is not allowed", **{"*": "CREATE INDEX pwned_idx ON orders (quantity)"}),
    attack(
        "comment-on",
        "ddl",
        r"COMMENT ON is not allowed",
        duckdb="COMMENT ON TABLE orders IS 'pwned'",
        postgres="COMMENT ON TABLE orders IS 'pwned'",
        snowflake="COMMENT ON TABLE orders IS 'pwned'",
    ),
    attack("undrop", "ddl", r"UNDROP is not allowed", snowflake="UNDROP TABLE orders"),
    attack("macro", "ddl", r"CREATE is not allowed", duckdb="CREATE MACRO pwned(x) AS x + 1"),
    attack(
        "grant",
        "ddl",
        r"GRANT is not allowed",
        postgres="GRANT ALL ON orders TO PUBLIC",
        snowflake="GRANT SELECT ON TABLE orders TO ROLE public",
    ),
    # -- several statements and the tricks that hide the second one -------------------------------
    attack("multi", "multi", MULTI, **{"*": "SELECT 1; DELETE FROM orders"}),
    attack("multi-comment", "multi", MULTI, **{"*": "SELECT 1 /* ; */ ; /* x */ DROP TABLE orders --"}),
    attack("multi-txn", "multi", r"statements in one call", **{"*": "BEGIN; DELETE FROM orders; COMMIT"}),
    attack("wrapper-escape", "multi", UNPARSABLE, **{"*": "SELECT 1) ; DELETE FROM orders WHERE (1 = 1"}),
    # -- comments, quoting, case, unicode -------------------------------------------------------------
    attack("comment-block", "comment/quoting", DELETE, **{"*": "/* SELECT */ DELETE FROM orders"}),
    attack("comment-line", "comment/quoting", DELETE, **{"*": "-- SELECT 1\nDELETE FROM orders"}),
    attack(
        "comment-nested",
        "comment/quoting",
        UNPARSABLE,
        sqlite="/* /* */ DELETE FROM orders /* */ */ SELECT 1",
        snowflake="/* /* */ DELETE FROM orders /* */ */ SELECT 1",
    ),
    attack("quoted-table", "comment/quoting", DELETE, **{"*": 'DELETE FROM "orders"'}),
    attack("case-games", "comment/quoting", DELETE, **{"*": "dElEtE fRoM OrDeRs"}),
    attack("parenthesized", "comment/quoting", DELETE, **{"*": "(DELETE FROM orders)"}),
    attack("fullwidth", "comment/quoting", UNPARSABLE, **{"*": "ＤＥＬＥＴＥ FROM orders"}),
    attack("homoglyph", "comment/quoting", UNPARSABLE, **{"*": "DЕLETE FROM orders"}),  # Cyrillic Е
    # -- writes hidden inside a query ---------------------------------------------------------------
    attack(
        "cte-delete", "cte-dml", DELETE, **{"*": "WITH x AS (DELETE FROM orders RETURNING *) SELECT * FROM x"}
    ),
    attack(
        "cte-insert",
        "cte-dml",
        INSERT,
        **{"*": "WITH x AS (SELECT 999 AS id) INSERT INTO orders (order_id, quantity) SELECT id, 1 FROM x"},
    ),
    attack(
        "select-into",
        "cte-dml",
        r"(SELECT … INTO|CREATE) .*is not allowed",
        **{"*": "SELECT * INTO pwned FROM orders"},
    ),
    attack("for-update", "cte-dml", r"row locks", **{"*": "SELECT * FROM orders FOR UPDATE"}),
    attack(
        "explain-analyze",
        "cte-dml",
        r"EXPLAIN ANALYZE is not allowed",
        **{
            "*": "EXPLAIN ANALYZE DELETE FROM orders",
            "sqlite": "EXPLAIN ANALYZE SELECT 1",
            "postgres": "EXPLAIN (FORMAT JSON, /* x */ ANALYZE) DELETE FROM orders",
        },
    ),
    attack("explain-dml", "cte-dml", DELETE, **{"*": "EXPLAIN DELETE FROM orders"}),
    attack(
        "sql-string",
        "sql-from-string",
        r"function (query|query_to_xml)\(\)",
        duckdb="SELECT * FROM query('DELETE FROM orders')",
        postgres="SELECT query_to_xml('DELETE FROM orders RETURNING *', true, true, '')",
    ),
    attack(
        "execute-immediate",
        "sql-from-string",
        r"EXECUTE is not allowed",
        snowflake="EXECUTE IMMEDIATE 'DELETE FROM orders'",
        postgres="EXECUTE pwned",
    ),
    attack(
        "do-block",
        "sql-from-string",
        r"DO is not allowed",
        postgres="DO $$BEGIN EXECUTE 'RESET ROLE'; EXECUTE 'COPY (SELECT 1) TO PROGRAM ''touch {out}'''; END$$",
        duckdb="DO $$ DELETE FROM orders $$",
    ),
    # -- COPY, EXPORT, files written ---------------------------------------------------------------
    attack(
        "copy-to",
        "copy/export",
        r"COPY is not allowed",
        duckdb="COPY orders TO '{out}'",
        postgres="COPY orders TO '{out}'",
        snowflake="COPY INTO '{out}' FROM orders",
    ),
    attack(
        "copy-query-to",
        "copy/export",
        r"COPY is not allowed",
        duckdb="COPY (SELECT * FROM orders) TO '{out}' (FORMAT csv)",
        postgres="COPY (SELECT * FROM orders) TO '{out}'",
    ),
    attack(
        "copy-from",
        "copy/export",
        r"COPY is not allowed",
        duckdb="COPY orders FROM '{canary_csv}'",
        postgres="COPY orders FROM '{canary}'",
        snowflake="COPY INTO orders FROM @~/staged",
    ),
    attack(
        "copy-program",
        "copy/export",
        r"COPY is not allowed",
        postgres="COPY (SELECT 1) TO PROGRAM 'touch {out}'",
    ),
    attack("copy-stage", "copy/export", r"COPY is not allowed", snowflake="COPY INTO @~/pwned FROM orders"),
    attack("export", "copy/export", r"EXPORT is not allowed", duckdb="EXPORT DATABASE '{out}'"),
    attack("vacuum-into", "copy/export", r"VACUUM is not allowed", sqlite="VACUUM INTO '{out}'"),
    attack(
        "file-write",
        "copy/export",
        r"function (writefile|pg_file_write)\(\)",
        sqlite="SELECT writefile('{out}', 'pwned')",
        postgres="SELECT pg_file_write('{out}', 'pwned', false)",
    ),
    attack("put", "copy/export", r"PUT is not allowed", snowflake="PUT file://{canary} @~"),
    attack("get", "copy/export", r"GET is not allowed", snowflake="GET @~/staged file://{out}"),
    # -- ATTACH, INSTALL, LOAD ---------------------------------------------------------------------
    attack(
        "attach-file",
        "attach/install/load",
        r"ATTACH is not allowed",
        duckdb="ATTACH '{canary_db}' AS c",
        sqlite="ATTACH DATABASE '{canary_db}' AS c",
    ),
    attack(
        "attach-memory",
        "attach/install/load",
        r"ATTACH is not allowed",
        duckdb="ATTACH ':memory:' AS scratch",
        sqlite="ATTACH DATABASE ':memory:' AS scratch",
    ),
    attack(
        "detach",
        "attach/install/load",
        r"DETACH is not allowed",
        duckdb="DETACH shop",
        sqlite="DETACH DATABASE main",
    ),
    attack("install", "attach/install/load", r"INSTALL is not allowed", duckdb="INSTALL httpfs"),
    attack(
        "load", "attach/install/load", r"LOAD is not allowed", duckdb="LOAD '{out}'", postgres="LOAD '{out}'"
    ),
    attack(
        "load-extension",
        "attach/install/load",
        r"function load_extension\(\)",
        sqlite="SELECT load_extension('{out}')",
    ),
    # -- configuration -----------------------------------------------------------------------------
    attack(
        "set",
        "config",
        r"SET is not allowed",
        duckdb="SET enable_external_access = true",
        postgres="SET default_transaction_read_only = off",
        snowflake="SET pwned = 1",
    ),
    attack(
        "set-lock",
        "config",
        r"(SET|RESET) is not allowed",
        duckdb="RESET lock_configuration",
        postgres="SET transaction_read_only = off",
    ),
    attack("set-role", "config", r"(SET|RESET) is not allowed", postgres="RESET ROLE"),
    attack("set-session-auth", "config", r"SET is not allowed", postgres="SET SESSION AUTHORIZATION DEFAULT"),
    attack(
        "set-config",
        "config",
        r"function set_config\(\)",
        postgres="SELECT set_config('default_transaction_read_only', 'off', false)",
    ),
    attack(
        "alter-session",
        "config",
        r"ALTER is not allowed",
        snowflake="ALTER SESSION SET QUERY_TAG = 'pwned'",
        postgres="ALTER SYSTEM SET work_mem = '1MB'",
    ),
    attack(
        "use", "config", r"USE is not allowed", duckdb="USE system", snowflake="USE SCHEMA INFORMATION_SCHEMA"
    ),
    attack(
        "pragma-set",
        "config",
        r"PRAGMA is not allowed",
        duckdb="PRAGMA threads = 1",
        sqlite="PRAGMA journal_mode = WAL",
    ),
    attack(
        "pragma-write",
        "config",
        r"PRAGMA is not allowed",
        duckdb="PRAGMA enable_profiling",
        sqlite="PRAGMA user_version = 42",
    ),
    attack("pragma-schema", "config", r"PRAGMA is not allowed", sqlite="PRAGMA writable_schema = ON"),
    attack(
        "call",
        "config",
        r"CALL is not allowed",
        duckdb="CALL enable_logging()",
        snowflake="CALL SYSTEM$WAIT(1)",
        postgres="CALL pwned()",
    ),
    attack(
        "checkpoint",
        "config",
        r"(FORCE )?CHECKPOINT is not allowed",
        duckdb="FORCE CHECKPOINT",
        postgres="CHECKPOINT",
    ),
    attack("vacuum", "config", r"VACUUM is not allowed", **{"*": "VACUUM", "snowflake": "VACUUM orders"}),
    attack("analyze", "config", r"ANALYZE is not allowed", **{"*": "ANALYZE orders"}),
    attack(
        "transaction",
        "config",
        r"(transaction control|START TRANSACTION) is not allowed",
        **{"*": "BEGIN TRANSACTION", "postgres": "START TRANSACTION READ WRITE"},
    ),
    attack("secret", "config", r"CREATE is not allowed", duckdb="CREATE SECRET pwned (TYPE http)"),
    # -- reading files outside the database ------------------------------------------------------------
    attack(
        "read-text",
        "file read",
        r"function (read_text|readfile|pg_read_file)\(\)",
        duckdb="SELECT content FROM read_text('{canary}')",
        sqlite="SELECT readfile('{canary}')",
        postgres="SELECT pg_read_file('{canary}')",
        snowflake="SELECT content FROM read_text('{canary}')",
    ),
    attack(
        "read-csv",
        "file read",
        r"function (read_csv|read_csv_auto|pg_read_binary_file)\(\)",
        duckdb="SELECT * FROM read_csv_auto('{canary_csv}', header = false)",
        postgres="SELECT pg_read_binary_file('{canary}')",
        snowflake="SELECT * FROM read_csv('{canary_csv}')",
    ),
    attack(
        "replacement-scan",
        "file read",
        r"reading .* as a table is not allowed",
        duckdb="SELECT * FROM '{canary_csv}'",
        snowflake="SELECT * FROM '{canary_csv}'",
        sqlite="SELECT * FROM '{canary_db}'",
    ),
    attack(
        "quoted-file-table",
        "file read",
        r"reading the file .* as a table is not allowed",
        duckdb='FROM "{canary_csv}"',
        postgres='SELECT * FROM "{canary}"',
    ),
    attack(
        "quoted-function",
        "file read",
        r"function (read_blob|pg_read_file)\(\)",
        duckdb="SELECT * FROM \"read_blob\"('{canary}')",
        postgres="SELECT \"pg_read_file\"('{canary}')",
    ),
    attack(
        "qualified-function",
        "file read",
        r"function (read_text|pg_read_file)\(\)",
        duckdb="SELECT * FROM main.read_text('{canary}')",
        postgres="SELECT pg_catalog.pg_read_file('{canary}', 0, 100)",
    ),
    attack(
        "comment-in-call",
        "file read",
        r"function (read_text|pg_read_file)\(\)",
        duckdb="SELECT * FROM read_text /* x */ ('{canary}')",
        postgres="SELECT pg_read_file /* x */ ('{canary}')",
    ),
    attack(
        "unicode-escape",
        "file read",
        r"Unicode-escaped",
        postgres="SELECT U&\"pg\\005fread\\005ffile\"('{canary}')",
        duckdb="SELECT U&\"read\\005ftext\"('{canary}')",
    ),
    attack(
        "list-dir",
        "file read",
        r"function (glob|pg_ls_dir|fsdir)\(\)",
        duckdb="SELECT * FROM glob('{canary_dir}/*')",
        postgres="SELECT * FROM pg_ls_dir('{canary_dir}')",
        sqlite="SELECT name FROM fsdir('{canary_dir}')",
        snowflake="SELECT * FROM glob('{canary_dir}/*')",
    ),
    attack(
        "sniff",
        "file read",
        r"function (sniff_csv|pg_stat_file)\(\)",
        duckdb="SELECT * FROM sniff_csv('{canary_csv}')",
        postgres="SELECT pg_stat_file('{canary}')",
    ),
    attack(
        "describe-file",
        "file read",
        r"reading .* as a table is not allowed|function read_text",
        duckdb="DESCRIBE '{canary_csv}'",
        snowflake="DESCRIBE SELECT * FROM read_text('{canary}')",
    ),
    attack(
        "sql-string-read",
        "file read",
        r"function (query|query_to_xml|set_config)\(\)",
        duckdb="SELECT * FROM query('SELECT content FROM read_text(''{canary}'')')",
        postgres="SELECT set_config('role', 'postgres', true), "
        "query_to_xml('SELECT pg_read_file(''{canary}'')', true, true, '')",
    ),
    attack(
        "lo-import",
        "file read",
        r"function lo_(import|get)\(\)",
        postgres="SELECT lo_get(lo_import('{canary}'))",
    ),
    attack("stage-read", "file read", r"reading (a )?stage", snowflake="SELECT $1 FROM @~/staged"),
    attack("list-stage", "file read", r"LIST .*is not allowed|reading (a )?stage", snowflake="LIST @~"),
    attack("stage-directory", "file read", r"reading (a )?stage", snowflake="SELECT * FROM DIRECTORY(@~)"),
    attack(
        "join-file",
        "file read",
        r"reading .* as a table is not allowed",
        duckdb="SELECT * FROM orders JOIN '{canary_csv}' ON true",
        snowflake="SELECT * FROM orders, '{canary_csv}'",
    ),
    attack(
        "ts-stat",
        "file read",
        r"function ts_stat\(\)",
        postgres="SELECT * FROM ts_stat('SELECT to_tsvector(pg_read_file(''{canary}''))')",
    ),
    attack(
        "crosstab",
        "file read",
        r"function crosstab\(\)",
        postgres="SELECT * FROM crosstab('SELECT ''a''::text, ''b''::text, pg_read_file(''{canary}'')') "
        "AS t(r text, c text)",
    ),
    # -- the network and other databases -------------------------------------------------------------
    attack(
        "http-read",
        "network",
        r"function read_csv\(\)",
        duckdb="SELECT * FROM read_csv('http://127.0.0.1:{port}/x.csv')",
        snowflake="SELECT * FROM read_csv('http://127.0.0.1:{port}/x.csv')",
    ),
    attack(
        "dblink",
        "network",
        r"function dblink\(\)",
        postgres="SELECT * FROM dblink('host=127.0.0.1 port={port} connect_timeout=2', 'SELECT 1') AS t(x int)",
    ),
    attack(
        "dblink-self",
        "network",
        r"function dblink(_exec)?\(\)",
        postgres="SELECT dblink_exec('dbname={db} user=postgres host=127.0.0.1', 'DELETE FROM orders')",
    ),
    attack("program", "network", r"COPY is not allowed", postgres="COPY orders FROM PROGRAM 'cat {canary}'"),
    # -- sequences, transaction ids, locks, notifications, other sessions -----------------------------
    attack(
        "nextval",
        "sequence/state",
        r"function nextval\(\)|sequence NEXTVAL",
        duckdb="SELECT nextval('seq')",
        postgres="SELECT nextval('seq')",
        snowflake="SELECT seq.nextval",
    ),
    attack(
        "nextval-quoted",
        "sequence/state",
        r"function nextval\(\)|sequence NEXTVAL",
        postgres="SELECT \"nextval\"('seq'), pg_catalog.nextval('seq')",
        snowflake='SELECT "SEQ"."NEXTVAL"',
        duckdb="SELECT NEXTVAL('seq')",
    ),
    attack(
        "nextval-identifier", "sequence/state", r"IDENTIFIER\(", snowflake="SELECT IDENTIFIER('seq.nextval')"
    ),
    attack(
        "setval",
        "sequence/state",
        r"function setval\(\)",
        postgres="SELECT setval('seq', 1000)",
        duckdb="SELECT setval('seq', 1000)",
    ),
    attack("txid", "sequence/state", r"function txid_current\(\)", postgres="SELECT txid_current()"),
    attack(
        "advisory-lock",
        "sequence/state",
        r"function pg_advisory_lock\(\)",
        postgres="SELECT pg_advisory_lock(4242)",
    ),
    attack(
        "notify",
        "sequence/state",
        r"function pg_notify\(\)|LISTEN is not allowed",
        postgres="SELECT pg_notify('flexsql', 'pwned')",
    ),
    attack(
        "wal-message",
        "sequence/state",
        r"function pg_logical_emit_message\(\)",
        postgres="SELECT pg_logical_emit_message(false, 'flexsql', 'pwned')",
    ),
    attack(
        "large-object",
        "sequence/state",
        r"function lo_from_bytea\(\)",
        postgres="SELECT lo_from_bytea(0, 'pwned')",
    ),
    attack(
        "terminate",
        "sequence/state",
        r"function pg_terminate_backend\(\)",
        postgres="SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid()",
    ),
    attack(
        "reload-conf", "sequence/state", r"function pg_reload_conf\(\)", postgres="SELECT pg_reload_conf()"
    ),
    attack(
        "system-function",
        "sequence/state",
        r"function system\$abort_session\(\)",
        snowflake="SELECT SYSTEM$ABORT_SESSION(1)",
    ),
    attack(
        "prepare",
        "sequence/state",
        r"PREPARE is not allowed",
        postgres="PREPARE pwned AS DELETE FROM orders",
        duckdb="PREPARE pwned AS DELETE FROM orders",
    ),
    attack("deallocate", "sequence/state", r"DEALLOCATE is not allowed", postgres="DEALLOCATE ALL"),
    # -- hidden behind a family reference: the guard checks the SQL as expanded (tools/engines/families.py)
    attack("family-multi", "multi", MULTI, **{"*": "SELECT count(*) FROM orders*; DELETE FROM orders"}),
    attack(
        "family-cte-dml",
        "cte-dml",
        DELETE,
        postgres="WITH d AS (DELETE FROM orders RETURNING *) SELECT * FROM orders* AS o",
    ),
    attack(
        "family-quoted-name",
        "comment/quoting",
        MULTI,
        **{"*": 'SELECT * FROM "orders*" AS o; DROP TABLE orders'},
    ),
]


def corpus(engine: str) -> list[tuple[Attack, str]]:
    return [(a, a.sql.get(engine, a.sql.get("*", ""))) for a in ATTACKS if a.sql.get(engine, a.sql.get("*"))]


def test_corpus_covers_every_engine_and_every_class():
    sizes = {engine: len(corpus(engine)) for engine in ENGINES}
    assert len(ATTACKS) >= 60 and all(size >= 35 for size in sizes.values()), sizes
    required = {
        "write",
        "ddl",
        "multi",
        "comment/quoting",
        "cte-dml",
        "copy/export",
        "attach/install/load",
        "config",
        "file read",
        "sequence/state",
    }
    for engine in ENGINES:
        assert required <= {a.kind for a, _ in corpus(engine)} or engine in ("sqlite", "snowflake"), engine


# -- the environment each engine runs the corpus in -----------------------------------------------------


class ConnectionCounter:
    """A loopback TCP listener that counts connections: the network attacks must reach it 0 times."""

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._sock.settimeout(0.2)
        self.port = self._sock.getsockname()[1]
        self.count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            self.count += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self._sock.close()


@dataclass
class Env:
    engine: str
    url: str
    params: dict[str, str]
    secrets: list[str]
    written: Callable[[list[str]], list[str]]  # which of those paths exist
    state: Callable[[], dict[str, Any]]  # everything observable that must not change
    timeout_s: float = 5.0
    rendered_outs: list[str] = field(default_factory=list)

    def render(self, template: str, attack_id: str) -> str:
        out = self.params["out_base"] + attack_id.replace("-", "_")
        self.rendered_outs.append(out)
        return template.format(out=out, **self.params)


def _token() -> str:
    return "FLEXSQL_SECRET_" + secrets.token_hex(8).upper()


def _local_canaries(directory: Path, token: str, name_token: str) -> dict[str, str]:
    """A secret text file, the same secret as CSV, and a file whose name is secret."""
    directory.mkdir()
    (directory / "canary.txt").write_text(token + "\n")
    (directory / "canary.csv").write_text(f"secret\n{token}\n")
    (directory / f"listing_{name_token}.txt").write_text("x")
    return {
        "canary": str(directory / "canary.txt"),
        "canary_csv": str(directory / "canary.csv"),
        "canary_dir": str(directory),
    }


def _local_written(paths: list[str]) -> list[str]:
    return [p for p in paths if Path(p).exists()]


@contextlib.contextmanager
def duckdb_env(tmp_path: Path, counter: ConnectionCounter) -> Iterator[Env]:
    import duckdb

    token, name_token, db_token = _token(), _token(), _token()
    url = make_duckdb(tmp_path)
    path = urlsplit(url).path
    with duckdb.connect(path) as conn:
        conn.execute("CREATE SEQUENCE seq")
        conn.execute("SELECT nextval('seq')")
    params = _local_canaries(tmp_path / "secret", token, name_token)
    canary_db = tmp_path / "secret" / "canary.duckdb"
    with duckdb.connect(str(canary_db)) as conn:
        conn.execute("CREATE TABLE secret AS SELECT ? AS token", [db_token])
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    params.update(canary_db=str(canary_db), out_base=str(out_dir) + "/", port=str(counter.port), db="shop")
    # positive control: an unprotected connection can read every secret
    with duckdb.connect() as plain:
        assert token in plain.execute("SELECT content FROM read_text(?)", [params["canary"]]).fetchone()[0]
        assert any(
            name_token in r[0]
            for r in plain.execute("SELECT * FROM glob(?)", [params["canary_dir"] + "/*"]).fetchall()
        )
        plain.execute(f"ATTACH '{canary_db}' AS c (READ_ONLY)")
        assert plain.execute("SELECT token FROM c.secret").fetchone()[0] == db_token

    source = open_source(url)

    def state() -> dict[str, Any]:
        row = source.execute(
            "SELECT current_setting('enable_external_access'), current_setting('lock_configuration'), "
            "current_setting('threads'), current_setting('memory_limit'), current_setting('enable_profiling'), "
            "current_schema(), (SELECT count(*) FROM duckdb_databases()), "
            "(SELECT list(last_value) FROM duckdb_sequences()), (SELECT count(*) FROM duckdb_tables() WHERE temporary)"
        ).rows[0]
        assert row[0] is False and row[1] is True, row  # external access off, configuration locked
        return {
            "settings": row,
            "checksum": content_checksum("duckdb", url),
            "out_dir": sorted(p.name for p in out_dir.iterdir()),
        }

    try:
        yield Env("duckdb", url, params, [token, name_token, db_token], _local_written, state)
    finally:
        source.close()


@contextlib.contextmanager
def sqlite_env(tmp_path: Path, counter: ConnectionCounter) -> Iterator[Env]:
    token, name_token, db_token = _token(), _token(), _token()
    url = make_sqlite(tmp_path)
    path = urlsplit(url).path
    with contextlib.closing(sqlite3.connect(path)) as conn:  # an AUTOINCREMENT counter, SQLite's sequence
        conn.execute("CREATE TABLE audit (id INTEGER PRIMARY KEY AUTOINCREMENT, note TEXT)")
        conn.execute("INSERT INTO audit (note) VALUES ('first')")
        conn.commit()
    params = _local_canaries(tmp_path / "secret", token, name_token)
    canary_db = tmp_path / "secret" / "canary.sqlite"
    with contextlib.closing(sqlite3.connect(canary_db)) as conn:
        conn.execute("CREATE TABLE secret (token TEXT)")
        conn.execute("INSERT INTO secret VALUES (?)", (db_token,))
        conn.commit()
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    params.update(canary_db=str(canary_db), out_base=str(out_dir) + "/", port=str(counter.port), db="main")
    with contextlib.closing(sqlite3.connect(":memory:")) as plain:  # positive control
        plain.execute("ATTACH DATABASE ? AS c", (str(canary_db),))
        assert plain.execute("SELECT token FROM c.secret").fetchone()[0] == db_token

    source = open_source(url)

    def state() -> dict[str, Any]:
        databases = source.execute("SELECT name FROM pragma_database_list").rows
        flags = source.execute("SELECT * FROM pragma_foreign_keys").rows
        return {
            "databases": databases,
            "flags": flags,
            "checksum": content_checksum("sqlite", url),
            "out_dir": sorted(p.name for p in out_dir.iterdir()),
        }

    try:
        yield Env("sqlite", url, params, [token, name_token, db_token], _local_written, state)
    finally:
        source.close()


@contextlib.contextmanager
def postgres_env(tmp_path: Path, counter: ConnectionCounter) -> Iterator[Env]:
    """A private database (extensions are per database) with the shop tables, a sequence and the
    extensions an attacker would want (dblink, adminpack, tablefunc) when the server has them. The
    secret file is written by the server itself, so its path is valid wherever the server runs: into a
    folder of this test's own (a fresh name, created by the server, removed afterwards), so that no
    attack reads, lists or writes a folder other runs share."""
    import psycopg

    dsn = require_pg()
    db = "flexsql_guard_" + uuid.uuid4().hex[:10]
    parts = urlsplit(dsn)
    url = urlunsplit((parts.scheme, parts.netloc, "/" + db, parts.query, ""))
    token, name_token = _token(), _token()
    folder = "/tmp/flexsql_" + uuid.uuid4().hex[:12]  # on the server's machine
    canary, listing = f"{folder}/canary.txt", f"{folder}/listing_{name_token}.txt"
    with psycopg.connect(dsn, autocommit=True) as admin:
        superuser = admin.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[0]
        if not superuser:
            pytest.skip(
                "the corpus is built for a superuser connection (the hardest case); FLEXSQL_TEST_PG_DSN's "
                "role is not a superuser"
            )
        admin.execute(f"CREATE DATABASE {db}")
    control = psycopg.connect(url, autocommit=True)
    try:
        for statement in ddl("postgres"):
            control.execute(statement)
        control.execute("CREATE SEQUENCE seq")
        control.execute("SELECT nextval('seq')")
        available = {r[0] for r in control.execute("SELECT name FROM pg_available_extensions")}
        for extension in ("dblink", "adminpack", "tablefunc"):
            if extension in available:
                control.execute(f"CREATE EXTENSION {extension}")
        control.execute(f"COPY (SELECT 1) TO PROGRAM 'mkdir -m 700 {folder}'")
        control.execute(f"COPY (SELECT '{token}') TO '{canary}'")
        control.execute(f"COPY (SELECT 'x') TO '{listing}'")
        # positive controls: the superuser reads the secret, lists it, and dblink reaches the listener
        assert token in control.execute("SELECT pg_read_file(%s)", (canary,)).fetchone()[0]
        assert any(name_token in r[0] for r in control.execute("SELECT pg_ls_dir(%s)", (folder,)))
        if "dblink" in available:
            with contextlib.suppress(psycopg.Error):
                control.execute(
                    f"SELECT dblink_connect('host=127.0.0.1 port={counter.port} connect_timeout=2')"
                )
            assert counter.count >= 1
            counter.count = 0
        params = {
            "canary": canary,
            "canary_csv": canary,
            "canary_dir": folder,
            "canary_db": canary,
            "out_base": f"{folder}/out_",
            "port": str(counter.port),
            "db": db,
        }
        source = open_source(url)

        def written(paths: list[str]) -> list[str]:
            return [
                p
                for p in paths
                if control.execute("SELECT pg_stat_file(%s, true)", (p,)).fetchone()[0] is not None
            ]

        def state() -> dict[str, Any]:
            inside = source.execute(
                "SELECT current_user, session_user, current_setting('transaction_read_only'), "
                "current_setting('default_transaction_read_only'), current_setting('search_path'), "
                "current_setting('work_mem')"
            ).rows[0]
            assert inside[0] == "pg_read_all_data" and inside[2] == "on", inside
            server = control.execute(
                "SELECT (SELECT last_value::text || is_called::text FROM seq), "
                "(SELECT count(*) FROM pg_largeobject_metadata), "
                "(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'), "
                "(SELECT count(*) FROM pg_replication_slots), (SELECT count(*) FROM pg_prepared_xacts), "
                "(SELECT count(*) FROM pg_db_role_setting), "
                "(SELECT md5(coalesce(string_agg(name || '=' || coalesce(setting, ''), ',' ORDER BY name), '')) "
                " FROM pg_file_settings)"
            ).fetchone()
            return {"inside": inside, "server": server, "checksum": content_checksum("postgres", url)}

        yield Env("postgres", url, params, [token, name_token], written, state)
        source.close()
    finally:
        with contextlib.suppress(psycopg.Error):
            control.execute(f"COPY (SELECT 1) TO PROGRAM 'rm -rf {folder}'")
        control.close()
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


@contextlib.contextmanager
def snowflake_env(tmp_path: Path, counter: ConnectionCounter) -> Iterator[Env]:
    import snowflake.connector

    token, name_token = _token(), _token()
    params = _local_canaries(tmp_path / "secret", token, name_token)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    with make_snowflake() as url:
        database = urlsplit(url).path.strip("/").split("/")[0]
        control = snowflake.connector.connect(**fakesnow_server(), database=database, schema="SHOP")
        try:
            cur = control.cursor()
            cur.execute("CREATE SEQUENCE seq")
            cur.execute("SELECT seq.nextval")
            first = cur.fetchone()[0]
            # positive control: the emulator's plain connection reads local files (it runs on DuckDB)
            cur.execute(f"SELECT content FROM read_text('{params['canary']}')")
            assert token in cur.fetchone()[0]
            params.update(
                canary_db=params["canary"], out_base=str(out_dir) + "/", port=str(counter.port), db=database
            )
            source = open_source(url)

            def state() -> dict[str, Any]:
                where = source.execute("SELECT CURRENT_DATABASE(), CURRENT_SCHEMA()").rows
                return {
                    "where": where,
                    "checksum": content_checksum("snowflake", url),
                    "out_dir": sorted(p.name for p in out_dir.iterdir()),
                }

            def sequence_untouched() -> None:
                cur.execute("SELECT seq.nextval")
                assert cur.fetchone()[0] == first + 1, "the corpus advanced the sequence"

            env = Env("snowflake", url, params, [token, name_token], _local_written, state, timeout_s=3.0)
            yield env
            sequence_untouched()
            source.close()
        finally:
            control.close()


ENVIRONMENTS = {
    "duckdb": duckdb_env,
    "sqlite": sqlite_env,
    "postgres": postgres_env,
    "snowflake": snowflake_env,
}


# -- the corpus itself ------------------------------------------------------------------------------


def test_attack_corpus_is_refused_by_the_guard_and_harmless_on_the_engine(engine, tmp_path):
    counter = ConnectionCounter()
    try:
        with ENVIRONMENTS[engine](tmp_path, counter) as env:
            source = open_source(env.url, name="target")
            before = env.state()
            failures: list[str] = []
            outcomes: Counter[tuple[str, str]] = Counter()
            ran: list[str] = []
            for item, template in corpus(engine):
                sql = env.render(template, item.id)
                # layer 1: the guard refuses, and says what
                try:
                    source.execute(sql, timeout_s=env.timeout_s)
                    failures.append(f"{item.id}: the guard let it through: {sql!r}")
                except RefusedError as exc:
                    message = str(exc)
                    if not message.startswith("refused: ") or not re.search(item.refusal, message):
                        failures.append(f"{item.id}: refusal does not name what was refused: {message!r}")
                    if "Traceback" in message or any(s in message for s in env.secrets):
                        failures.append(f"{item.id}: refusal leaks: {message!r}")
                except Exception as exc:  # noqa: BLE001 - any other type is a failure to report
                    failures.append(f"{item.id}: guard raised {type(exc).__name__}: {exc}")
                # layer 2: straight to the read-only engine connection
                try:
                    result = source.execute(sql, guarded=False, timeout_s=env.timeout_s)
                    seen, outcome = repr(result.columns) + repr(result.rows), "ran, harmless"
                except (QueryError, RefusedError) as exc:
                    seen, outcome = str(exc), "refused by the engine"
                except Exception as exc:  # noqa: BLE001
                    failures.append(f"{item.id}: engine layer raised {type(exc).__name__}: {exc}")
                    continue
                leaked = [s for s in env.secrets if s in seen]
                if leaked:
                    failures.append(f"{item.id}: the engine layer leaked a secret: {seen[:300]!r}")
                outcomes[(item.kind, outcome)] += 1
                if outcome.startswith("ran"):
                    ran.append(item.id)
            after = env.state()
            assert not failures, "\n".join(failures)
            assert after == before, "the corpus changed the database, a setting or a sequence"
            assert env.written(env.rendered_outs) == [], "the corpus wrote files"
            assert counter.count == 0, "the corpus reached the network"
            assert source.execute("SELECT count(*) FROM orders").rows[0][0] == 7
            # positive control for the family attacks: the reference alone runs, as the union of its tables
            assert source.execute("SELECT count(*) FROM orders* AS o").rows[0][0] == 7
            assert source.execute("SELECT count(*) FROM shipped_orders").rows[0][0] == 5
            source.close()
            _print_summary(engine, outcomes, ran)
    finally:
        counter.close()


def _print_summary(engine: str, outcomes: Counter[tuple[str, str]], ran: list[str]) -> None:
    kinds = sorted({k for k, _ in outcomes})
    lines = [f"{engine}: {sum(outcomes.values())} attacks, all refused by the guard; engine layer:"]
    for kind in kinds:
        parts = [f"{n} {o}" for (k, o), n in sorted(outcomes.items()) if k == kind]
        lines.append(f"  {kind:22} {', '.join(parts)}")
    lines.append(f"  ran on the engine without effect: {', '.join(ran) or 'none'}")
    print("\n".join(lines))


@pytest.mark.postgres
def test_postgres_superuser_gets_a_warning_with_the_read_only_role_statements():
    import psycopg

    dsn = require_pg()
    with psycopg.connect(dsn) as conn:
        if not conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[0]:
            pytest.skip("FLEXSQL_TEST_PG_DSN's role is not a superuser")
    source = open_source(dsn)
    try:
        report = source.safety()
        warning = "\n".join(report.warnings)
        assert "superuser" in warning and "read-only role" in warning
        assert "CREATE ROLE flexsql_reader" in warning and "GRANT SELECT ON ALL TABLES IN SCHEMA" in warning
        assert "GRANT pg_read_all_data TO" not in warning  # it can read pg_authid's password hashes
        assert "default_transaction_read_only = on" in warning
        assert any("pg_read_all_data" in m for m in report.measures)
        assert source.execute("SELECT current_user").rows == [("pg_read_all_data",)]
    finally:
        source.close()


def test_engine_layer_sequence_is_untouched_by_a_guard_bypass_on_duckdb(tmp_path):
    """A direct check of one claim the summary makes: a sequence cannot move on the read-only
    DuckDB connection even when the guard is bypassed (nextval needs a write)."""
    import duckdb

    url = make_duckdb(tmp_path)
    with duckdb.connect(urlsplit(url).path) as conn:
        conn.execute("CREATE SEQUENCE seq START 5")
    source = open_source(url)
    try:
        with pytest.raises(QueryError, match="read-only"):
            source.execute("SELECT nextval('seq')", guarded=False)
    finally:
        source.close()
    with duckdb.connect(urlsplit(url).path) as conn:
        assert conn.execute("SELECT nextval('seq')").fetchone()[0] == 5


def test_a_second_source_on_the_same_duckdb_file_shares_the_locked_instance(tmp_path):
    """DuckDB shares one instance per file within a process: the second Source (a checksum, a
    second name for the same file) must open it and find it still read-only and locked."""
    url = make_duckdb(tmp_path)
    first, second = open_source(url, name="a"), open_source(url, name="b")
    try:
        assert first.execute("SELECT count(*) FROM orders").rows == [(7,)]
        assert second.execute("SELECT count(*) FROM orders").rows == [(7,)]
        settings_sql = (
            "SELECT current_setting('enable_external_access'), current_setting('lock_configuration')"
        )
        assert second.execute(settings_sql).rows == [(False, True)]
        with pytest.raises(QueryError, match="locked"):
            second.execute("SET enable_external_access = true", guarded=False)
    finally:
        first.close()
        second.close()
