"""SQLite (tools/engines/sqlite_source.py): a huge zeroblob is cut or refused without materialising."""

from __future__ import annotations

from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.query import RunQuery, run_query
from flexsql.tools.runtime.context import ToolContext


def test_sqlite_zeroblob_is_cut_or_refused_without_materialising(tmp_path):
    import sqlite3

    path = tmp_path / "z.sqlite"
    sqlite3.connect(path).close()
    src = open_source(f"sqlite:///{path}")
    try:
        ctx = ToolContext(sources=SourceRegistry([src]))
        from flexsql.errors import FlexSQLError

        try:
            out = run_query(ctx, RunQuery(sql="SELECT zeroblob(500000000) AS z"))
        except FlexSQLError as exc:
            assert "too big" in str(exc) or "cell" in str(exc)
        else:
            assert out.row_count == 1 and "rows 1-0" not in out.to_text()
    finally:
        src.close()


def _latin1_named(path) -> None:
    """A SQLite file with a table whose name is the Latin-1 bytes of 'café' (not UTF-8), as old tools
    wrote them; SQL from Python cannot name it, so the name is written into the schema directly."""
    import sqlite3

    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE cafe (id INTEGER, name TEXT)")
    conn.execute("INSERT INTO cafe VALUES (1, 'espresso')")
    conn.execute("CREATE TABLE ok (x INTEGER)")
    conn.commit()
    conn.execute("PRAGMA writable_schema = ON")
    bad = b"caf\xe9"
    conn.execute(
        "UPDATE sqlite_master SET name = CAST(? AS TEXT), tbl_name = CAST(? AS TEXT), sql = CAST(? AS TEXT) "
        "WHERE name = 'cafe'",
        (bad, bad, b'CREATE TABLE "' + bad + b'" (id INTEGER, name TEXT)'),
    )
    conn.commit()
    conn.close()


def test_a_table_named_in_latin1_is_described_and_its_refusal_explained(tmp_path):
    """Was: listed with "0 cols" (its name was read with U+FFFD in place of the byte, which names no
    table) and queries failed with a bare "no such table" (issue 30, item 13). Now its columns are
    listed, shown as caf<E9>, and naming it says why no SQL can and what to do."""
    import json
    import subprocess
    import sys

    from tests.support.mcp_support import server_env

    path = tmp_path / "latin.sqlite"
    _latin1_named(path)

    def call(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-P", "-m", "flexsql.server", "call", *args, "--db", f"sqlite:///{path}"],
            capture_output=True,
            text=True,
            timeout=120,
            env=server_env(),
        )

    listed = call("list_tables")
    assert listed.returncode == 0, listed.stderr
    line = next(x for x in listed.stdout.splitlines() if "caf" in x)
    assert "caf<E9> 2 cols" in line and "not UTF-8" in line, listed.stdout
    described = call("describe_table", "table=caf<E9>", "--json")
    assert [c["name"] for c in json.loads(described.stdout)["columns"]] == ["id", "name"], described.stdout
    queried = call("run_query", 'sql=SELECT * FROM "caf<E9>"')
    assert queried.returncode != 0 and "no such table: caf<E9>" in queried.stderr, queried.stderr
    assert "not UTF-8 (bytes 63 61 66 e9" in queried.stderr and "RENAME" in queried.stderr, queried.stderr
    found = call("find_values", "text=espresso")
    assert found.returncode == 0 and "Traceback" not in found.stderr, found.stderr
