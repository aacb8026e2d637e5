"""The tasks section of report.html: a place to see why a task failed.

Per task: the question, the gold and predicted SQL side by side, the two results side by side with
the first difference marked (evals/result_diff.py), every scorer's verdict, and the trace as a
timeline — stages, model calls with their tokens (and cached tokens when the endpoint reports them),
tool calls with their time and outcome, candidates and repairs, the evaluator's verdicts and the
selection's reason. Filters by outcome, database and the stage where the task failed; charts of
accuracy by database and of failures by kind, both following the filters.

The page is one file that works offline: the data is a JSON block, the code and style are inline
(report_explorer.js, report_explorer.css next to this module), nothing is fetched. Traces are read
tolerantly: an event kind this module does not know is shown by its name and small fields, a field
that is missing is left out, a line that is not JSON is skipped; a trace is cut to TRACE_ITEMS items
and each text to TEXT_CHARS, so a report of a thousand tasks stays a few megabytes."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from flexsql.evals.scoring import CATEGORY_TEXT

TRACE_ITEMS = 240  # timeline items kept per task (the first 200 and the last 40)
TEXT_CHARS = 240  # of a detail shown in the timeline
SQL_CHARS = 6000  # of each SQL text
QUESTION_CHARS = 2000
_HERE = Path(__file__).resolve().parent

# The stages of the builtin agent in the order they run (agent/pipeline.py); a failed task is filed
# under the stage its trace ended in, or under what happened after the agent answered.
STAGE_ORDER = [
    "setup",
    "runner",
    "knowledge",
    "classify",
    "link",
    "plan",
    "implement",
    "run",
    "repair",
    "evaluate",
    "revise_plan",
    "select",
    "budget",
    "execution",
    "result",
]
STAGE_TEXT = {
    "setup": "setup (database, gold, endpoint)",
    "runner": "no answer from the runner",
    "budget": "agent budget spent",
    "execution": "predicted SQL failed when scored",
    "result": "answered, result wrong",
}
_EXECUTION = {"execution_error", "timeout", "refused", "too_large", "unreadable_prediction", "empty_result"}


def task_explorer(records: list[dict[str, Any]], scorer: str, failure_kind: Any) -> str:
    """The section's HTML: filters, charts, the task list and each task's details (built in the
    browser from the embedded data). `failure_kind(record)` tells model from setup failures."""
    tasks = [task_data(r, scorer, failure_kind(r)) for r in records]
    data = {"scorer": scorer, "tasks": tasks, "stages": STAGE_ORDER, "stage_text": STAGE_TEXT}
    payload = json.dumps(data, ensure_ascii=False, default=str, separators=(",", ":"))
    # inside <script>: "</" would end the element, "<!--" would open a comment
    payload = payload.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    css = (_HERE / "report_explorer.css").read_text(encoding="utf-8")
    js = (_HERE / "report_explorer.js").read_text(encoding="utf-8")
    return (
        f"<style>{css}</style>"
        # errors of this page's scripts, kept where a test (or a reader's console) can find them
        "<script>window.__errors=[];addEventListener('error',function(e){__errors.push(String(e.message))});</script>"
        f'<section id="explorer"><h2>Tasks ({len(tasks)})</h2>'
        '<noscript><p class="warn">The task explorer needs JavaScript; results.jsonl holds the same data.'
        "</p></noscript>"
        '<div id="explorer-root"></div></section>'
        f'<script type="application/json" id="report-data">{payload}</script>'
        f"<script>{js}</script>"
    )


def task_data(record: dict[str, Any], scorer: str, kind: str) -> dict[str, Any]:
    """What the explorer shows of one task."""
    scores = record.get("scores") or {}
    evaluated = bool(record.get("evaluated"))
    passed = evaluated and scores.get(scorer, record.get("score")) == 1
    outcome = _outcome(record, evaluated, passed, kind)
    category = (
        (record.get("categories") or {}).get(scorer) or record.get("category") or record.get("outcome") or ""
    )
    trace = read_trace(record.get("trace"))
    stage = "" if passed or outcome == "not_scored" else failed_stage(record, outcome, category, trace)
    tokens = record.get("tokens") or {}
    return {
        "id": str(record.get("instance_id")),
        "db": str(record.get("db") or "?"),
        "outcome": outcome,
        "category": category,
        "category_text": CATEGORY_TEXT.get(category, category.replace("_", " ")),
        "kind": kind if not passed else "",
        "stage": stage,
        "question": _cut(record.get("question"), QUESTION_CHARS),
        "sql": _cut(record.get("sql"), SQL_CHARS),
        "gold_sql": _cut(record.get("gold_sql"), SQL_CHARS),
        "reason": _cut(record.get("reason"), 1200),
        "status": record.get("status"),
        "scores": scores,
        "similarity": (record.get("similarities") or {}).get("rex"),
        "reasons": {k: _cut(v, 800) for k, v in (record.get("reasons") or {}).items()},
        "latency": (record.get("timings") or {}).get("total_s"),
        "model_calls": record.get("model_calls"),
        "tool_calls": record.get("tool_calls"),
        "tokens": {k: v for k, v in tokens.items() if isinstance(v, int | float)},
        "results": record.get("results"),
        "trace": trace,
    }


def _outcome(record: dict[str, Any], evaluated: bool, passed: bool, kind: str) -> str:
    if passed:
        return "passed"
    if record.get("outcome") == "not_scored":
        return "not_scored"
    if kind == "infrastructure":
        return "setup"
    if evaluated:
        return "wrong"
    return "no_answer"


def failed_stage(record: dict[str, Any], outcome: str, category: str, trace: dict[str, Any] | None) -> str:
    """Where a failed task went wrong: the agent stage its trace ended in when the agent gave no
    answer; `execution` when the answer failed to run; `result` when it ran and was wrong."""
    if outcome == "setup":
        return "setup"
    if outcome == "wrong":
        return "execution" if category in _EXECUTION else "result"
    # no answer
    if trace is None or not trace.get("items"):
        return "runner"
    summary = trace.get("summary") or {}
    if summary.get("budget"):
        return "budget"
    status = record.get("status")
    if status in ("needs_clarification", "unanswerable", "reply"):
        return "classify"
    return str(summary.get("failed_stage") or summary.get("last_stage") or "runner")


def _cut(value: Any, limit: int) -> str | None:
    if value is None:
        return None
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _small(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return _cut(" ".join(text.split()), TEXT_CHARS) or ""


# -- traces ----------------------------------------------------------------------------------------


def read_trace(path: Any) -> dict[str, Any] | None:
    """A task's trace (JSONL, agent/trace.py) as timeline items, or None when there is none."""
    if not path:
        return None
    try:
        text = Path(str(path)).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return {"items": [], "error": f"the trace could not be read: {exc.strerror or exc}", "summary": {}}
    events = []
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a line cut short by a crash
        if isinstance(event, dict):
            events.append(event)
    return timeline(events)


