"""link's request on a warehouse: the schema overview ranked by relevance, so a bound never cuts
the schema the question needs (a 157-schema catalog once lost it past 4,000 characters)."""

from __future__ import annotations

from pathlib import Path

import duckdb

from flexsql.agent.budget import Budget
from flexsql.agent.stages.chat import Run
from flexsql.agent.stages.link import known_tables, schema_overview, search_hits
from flexsql.agent.trace import Trace
from flexsql.config import Settings
from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.runtime.context import ToolContext


def _warehouse(tmp_path: Path) -> str:
    path = tmp_path / "wh.duckdb"
    con = duckdb.connect(str(path))
    for i in range(160):
        con.execute(f"CREATE SCHEMA archive_department_{i:03d}")
        con.execute(f"CREATE TABLE archive_department_{i:03d}.ledger_{i} (id INTEGER, amount INTEGER)")
    con.execute("CREATE SCHEMA zz_enrollment")
    con.execute(
        "CREATE TABLE zz_enrollment.students (student_id INTEGER, state VARCHAR, degree_program VARCHAR)"
    )
    con.execute("INSERT INTO zz_enrollment.students VALUES (1, 'NorthCarolina', NULL)")
    con.close()
    return f"duckdb:///{path}"


def test_the_schema_holding_the_search_hits_comes_first_and_survives_the_bound(tmp_path: Path) -> None:
    source = open_source(_warehouse(tmp_path), name="wh")
    try:
        settings = Settings()
        run = Run(
            run_id="t",
            question="students without a degree program",
            tools=ToolContext(sources=SourceRegistry([source])),
            settings=settings,
            model_for=lambda stage: None,  # type: ignore[arg-type,return-value]
            trace=Trace("t"),
            budget=Budget(10, 10_000, 60.0),
            source="wh",
            dialect=source.dialect,
        )
        _, ranked = search_hits(run)
        assert ranked and "zz_enrollment" in ranked[0]
        text = schema_overview(run, ranked, max_chars=1_000)
        assert text is not None and len(text) < 1_600
        assert text.splitlines()[0].startswith("zz_enrollment: 1 tables")  # first, not cut at the end
        assert "more schemas, less related to the question" in text
        unranked = schema_overview(run, [], max_chars=1_000)
        assert unranked is not None and "zz_enrollment: 1" not in unranked  # what ranking fixes
    finally:
        source.close()


def test_schemas_of_tables_classify_described_rank_before_the_search_hits(tmp_path: Path) -> None:
    source = open_source(_warehouse(tmp_path), name="wh")
    try:
        run = Run(
            run_id="t",
            question="ledger amounts of department 7",
            tools=ToolContext(sources=SourceRegistry([source])),
            settings=Settings(),
            model_for=lambda stage: None,  # type: ignore[arg-type,return-value]
            trace=Trace("t"),
            budget=Budget(10, 10_000, 60.0),
            source="wh",
            dialect=source.dialect,
        )
        run.notebook.tool(
            "classify", "describe_table", {"table": "zz_enrollment.students"}, "students (table)"
        )
        described, _ = known_tables(run, list(run.notebook.described))
        text = schema_overview(run, [*described, "archive_department_007.ledger_7"], max_chars=1_000)
        assert text is not None
        first, second = text.splitlines()[:2]
        assert first.startswith("zz_enrollment: 1 tables") and second.startswith("archive_department_007:")
    finally:
        source.close()
