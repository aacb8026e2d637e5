"""Reports of an evaluation: a summary dict (also in summary.json), report.md, and a
self-contained report.html (inline CSS and SVG charts, nothing fetched from the network).

Two denominators everywhere: *evaluated* (tasks with a prediction that reached a verdict — the
official "final score") and *all* (every task in the file, missing predictions count as failures —
the official "real score")."""

from __future__ import annotations

import html
import json
import statistics
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from flexsql.evals import dialogue
from flexsql.evals.scoring import CATEGORY_TEXT, SCORER_NOTES, SCORERS
from flexsql.evals.tasks import Task
from flexsql.paths import write_private

# Failures of the setup, not of the answer (database not found, gold SQL failed, runner crashed): a
# resumed run does these tasks again instead of keeping their 0.
INFRASTRUCTURE = {"no_database", "runner_error"}
# What the report counts as the setup's failure rather than the model's: the above, and a missing gold
# or an endpoint / server that failed (flexsql.errors codes the builtin runner records).
SETUP_CATEGORIES = INFRASTRUCTURE | {"no_gold", "model_error", "config", "unavailable", "busy", "internal"}


def infrastructure_failure(record: dict[str, Any]) -> bool:
    if record.get("outcome") == "gold_error" or record.get("category") in INFRASTRUCTURE:
        return True
    return any(c in INFRASTRUCTURE for c in (record.get("categories") or {}).values())


def failure_kind(record: dict[str, Any]) -> str:
    """`infrastructure` (the database, gold, runner or endpoint failed) or `model` (a wrong answer)."""
    if infrastructure_failure(record) or record.get("category") in SETUP_CATEGORIES:
        return "infrastructure"
    return "model"


