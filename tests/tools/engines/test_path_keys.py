"""Any key reads by its path (issue 30, item 8): describe_table listed `j.dot.key` (and STRUCT field `b.c`)
with examples while the value tools read NULL in every row, `j."dot.key"` too; on SQLite keys stored with
JSON escapes (`q\\"uote`, `ünï` as json.dumps writes it) read NULL and find_values missed them; key `""`
was listed as `j.` and refused. A path quotes any key (`j."dot.key"`, `j.""`, `j."q""uote"`) and reads
it as the engine stores it. On every engine, through a real MCP client."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from flexsql.tools.engines.paths import key_text, parse_path
from tests.support.engines import statements_database
from tests.support.mcp_support import tool_caller

pytestmark = pytest.mark.anyio

DOC = {"dot.key": "v1", "": "empty", 'q"uote': "qq", "ünï": "umlaut", "plain": {"x": "deep"}}
ARRAY = [{"k.k": "in-array"}, {"k.k": "again"}]
# path -> the value it reads
PATHS = {
    'j."dot.key"': "v1",
    'j.""': "empty",
    'j."q""uote"': "qq",
    "j.ünï": "umlaut",
    "j.plain.x": "deep",
    'a[]."k.k"': "in-array",
}
JSON_TYPE = {"duckdb": "JSON", "sqlite": "TEXT", "postgres": "JSONB", "snowflake": "VARIANT"}


def _statements(engine: str, prefix: str = "") -> list[str]:
    j = JSON_TYPE[engine]

    def lit(value: object) -> str:  # json.dumps escapes ü and ": stored as \u00fc and \"
        if engine == "snowflake":  # a backslash escapes in Snowflake's string literals
            return "PARSE_JSON('" + json.dumps(value).replace("\\", "\\\\").replace("'", "''") + "')"
        return "'" + json.dumps(value).replace("'", "''") + "'"

    insert = "SELECT" if engine == "snowflake" else "VALUES ("
    close = "" if engine == "snowflake" else ")"
    return [
        f"CREATE TABLE {prefix}odd (id INTEGER, j {j}, a {j})",
        f"INSERT INTO {prefix}odd {insert} 1, {lit(DOC)}, {lit(ARRAY)}{close}",
        f"INSERT INTO {prefix}odd {insert} 2, {lit({'plain': {}})}, {lit([])}{close}",
    ]


@contextlib.contextmanager
def odd_url(engine: str, directory: Path) -> Iterator[str]:
    struct = ["CREATE TABLE st AS SELECT {'b': {'c': 1}, 'b.c': 2} AS s"]  # DuckDB's STRUCT field b.c
    with statements_database(engine, directory, "odd", _statements, struct, snowflake=("PK_", "S")) as url:
        yield url


def _fold(path: str, engine: str) -> str:
    """Snowflake folds the column names up; keys keep their case."""
    if engine != "snowflake":
        return path
    head, rest = path[0], path[1:]
    return head.upper() + rest


@pytest.fixture
def odd(engine, tmp_path):
    with odd_url(engine, tmp_path) as url:
        yield url


async def test_any_key_is_listed_and_read_by_its_quoted_path(odd, engine):
    # fakesnow rewrites a VARIANT path onto DuckDB's `$.""`, which DuckDB refuses: the empty key is
    # checked on the three engines that run it (Snowflake reads it as col[''])
    paths = {p: v for p, v in PATHS.items() if not (engine == "snowflake" and p == 'j.""')}
    async with tool_caller(odd) as call:
        described = await call("describe_table", table="odd")
        for path, value in paths.items():
            listed = _fold(path, engine)
            assert f"  - {listed} VARCHAR e.g. '{value}'" in described, (listed, described)
            values = await call("distinct_values", table="odd", column=listed)
            assert f"{value} | 1" in values, (listed, values)
        where = _fold('j."dot.key"', engine) + " = 'v1'"
        rows = await call(
            "sample_rows", table="odd", columns=["id", _fold('j."q""uote"', engine)], where=where
        )
        assert "1 | qq" in rows, rows
        found = await call("find_values", text="umlaut")
        assert f"{_fold('j.ünï', engine)} = 'umlaut'" in found, found
        found = await call("find_values", text="qq")
        assert _fold('j."q""uote"', engine) in found, found


async def test_a_struct_field_with_a_dot_reads(tmp_path):
    with odd_url("duckdb", tmp_path) as url:
        async with tool_caller(url) as call:
            described = await call("describe_table", table="st")
            assert '  - s."b.c" BIGINT e.g. 2' in described and "  - s.b.c BIGINT e.g. 1" in described
            assert "2 | 1" in await call("distinct_values", table="st", column='s."b.c"')
            assert "1 | 1" in await call("distinct_values", table="st", column="s.b.c")


def test_the_path_syntax_round_trips_any_key():
    for key in ("plain", "dot.key", "", 'q"uote', "ünï", "a[]b", "with space", "2024", 'x"."y'):
        spec = parse_path(f"j.{key_text(key)}[].{key_text(key)}")
        assert spec is not None and spec.before == (key,) and spec.after == (key,), key
        assert parse_path(spec.text) == spec
    assert key_text("dot.key") == '"dot.key"' and key_text("") == '""' and key_text('q"u') == '"q""u"'
