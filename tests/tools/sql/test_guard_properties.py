"""Property tests (hypothesis): random text, token soups of SQL keywords, malformed identifiers.

- The guard answers with the checked statement or a RefusedError, never another exception.
- Disguising a refused statement (comments, whitespace, letter case outside quotes) keeps it
  refused: the verdict does not depend on presentation.
- A source, guarded or not, only ever raises RefusedError, QueryError or NotFoundError, and after
  hundreds of random statements the database checksum is unchanged and the source still answers.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flexsql.errors import NotFoundError, QueryError, RefusedError
from flexsql.tools.engines import engine_for, open_source
from flexsql.tools.sql.guard import check_sql
from tests.support.engines import content_checksum, engine_params, engine_url

DIALECTS = ["duckdb", "sqlite", "postgres", "snowflake"]
ALLOWED_ERRORS = (RefusedError, QueryError, NotFoundError)

KEYWORDS = [
    "SELECT",
    "FROM",
    "WHERE",
    "WITH",
    "AS",
    "UNION",
    "ALL",
    "VALUES",
    "JOIN",
    "ON",
    "GROUP BY",
    "ORDER BY",
    "LIMIT",
    "INSERT",
    "INTO",
    "UPDATE",
    "SET",
    "DELETE",
    "DROP",
    "TABLE",
    "CREATE",
    "ALTER",
    "TRUNCATE",
    "MERGE",
    "COPY",
    "TO",
    "ATTACH",
    "DETACH",
    "INSTALL",
    "LOAD",
    "PRAGMA",
    "CALL",
    "EXPLAIN",
    "ANALYZE",
    "SHOW",
    "DESCRIBE",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "RETURNING",
    "FOR UPDATE",
    "DO",
    "EXECUTE",
    "PREPARE",
    "RESET",
    "USE",
    "VACUUM",
    "GRANT",
    "LATERAL",
    "PROGRAM",
    "STDOUT",
    "NULL",
    "TRUE",
    "CASE",
    "WHEN",
    "THEN",
    "END",
    "NOT",
    "EXISTS",
    "IN",
    "IMMEDIATE",
]
PUNCTUATION = [
    "(",
    ")",
    ",",
    ";",
    "*",
    ".",
    "=",
    "'",
    '"',
    "--",
    "/*",
    "*/",
    "$$",
    "::",
    "@",
    "U&",
    "\\",
    "\n",
    "||",
]
FUNCTIONS = [
    "pg_read_file",
    "read_text",
    "read_csv",
    "nextval",
    "set_config",
    "query",
    "query_to_xml",
    "lo_import",
    "glob",
    "readfile",
    "load_extension",
    "dblink",
    "count",
    "lower",
    "sum",
    "coalesce",
]
TABLES = ["orders", "customers", "products", "shipped_orders", "seq", "pg_catalog.pg_class", "'x.csv'"]

identifiers = st.from_regex(r"[A-Za-z_][A-Za-z0-9_$]{0,12}", fullmatch=True)
literals = st.one_of(
    st.text(max_size=12).map(lambda s: "'" + s.replace("'", "''") + "'"), st.integers(-10, 10**6).map(str)
)
token_soup = st.lists(
    st.one_of(
        st.sampled_from(KEYWORDS),
        st.sampled_from(PUNCTUATION),
        st.sampled_from(FUNCTIONS),
        st.sampled_from(TABLES),
        identifiers,
        literals,
    ),
    max_size=25,
).map(" ".join)
# Soups that start like a query get further into the parser and the engines.
query_soup = st.tuples(
    st.sampled_from(["SELECT", "WITH x AS (SELECT 1)", "EXPLAIN", "VALUES (", "FROM", "("]), token_soup
).map(" ".join)
random_sql = st.one_of(st.text(max_size=200), token_soup, query_soup)


def _relation(name: str, quoted: bool) -> str:
    return '"' + name.replace('"', '""') + '"' if quoted else name


random_select = st.builds(
    lambda name, quoted: f"SELECT * FROM {_relation(name, quoted)}",
    st.text(min_size=1, max_size=40),
    st.booleans(),
)

PROPERTY_SETTINGS = settings(
    max_examples=200,
    deadline=None,
    derandomize=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@PROPERTY_SETTINGS
@given(sql=st.one_of(random_sql, random_select))
def test_guard_answers_with_the_statement_or_a_refusal(sql):
    for dialect in DIALECTS:
        try:
            checked = check_sql(sql, engine_for(dialect))
        except RefusedError as exc:
            assert str(exc).startswith("refused: ") and "Traceback" not in str(exc)
            continue
        assert checked and checked in sql  # the statement itself, trimmed; never rewritten


SEEDS = [
    "DELETE FROM orders WHERE order_id = 100",
    "UPDATE orders SET quantity = 0",
    "DROP TABLE orders",
    "SELECT 1; DELETE FROM orders",
    "WITH x AS (DELETE FROM orders RETURNING *) SELECT * FROM x",
    "SELECT * INTO pwned FROM orders",
    "SELECT * FROM orders FOR UPDATE",
    "EXPLAIN ANALYZE DELETE FROM orders",
    "SELECT pg_read_file('/etc/passwd')",
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT nextval('seq')",
    "SELECT set_config('role', 'postgres', true)",
    "SELECT * FROM 'secret.csv'",
    "COPY orders TO '/tmp/x.csv'",
    "ATTACH 'x.db' AS y",
]
SEPARATORS = [" ", "\n", "\t", " /* c */ ", "/**/", " -- c\n", "  "]


def _disguise(sql: str, separators: list[str], flips: list[bool]) -> str:
    """Replace whitespace by other separators and flip the case of letters outside quotes."""
    parts = re.split(r"('(?:[^']|'')*')", sql)
    out, i = [], 0
    for part in parts:
        if part.startswith("'"):
            out.append(part)
            continue
        chars = []
        for ch in part:
            if ch == " ":
                chars.append(separators[i % len(separators)])
                i += 1
            elif ch.isalpha() and flips[i % len(flips)]:
                chars.append(ch.swapcase())
                i += 1
            else:
                chars.append(ch)
                i += 1
        out.append("".join(chars))
    return "".join(out)


@PROPERTY_SETTINGS
@given(
    seed=st.sampled_from(SEEDS),
    separators=st.lists(st.sampled_from(SEPARATORS), min_size=1, max_size=6),
    flips=st.lists(st.booleans(), min_size=1, max_size=9),
)
def test_disguised_attacks_stay_refused(seed, separators, flips):
    sql = _disguise(seed, separators, flips)
    for dialect in DIALECTS:
        with pytest.raises(RefusedError):
            check_sql(sql, engine_for(dialect))


@pytest.mark.parametrize("engine", engine_params("duckdb", "sqlite", "postgres"), indirect=True)
def test_random_sql_on_a_live_source_raises_only_clear_errors_and_writes_nothing(engine, tmp_path):
    with engine_url(engine, tmp_path) as url:
        before = content_checksum(engine, url)
        source = open_source(url)
        try:

            @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
            @given(sql=st.one_of(random_sql, random_select), guarded=st.booleans())
            def run(sql: str, guarded: bool) -> None:
                try:
                    source.execute(sql, guarded=guarded, timeout_s=2)
                except ALLOWED_ERRORS as exc:
                    assert str(exc).strip() and "Traceback" not in str(exc)

            run()
            assert source.execute("SELECT count(*) FROM orders").rows[0][0] == 7
        finally:
            source.close()
        assert content_checksum(engine, url) == before