def wilson_interval(passed: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """The 95% Wilson score interval of an accuracy, in percent (it stays inside 0-100 and behaves at
    small n and at 0 or 100%, where the normal approximation does not)."""
    if n <= 0:
        return None
    p = passed / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    return round(100 * max(0.0, centre - half), 2), round(100 * min(1.0, centre + half), 2)


def _pct(n: int, d: int) -> float | None:
    return round(100.0 * n / d, 2) if d else None


def summarize(
    records: list[dict[str, Any]],
    tasks: list[Task],
    scorer: str,
    *,
    ran: int = 0,
    wall_s: float = 0.0,
    runner: str = "",
    executor: str = "",
    interrupted: bool = False,
    provenance: dict[str, Any] | None = None,
) -> dict[str, Any]:
    scored_tasks = [t for t in tasks if t.scored]
    all_n = len(scored_tasks)
    by_id = {r["instance_id"]: r for r in records}
    scored_records = [by_id[t.instance_id] for t in scored_tasks if t.instance_id in by_id]
    evaluated = [r for r in scored_records if r.get("evaluated")]
    scorers: dict[str, dict[str, Any]] = {}
    for name in SCORERS:
        have = [r for r in evaluated if name in r.get("scores", {})]
        if not have:
            continue
        passed = sum(r["scores"][name] for r in have)
        scorers[name] = {
            "passed": passed,
            "evaluated": len(have),
            "all": all_n,
            "accuracy_evaluated": _pct(passed, len(have)),
            "accuracy_all": _pct(passed, all_n),
            **similarity_summary(have, name, all_n),
        }
    primary = scorers.get(
        scorer,
        {
            "passed": 0,
            "evaluated": len(evaluated),
            "all": all_n,
            "accuracy_evaluated": None,
            "accuracy_all": _pct(0, all_n),
        },
    )

    by_db: dict[str, dict[str, int]] = defaultdict(lambda: {"tasks": 0, "evaluated": 0, "passed": 0})
    for t in scored_tasks:
        row = by_db[t.db or "?"]
        row["tasks"] += 1
        r = by_id.get(t.instance_id)
        if r and r.get("evaluated"):
            row["evaluated"] += 1
            row["passed"] += int(r.get("scores", {}).get(scorer, r.get("score", 0)))
    failures = [
        r for r in scored_records if not (r.get("evaluated") and r.get("scores", {}).get(scorer) == 1)
    ]
    missing = [t.instance_id for t in scored_tasks if t.instance_id not in by_id]
    # tasks not run yet are no failure: they are counted apart (an interrupted run is not a bad one)
    reasons = Counter(_category(r, scorer) for r in failures)

    turn_types: dict[str, dict[str, int]] = defaultdict(
        lambda: {"turns": 0, "scored": 0, "passed": 0, "answered_sql": 0}
    )
    for t in tasks:
        if t.benchmark != "dialogue":
            continue
        row = turn_types[t.turn_type or "unlabelled"]
        row["turns"] += 1
        r = by_id.get(t.instance_id)
        if t.scored:
            row["scored"] += 1
            if r and r.get("evaluated"):
                row["passed"] += int(r.get("scores", {}).get(scorer, 0))
        if r and r.get("sql") and r.get("runner") != "gold":
            row["answered_sql"] += 1

    times = [
        r.get("timings", {}).get("total_s")
        for r in records
        if r.get("timings", {}).get("total_s") is not None
    ]
    tokens: Counter[str] = Counter()
    cost = 0.0
    for r in records:
        for k, v in (r.get("tokens") or {}).items():
            tokens[k] += v
        cost += r.get("cost_usd") or 0.0
    by_benchmark: dict[str, dict[str, int]] = defaultdict(lambda: {"tasks": 0, "evaluated": 0, "passed": 0})
    for t in scored_tasks:
        row = by_benchmark[t.benchmark]
        row["tasks"] += 1
        r = by_id.get(t.instance_id)
        if r and r.get("evaluated"):
            row["evaluated"] += 1
            row["passed"] += int(r.get("scores", {}).get(scorer, r.get("score", 0)))
    provenance = provenance or {}
    return {
        "model": provenance.get("model"),
        "provenance": provenance,
        "by_benchmark": dict(sorted(by_benchmark.items())),
        "agent": agent_usage(records),
        "runner": runner,
        "executor": executor,
        "scorer": scorer,
        "interrupted": interrupted,
        "tasks": len(tasks),
        "scored_tasks": all_n,
        "recorded": len(scored_records),
        "evaluated": len(evaluated),
        "passed": primary["passed"],
        "accuracy_evaluated": primary["accuracy_evaluated"],
        "accuracy_all": primary["accuracy_all"],
        "ci95_evaluated": wilson_interval(primary["passed"], len(evaluated)),
        "scorers": scorers,
        "by_db": dict(sorted(by_db.items())),
        "failure_reasons": dict(reasons.most_common()),
        "failures": [
            {
                "instance_id": r["instance_id"],
                "db": r.get("db"),
                "category": _category(r, scorer),
                "reason": _reason(r, scorer),
                "kind": failure_kind(r),
            }
            for r in failures
        ],
        "failure_kinds": dict(Counter(failure_kind(r) for r in failures)),
        "not_run": missing,
        "turn_types": dict(sorted(turn_types.items())),
        "dialogue": dialogue.dialogue_summary(records, tasks, scorer),
        "ran_this_session": ran,
        "wall_s": round(wall_s, 3),
        "tasks_per_s": round(ran / wall_s, 2) if wall_s > 0 and ran else None,
        "median_task_s": round(statistics.median(times), 4) if times else None,
        "tokens": dict(tokens) or None,
        "cost_usd": round(cost, 4) if cost else None,
    }


def similarity_summary(records: list[dict[str, Any]], scorer: str, all_n: int) -> dict[str, float]:
    """For a scorer that grades (rex): the mean similarity over the evaluated tasks and over all
    (a task without a verdict counts 0); its accuracy is the rate of 1.0."""
    values = [r["similarities"][scorer] for r in records if scorer in (r.get("similarities") or {})]
    if not values:
        return {}
    return {
        "mean_similarity_evaluated": round(statistics.mean(values), 4),
        "mean_similarity_all": round(sum(values) / all_n, 4) if all_n else 0.0,
    }


def _similarity(v: dict[str, Any]) -> str:
    return "–" if v.get("mean_similarity_evaluated") is None else f"{v['mean_similarity_evaluated']:.4f}"


def agent_usage(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Model calls, tool calls and tokens per task, for runners that report them (the builtin agent)."""
    rows = [
        {
            "instance_id": r["instance_id"],
            "status": r.get("status"),
            "score": r.get("score", 0),
            "model_calls": r.get("model_calls") or 0,
            "tool_calls": r.get("tool_calls") or 0,
            "prompt_tokens": (r.get("tokens") or {}).get("prompt", 0),
            "cached_tokens": (r.get("tokens") or {}).get("cached", 0),
            "completion_tokens": (r.get("tokens") or {}).get("completion", 0),
        }
        for r in records
        if r.get("model_calls") is not None
    ]
    if not rows:
        return None
    mean = {
        k: round(statistics.mean(row[k] for row in rows), 1)
        for k in ("model_calls", "tool_calls", "prompt_tokens", "cached_tokens", "completion_tokens")
    }
    total = {k: sum(row[k] for row in rows) for k in ("prompt_tokens", "cached_tokens", "completion_tokens")}
    return {"tasks": len(rows), "mean": mean, "total": total, "per_task": rows}


def _cached(prompt: int, cached: int) -> str:
    """Prompt tokens with the share the endpoint served from its prefix cache (when it said)."""
    return f"{prompt:,}" + (f" ({cached / prompt:.0%} cached)" if prompt and cached else "")


def _category(record: dict[str, Any], scorer: str) -> str:
    category = (
        record.get("categories", {}).get(scorer)
        or record.get("category")
        or record.get("outcome")
        or record.get("status")
        or "?"
    )
    return CATEGORY_TEXT.get(category, category)


def _reason(record: dict[str, Any], scorer: str) -> str:
    return record.get("reasons", {}).get(scorer) or record.get("reason") or ""


def write_reports(out: Path, summary: dict[str, Any], records: list[dict[str, Any]]) -> None:
    out = Path(out)
    write_private(out / "summary.json", json.dumps(summary, indent=2, default=str))
    write_private(out / "report.md", markdown(summary))
    write_private(out / "report.html", html_report(summary, records))


def _provenance_text(s: dict[str, Any]) -> str:
    p = s.get("provenance") or {}
    extra = ", ".join(f"{k} {v}" for k, v in p.items() if k not in ("model", "runner") and v is not None)
    return f"{s.get('model')}" + (f" ({extra})" if extra else "")


def _fmt(p: float | None) -> str:
    return "–" if p is None else f"{p:.2f}%"


def markdown(s: dict[str, Any]) -> str:
    lines = [f"# flexsql eval — {s['runner']} runner, {s['scorer']} scorer", ""]
    if s.get("model"):
        lines += [f"Model: {_provenance_text(s)}", ""]
    if s["interrupted"]:
        lines += ["**Interrupted**: re-run the same command to finish the remaining tasks.", ""]
    if s["not_run"]:
        lines += [f"Not run yet: {len(s['not_run'])} task(s) (not counted as failures).", ""]
    lines += [
        f"- tasks: {s['scored_tasks']} scored ({s['tasks']} in the file), {s['evaluated']} evaluated, "
        f"{s['passed']} passed",
        f"- accuracy ({s['scorer']}): **{_fmt(s['accuracy_evaluated'])}** of evaluated "
        f"({s['passed']}/{s['evaluated']}), **{_fmt(s['accuracy_all'])}** of all tasks "
        f"({s['passed']}/{s['scored_tasks']})",
    ]
    if s.get("ci95_evaluated"):
        low, high = s["ci95_evaluated"]
        lines.append(f"- 95% interval of the accuracy of evaluated (Wilson): {low:.2f}% to {high:.2f}%")
    if s.get("tasks_per_s"):
        lines.append(
            f"- this session: {s['ran_this_session']} tasks in {s['wall_s']:.2f} s "
            f"({s['tasks_per_s']} tasks/s, median {s['median_task_s']} s per task, {s['executor']})"
        )
    if s.get("tokens"):
        lines.append(
            f"- tokens: {', '.join(f'{k} {v}' for k, v in s['tokens'].items())}"
            + (f"; cost ${s['cost_usd']}" if s.get("cost_usd") else "")
        )
    lines += [
        "",
        "## Scorers",
        "",
        "| scorer | passed | evaluated | all | accuracy (evaluated) | accuracy (all) | mean similarity |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, v in s["scorers"].items():
        lines.append(
            f"| {name} | {v['passed']} | {v['evaluated']} | {v['all']} | {_fmt(v['accuracy_evaluated'])} "
            f"| {_fmt(v['accuracy_all'])} | {_similarity(v)} |"
        )
    lines += [""] + [f"- **{k}**: {v}" for k, v in SCORER_NOTES.items() if k in s["scorers"]]
    if len(s.get("by_benchmark") or {}) > 1 or s.get("agent"):
        lines += [
            "",
            "## By benchmark",
            "",
            "| benchmark | tasks | evaluated | passed | accuracy (all) |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        for name, v in s["by_benchmark"].items():
            lines.append(
                f"| {name} | {v['tasks']} | {v['evaluated']} | {v['passed']} "
                f"| {_fmt(_pct(v['passed'], v['tasks']))} |"
            )
    if s.get("agent"):
        a = s["agent"]
        m = a["mean"]
        lines += [
            "",
            "## Agent usage",
            "",
            f"Per task on average: {m['model_calls']} model calls, {m['tool_calls']} "
            f"tool calls, {m['prompt_tokens']:,} prompt + {m['completion_tokens']:,} completion tokens. "
            f"In all: {_cached(a['total']['prompt_tokens'], a['total']['cached_tokens'])} prompt + "
            f"{a['total']['completion_tokens']:,} completion tokens.",
            "",
            "| task | status | score | model calls | tool calls | prompt tokens | cached prompt tokens | completion tokens |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for row in a["per_task"]:
            lines.append(
                f"| {row['instance_id']} | {row['status']} | {row['score']} | {row['model_calls']} "
                f"| {row['tool_calls']} | {row['prompt_tokens']} | {row['cached_tokens']} | {row['completion_tokens']} |"
            )
    lines += [
        "",
        "## By database",
        "",
        "| database | tasks | evaluated | passed | accuracy (all) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for db, v in s["by_db"].items():
        lines.append(
            f"| {db} | {v['tasks']} | {v['evaluated']} | {v['passed']} | {_fmt(_pct(v['passed'], v['tasks']))} |"
        )
    if s["turn_types"]:
        lines += [
            "",
            "## Dialogue turns by type",
            "",
            "| type | turns | scored | passed | answered with SQL |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        for k, v in s["turn_types"].items():
            lines.append(f"| {k} | {v['turns']} | {v['scored']} | {v['passed']} | {v['answered_sql']} |")
    if s.get("dialogue"):
        lines += dialogue.markdown(s["dialogue"])
    lines += ["", "## Failures by reason", ""]
    kinds = s.get("failure_kinds") or {}
    if kinds:
        lines += [
            f"Wrong answers (the model's): {kinds.get('model', 0)}; setup failures (database, gold, runner, "
            f"endpoint): {kinds.get('infrastructure', 0)}.",
            "",
        ]
    if s["failure_reasons"]:
        lines += ["| reason | tasks |", "| --- | ---: |"]
        lines += [f"| {k} | {v} |" for k, v in s["failure_reasons"].items()]
    else:
        lines.append("none")
    if s["failures"]:
        lines += [
            "",
            "## Every failure",
            "",
            "| task | database | category | reason | kind |",
            "| --- | --- | --- | --- | --- |",
        ]
        for f in s["failures"]:
            reason = str(f["reason"]).replace("|", "\\|").replace("\n", " ")
            lines.append(
                f"| {f['instance_id']} | {f['db']} | {f['category']} | {reason[:500]} | {f.get('kind', '')} |"
            )
    return "\n".join(lines) + "\n"


# -- HTML ------------------------------------------------------------------------------------------

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;max-width:1100px;color:#1d2330;padding:0 1rem}
h1{font-size:1.5rem} h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #dde;padding-bottom:.2rem}
table{border-collapse:collapse;width:100%;margin:.5rem 0} th,td{padding:.3rem .5rem;border-bottom:1px solid #eef;text-align:left;vertical-align:top}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums} .big{font-size:1.6rem;font-weight:600}
.cards{display:flex;gap:1rem;flex-wrap:wrap} .card{border:1px solid #dde;border-radius:8px;padding:.7rem 1rem;min-width:200px}
.muted{color:#667} .warn{background:#fff4d6;padding:.5rem 1rem;border-radius:6px} code{font-size:.9em}
td.reason{font-size:.85em;max-width:650px;word-break:break-word}
"""


def _bar_chart(rows: list[tuple[str, float, str]], max_value: float, color: str, title: str) -> str:
    """Horizontal bars: (label, value, text shown after the bar)."""
    if not rows:
        return ""
    label_w, bar_w, row_h = 220, 560, 24
    height = row_h * len(rows) + 10
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{html.escape(title)}" '
        f'width="{label_w + bar_w + 160}" height="{height}" style="max-width:100%">'
    ]
    for i, (label, value, text) in enumerate(rows):
        y = 5 + i * row_h
        w = 0 if max_value <= 0 else max(1.0, bar_w * value / max_value) if value > 0 else 0
        short = label if len(label) <= 32 else label[:31] + "…"
        parts.append(
            f'<text x="{label_w - 8}" y="{y + 16}" text-anchor="end" font-size="12">{html.escape(short)}</text>'
        )
        parts.append(f'<rect x="{label_w}" y="{y + 3}" width="{bar_w}" height="{row_h - 8}" fill="#eef1f6"/>')
        parts.append(
            f'<rect x="{label_w}" y="{y + 3}" width="{w:.1f}" height="{row_h - 8}" fill="{color}">'
            f"<title>{html.escape(label)}: {html.escape(text)}</title></rect>"
        )
        parts.append(
            f'<text x="{label_w + bar_w + 8}" y="{y + 16}" font-size="12">{html.escape(text)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def html_report(s: dict[str, Any], records: list[dict[str, Any]] | None = None) -> str:
    e = html.escape
    title = f"flexsql eval — {s['runner']} runner, {s['scorer']} scorer"
    out = [
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{e(title)}</title>"
        f"<style>{_CSS}</style></head><body><h1>{e(title)}</h1>"
    ]
    if s.get("model"):
        out.append(f"<p>Model: <code>{e(_provenance_text(s))}</code></p>")
    if s["interrupted"]:
        out.append("<p class=warn>Interrupted: re-run the same command to finish the remaining tasks.</p>")
    not_run = len(s.get("not_run") or [])
    out.append("<div class=cards>")
    out.append(
        f"<div class=card><div class=muted>accuracy, evaluated</div><div class=big>{_fmt(s['accuracy_evaluated'])}</div>"
        f"<div class=muted>{s['passed']} / {s['evaluated']} evaluated"
        + (
            f"; 95% interval {s['ci95_evaluated'][0]:.1f}–{s['ci95_evaluated'][1]:.1f}%"
            if s.get("ci95_evaluated")
            else ""
        )
        + "</div></div>"
    )
    if s["recorded"]:  # with nothing recorded yet, "0.00% of all" would read as a result
        out.append(
            f"<div class=card><div class=muted>accuracy, all tasks</div><div class=big>{_fmt(s['accuracy_all'])}</div>"
            f"<div class=muted>{s['passed']} / {s['scored_tasks']} tasks</div></div>"
        )
    if not_run:
        out.append(
            f"<div class=card><div class=muted>not run yet</div><div class=big>{not_run}</div>"
            f"<div class=muted>of {s['scored_tasks']} tasks; re-run the command to finish</div></div>"
        )
    if s.get("tasks_per_s"):
        out.append(
            f"<div class=card><div class=muted>speed ({e(s['executor'])})</div><div class=big>{s['tasks_per_s']} tasks/s</div>"
            f"<div class=muted>{s['ran_this_session']} tasks in {s['wall_s']:.1f} s</div></div>"
        )
    if s.get("tokens"):
        total = sum(s["tokens"].values())
        out.append(
            f"<div class=card><div class=muted>tokens</div><div class=big>{total:,}</div>"
            f"<div class=muted>{e(', '.join(f'{k} {v:,}' for k, v in s['tokens'].items()))}</div></div>"
        )
    out.append("</div>")

    out.append(
        "<h2>Scorers</h2><table><tr><th>scorer</th><th class=n>passed</th><th class=n>evaluated</th>"
        "<th class=n>all</th><th class=n>accuracy (evaluated)</th><th class=n>accuracy (all)</th>"
        "<th class=n>mean similarity</th><th>rule</th></tr>"
    )
    for name, v in s["scorers"].items():
        out.append(
            f"<tr><td><code>{e(name)}</code></td><td class=n>{v['passed']}</td><td class=n>{v['evaluated']}</td>"
            f"<td class=n>{v['all']}</td><td class=n>{_fmt(v['accuracy_evaluated'])}</td>"
            f"<td class=n>{_fmt(v['accuracy_all'])}</td><td class=n>{_similarity(v)}</td>"
            f"<td class=muted>{e(SCORER_NOTES.get(name, ''))}</td></tr>"
        )
    out.append("</table>")

    if s.get("agent"):
        a, m = s["agent"], s["agent"]["mean"]
        out.append(
            f"<h2>Agent usage</h2><p>Per task on average: {m['model_calls']} model calls, {m['tool_calls']} tool "
            f"calls, {m['prompt_tokens']:,} prompt + {m['completion_tokens']:,} completion tokens. In all: "
            f"{e(_cached(a['total']['prompt_tokens'], a['total']['cached_tokens']))} prompt + "
            f"{a['total']['completion_tokens']:,} completion tokens.</p>"
        )
        out.append(
            "<table><tr><th>task</th><th>status</th><th class=n>score</th><th class=n>model calls</th>"
            "<th class=n>tool calls</th><th class=n>prompt tokens</th><th class=n>cached prompt tokens</th>"
            "<th class=n>completion tokens</th></tr>"
        )
        for row in a["per_task"]:
            out.append(
                f"<tr><td>{e(str(row['instance_id']))}</td><td>{e(str(row['status']))}</td>"
                f"<td class=n>{row['score']}</td><td class=n>{row['model_calls']}</td>"
                f"<td class=n>{row['tool_calls']}</td><td class=n>{row['prompt_tokens']:,}</td>"
                f"<td class=n>{row['cached_tokens']:,}</td><td class=n>{row['completion_tokens']:,}</td></tr>"
            )
        out.append("</table>")
    if len(s.get("by_benchmark") or {}) > 1:
        out.append("<h2>Accuracy by benchmark</h2>")
        out.append(
            _bar_chart(
                [
                    (k, _pct(v["passed"], v["tasks"]) or 0.0, f"{v['passed']}/{v['tasks']}")
                    for k, v in s["by_benchmark"].items()
                ],
                100.0,
                "#3b7dd8",
                "accuracy by benchmark",
            )
        )
    out.append("<h2>Accuracy by database</h2>")
    rows = [
        (
            db,
            _pct(v["passed"], v["evaluated"]) or 0.0,
            f"{_fmt(_pct(v['passed'], v['evaluated']))} ({v['passed']}/{v['evaluated']} evaluated, "
            f"{v['tasks']} tasks)",
        )
        for db, v in s["by_db"].items()
        if v["evaluated"]
    ]
    out.append(_bar_chart(rows, 100.0, "#3b7dd8", "accuracy by database"))
    waiting = [db for db, v in s["by_db"].items() if not v["evaluated"]]
    if waiting:
        out.append(f"<p class=muted>not run yet (or nothing evaluated): {e(', '.join(waiting))}</p>")

    out.append("<h2>Failures by reason</h2>")
    kinds = s.get("failure_kinds") or {}
    if kinds:
        out.append(
            f"<p>Wrong answers (the model's): <b>{kinds.get('model', 0)}</b>; setup failures (database, "
            f"gold, runner, endpoint): <b>{kinds.get('infrastructure', 0)}</b>.</p>"
        )
    if s["failure_reasons"]:
        top = max(s["failure_reasons"].values())
        out.append(
            _bar_chart(
                [(k, float(v), str(v)) for k, v in s["failure_reasons"].items()],
                float(top),
                "#d8613b",
                "failures by reason",
            )
        )
    else:
        out.append("<p>none</p>")

    if s["turn_types"]:
        out.append(
            "<h2>Dialogue turns by type</h2><table><tr><th>type</th><th class=n>turns</th><th class=n>scored</th>"
            "<th class=n>passed</th><th class=n>answered with SQL</th></tr>"
        )
        for k, v in s["turn_types"].items():
            out.append(
                f"<tr><td>{e(k)}</td><td class=n>{v['turns']}</td><td class=n>{v['scored']}</td>"
                f"<td class=n>{v['passed']}</td><td class=n>{v['answered_sql']}</td></tr>"
            )
        out.append("</table>")

    if s.get("dialogue"):
        out.append(dialogue.html(s["dialogue"]))

    if s["failures"]:
        out.append(
            f"<h2>Every failure ({len(s['failures'])})</h2><table><tr><th>task</th><th>database</th>"
            "<th>kind</th><th>category</th><th>reason</th></tr>"
        )
        for f in s["failures"]:
            out.append(
                f"<tr><td>{e(str(f['instance_id']))}</td><td>{e(str(f['db']))}</td><td>{e(f.get('kind', ''))}</td>"
                f"<td>{e(f['category'])}</td><td class=reason>{e(str(f['reason'])[:1000])}</td></tr>"
            )
        out.append("</table>")
    if records:
        from flexsql.evals.report_explorer import task_explorer  # it reads failure_kind from here

        out.append(task_explorer(records, s["scorer"], failure_kind))
    out.append("</body></html>\n")
    return "".join(out)
