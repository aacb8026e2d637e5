"""Arrow I/O between the server and the sandbox (tools/sandbox/arrow_io.py)."""

from __future__ import annotations

from flexsql.tools.sandbox.arrow_io import rows_from_table, table_from_rows


def test_mixed_type_columns_travel_as_text():
    table = table_from_rows(["v"], [(1,), ("x",), (None,)])
    assert rows_from_table(table) == [("1",), ("x",), (None,)]