def _usage(usage: Any) -> dict[str, int]:
    """prompt / completion / cached tokens of a reply; `cached_tokens` is optional (also read from
    OpenAI's prompt_tokens_details)."""
    if not isinstance(usage, dict):
        return {}
    out = {}
    for key, name in (("prompt_tokens", "prompt"), ("completion_tokens", "completion")):
        if isinstance(usage.get(key), int | float):
            out[name] = int(usage[key])
    cached = usage.get("cached_tokens")
    if cached is None and isinstance(usage.get("prompt_tokens_details"), dict):
        cached = usage["prompt_tokens_details"].get("cached_tokens")
    if isinstance(cached, int | float):
        out["cached"] = int(cached)
    return out


def timeline(events: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Trace events as timeline items: {t, d (duration), k (kind), s (stage), label, ok, tok, detail,
    repair}. Requests pair with replies by `call`, tool calls with results by `call_id`."""
    items: list[dict[str, Any]] = []
    requests: dict[str, dict[str, Any]] = {}
    tools: dict[str, dict[str, Any]] = {}
    stage = ""
    last_stage = ""
    models: list[str] = []  # named once per trace: items carry the name only when it changes
    item: dict[str, Any] | None
    failed_at = ""
    budget = False
    totals = {"prompt": 0, "completion": 0, "cached": 0}
    cached_seen = False
    for e in events:
        kind = str(e.get("kind") or "?")
        t = e.get("t") if isinstance(e.get("t"), int | float) else None
        s = str(e.get("stage") or "")
        if kind == "stage":
            stage = last_stage = s
            items.append({"t": t, "k": "stage", "s": s, "label": _small(e.get("message") or s)})
        elif kind == "request":
            model = str(e.get("model") or "model")
            if model not in models:
                models.append(model)
            item = {
                "t": t,
                "k": "model",
                "s": s or stage,
                "label": f"model call · {s or stage}" + (f" · {model}" if model != models[0] else ""),
                "ok": None,
                "req": _request_detail(e),
                "call": e.get("call"),
            }
            items.append(item)
            if e.get("call") is not None:
                requests[str(e.get("call"))] = item
        elif kind == "reply":
            item = requests.pop(str(e.get("call")), None)
            if item is None:  # a reply whose request the trace lost
                item = {"t": t, "k": "model", "s": s or stage, "label": f"model call · {s or stage}"}
                items.append(item)
            tok = _usage(e.get("usage"))
            for key, value in tok.items():
                totals[key] += value
            cached_seen = cached_seen or "cached" in tok
            item["tok"] = tok
            elapsed = e.get("elapsed_s")
            if isinstance(elapsed, int | float):
                item["d"] = elapsed
            elif t is not None and item.get("t") is not None:
                item["d"] = round(t - item["t"], 4)
            calls = e.get("tool_calls") or []
            names = [str(c.get("name")) for c in calls if isinstance(c, dict)]
            item["ok"] = e.get("finish_reason") not in ("error", "length")
            item["detail"] = (
                f"asked for {', '.join(names)}"
                if names
                else _small(e.get("content") or e.get("reasoning") or "")
            )
            if e.get("finish_reason"):
                item["label"] += f" · {e.get('finish_reason')}"
        elif kind == "tool_call":
            item = {
                "t": t,
                "k": "tool",
                "s": stage,
                "label": str(e.get("tool") or "tool"),
                "detail": _small(e.get("arguments") or ""),
                "ok": None,
            }
            items.append(item)
            if e.get("call_id") is not None:
                tools[str(e.get("call_id"))] = item
        elif kind == "tool_result":
            item = tools.pop(str(e.get("call_id")), None)
            if item is None:  # refused before it ran (unknown tool, bad arguments)
                item = {"t": t, "k": "tool", "s": stage, "label": str(e.get("tool") or "tool"), "detail": ""}
                items.append(item)
            elif t is not None and item.get("t") is not None:
                item["d"] = round(t - item["t"], 4)
            failed = bool(e.get("error"))
            text = str(e.get("text") or "")
            item["ok"] = not failed
            item["outcome"] = "error" if failed else ("empty" if _empty(text) else "ok")
            item["result"] = _small(text)
        elif kind == "candidate":
            error = e.get("error")
            repaired = e.get("repaired_from")
            plan = e.get("plan_index")
            head = f"candidate {e.get('candidate_id')}" + (
                f" (plan {plan + 1})" if isinstance(plan, int) else ""
            )
            items.append(
                {
                    "t": t,
                    "k": "candidate",
                    "s": "repair" if repaired else "run",  # its program ran (the stage event follows it)
                    "label": head
                    + (f", repair of {repaired}" if repaired else "")
                    + (": failed" if error else f": {e.get('rows')} rows"),
                    "ok": not error,
                    "repair": bool(repaired),
                    "detail": _small(error or e.get("code") or ""),
                }
            )
        elif kind == "verdict":
            verdict = str(e.get("verdict") or "")
            items.append(
                {
                    "t": t,
                    "k": "verdict",
                    "s": "evaluate",
                    "label": f"evaluator: {e.get('candidate')} {verdict}",
                    "ok": verdict in ("ok", "alternative"),
                    "detail": _small(e.get("feedback") or ""),
                }
            )
        elif kind == "selection":
            items.append(
                {
                    "t": t,
                    "k": "selection",
                    "s": "select",
                    "label": f"selected {e.get('chosen') or 'nothing'}",
                    "ok": e.get("chosen") is not None,
                    "detail": _small(e.get("reason") or ""),
                }
            )
        elif kind == "answer":
            items.append(
                {
                    "t": t,
                    "k": "answer",
                    "s": stage,
                    "label": f"answer: {e.get('status')}",
                    "ok": e.get("status") == "answered",
                    "detail": _small(e.get("budget_exhausted") or ""),
                }
            )
        elif kind in (
            "failed",
            "plan_failed",
            "budget",
            "unusable_reply",
            "knowledge_failed",
            "classify_failed",
        ):
            if kind == "failed":
                failed_at = failed_at or stage
            if kind == "budget":
                budget = True
            items.append(
                {
                    "t": t,
                    "k": "problem",
                    "s": s or stage,
                    "label": kind.replace("_", " "),
                    "ok": False,
                    "detail": _small(e.get("error") or e.get("problem") or e.get("exhausted") or ""),
                }
            )
        elif kind == "question":
            pass  # the question is shown above the trace
        elif kind == "prefix":  # the fixed start every request of the question shares
            prefix_tools = e.get("tools")
            count = len(prefix_tools) if isinstance(prefix_tools, list) else 0
            items.append(
                {
                    "t": t,
                    "k": "note",
                    "s": stage,
                    "label": "request prefix",
                    "detail": f"{len(str(e.get('system') or '')):,} characters of system text, {count} tools",
                }
            )
        elif kind == "trace_cut":
            items.append(
                {"t": t, "k": "note", "s": stage, "label": kind.replace("_", " "), "detail": _note(e)}
            )
        else:  # a kind this report does not know yet: its name and small fields
            items.append({"t": t, "k": "other", "s": s or stage, "label": kind, "detail": _note(e)})
    for item in items:
        item.pop("call", None)
    cut = max(0, len(items) - TRACE_ITEMS)
    if cut:
        items = items[:200] + [{"k": "note", "label": f"{cut} items not shown", "t": None}] + items[-40:]
    summary: dict[str, Any] = {
        "last_stage": last_stage,
        "failed_stage": failed_at,
        "budget": budget,
        "models": models,
    }
    summary["tokens"] = {k: v for k, v in totals.items() if k != "cached" or (cached_seen and v)}
    return {"items": items, "summary": summary}


def _request_detail(event: dict[str, Any]) -> str:
    """What a request offered and how much of it an earlier request had sent (a prefix cache's hits)."""
    parts = []
    offered = event.get("tools")
    tools_offered: list[Any] = offered if isinstance(offered, list) else []
    choice = event.get("tool_choice")
    if tools_offered:
        parts.append(
            f"{len(tools_offered)} tools offered" + (f" (tool_choice {choice})" if choice else "")
            if len(tools_offered) > 4
            else "tools: "
            + ", ".join(map(str, tools_offered))
            + (f" (tool_choice {choice})" if choice else "")
        )
    chars, shared = event.get("chars"), event.get("shared_chars")
    if isinstance(chars, int) and chars > 0:
        parts.append(
            f"{chars:,} characters"
            + (f", {shared / chars:.0%} sent before" if isinstance(shared, int) else "")
        )
    return "; ".join(parts)


def _note(event: dict[str, Any]) -> str:
    small = {
        k: v
        for k, v in event.items()
        if k not in ("t", "run", "kind")
        and (isinstance(v, int | float | bool) or (isinstance(v, str) and len(v) < 200))
    }
    return _small(small) if small else ""


def _empty(text: str) -> bool:
    head = text[:200].lower()
    return "0 rows" in head or "no rows" in head or head.startswith("[]")
