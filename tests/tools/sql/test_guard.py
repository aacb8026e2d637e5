"""The guard as tables of input → verdict, per dialect (sqlglot style).

Two tables: what must be refused, with the words the refusal must contain, and what must be
allowed (the guard is useless if it refuses ordinary analysis). The allowed table is also run on
the real shop database of every engine: the guard's "yes" must be a query the engine answers.
The engine-side checks that do not need a server (PostgreSQL's name net, Snowflake's wrapper) are
tables in tests/tools/engines/ (test_postgres_source.py, test_snowflake_source.py); their behaviour on
live engines is in tests/tools/engines/test_attack_corpus.py.
"""

from __future__ import annotations

import re

import pytest

from flexsql.errors import RefusedError
from flexsql.tools.engines import engine_for
from flexsql.tools.sql.guard import MAX_SQL_CHARS, check_sql, is_denied_function
from tests.support.pg_credentials import CREDENTIAL_QUERIES

DIALECTS = ["duckdb", "sqlite", "postgres", "snowflake"]
EVERY = tuple(DIALECTS)

# (dialects, sql, regex the refusal must match)
REFUSED: list[tuple[tuple[str, ...], str, str]] = [
    (EVERY, "DELETE FROM orders", r"^refused: DELETE is not allowed — this server is read-only"),
    (EVERY, "delete from orders where 1 = 1", r"DELETE is not allowed"),
    (EVERY, "UPDATE orders SET status = 'X'", r"UPDATE is not allowed"),
    (EVERY, "INSERT INTO orders VALUES (1, 1, 1, 1, '2024-01-01', 'S')", r"INSERT is not allowed"),
    (EVERY, "DROP TABLE orders", r"DROP is not allowed"),
    (EVERY, "CREATE TABLE t AS SELECT 1", r"CREATE is not allowed"),
    (EVERY, "ALTER TABLE orders RENAME TO o2", r"ALTER is not allowed"),
    (EVERY, "SELECT 1; DELETE FROM orders", r"2 statements in one call is not allowed — send exactly one"),
    (EVERY, "SELECT 1; SELECT 2; SELECT 3", r"3 statements in one call"),
    (EVERY, "/* hello */ DELETE FROM orders", r"DELETE is not allowed"),
    (EVERY, "-- hello\nDELETE FROM orders", r"DELETE is not allowed"),
    (EVERY, "(DELETE FROM orders)", r"DELETE is not allowed"),
    (EVERY, "WITH x AS (SELECT 1) DELETE FROM orders", r"DELETE is not allowed"),
    (EVERY, "WITH x AS (DELETE FROM orders RETURNING *) SELECT * FROM x", r"DELETE is not allowed"),
    (EVERY, "WITH x AS (SELECT 1) INSERT INTO orders SELECT * FROM x", r"INSERT is not allowed"),
    (EVERY, "SELECT * INTO t2 FROM orders", r"(SELECT … INTO|CREATE)"),
    (EVERY, "SELECT * FROM orders FOR UPDATE", r"row locks"),
    (("postgres",), "SELECT * FROM orders FOR NO KEY UPDATE", r"row locks"),
    (("postgres",), "SELECT * FROM orders FOR KEY SHARE", r"row locks"),
    (EVERY, "EXPLAIN ANALYZE SELECT 1", r"EXPLAIN ANALYZE is not allowed — it executes the statement"),
    (("postgres", "duckdb"), "EXPLAIN (ANALYZE) SELECT 1", r"EXPLAIN ANALYZE"),
    (("postgres",), "EXPLAIN (FORMAT JSON, ANALYSE true) SELECT 1", r"EXPLAIN ANALYZE"),
    (("postgres",), "EXPLAIN VERBOSE /* c */ ANALYZE SELECT 1", r"EXPLAIN ANALYZE"),
    (("postgres",), "EXPLAIN /* c */ ANALYZE DELETE FROM orders", r"EXPLAIN ANALYZE"),
    (EVERY, "EXPLAIN DELETE FROM orders", r"DELETE is not allowed"),
    (EVERY, "EXPLAIN SELECT 1; DELETE FROM orders", r"2 statements"),
    (EVERY, "BEGIN", r"transaction control is not allowed"),
    (EVERY, "COMMIT", r"COMMIT is not allowed"),
    (EVERY, "VACUUM", r"VACUUM is not allowed"),
    (EVERY, "ANALYZE", r"ANALYZE is not allowed"),
    (EVERY, "GRANT SELECT ON orders TO public", r"GRANT is not allowed"),
    (EVERY, "SET x = 1", r"SET is not allowed"),
    (EVERY, "CALL proc()", r"CALL is not allowed"),
    (EVERY, "COPY orders TO '/tmp/x.csv'", r"COPY is not allowed"),
    (EVERY, "ATTACH 'x.db' AS y", r"ATTACH is not allowed"),
    (EVERY, "EXPORT DATABASE '/tmp/x'", r"EXPORT is not allowed"),
    (EVERY, "IMPORT DATABASE '/tmp/x'", r"IMPORT is not allowed"),
    (EVERY, "CHECKPOINT", r"CHECKPOINT is not allowed"),
    (("duckdb",), "FORCE CHECKPOINT", r"FORCE CHECKPOINT is not allowed"),
    (
        ("postgres",),
        "START TRANSACTION READ WRITE",
        r"(transaction control|START TRANSACTION) is not allowed",
    ),
    (EVERY, "RESET ALL", r"RESET is not allowed"),
    (("duckdb",), "INSTALL httpfs", r"INSTALL is not allowed"),
    (("duckdb", "postgres"), "LOAD 'x'", r"LOAD is not allowed"),
    (("duckdb",), "DETACH shop", r"DETACH is not allowed"),
    (("duckdb",), "USE memory", r"USE is not allowed"),
    (("duckdb",), "PRAGMA threads = 1", r"PRAGMA is not allowed"),
    (("sqlite",), "PRAGMA table_info(orders)", r"PRAGMA is not allowed.*pragma_table_info"),
    (("sqlite",), "VACUUM INTO '/tmp/copy.db'", r"VACUUM is not allowed"),
    (("sqlite",), "REPLACE INTO orders VALUES (1)", r"(INSERT|REPLACE) is not allowed"),
    (("postgres",), "DO $$ BEGIN DELETE FROM orders; END $$", r"DO is not allowed"),
    (("duckdb", "sqlite"), "DO $$ x $$", r"DO is not allowed"),
    (("postgres",), "PREPARE p AS DELETE FROM orders", r"PREPARE is not allowed"),
    (("postgres",), "LISTEN channel", r"LISTEN is not allowed"),
    (("postgres",), "TABLE orders", r"TABLE is not allowed"),
    (("postgres",), "SET ROLE postgres", r"SET is not allowed"),
    (("postgres",), "RESET ROLE", r"RESET is not allowed"),
    (("snowflake",), "ALTER SESSION SET QUERY_TAG = 'x'", r"ALTER is not allowed"),
    (("snowflake",), "EXECUTE IMMEDIATE 'DELETE FROM orders'", r"EXECUTE is not allowed"),
    (("snowflake",), "PUT file:///tmp/x @~", r"PUT is not allowed"),
    (("snowflake",), "LIST @~", r"LIST .*is not allowed"),
    (("snowflake",), "UNDROP TABLE orders", r"UNDROP is not allowed"),
    (("snowflake",), "COPY INTO @~/x FROM orders", r"COPY is not allowed"),
    # functions, however they are written
    (
        EVERY,
        "SELECT pg_read_file('/etc/passwd')",
        r"function pg_read_file\(\) is not allowed — it reads files",
    ),
    (EVERY, "SELECT PG_READ_FILE('/etc/passwd')", r"function pg_read_file\(\)"),
    (EVERY, "SELECT \"pg_read_file\"('/etc/passwd')", r"function pg_read_file\(\)"),
    (EVERY, "SELECT pg_catalog.pg_read_file('/etc/passwd')", r"function pg_read_file\(\)"),
    (EVERY, "SELECT pg_read_file /* c */ ('/etc/passwd')", r"function pg_read_file\(\)"),
    (EVERY, "SELECT pg_read_binary_file('/etc/passwd')", r"function pg_read_binary_file\(\)"),
    (EVERY, "SELECT * FROM pg_ls_dir('/')", r"function pg_ls_dir\(\)"),
    (EVERY, "SELECT lo_import('/etc/passwd')", r"function lo_import\(\)"),
    (
        EVERY,
        "SELECT * FROM dblink('host=x', 'SELECT 1') AS t(a int)",
        r"function dblink\(\) .*another database",
    ),
    (EVERY, "SELECT set_config('role', 'postgres', true)", r"function set_config\(\) .*changes server"),
    (
        EVERY,
        "SELECT query_to_xml('DELETE FROM orders', true, true, '')",
        r"function query_to_xml\(\) .*runs SQL",
    ),
    (EVERY, "SELECT * FROM ts_stat('SELECT 1')", r"function ts_stat\(\)"),
    (EVERY, "SELECT nextval('seq')", r"function nextval\(\) .*sequence"),
    (EVERY, "SELECT setval('seq', 5)", r"function setval\(\)"),
    (EVERY, "SELECT txid_current()", r"function txid_current\(\)"),
    (EVERY, "SELECT pg_advisory_lock(1)", r"function pg_advisory_lock\(\)"),
    (EVERY, "SELECT pg_terminate_backend(1)", r"function pg_terminate_backend\(\)"),
    (EVERY, "SELECT pg_stat_reset_shared('bgwriter')", r"function pg_stat_reset_shared\(\)"),
    (EVERY, "SELECT pg_logical_emit_message(false, 'a', 'b')", r"function pg_logical_emit_message\(\)"),
    (EVERY, "SELECT * FROM read_csv('/etc/passwd')", r"function read_csv\(\)"),
    (EVERY, "SELECT * FROM read_csv_auto('/etc/passwd')", r"function read_csv_auto\(\)"),
    (EVERY, "SELECT * FROM read_parquet('s3://bucket/x.parquet')", r"function read_parquet\(\)"),
    (EVERY, "SELECT * FROM read_text('/etc/passwd')", r"function read_text\(\)"),
    (EVERY, "SELECT * FROM main.read_blob('/etc/passwd')", r"function read_blob\(\)"),
    (EVERY, "SELECT * FROM query('SELECT 1')", r"function query\(\) .*runs SQL"),
    (EVERY, "SELECT load_extension('/tmp/x.so')", r"function load_extension\(\)"),
    (EVERY, "SELECT readfile('/etc/passwd')", r"function readfile\(\)"),
    (EVERY, "SELECT writefile('/tmp/x', 'y')", r"function writefile\(\)"),
    (("duckdb", "snowflake"), "SELECT * FROM glob('/etc/*')", r"function glob\(\)"),
    (EVERY, "SELECT * FROM orders, LATERAL pg_read_file('x') f", r"function pg_read_file\(\)"),
    (EVERY, "SELECT pg_read_file(VARIADIC ARRAY['x'])", r"function pg_read_file\(\)"),
    (("postgres", "duckdb"), "SELECT U&\"pg\\005fread\\005ffile\"('/etc/passwd')", r"Unicode-escaped"),
    (("postgres",), "SELECT U&'\\0041'", r"Unicode-escaped"),
    (("snowflake",), "SELECT SYSTEM$ABORT_SESSION(1)", r"function system\$abort_session\(\)"),
    (("snowflake",), "SELECT seq.nextval", r"sequence NEXTVAL"),
    (("snowflake",), "SELECT db.sch.seq.NEXTVAL", r"sequence NEXTVAL"),
    (("snowflake",), 'SELECT "SEQ"."NEXTVAL"', r"sequence NEXTVAL"),
    (("snowflake",), "SELECT IDENTIFIER('seq.nextval')", r"IDENTIFIER"),
    (("snowflake",), "SELECT $1 FROM @~/x.csv", r"reading (a )?stage"),
    (("snowflake",), "SELECT * FROM DIRECTORY(@stage)", r"reading (a )?stage"),
    # files read as tables
    (EVERY, "SELECT * FROM 'data.csv'", r"reading .*data.csv.* as a table is not allowed — files outside"),
    (EVERY, "FROM '/etc/passwd'", r"reading .* as a table"),
    (EVERY, 'SELECT * FROM "/etc/passwd"', r"reading the file '/etc/passwd' as a table"),
    (EVERY, "SELECT * FROM orders JOIN 'x.parquet' ON true", r"reading .* as a table"),
    (EVERY, "SELECT * FROM orders, 'x.csv'", r"reading .* as a table"),
    (("duckdb",), "DESCRIBE 'x.csv'", r"reading (the file )?'x.csv' as a table"),
    (("duckdb",), "SUMMARIZE 'x.csv'", r"reading .* as a table"),
    (("duckdb",), "SUMMARIZE 'secret'", r"reading 'secret' as a table"),
    (("duckdb",), "PIVOT 'x' ON a USING count(*)", r"reading 'x' as a table"),
    (EVERY, "SELECT * FROM orders LEFT JOIN 'x' USING (order_id)", r"reading 'x' as a table"),
    (EVERY, "SELECT * FROM orders WHERE order_id IN (SELECT a FROM 'x')", r"reading 'x' as a table"),
    (("duckdb",), "SHOW 'x.csv'", r"SHOW 'x.csv' is not allowed — only the catalog forms of SHOW"),
    # what cannot be checked is refused, with a message
    (EVERY, "", r"^refused: the SQL text is empty"),
    (EVERY, "   \n ", r"^refused: the SQL text is empty"),
    (EVERY, "SELECT 1\x00", r"NUL byte"),
    (
        EVERY,
        "SELEC 1 FROM",
        r"^refused: syntax error — SELEC is not a SQL statement \(did you mean SELECT\?\)",
    ),
    (EVERY, "SELEC * FROM orders", r"^refused: syntax error — SELEC is not a SQL statement"),
    (EVERY, "HELLO world", r"^refused: syntax error — HELLO is not a SQL statement"),
    (EVERY, "ＤＥＬＥＴＥ FROM orders", r"^refused: "),
    (EVERY, "SELECT " + "(" * 3000 + "1" + ")" * 3000, r"^refused: "),
]

