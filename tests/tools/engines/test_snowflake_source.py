"""Snowflake's engine layer (tools/engines/snowflake_source.py): the wrapper that sends one query
inside `SELECT * FROM (…)`, keeping its order outside, and refuses what would escape it. No server
needed; the live engine is in test_attack_corpus.py and the shop tests."""

from __future__ import annotations

import pytest

from flexsql.errors import QueryError


@pytest.mark.parametrize(
    ("sql", "sent"),
    [
        ("SELECT 1", "SELECT * FROM (\nSELECT 1\n)"),
        ("SELECT 1;", "SELECT * FROM (\nSELECT 1\n)"),
        ("SELECT ';' AS x -- c", "SELECT * FROM (\nSELECT ';' AS x -- c\n)"),
        ("WITH x AS (SELECT 1) SELECT * FROM x", "SELECT * FROM (\nWITH x AS (SELECT 1) SELECT * FROM x\n)"),
        ("DELETE FROM orders", "SELECT * FROM (\nDELETE FROM orders\n)"),  # Snowflake's own parser refuses it
        ("SHOW TABLES", "SHOW TABLES"),
        ("DESC TABLE orders", "DESC TABLE orders"),
        ("EXPLAIN USING TEXT SELECT 1", "EXPLAIN USING TEXT SELECT 1"),
    ],
)
def test_snowflake_wrapper_sends(sql, sent):
    from flexsql.tools.engines.snowflake_source import SnowflakeSource

    assert SnowflakeSource.engine_wrap(sql) == sent


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT 1) ; DELETE FROM orders WHERE (1 = 1", "several statements"),
        ("SELECT 1) UNION ALL (SELECT 2", "without its '('"),
        ("SELECT (1", "unclosed"),
        ("SHOW TABLES; DELETE FROM orders", "several statements"),
        ("EXPLAIN ANALYZE DELETE FROM orders", "EXPLAIN ANALYZE"),
        ("EXPLAIN DELETE FROM orders", "not a query"),
        ("SELECT seq.nextval", "NEXTVAL"),
        ('SELECT "SEQ"."NEXTVAL"', "NEXTVAL"),
        ("SELECT IDENTIFIER('seq.nextval')", "IDENTIFIER"),
        ("SELECT $1 FROM @~/x", "stage"),
        ("SELECT * FROM read_text('/etc/passwd')", "read_text()"),
        ("SELECT * FROM '/etc/passwd'", "as a table"),
        ("SELECT * FROM orders, '/etc/passwd'", "as a table"),
        ("SELECT SYSTEM$WAIT(1)", "system$wait()"),
    ],
)
def test_snowflake_wrapper_refuses(sql, reason):
    from flexsql.tools.engines.snowflake_source import SnowflakeSource

    with pytest.raises(QueryError) as info:
        SnowflakeSource.engine_wrap(sql)
    assert str(info.value).startswith("refused by the engine: ") and reason in str(info.value)


@pytest.mark.parametrize(
    ("sql", "outer"),
    [
        ("SELECT name, price AS p FROM products ORDER BY p DESC, name", " ORDER BY 2 DESC, 1"),
        (
            "SELECT category, count(*) FROM products GROUP BY category ORDER BY count(*) DESC LIMIT 2",
            " ORDER BY 2 DESC",
        ),
        ("SELECT name FROM customers ORDER BY 1 NULLS FIRST", " ORDER BY 1 NULLS FIRST"),
        ("SELECT name FROM customers UNION ALL SELECT title FROM products ORDER BY name", " ORDER BY 1"),
        ("(SELECT name FROM customers ORDER BY name)", " ORDER BY 1"),
        ("SELECT name FROM customers", ""),
        ("SELECT * FROM (SELECT name FROM customers ORDER BY name)", ""),  # an inner order orders nothing
    ],
)
def test_snowflake_wrapper_keeps_the_order_outside(sql, outer):
    from flexsql.tools.engines.snowflake_source import SnowflakeSource

    assert SnowflakeSource.engine_wrap(sql) == f"SELECT * FROM (\n{sql}\n){outer}"


def test_snowflake_without_a_password_names_snowflake_password(monkeypatch) -> None:
    """Was: the connector's "251006: Password is empty", with no word of SNOWFLAKE_PASSWORD."""
    from flexsql.errors import FlexSQLError
    from flexsql.tools.engines import open_source

    monkeypatch.delenv("SNOWFLAKE_PASSWORD", raising=False)
    source = open_source("snowflake://me@acct/DB/PUBLIC?warehouse=WH", name="snow")
    with pytest.raises(FlexSQLError, match="no password for Snowflake .* set SNOWFLAKE_PASSWORD"):
        source.execute("SELECT 1")
