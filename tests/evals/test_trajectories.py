"""Trajectories to train on (issue 32, 3): from a real builtin evaluation against the loopback
OpenAI-compatible stub, each task's model conversations rebuild as valid OpenAI chats — every tool
call answered by its tool message, the thread's leaves as the model saw them — with each tool call's
outcome and every scorer's score; the API key never appears."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flexsql.config import Settings
from flexsql.evals.trajectories import SCHEMA, trajectory
from tests.support.report_runs import TASKS, builtin_run


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return builtin_run(tmp_path_factory.mktemp("trajectories"))


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line]


def _valid_chat(messages: list[dict[str, Any]]) -> None:
    """OpenAI chat format: a system message, then user/assistant turns, each assistant tool call
    answered once by a tool message before the next assistant or user message."""
    assert messages[0]["role"] == "system" and messages[1]["role"] == "user"
    assert messages[-1]["role"] == "assistant"
    pending: list[str] = []
    for prev, message in zip(messages, messages[1:], strict=False):
        role = message["role"]
        assert role in ("user", "assistant", "tool"), role
        if role == "tool":
            assert message["tool_call_id"] in pending, message
            pending.remove(message["tool_call_id"])
            continue
        assert not pending, f"calls {pending} left unanswered before a {role} message"
        assert role != prev["role"] or role == "tool", f"two {role} messages in a row"
        if role == "assistant":
            pending = [c["id"] for c in message.get("tool_calls") or []]
    assert not pending


def test_each_task_becomes_one_record_of_valid_chats_with_outcomes_and_scores(run: Path) -> None:
    records = _records(run)
    assert len(records) == len(TASKS)
    lines = [trajectory(r, Path(r["trace"]) if r.get("trace") else None, Settings()).line() for r in records]
    loaded = [json.loads(line) for line in lines]
    assert all(t["schema"] == SCHEMA for t in loaded)
    by_id = {t["instance_id"]: t for t in loaded}
    right = by_id["0"]  # answered right, K=2: a leaf per plan
    assert (
        right["score"] == 1
        and right["scores"]["ex"] == 1
        and set(right["scores"]) >= {"ex", "spider2", "rex"}
    )
    assert len(right["conversations"]) >= 2 and right["complete"]
    names = [d["function"]["name"] for d in right["tools"]]
    assert "run_query" in names
    assert all("source" not in d["function"]["parameters"].get("properties", {}) for d in right["tools"])
    for conversation in right["conversations"]:
        messages = conversation["messages"]
        _valid_chat(messages)
        assert messages[1]["content"].startswith("Database: the flexsql source")
        stages = [s["stage"] for s in conversation["steps"]]
        assert stages[:3] == ["classify", "link", "plan"] and "implement" in stages
        for step in conversation["steps"]:  # each step starts at its instruction
            assert f"[{step['stage']}]" in messages[step["start"]]["content"]
    # the two plans share the trunk and differ after it, as the requests did
    first, second = right["conversations"][:2]
    plan_at = first["steps"][2]["start"]
    assert first["messages"][: plan_at + 2] == second["messages"][: plan_at + 2]
    assert first["messages"][plan_at + 2 :] != second["messages"][plan_at + 2 :]
    # link's two describe_table calls: one ran, one named a table that does not exist
    outcomes = {(o["tool"], o["outcome"], o["error"]) for o in right["tool_calls"]}
    assert ("describe_table", "ok", None) in outcomes
    assert any(tool == "describe_table" and outcome == "error" and error for tool, outcome, error in outcomes)
    assert by_id["1"]["score"] == 0  # answered in the wrong order: scored as the results file says
    repaired = by_id["2"]
    assert any("repair" in [s["stage"] for s in c["steps"]] for c in repaired["conversations"])


def test_no_key_reaches_a_trajectory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model that echoes the bearer key it was sent (in classify's reply): the trace scrubs it, so the
    trajectories hold the mask and never the key."""
    key = "sk-trajectory-" + "k3y" * 12
    monkeypatch.setenv("TRAJ_TEST_KEY", key)
    from tests.support import report_runs

    real_eval, real_script = report_runs.run_eval, report_runs.DebugScript

    class Echoing(real_script):  # type: ignore[misc, valid-type]
        def __call__(self, request: Any) -> Any:
            if request.stage == "classify":
                return {"type": "answerable", "reason": request.headers.get("authorization", "")}
            return super().__call__(request)

    monkeypatch.setattr(
        report_runs, "run_eval", lambda *args: real_eval(*args, "--api-key-env", "TRAJ_TEST_KEY")
    )
    monkeypatch.setattr(report_runs, "DebugScript", Echoing)
    out = builtin_run(tmp_path)
    lines = [
        trajectory(r, Path(r["trace"]) if r.get("trace") else None, Settings()).line() for r in _records(out)
    ]
    assert any("Bearer ***" in line for line in lines)  # the echo happened, masked
    assert not any(key in line or "k3yk3y" in line for line in lines)


def test_flexsql_eval_writes_the_trajectories_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support import report_runs

    path = tmp_path / "train" / "trajectories.jsonl"
    real_eval = report_runs.run_eval
    monkeypatch.setattr(report_runs, "run_eval", lambda *args: real_eval(*args, "--trajectories", path))
    builtin_run(tmp_path)
    lines = path.read_text().splitlines()
    assert len(lines) == len(TASKS)
    loaded = [json.loads(line) for line in lines]
    assert sorted(t["instance_id"] for t in loaded) == sorted(str(i) for i in range(len(TASKS)))
    for t in loaded:
        for conversation in t["conversations"]:
            _valid_chat(conversation["messages"])
    assert not list(path.parent.glob(".*.tmp"))
