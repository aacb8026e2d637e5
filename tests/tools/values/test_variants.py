"""find_values on values typed the way people type them (issue 19): spaces dropped or added
('North Carolina' <-> 'NorthCarolina'), hyphens ('e-mail' <-> 'email'), a word glued inside a
compound ('Carolina' in 'NorthCarolina'), one word of several ('Casey' -> 'Todd Casey'), the other
number ('Dog' -> 'Dogs'), each saying how it matched; and the index file rebuilt from an older layout."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import duckdb
import pytest

from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.values.find import FindValues, find_values
from flexsql.tools.values.index_file import INDEX_VERSION, open_index
from tests.support.contexts import context


@pytest.fixture
def vctx(tmp_path: Path) -> ToolContext:
    path = tmp_path / "v.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute("CREATE TABLE states (name VARCHAR, region VARCHAR)")
    conn.execute(
        "INSERT INTO states VALUES ('NorthCarolina', 'South'), ('SouthDakota', 'North'), "
        "('Texas', 'South'), ('New York', 'Northeast')"
    )
    conn.execute("CREATE TABLE events (title VARCHAR, contact VARCHAR, kind VARCHAR)")
    conn.execute(
        "INSERT INTO events VALUES ('Australian Open', 'e-mail', 'Dogs'), ('French Open', 'phone', 'Cats'), "
        "('Wimbledon', 'email list', 'Companies'), ('US Open', 'post', 'Dogs')"
    )
    conn.execute("CREATE TABLE players (name VARCHAR, club VARCHAR)")
    conn.execute(
        "INSERT INTO players VALUES ('Todd Casey', 'Northfield'), ('Anna Carey', 'Westwood'), "
        "('Bo Smith', 'Northfield')"
    )
    conn.close()
    return context(f"duckdb:///{path}")


def _top(ctx: ToolContext, text: str) -> tuple[str, str, str]:
    m = find_values(ctx, FindValues(text=text)).matches[0]
    return f"{m.table.split('.')[-1]}.{m.column}", m.value, m.match


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("North Carolina", ("states.name", "NorthCarolina", "spacing")),
        ("north-carolina", ("states.name", "NorthCarolina", "spacing")),
        ("NewYork", ("states.name", "New York", "spacing")),
        ("AustralianOpen", ("events.title", "Australian Open", "spacing")),
        ("email", ("events.contact", "e-mail", "spacing")),
        ("Carolina", ("states.name", "NorthCarolina", "compound")),
        ("Dakota", ("states.name", "SouthDakota", "compound")),
        ("Casey", ("players.name", "Todd Casey", "partial")),
        ("Dog", ("events.kind", "Dogs", "plural")),
        ("company", ("events.kind", "Companies", "plural")),
        ("Texsa", ("states.name", "Texas", "fuzzy")),
        ("texas", ("states.name", "Texas", "case-insensitive")),
    ],
)
def test_values_typed_another_way(vctx: ToolContext, text: str, expected: tuple[str, str, str]) -> None:
    assert _top(vctx, text) == expected


def test_a_word_glued_inside_a_compound(vctx: ToolContext) -> None:
    """'field' glued after a word of the index ('north') is a part of 'Northfield'; letters held inside
    a word with no boundary to show ('asey' in 'Casey') are not."""
    found = find_values(vctx, FindValues(text="field")).matches
    assert [(m.column, m.value, m.match) for m in found][:1] == [("club", "Northfield", "compound")]
    assert all(m.match != "compound" for m in find_values(vctx, FindValues(text="asey")).matches)


def test_a_real_word_outranks_its_near_spellings(vctx: ToolContext) -> None:
    """'Casey' is held as a word ('Todd Casey'): it is no typo of 'Carey'."""
    found = find_values(vctx, FindValues(text="Casey")).matches
    assert [m.value for m in found][:1] == ["Todd Casey"]
    carey = [m for m in find_values(vctx, FindValues(text="Carey")).matches]
    assert carey[0].value == "Anna Carey" and carey[0].match == "partial"


def test_each_match_says_how_in_its_text(vctx: ToolContext) -> None:
    text = find_values(vctx, FindValues(text="North Carolina")).to_text()
    assert "states.name = 'NorthCarolina'" in text and "spacing" in text


def test_an_index_of_an_older_layout_is_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    old = sqlite3.connect(path)
    old.executescript(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT); INSERT INTO meta VALUES ('version', '2');"
        "CREATE TABLE vals (vid INTEGER PRIMARY KEY, cid INTEGER, value TEXT, norm TEXT, skey TEXT, count INTEGER);"
        "INSERT INTO vals VALUES (1, 1, 'x', 'x', 'x', 1);"
    )
    old.commit()
    old.close()
    conn = open_index(path, "duckdb:///x")
    try:
        assert conn.execute("SELECT value FROM meta WHERE key = 'version'").fetchone() == (INDEX_VERSION,)
        assert conn.execute("SELECT count(*) FROM vals").fetchone() == (0,)
        assert "ckey" in [r[1] for r in conn.execute("PRAGMA table_info(vals)")]
    finally:
        conn.close()
