"""A replay of a real model's run (issue 18, relay run 1): the replies it gave on the demo database
to "top 5 categories by net revenue shipped to France in 2024", in order, sent back through the
loopback stub against a small demo database. What that model needed must keep reaching it: the
stored spellings classify found reach link and plan (once), the second evaluator can compare with the
first candidate's result id, every request names only the tools it offers, and the answer keeps
both readings, choosing the likelier one over the candidate judged right only for the other."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flexsql.agent.service import ask_question
from flexsql.demo_db.build import build_demo_db
from flexsql.server.sessions import SessionState
from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.toolbox import TOOLS
from tests.support.agent_support import first_user_text, requests_for, settings_for
from tests.support.openai_stub import OpenAIStub, Reply, StubRequest

pytestmark = pytest.mark.anyio

RECORDING = json.loads((Path(__file__).parents[1] / "fixtures" / "relay_demo_france.json").read_text())
TOOL_NAME = re.compile(
    r"\b(" + "|".join(sorted((t.name for t in TOOLS.available(True)), key=len)[::-1]) + r")\b"
)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SourceRegistry]:
    path = build_demo_db(tmp_path_factory.mktemp("demo") / "demo.duckdb", scale=0.1)
    registry = SourceRegistry([open_source("duckdb:///" + path.as_posix().lstrip("/"), name="demo")])
    yield registry
    registry.close()


class Replay:
    """Answers each request with the recorded reply, checking it is the stage the model answered."""

    def __init__(self) -> None:
        self.turns: list[dict[str, Any]] = list(RECORDING["turns"])

    def __call__(self, req: StubRequest) -> Reply:
        turn = self.turns.pop(0)
        assert req.stage == turn["stage"], (
            f"the run asked {req.stage} where the model answered {turn['stage']}"
        )
        reply = turn["reply"]
        calls = [(c["name"], c.get("arguments", {})) for c in reply.get("tool_calls") or []]
        return Reply(content=reply.get("content"), tool_calls=calls)


async def test_the_recorded_run_replays_with_findings_siblings_and_readings(demo: SourceRegistry) -> None:
    replay = Replay()
    with OpenAIStub(replay) as stub:
        settings = settings_for(
            stub, agent={"plans": RECORDING["plans"], "plan_concurrency": 1, "tool_rounds": 6}
        )
        answer = await ask_question(
            SessionState(demo, settings).new_context(), settings, RECORDING["question"], python=True
        )
    assert not replay.turns, f"{len(replay.turns)} recorded replies were not asked for"
    assert answer.status == "answered", answer.reason
    assert (answer.usage.model_calls, answer.usage.tool_calls) == (14, 13)
    for req in stub.requests:  # what flexsql says names only the tools the request offers
        text = "\n".join(str(m.get("content")) for m in req.messages if m["role"] in ("system", "user"))
        assert set(TOOL_NAME.findall(text)) <= set(req.tools), req.stage
    link = requests_for(stub, "link")[0]
    # classify's finding and the table it described are on the thread link reads, once
    assert link.text.count("'France', 'FRANCE', 'france', 'France '") == 1
    assert "main.order_status" in link.text
    assert "R Returned" in requests_for(stub, "implement")[0].text  # the plan stage's finding
    first = next(c for c in answer.candidates if c.plan_index == 0)
    second_eval = first_user_text(requests_for(stub, "evaluate")[2])
    assert f"result_id {first.result_id}" in second_eval
    chosen = next(r for r in answer.by_reading if r.chosen)
    assert chosen.rank == 1 and first.candidate_id in chosen.candidates
    other = next(r for r in answer.by_reading if r.rank == 2)
    assert other.candidates and "if you meant this" in answer.to_text()
    assert next(c for c in answer.candidates if c.plan_index == 1).verdicts == ["alternative"]