# Ordinary analysis that must pass, per dialect ("*" is every dialect).
ALLOWED: dict[str, list[str]] = {
    "*": [
        "SELECT 1",
        "select * from orders",
        "SELECT * FROM orders WHERE status = 'delete'",
        "SELECT status, count(*) AS n FROM orders GROUP BY status ORDER BY n DESC",
        "SELECT 'DROP TABLE orders; --' AS note",
        'SELECT status AS "delete" FROM orders',
        'SELECT order_id AS "update", quantity AS "set" FROM orders',
        "WITH t AS (SELECT * FROM orders) SELECT count(*) FROM t",
        "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 5) SELECT sum(i) FROM r",
        "SELECT order_id, row_number() OVER (PARTITION BY customer_id ORDER BY order_date) AS rn FROM orders",
        "SELECT order_id, sum(quantity) OVER (ORDER BY order_id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM orders",
        "SELECT customer_id FROM orders UNION SELECT customer_id FROM customers",
        "SELECT customer_id FROM orders INTERSECT SELECT customer_id FROM customers",
        "SELECT customer_id FROM customers EXCEPT SELECT customer_id FROM orders",
        "SELECT * FROM orders o JOIN customers c ON c.customer_id = o.customer_id WHERE c.country = 'France'",
        "SELECT * FROM orders WHERE EXISTS (SELECT 1 FROM customers c WHERE c.customer_id = orders.customer_id)",
        "SELECT * FROM orders WHERE customer_id IN (SELECT customer_id FROM customers WHERE segment = 'B2B')",
        "SELECT CASE WHEN quantity > 2 THEN 'big' ELSE 'small' END AS size FROM orders",
        "SELECT lower(name), upper(name), length(name), coalesce(country, '?') FROM customers",
        "SELECT * FROM orders ORDER BY order_id LIMIT 3 OFFSET 1",
        "SELECT count(DISTINCT customer_id) FROM orders",
        "SELECT max(order_date), min(order_date) FROM orders",
        "SELECT * FROM orders -- a trailing comment",
        "SELECT * FROM orders /* a comment; with a semicolon */",
        "SELECT * FROM orders;",
        "SELECT 1; -- trailing",
        "/* leading */ SELECT 1",
        "SELECT * FROM shipped_orders",
        "SELECT quantity * 2 AS doubled, quantity / 2.0 AS half FROM orders",
        "SELECT name FROM customers WHERE name LIKE '%on%'",
        "VALUES (1, 'a'), (2, 'b')",
        "EXPLAIN SELECT * FROM orders",
    ],
    "duckdb": [
        "FROM orders",
        "SELECT * FROM orders USING SAMPLE 50%",
        "SUMMARIZE orders",
        "DESCRIBE orders",
        "SHOW TABLES",
        "PIVOT orders ON status USING count(*)",
        "SELECT * FROM range(3)",
        "SELECT EXTRACT(YEAR FROM DATE '2024-01-01'), TRIM(BOTH 'x' FROM 'xabcx')",
        "SELECT list_transform([1, 2], lambda x: x + 1)",
        "SELECT count(*) FILTER (WHERE status = 'S') FROM orders",
        "SELECT * FROM duckdb_tables()",
        "SELECT current_setting('threads')",
        "SELECT * FROM orders QUALIFY row_number() OVER (PARTITION BY customer_id ORDER BY order_id) = 1",
        "SELECT DISTINCT ON (customer_id) * FROM orders ORDER BY customer_id, order_date DESC",
    ],
    "sqlite": [
        "SELECT * FROM pragma_table_info('orders')",
        "SELECT name FROM sqlite_master WHERE type = 'table'",
        "SELECT glob('*a*', name) FROM customers",
        "SELECT strftime('%Y', order_date) FROM orders",
        "SELECT * FROM orders WHERE status GLOB 'S*'",
        "EXPLAIN QUERY PLAN SELECT * FROM orders",
        "SELECT sqlite_version()",
        "SELECT json_extract('{\"a\": 1}', '$.a')",
    ],
    "postgres": [
        "SHOW search_path",
        "SHOW ALL",
        "SELECT count(*) FILTER (WHERE status = 'S') FROM orders",
        "SELECT DISTINCT ON (customer_id) * FROM orders ORDER BY customer_id, order_date DESC",
        "SELECT * FROM generate_series(1, 3)",
        "SELECT EXTRACT(YEAR FROM order_date), EXTRACT(YEAR FROM '2024-01-01'::date) FROM orders",
        "SELECT TRIM(BOTH 'x' FROM 'xabcx'), substring('abc' FROM 2)",
        "SELECT date_trunc('month', order_date), to_char(order_date, 'YYYY-MM') FROM orders",
        "SELECT order_date::text FROM orders",
        "SELECT string_agg(name, ', ' ORDER BY name) FROM customers",
        "SELECT * FROM orders TABLESAMPLE SYSTEM (100)",
        "SELECT * FROM orders o, LATERAL (SELECT c.name FROM customers c WHERE c.customer_id = o.customer_id) x",
        "SELECT customer_id, sum(quantity) FROM orders GROUP BY ROLLUP (customer_id)",
        "SELECT current_setting('search_path'), current_user, pg_typeof(1)",
        "SELECT * FROM pg_catalog.pg_tables WHERE schemaname = current_schema()",
        "SELECT pg_size_pretty(pg_total_relation_size('orders'))",
        "EXPLAIN (FORMAT JSON) SELECT * FROM orders",
        "SELECT $$a dollar-quoted; string$$",
        "SELECT jsonb_build_object('a', 1)",
    ],
    "snowflake": [
        "SHOW TABLES",
        "DESCRIBE TABLE orders",
        "SELECT * FROM orders QUALIFY ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY order_id) = 1",
        "SELECT IFF(quantity > 2, 'big', 'small') FROM orders",
        "SELECT * FROM IDENTIFIER('orders')",
        "SELECT TO_VARCHAR(order_date, 'YYYY-MM') FROM orders",
        "SELECT COUNT_IF(status = 'S') FROM orders",
        "SELECT PARSE_JSON('{\"a\": 1}'):a",
    ],
}


