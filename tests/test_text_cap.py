"""The text a model reads is capped at limits.output_chars for every tool, wide tables included (a
400-column table used to come back as ~29,000 characters of describe_table / sample_rows text)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flexsql.config import Settings
from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.registry import result_text
from flexsql.tools.toolbox import TOOLS


@pytest.fixture
def wide(tmp_path: Path):  # type: ignore[no-untyped-def]
    import duckdb

    path = tmp_path / "wide.duckdb"
    con = duckdb.connect(str(path))
    cols = ", ".join(f"measurement_column_number_{i} VARCHAR" for i in range(400))
    con.execute(f"CREATE TABLE wide ({cols})")
    con.execute(
        f"INSERT INTO wide SELECT {', '.join(repr(f'value {i} ' * 3) for i in range(400))} FROM range(30)"
    )
    con.close()
    source = open_source(f"duckdb:///{path}", name="wide")
    yield ToolContext(sources=SourceRegistry([source]))
    source.close()


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("describe_table", {"table": "wide"}),
        ("sample_rows", {"table": "wide", "limit": 30}),
        ("run_query", {"sql": "SELECT * FROM wide", "max_rows": 30}),
        ("search_schema", {"query": "measurement column number", "limit": 100}),
    ],
)
def test_text_stays_under_the_cap(wide: ToolContext, tool: str, arguments: dict) -> None:
    for cap in (4000, 1500):
        settings = Settings(limits={"output_chars": cap})
        text = result_text(TOOLS.call(wide, tool, arguments), settings)
        assert len(text) <= cap, (tool, cap, len(text))
        assert text.strip()
