"""The guard as a table: SQL → verdict on each of the four dialects, checked on real engines.

Verdicts: "ok" — the guard lets it through and the engine answers it (for Snowflake, fakesnow behind
the source's engine-level wrapper, which shares the guard's token walk); "guard-ok" — the guard lets
it through but the engine lacks the syntax (its own error then tells the model what is wrong);
"refused" — the guard refuses it; "ok?" — not this dialect's syntax, any clean verdict will do. One row per behaviour, so a drift between the layers shows as one red cell.
"""

from __future__ import annotations

import pytest

from flexsql.errors import FlexSQLError, QueryError, RefusedError
from flexsql.tools.engines import engine_for
from flexsql.tools.sql.guard import check_sql
from tests.support.engines import engine_params

DIALECTS = {"duckdb": "duckdb", "sqlite": "sqlite", "postgres": "postgres", "snowflake": "snowflake"}
ALL = tuple(DIALECTS)

# (sql, verdict for every dialect, or {dialect: verdict} with "*" as the default)
TABLE: list[tuple[str, str | dict[str, str]]] = [
    ("SELECT count(*) FROM orders", "ok"),
    ("SELECT name FROM customers WHERE country = 'France' ORDER BY name", "ok"),
    ("WITH big AS (SELECT * FROM orders WHERE quantity > 1) SELECT count(*) FROM big", "ok"),
    ("SELECT 1 UNION ALL SELECT 2", "ok"),
    ("(SELECT name FROM customers ORDER BY name)", {"*": "ok", "sqlite": "guard-ok"}),
    # FROM inside a function call is not a table: the Snowflake engine layer used to refuse these
    ("SELECT EXTRACT(YEAR FROM CAST('2024-01-01' AS DATE))", {"*": "ok", "sqlite": "guard-ok"}),
    ("SELECT EXTRACT(YEAR FROM '2024-01-01'::date)", {"*": "ok", "sqlite": "guard-ok"}),
    ("SELECT TRIM('x' FROM name) FROM customers", {"*": "ok", "sqlite": "guard-ok", "snowflake": "refused"}),
    ("SELECT SUBSTRING(name FROM 1 FOR 3) FROM customers", {"*": "ok", "sqlite": "guard-ok"}),
    ("SELECT 'a;b' AS s", "ok"),
    ("SELECT 1;", "ok"),
    ("DELETE FROM orders", "refused"),
    ("UPDATE customers SET name = 'x'", "refused"),
    ("DROP TABLE orders", "refused"),
    ("CREATE TABLE t AS SELECT 1 AS a", "refused"),
    ("INSERT INTO customers VALUES (9, 'x', 'y', 'z')", "refused"),
    ("SELECT 1; DELETE FROM orders", "refused"),
    ("WITH d AS (DELETE FROM orders RETURNING *) SELECT * FROM d", "refused"),
    ("SELECT * FROM 'data.csv'", "refused"),
    ("SELECT * FROM orders, '/etc/passwd'", "refused"),
    ("SELECT * FROM read_csv('/etc/passwd')", "refused"),
    ("SELECT pg_read_file('/etc/passwd')", "refused"),
    ("SELECT load_extension('x')", "refused"),
    ("SELECT seq.nextval", {"*": "refused", "duckdb": "ok?", "sqlite": "ok?", "postgres": "ok?"}),
    ("SELECT $1 FROM @~/stage", {"*": "refused", "duckdb": "ok?", "sqlite": "ok?", "postgres": "ok?"}),
    ("SELECT rolname, rolpassword FROM pg_authid", {"*": "ok?", "postgres": "refused"}),
    ("EXPLAIN SELECT 1", {"*": "ok?"}),
    ("EXPLAIN ANALYZE SELECT 1", "refused"),
]


def verdict(row: str | dict[str, str], dialect: str) -> str:
    if isinstance(row, str):
        return row
    return row.get(dialect, row.get("*", "ok"))


CELLS = [(sql, d, verdict(v, d)) for sql, v in TABLE for d in ALL]


def _guard(sql: str, dialect: str) -> str:
    try:
        check_sql(sql, engine_for(dialect))
    except RefusedError:
        return "refused"
    return "ok"


@pytest.mark.parametrize(("sql", "dialect", "expected"), CELLS, ids=[f"{d}:{s[:40]}" for s, d, _ in CELLS])
def test_guard_verdict(sql, dialect, expected):
    if expected == "ok?":  # not this dialect's syntax: any verdict is fine as long as it is a clean one
        assert _guard(sql, dialect) in ("ok", "refused")
        return
    assert _guard(sql, dialect) == expected.replace("guard-ok", "ok"), f"{dialect}: {sql}"


@pytest.mark.parametrize("sql", [s for s, v in TABLE if verdict(v, "snowflake") != "ok?"])
def test_snowflake_engine_layer_agrees_with_the_guard(sql):
    from flexsql.tools.engines.snowflake_source import SnowflakeSource

    allowed = _guard(sql, "snowflake") == "ok"
    try:
        SnowflakeSource.engine_wrap(sql)
        engine = "ok"
    except QueryError:
        engine = "refused"
    if allowed:  # whatever the guard lets through, the engine layer must send
        assert engine == "ok", sql


@pytest.fixture(params=engine_params(*ALL))
def shop_source(request, tmp_path):
    from flexsql.tools.engines import open_source
    from tests.support.engines import engine_url

    with engine_url(request.param, tmp_path) as url:
        source = open_source(url, name="shop")
        try:
            yield request.param, source
        finally:
            source.close()


def test_allowed_rows_run_on_every_engine(shop_source):
    engine, source = shop_source
    failures = []
    for sql, row in TABLE:
        if verdict(row, engine) != "ok":
            continue
        try:
            source.execute(sql, timeout_s=20)
        except FlexSQLError as exc:
            failures.append(f"{sql}: {exc}")
    assert not failures, "\n".join(failures)


def test_importing_the_guard_leaves_sqlglots_logger_alone(caplog):
    import logging

    import sqlglot

    import flexsql.tools.sql.guard  # noqa: F401

    assert logging.getLogger("sqlglot").level == logging.NOTSET
    with caplog.at_level(logging.WARNING, logger="sqlglot"):
        sqlglot.parse_one("VACUUM t", read="duckdb")  # falls back to a Command, with a warning
    assert any(r.name == "sqlglot" for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="sqlglot"), pytest.raises(RefusedError):
        check_sql("VACUUM t", engine_for("duckdb"))  # the guard's own parse stays quiet
    assert not [r for r in caplog.records if r.name == "sqlglot"]


def test_a_refused_show_says_which_form_runs() -> None:
    """`SHOW '/etc/passwd'` used to answer "SHOW is not allowed — only … SHOW … run", contradicting itself."""
    from flexsql.errors import RefusedError
    from flexsql.tools.sql.guard import check_sql

    with pytest.raises(RefusedError) as caught:
        check_sql("SHOW '/etc/passwd'", engine_for("duckdb"))
    message = str(caught.value)
    assert "SHOW TABLES" in message and "file" in message
    assert "only SELECT / WITH / VALUES / SHOW" not in message
