"""PostgreSQL (tools/engines/postgres_source.py) on the real server: credential catalogs unreachable for
a superuser connection and for the recommended read-only role, the engine-level name net, exact
bigint sums, a server-side cursor while fetching, and reconnecting after the backends are terminated."""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit, urlunsplit

import pytest

from flexsql.errors import QueryError, RefusedError
from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.query import RunQuery, run_query
from flexsql.tools.runtime.context import ToolContext
from tests.support.engines import require_pg
from tests.support.pg_credentials import CREDENTIAL_QUERIES


def _pg_superuser_dsn() -> str:
    import psycopg

    dsn = require_pg()
    with psycopg.connect(dsn) as conn:
        if not conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[0]:
            pytest.skip("FLEXSQL_TEST_PG_DSN's role is not a superuser (needed to create the reader role)")
    return dsn


def _assert_hashes_unreachable(source) -> None:
    for sql in CREDENTIAL_QUERIES[:12]:
        with pytest.raises(RefusedError):
            source.execute(sql)
        # the engine layer on its own (the guard bypassed) refuses too
        with pytest.raises(QueryError) as info:
            source.execute(sql, guarded=False)
        assert "SCRAM" not in str(info.value) and "md5" not in str(info.value)


@pytest.mark.postgres
def test_postgres_superuser_connection_cannot_read_password_hashes():
    source = open_source(_pg_superuser_dsn())
    try:
        assert source.privileges()["drop_to"] == "pg_read_all_data"
        _assert_hashes_unreachable(source)
        assert source.execute("SELECT rolpassword FROM pg_roles WHERE rolname = current_user").rows == [
            ("********",)
        ]
    finally:
        source.close()


@pytest.mark.postgres
def test_recommended_read_only_role_reads_tables_but_not_password_hashes():
    import psycopg

    from flexsql.tools.engines.postgres_source import READ_ONLY_ROLE_SQL

    dsn = _pg_superuser_dsn()
    role, schema = "flexsql_r_" + uuid.uuid4().hex[:8], "flexsql_s_" + uuid.uuid4().hex[:8]
    db = urlsplit(dsn).path.lstrip("/") or "postgres"
    recommended = READ_ONLY_ROLE_SQL.format(db=db, schema=schema).replace("flexsql_reader", role)
    assert "pg_read_all_data TO" not in recommended  # it can read pg_authid
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
        admin.execute(f"CREATE TABLE {schema}.orders (id int)")
        admin.execute(f"INSERT INTO {schema}.orders VALUES (1), (2)")
        for statement in recommended.split(";"):
            code = "\n".join(line.split("--")[0] for line in statement.splitlines()).strip()
            if code:
                admin.execute(code.replace("'…'", "'pw'"))
    parts = urlsplit(dsn)
    url = urlunsplit((parts.scheme, f"{role}:pw@{parts.hostname}:{parts.port or 5432}", parts.path, "", ""))
    source = open_source(url)
    try:
        assert source.execute(f"SELECT count(*) FROM {schema}.orders").rows == [(2,)]
        assert source.safety().warnings == []
        _assert_hashes_unreachable(source)
    finally:
        source.close()
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")


@pytest.mark.postgres
def test_postgres_sum_of_bigints_is_exact():
    src = open_source(require_pg(), name="pg")
    try:
        ctx = ToolContext(sources=SourceRegistry([src]))
        out = run_query(ctx, RunQuery(sql="SELECT sum(x) AS s FROM (VALUES (9007199254740993::bigint)) t(x)"))
        assert out.rows == [[9007199254740993]]
        assert "9007199254740993" in out.to_text()
    finally:
        src.close()


@pytest.mark.postgres
def test_postgres_fetches_through_a_server_side_cursor():
    """With max_rows=20, the server keeps the rest: the backend shows a named cursor while we fetch."""
    src = open_source(require_pg(), name="pg")
    try:
        ctx = ToolContext(sources=SourceRegistry([src]))
        ctx.limits.store_rows = 1000
        out = run_query(
            ctx,
            RunQuery(
                sql="SELECT g, (SELECT count(*) FROM pg_cursors WHERE name <> '') AS cursors "
                "FROM generate_series(1, 200000) g",
                max_rows=20,
            ),
        )
        assert out.rows[0][1] >= 1
        assert out.total_rows == 1001 and out.total_is_lower_bound
    finally:
        src.close()


@pytest.mark.postgres
def test_postgres_reconnects_after_its_backends_are_terminated():
    import psycopg

    dsn = require_pg()
    src = open_source(dsn, name="pg")
    marker = "flexsql_" + uuid.uuid4().hex[:8]
    try:
        ctx = ToolContext(sources=SourceRegistry([src]))
        assert run_query(ctx, RunQuery(sql=f"SELECT '{marker}' AS m")).rows == [[marker]]
        pids = [conn.info.backend_pid for conn in src._pool]  # only ours: other tests share the server
        assert pids
        with psycopg.connect(dsn, autocommit=True) as admin:
            for pid in pids:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        assert run_query(ctx, RunQuery(sql="SELECT 2 AS n")).rows == [[2]]
    finally:
        src.close()


@pytest.mark.parametrize(
    ("sql", "refused"),
    [
        ("SELECT 1", None),
        ("SELECT * FROM orders WHERE status = 'S'", None),
        ("SELECT configuration, set_configured FROM t", None),
        ("SELECT set_config('role', 'postgres', true)", "set_config()"),
        ("SELECT pg_catalog.\"set_config\"('role', 'postgres', true)", "set_config()"),
        ("SELECT SET_CONFIG('role', 'postgres', true)", "set_config()"),
        ("SELECT query_to_xml('SELECT 1', true, true, '')", "query_to_xml()"),
        ("SELECT * FROM dblink('x', 'y') AS t(a int)", "dblink()"),
        ("SELECT pg_try_advisory_lock(1)", "pg_try_advisory_lock()"),
        ("SELECT txid_current()", "txid_current()"),
        ("SELECT pg_logical_emit_message(false, 'a', 'b')", "pg_logical_emit_message()"),
        ("SELECT U&\"set\\005fconfig\"('role', 'postgres', true)", 'U&"…"'),
    ],
)
def test_postgres_engine_name_net(sql, refused):
    from flexsql.tools.engines.postgres_source import engine_refusal

    message = engine_refusal(sql)
    if refused is None:
        assert message is None
    else:
        assert message is not None and message.startswith("refused by the engine: ") and refused in message
