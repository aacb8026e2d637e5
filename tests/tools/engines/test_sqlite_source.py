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