def _allowed_cases() -> list[tuple[str, str]]:
    return [(d, sql) for d in DIALECTS for sql in ALLOWED["*"] + ALLOWED[d]]


@pytest.mark.parametrize(
    ("dialect", "sql", "message"),
    [(d, sql, msg) for dialects, sql, msg in REFUSED for d in dialects],
    ids=lambda v: v[:40] if isinstance(v, str) else v,
)
def test_refused(dialect, sql, message):
    with pytest.raises(RefusedError) as info:
        check_sql(sql, engine_for(dialect))
    text = str(info.value)
    assert text.startswith("refused: "), text
    assert "Traceback" not in text and "\n" not in text.strip(), text
    assert re.search(message, text), f"{text!r} does not match {message!r}"


@pytest.mark.parametrize(("dialect", "sql"), _allowed_cases(), ids=lambda v: v[:40])
def test_allowed(dialect, sql):
    assert check_sql(sql, engine_for(dialect))


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT 1;", "SELECT 1"),
        ("SELECT 1;;  ", "SELECT 1"),
        ("SELECT 1; -- done", "SELECT 1"),
        ("SELECT 1; /* done */", "SELECT 1"),
        ("  SELECT ';' AS x ;", "SELECT ';' AS x"),
        ("SELECT 1 -- keep", "SELECT 1 -- keep"),
    ],
)
def test_returns_the_single_statement_without_what_follows_it(sql, expected):
    for dialect in DIALECTS:
        assert check_sql(sql, engine_for(dialect)) == expected


