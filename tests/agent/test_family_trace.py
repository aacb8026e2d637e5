"""A family reference in the agent's SQL (issue 20): the trace records the union of shards that ran,
for the implementer's run_query calls and for the candidate program, while the answer shows the
SQL as the model wrote it. A real run: the OpenAI-compatible backend against the loopback stub, over
the small web-analytics warehouse in DuckDB."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flexsql.tools.engines import SourceRegistry, open_source
from tests.support.agent_support import Shop, StageScript, ask, program, tool_reply
from tests.support.openai_stub import OpenAIStub, StubRequest
from tests.support.warehouse import ROWS_2017, SHARDS_2017, warehouse_url

pytestmark = pytest.mark.anyio

FAMILY_SQL = "SELECT count(*) AS sessions FROM ga_sessions_2017*"


def _implement(req: StubRequest) -> object:
    if not any(m.get("role") == "tool" for m in req.messages):
        return tool_reply(("run_query", {"sql": FAMILY_SQL}))
    return program(FAMILY_SQL)


async def test_the_trace_records_the_union_a_family_reference_ran_as(tmp_path: Path) -> None:
    with warehouse_url("duckdb", tmp_path) as url:
        shop = Shop(url, 0, 0, 0, [], SourceRegistry([open_source(url, name="ga")]))
        script = StageScript(plans={"count the 2017 sessions": FAMILY_SQL}, link_tables=["ga_sessions_2017*"])
        script.on["implement"] = _implement
        trace = tmp_path / "trace.jsonl"
        try:
            with OpenAIStub(script) as stub:
                answer = await ask(
                    shop, stub, "How many sessions were there in 2017?", agent={"plans": 1}, trace_path=trace
                )
        finally:
            shop.close()
    assert answer.sql == FAMILY_SQL and answer.rows == [[ROWS_2017]]  # the answer shows the model's SQL
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    call = next(e for e in events if e["kind"] == "tool_call" and e["tool"] == "run_query")
    assert call["arguments"]["sql"] == FAMILY_SQL
    result = next(e for e in events if e["kind"] == "tool_result" and e["call_id"] == call["call_id"])
    runs = [e for e in events if e["kind"] == "expanded_sql"]
    assert len(runs) == 1 and result.get("expanded_sql"), "the trace does not say what ran"
    ran = runs[0]
    candidate = next(e for e in events if e["kind"] == "candidate")
    assert ran["result_id"] == candidate["result_id"] and candidate["code"] == FAMILY_SQL
    for expanded in (result["expanded_sql"], ran["sql"]):
        assert expanded.count("UNION ALL") == len(SHARDS_2017) - 1
        assert all(shard in expanded for shard in SHARDS_2017) and "ga_sessions_2017*" not in expanded
    assert ran["families"] == [f"ga_sessions_2017* read 3 table(s): {SHARDS_2017[0]} … {SHARDS_2017[-1]}"]
