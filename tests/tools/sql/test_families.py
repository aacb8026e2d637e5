"""Family references found in SQL text (tools/sql/families.py): only table names in FROM/JOIN or a FROM
list, never inside strings, comments, arithmetic or `t.*`."""

from __future__ import annotations

import pytest

from flexsql.tools.sql.families import family_refs


def _texts(sql: str, dialect: str = "duckdb") -> list[str]:
    return [r.text for r in family_refs(sql, dialect)]


def test_references_in_table_position_only():
    assert _texts("SELECT count(*) FROM events_*") == ["events_*"]
    assert _texts('SELECT t.* FROM web."events_2024*" t JOIN users_* u ON t.id = u.id') == [
        'web."events_2024*"',
        "users_*",
    ]
    assert _texts("SELECT * FROM a_*, b_2017* WHERE x = 1") == ["a_*", "b_2017*"]
    assert _texts("SELECT * FROM ga_sessions_20160801-20170630 AS s") == ["ga_sessions_20160801-20170630"]


def test_strings_comments_and_arithmetic_are_left_alone():
    assert _texts("SELECT 'FROM x_*' AS s, price*2, a, b*c FROM t -- FROM y_*") == []
    assert _texts("SELECT count(*), t.* FROM t /* JOIN z_* */") == []
    assert _texts("SELECT $$ FROM q_* $$ FROM t") == []
    assert _texts("SELECT $body$ FROM q_* $body$ FROM t", "postgres") == []


@pytest.mark.parametrize(
    ("dialect", "sql", "found"),
    [
        # an escape string: \' is a quote inside it, so the string runs on to the last quote
        ("postgres", "SELECT E'\\' FROM s.events_2017* x' AS a FROM t", []),
        ("duckdb", "SELECT E'\\' FROM s.events_2017* x' AS a FROM t", []),
        # Snowflake escapes with a backslash in every string
        ("snowflake", "SELECT 'a\\' FROM s.events_2017* x' AS a FROM t", []),
        # positive controls: where a backslash escapes nothing, the string ends at it
        ("postgres", "SELECT '\\' AS a FROM s.events_2017* x", ["s.events_2017*"]),
        ("duckdb", "SELECT '\\' AS a FROM s.events_2017* x", ["s.events_2017*"]),
        ("sqlite", "SELECT '\\' AS a FROM events_2017* x", ["events_2017*"]),
        ("snowflake", "SELECT '\\\\' AS a FROM s.events_2017* x", ["s.events_2017*"]),
    ],
)
def test_strings_end_where_the_dialect_ends_them(dialect: str, sql: str, found: list[str]):
    """Was: the masker ignored backslash escapes, so `E'\\' FROM S.EVENTS_2017* …'` rewrote text
    inside a string literal (issue 30, item 13)."""
    assert _texts(sql, dialect) == found


def test_an_alias_after_the_reference_is_seen():
    refs = family_refs("SELECT * FROM e_* AS e WHERE 1=1")
    assert refs[0].has_alias
    assert not family_refs("SELECT * FROM e_* WHERE 1=1")[0].has_alias
    assert family_refs("SELECT * FROM e_* e")[0].has_alias