@pytest.mark.parametrize("value", [None, 42, b"SELECT 1", ["SELECT 1"]])
def test_non_text_is_refused_not_crashed(value):
    with pytest.raises(RefusedError, match="empty"):
        check_sql(value, engine_for("duckdb"))  # type: ignore[arg-type]


def test_oversized_text_is_refused_before_parsing():
    with pytest.raises(RefusedError, match="characters, over the"):
        check_sql("SELECT " + "1 + " * (MAX_SQL_CHARS // 4) + "1", engine_for("duckdb"))


@pytest.mark.parametrize(
    ("name", "dialect", "denied"),
    [
        ("pg_read_file", "postgres", True),
        ("PG_READ_FILE", "postgres", True),
        ("pg_ls_waldir", "postgres", True),
        ("dblink_exec", "postgres", True),
        ("lo_unlink", "postgres", True),
        ("binary_upgrade_set_next_pg_type_oid", "postgres", True),
        ("system$wait", "snowflake", True),
        ("read_json_auto", "duckdb", True),
        ("glob", "duckdb", True),
        ("glob", "sqlite", False),
        ("sqlite_version", "sqlite", False),
        ("lower", "postgres", False),
        ("pg_typeof", "postgres", False),
        ("current_setting", "postgres", False),
        ("generate_series", "duckdb", False),
        ("pg_size_pretty", "postgres", False),
        ("lo", "postgres", False),
        ("nextval", None, True),
    ],
)
def test_denied_function_table(name, dialect, denied):
    assert is_denied_function(name, engine_for(dialect) if dialect else None) is denied


# -- the guard's "yes" is a query the engine answers --------------------------------------------------------

RUNS: dict[str, list[str]] = {
    engine: [
        sql for sql in ALLOWED["*"] + ALLOWED[engine] if "sqlite_master" not in sql or engine == "sqlite"
    ]
    for engine in DIALECTS
}
# Snowflake statements the emulator (fakesnow on DuckDB) cannot run, though real Snowflake does.
EMULATOR_GAPS = {
    "EXPLAIN SELECT * FROM orders",
    "VALUES (1, 'a'), (2, 'b')",
    "SELECT PARSE_JSON('{\"a\": 1}'):a",
}


def test_allowed_queries_run_on_every_engine(shop, engine):
    failures = []
    for sql in RUNS[engine]:
        if engine == "snowflake" and sql in EMULATOR_GAPS:
            continue
        try:
            shop.execute(sql, timeout_s=10)
        except Exception as exc:  # noqa: BLE001 - collect them all for one readable failure
            failures.append(f"{sql!r}: {type(exc).__name__}: {str(exc)[:200]}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("sql", CREDENTIAL_QUERIES)
def test_guard_refuses_postgres_credential_catalogs(sql):
    with pytest.raises(
        RefusedError, match=r"refused: the catalog pg_\w+ is not allowed — it holds credentials"
    ):
        check_sql(sql, engine_for("postgres"))


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT rolname, rolpassword FROM pg_roles",  # masked: '********'
        "SELECT usename FROM pg_user",
        "SELECT attname, most_common_vals FROM pg_stats",
        "SELECT relname FROM pg_class WHERE relname = 'pg_authid'",  # the name as data is fine
    ],
)
def test_guard_allows_the_masked_views(sql):
    assert check_sql(sql, engine_for("postgres")) == sql
