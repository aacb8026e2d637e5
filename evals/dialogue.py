"""Evaluation of dialogues (CoSQL / SParC): turn types, statuses, and the figures those papers report.

Scoring, per user turn of a dialogue task file:
- a turn whose gold system turn carries SQL is a *SQL turn*: scored by EX as any task (the expected
  status is `answered`). The gold decides: the few CoSQL turns labelled `ambiguous` whose system
  answered with SQL are SQL turns.
- a turn without gold SQL labelled `ambiguous`, `unanswerable` or `improper` is a *status turn*:
  right when the runner's status is `needs_clarification`, `unanswerable` or `reply` respectively
  (`EXPECTED_STATUS`). SQL given for it does not count: the turn asked for no query.
- other turns (an `answerable` label without gold SQL, unlabelled turns) are recorded, not scored.

The returned status comes from `Prediction.status`. A command runner reports it in
`status.json` (`{"status": "needs_clarification", "clarifying_question": "…"}`) or `status.txt`
in its output folder, or as a `status: <value>` line (or a JSON object with `"status"`) on stdout.
A runner that reports none is read as `answered` when it gave SQL or a CSV, `failed` otherwise.

Context: the turns of one dialogue run in order, one after the other, in one worker (dialogues run
concurrently with each other); a resumed run re-runs a dialogue from its first turn when any of its
turns is unfinished, so a runner that keeps state sees the whole dialogue again. Every turn's
`Task` carries `dialogue_index`, `turn_index` and `history` (the earlier user questions); a runner
that keeps a conversation per dialogue uses `conversation_id(task)` as its id and starts a new
conversation when `turn_index == 0`. The command runner writes the earlier questions to
`history.json` (questions only: the earlier turns' gold SQL and labels stay out of the agent's view).

Summary (`dialogue_summary`): per-type accuracy, the confusion matrix expected vs returned status,
question-level accuracy (every scored turn) and interaction-level accuracy (a dialogue is right when
all of its scored turns are).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from flexsql.evals.tasks import Task

STATUSES = ("answered", "needs_clarification", "unanswerable", "reply", "failed")
EXPECTED_STATUS = {"ambiguous": "needs_clarification", "unanswerable": "unanswerable", "improper": "reply"}
_STATUS_LINE = re.compile(r"^\s*status\s*[:=]\s*([a-z_-]+)\s*$", re.IGNORECASE | re.MULTILINE)


def conversation_id(task: Task) -> str:
    """The conversation a runner keeps for the dialogue this turn belongs to."""
    return (
        f"dialogue-{task.dialogue_index}" if task.dialogue_index is not None else f"task-{task.instance_id}"
    )


def expected_status(task: Task) -> str | None:
    """`answered` for SQL turns, the status a non-SQL turn asks for, None when the turn is not scored."""
    if task.benchmark != "dialogue":
        return "answered" if task.scored else None
    if task.scored:
        return "answered"
    return EXPECTED_STATUS.get(task.turn_type or "")


def is_status_turn(task: Task) -> bool:
    return task.benchmark == "dialogue" and not task.scored and expected_status(task) is not None


def returned_status(status: str | None, present: bool, error: str | None) -> str:
    if status:
        return status
    return "answered" if present else "failed"


def read_status(out_dir: Path, stdout_path: Path | None = None) -> str | None:
    """A command runner's status: status.json / status.txt in its output folder, else stdout."""
    for name in ("status.json", "status.txt"):
        path = Path(out_dir) / name
        try:
            text = path.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            continue
        if not text:
            continue
        if text.startswith("{"):
            try:
                value = json.loads(text).get("status")
            except (ValueError, AttributeError):
                value = None
        else:
            value = text.splitlines()[0]
        if isinstance(value, str) and value.strip():
            return _normal(value)
    if stdout_path is None:
        return None
    try:
        text = Path(stdout_path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    found = _STATUS_LINE.findall(text)
    if found:
        return _normal(found[-1])
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict) and isinstance(data.get("status"), str):
                return _normal(data["status"])
    return None


def _normal(value: str) -> str:
    return value.strip().lower().replace("-", "_").replace(" ", "_")


def status_record(task: Task, status: str | None, present: bool, error: str | None) -> dict[str, Any]:
    """Score a status turn: the record fields the harness adds (score, reason, category)."""
    expected = expected_status(task) or "?"
    got = returned_status(status, present, error)
    ok = got == expected
    if ok:
        reason = f"{task.turn_type} turn answered with status {got}"
    else:
        reason = f"{task.turn_type} turn: expected status {expected}, got {got}" + (
            f" ({error})" if error and got == "failed" else ""
        )
    return {
        "score": int(ok),
        "reason": reason,
        "category": "ok" if ok else "wrong_status",
        "expected_status": expected,
        "returned_status": got,
    }


def work_units(tasks: list[Task], finished: set[str]) -> list[list[Task]]:
    """What the harness runs as one unit: a whole dialogue (in turn order) when any of its turns is
    unfinished, each other task on its own."""
    units: list[list[Task]] = []
    dialogues: dict[int, list[Task]] = {}
    for task in tasks:
        if task.benchmark == "dialogue" and task.dialogue_index is not None:
            if task.dialogue_index not in dialogues:
                dialogues[task.dialogue_index] = []
                units.append(dialogues[task.dialogue_index])
            dialogues[task.dialogue_index].append(task)
        elif task.instance_id not in finished:
            units.append([task])
    out = []
    for unit in units:
        unit.sort(key=lambda t: t.turn_index or 0)
        if any(t.instance_id not in finished for t in unit):
            out.append(unit)
    return out


