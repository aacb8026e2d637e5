"""Family references found in SQL text (tools/sql/families.py): only table names in FROM/JOIN or a FROM
list, never inside strings, comments, arithmetic or `t.*`."""

from __future__ import annotations

from flexsql.tools.sql.families import family_refs


def _texts(sql: str) -> list[str]:
    return [r.text for r in family_refs(sql)]


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


def test_an_alias_after_the_reference_is_seen():
    refs = family_refs("SELECT * FROM e_* AS e WHERE 1=1")
    assert refs[0].has_alias
    assert not family_refs("SELECT * FROM e_* WHERE 1=1")[0].has_alias
    assert family_refs("SELECT * FROM e_* e")[0].has_alias
