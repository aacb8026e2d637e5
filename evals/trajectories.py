"""Trajectories to train on (`flexsql eval --trajectories FILE`): per task, the model conversations of
the run as the model saw them, rebuilt from the task's trace, in the OpenAI chat format SFT and RL
trainers read — with the final answer, every scorer's score and each tool call's outcome.

A question is one growing thread (docs/contract.md): classify, link and plan extend the trunk, and
each plan works on a fork of it. So a task's conversations are the thread's leaves: every request that
no later request extends, with the reply it got. Each is a complete chat — the system text, the
tools, then user / assistant / tool messages — and the shared trunk appears in each of them, as it did
in the requests. `steps` says where each step's instruction starts in `messages`.

The trace holds each request as the one it extends (`after`) and the messages added since
(`new_messages`), and the system text and tool names once (`prefix`); the tool definitions are
rebuilt from the settings the run used. Secrets never reach a trace (flexsql.agent.trace), so they
never reach a trajectory. A trace cut at [agent] trace_bytes yields the conversations it still holds,
marked `complete: false`.

The record (one JSON line per task; `schema` names this version):

    {"schema": "flexsql.trajectory/1", "instance_id": str, "question": str, "db": str | null,
     "status": str | null, "answer": {"sql": str | null, "rows": int | null, "text": str | null},
     "scores": {scorer: 0 | 1}, "similarities": {scorer: float}, "score": 0 | 1, "scorer": str,
     "tools": [OpenAI function definitions],
     "conversations": [{"messages": [chat messages], "steps": [{"stage": str, "start": int}]}],
     "tool_calls": [{"id": str, "tool": str, "stage": str, "outcome": "ok" | "empty" | "error",
                     "error": str | null}],
     "complete": bool}
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from flexsql.agent.context import tool_definitions
from flexsql.config import Settings

SCHEMA = "flexsql.trajectory/1"
_ERROR_KIND = re.compile(r"^([a-z_]+):")
_ROWS = re.compile(r"^r\d+: (\d+)\+? rows?\b")


class Step(BaseModel):
    stage: str
    start: int  # index in `messages` of the message holding the step's instruction


class Conversation(BaseModel):
    messages: list[dict[str, Any]]
    steps: list[Step]


class ToolOutcome(BaseModel):
    id: str
    tool: str
    stage: str
    outcome: Literal["ok", "empty", "error"]
    error: str | None = None  # the error's kind (not_found, engine_error, timeout, …)


class Trajectory(BaseModel):
    schema_: str = SCHEMA
    instance_id: str
    question: str
    db: str | None = None
    status: str | None = None
    answer: dict[str, Any] = {}
    scores: dict[str, int] = {}
    similarities: dict[str, float] = {}
    score: int = 0
    scorer: str = ""
    tools: list[dict[str, Any]] = []
    conversations: list[Conversation] = []
    tool_calls: list[ToolOutcome] = []
    complete: bool = True

    def line(self) -> str:
        data = self.model_dump(mode="json")
        data = {"schema": data.pop("schema_"), **data}
        return json.dumps(data, ensure_ascii=False)


def _outcome(text: str, error: bool) -> tuple[Literal["ok", "empty", "error"], str | None]:
    if error:
        kind = _ERROR_KIND.match(text)
        return "error", kind.group(1) if kind else "error"
    rows = _ROWS.match(text)
    return ("empty" if rows and rows.group(1) == "0" else "ok"), None


def _message(message: dict[str, Any]) -> dict[str, Any]:
    """A chat message as a trainer reads it: reasoning, where it was sent, as `reasoning_content`."""
    out = {k: v for k, v in message.items() if k not in ("reasoning", "reasoning_content")}
    thought = message.get("reasoning_content") or message.get("reasoning")
    if thought:
        out["reasoning_content"] = thought
    return out


def _without_reasoning(message: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k != "reasoning_content"}


def _reply_message(reply: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
    calls = reply.get("tool_calls") or []
    if calls:
        message["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls
        ]
    if reply.get("reasoning"):
        message["reasoning_content"] = reply["reasoning"]
    return message


def conversations(events: list[dict[str, Any]]) -> tuple[list[Conversation], list[str], bool]:
    """The thread's leaves as complete chats, the tool names the requests listed, and whether every
    request could be rebuilt."""
    system = ""
    tools: list[str] = []
    requests: dict[str, dict[str, Any]] = {}
    replies: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    complete = True
    for event in events:
        kind = event.get("kind")
        if kind == "prefix":
            system, tools = str(event.get("system") or ""), list(event.get("tools") or [])
        elif kind == "request" and "new_messages" in event:
            requests[event["call"]] = event
            order.append(event["call"])
        elif kind == "reply" and "call" in event:
            replies[event["call"]] = event
        elif kind == "trace_cut" or event.get("cut"):
            complete = False
    built: dict[str, tuple[list[dict[str, Any]], list[Step]]] = {}
    extended = {r.get("after") for r in requests.values()}
    for call in order:
        event = requests[call]
        after = event.get("after")
        if after is not None and after not in built:
            complete = False  # the request it extends was cut from the trace
            continue
        messages, steps = ([], []) if after is None else (list(built[after][0]), list(built[after][1]))
        start = len(messages)
        new = [_message(m) for m in event["new_messages"]]
        if any(m.get("role") == "user" for m in new):
            # reasoning leaves the thread at a new user message (agent/context.py): as it was sent
            messages = [_without_reasoning(m) for m in messages]
        messages += new
        stage = str(event.get("stage"))
        # a step starts at the user message holding its instruction (`[repair] …`; the opening holds
        # classify's): two repairs in a row are two steps
        starts = [
            i for i, m in enumerate(new) if m.get("role") == "user" and f"[{stage}]" in str(m.get("content"))
        ]
        if starts:
            steps.append(Step(stage=stage, start=start + starts[-1]))
        built[call] = (messages, steps)
    out = []
    for call in order:
        if call in extended or call not in built or call not in replies:
            continue
        messages, steps = built[call]
        chat = [{"role": "system", "content": system}, *messages, _reply_message(replies[call])]
        out.append(Conversation(messages=chat, steps=[Step(stage=s.stage, start=s.start + 1) for s in steps]))
    return out, tools, complete


def trajectory(
    record: dict[str, Any], trace: Path | None, settings: Settings, python: bool = True
) -> Trajectory:
    """One task's trajectory: its results.jsonl `record` and its trace (None: no model conversation)."""
    events: list[dict[str, Any]] = []
    if trace is not None and trace.exists():
        for line in trace.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
    chats, names, complete = conversations(events)
    stage_of: dict[str, str] = {}
    for event in events:
        if event.get("kind") == "reply":
            for call in event.get("tool_calls") or []:
                stage_of[str(call.get("id"))] = str(event.get("stage"))
    outcomes = []
    for event in events:
        if event.get("kind") == "tool_result":
            outcome, kind = _outcome(str(event.get("text") or ""), bool(event.get("error")))
            call_id = str(event.get("call_id"))
            outcomes.append(
                ToolOutcome(
                    id=call_id,
                    tool=str(event.get("tool")),
                    stage=stage_of.get(call_id, ""),
                    outcome=outcome,
                    error=kind,
                )
            )
    scores = {str(k): int(v) for k, v in (record.get("scores") or {}).items() if isinstance(v, int | float)}
    rows = (record.get("results") or {}).get("pred_rows")
    return Trajectory(
        instance_id=str(record.get("instance_id")),
        question=str(record.get("question") or ""),
        db=record.get("db"),
        status=record.get("status"),
        answer={"sql": record.get("sql"), "rows": rows, "text": record.get("answer_text")},
        scores=scores,
        similarities=dict(record.get("similarities") or {}),
        score=int(record.get("score") or 0),
        scorer=str(record.get("scorer") or ""),
        tools=tool_definitions(settings, names, python) if names else [],
        conversations=chats,
        tool_calls=outcomes,
        complete=complete and bool(chats) == bool(events),
    )


def write_trajectories(results: Path, path: Path, settings: Settings | None) -> int:
    """One line per task of `results` (an evaluation's results.jsonl) into `path`, written whole to a
    temporary file first (a failure leaves no half file); returns the number of tasks."""
    settings = settings or Settings()
    records = []
    for line in results.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as out:
        for record in records:
            trace = record.get("trace")
            out.write(trajectory(record, Path(trace) if trace else None, settings).line() + "\n")
    tmp.replace(path)
    return len(records)