# -- summary ---------------------------------------------------------------------------------------


def dialogue_summary(records: list[dict[str, Any]], tasks: list[Task], scorer: str) -> dict[str, Any] | None:
    """Per-type accuracy, confusion matrix, question- and interaction-level accuracy; None when the
    task file has no dialogues."""
    dialogue_tasks = [t for t in tasks if t.benchmark == "dialogue"]
    if not dialogue_tasks:
        return None
    by_id = {r["instance_id"]: r for r in records}
    per_type: dict[str, dict[str, Any]] = defaultdict(lambda: {"turns": 0, "scored": 0, "passed": 0})
    confusion: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    interactions: dict[int, list[int]] = defaultdict(list)
    questions = {"scored": 0, "passed": 0, "not_scored": 0, "not_run": 0}
    for t in dialogue_tasks:
        kind = t.turn_type or "unlabelled"
        row = per_type[kind]
        row["turns"] += 1
        expected = expected_status(t)
        r = by_id.get(t.instance_id)
        if expected is None or (r is not None and r.get("outcome", r.get("status")) == "not_scored"):
            questions["not_scored"] += 1
            continue
        if r is None:
            questions["not_run"] += 1
            interactions[t.dialogue_index or 0].append(0)
            continue
        score = int(r.get("scores", {}).get(scorer, r.get("score", 0))) if r.get("evaluated") else 0
        row["scored"] += 1
        row["passed"] += score
        questions["scored"] += 1
        questions["passed"] += score
        interactions[t.dialogue_index or 0].append(score)
        got = r.get("returned_status") or (
            "answered" if r.get("sql") or r.get("prediction_origin") else "failed"
        )
        confusion[expected][got] += 1
    for row in per_type.values():
        row["accuracy"] = _pct(row["passed"], row["scored"])
    all_right = sum(1 for scores in interactions.values() if scores and all(scores))
    return {
        "per_type": dict(sorted(per_type.items())),
        "confusion": {e: dict(sorted(g.items())) for e, g in sorted(confusion.items())},
        "question": {**questions, "accuracy": _pct(questions["passed"], questions["scored"])},
        "interaction": {
            "dialogues": len(interactions),
            "passed": all_right,
            "accuracy": _pct(all_right, len(interactions)),
        },
    }


def _pct(n: int, d: int) -> float | None:
    return round(100.0 * n / d, 2) if d else None


def _fmt(p: float | None) -> str:
    return "–" if p is None else f"{p:.2f}%"


def _columns(d: dict[str, Any]) -> list[str]:
    seen = {g for row in d["confusion"].values() for g in row}
    return [s for s in STATUSES if s in seen] + sorted(seen - set(STATUSES))


def markdown(d: dict[str, Any]) -> list[str]:
    q, i = d["question"], d["interaction"]
    lines = [
        "",
        "## Dialogues",
        "",
        f"- question-level accuracy: **{_fmt(q['accuracy'])}** ({q['passed']}/{q['scored']} scored turns; "
        f"{q['not_scored']} not scored, {q['not_run']} not run)",
        f"- interaction-level accuracy: **{_fmt(i['accuracy'])}** ({i['passed']}/{i['dialogues']} dialogues "
        "with every scored turn right)",
        "",
        "| turn type | turns | scored | passed | accuracy |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for kind, row in d["per_type"].items():
        lines.append(
            f"| {kind} | {row['turns']} | {row['scored']} | {row['passed']} | {_fmt(row['accuracy'])} |"
        )
    cols = _columns(d)
    if cols:
        lines += [
            "",
            "Expected status (rows) vs returned status (columns):",
            "",
            "| expected \\ returned | " + " | ".join(cols) + " |",
            "| --- |" + " ---: |" * len(cols),
        ]
        for expected, row in d["confusion"].items():
            lines.append(f"| {expected} | " + " | ".join(str(row.get(c, 0)) for c in cols) + " |")
    return lines


def html(d: dict[str, Any]) -> str:
    import html as h

    e = h.escape
    q, i = d["question"], d["interaction"]
    out = [
        "<h2>Dialogues</h2><div class=cards>",
        f"<div class=card><div class=muted>question-level accuracy</div><div class=big>{_fmt(q['accuracy'])}</div>"
        f"<div class=muted>{q['passed']} / {q['scored']} scored turns</div></div>",
        f"<div class=card><div class=muted>interaction-level accuracy</div><div class=big>{_fmt(i['accuracy'])}</div>"
        f"<div class=muted>{i['passed']} / {i['dialogues']} dialogues</div></div></div>",
        "<table><tr><th>turn type</th><th class=n>turns</th><th class=n>scored</th><th class=n>passed</th>"
        "<th class=n>accuracy</th></tr>",
    ]
    for kind, row in d["per_type"].items():
        out.append(
            f"<tr><td>{e(kind)}</td><td class=n>{row['turns']}</td><td class=n>{row['scored']}</td>"
            f"<td class=n>{row['passed']}</td><td class=n>{_fmt(row['accuracy'])}</td></tr>"
        )
    out.append("</table>")
    cols = _columns(d)
    if cols:
        out.append(
            "<p class=muted>Expected status (rows) vs returned status (columns)</p><table><tr><th>expected</th>"
            + "".join(f"<th class=n>{e(c)}</th>" for c in cols)
            + "</tr>"
        )
        for expected, row in d["confusion"].items():
            out.append(
                f"<tr><td>{e(expected)}</td>"
                + "".join(f"<td class=n>{row.get(c, 0)}</td>" for c in cols)
                + "</tr>"
            )
        out.append("</table>")
    return "".join(out)
