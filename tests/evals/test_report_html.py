"""report.html as a place to debug (evals/report_explorer.py): the trace read as a timeline, and the
page itself in Debian's headless chromium — it renders, its filters and charts work, each task shows
its SQL, results and trace — on the report of a real builtin evaluation (tests/support/report_runs.py:
the agent against a real OpenAI-compatible HTTP server playing a model with mistakes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flexsql.evals.report_explorer import failed_stage, read_trace, timeline
from tests.support.browser import Browser, chromium_or_skip
from tests.support.report_runs import HOSTILE, builtin_run

READY = "return document.getElementById('explorer-root') && document.getElementById('explorer-root').dataset.ready"


# -- the trace as a timeline ------------------------------------------------------------------------


def test_timeline_pairs_calls_reads_tokens_and_tolerates_what_it_does_not_know(tmp_path: Path) -> None:
    events: list[Any] = [
        {"t": 0.0, "kind": "question", "question": "q?"},
        {"t": 0.01, "kind": "stage", "stage": "link", "message": "finding the tables"},
        {
            "t": 0.02,
            "kind": "request",
            "call": "m1",
            "stage": "link",
            "model": "m",
            "tools": ["describe_table"],
        },
        {"t": 0.03, "kind": "request", "call": "m2", "stage": "link", "model": "m", "tools": []},
        # replies out of order (concurrent plans), one with cached tokens as the lead's format will
        # carry them, one in OpenAI's prompt_tokens_details
        {
            "t": 0.50,
            "kind": "reply",
            "call": "m2",
            "usage": {
                "prompt_tokens": 100,
                "completion_tokens": 5,
                "prompt_tokens_details": {"cached_tokens": 64},
            },
            "elapsed_s": 0.47,
            "finish_reason": "stop",
            "content": "{}",
        },
        {
            "t": 0.60,
            "kind": "reply",
            "call": "m1",
            "usage": {"prompt_tokens": 900, "completion_tokens": 30, "cached_tokens": 512},
            "tool_calls": [{"name": "describe_table", "id": "c1"}],
            "finish_reason": "tool_calls",
        },
        {
            "t": 0.61,
            "kind": "tool_call",
            "tool": "describe_table",
            "call_id": "c1",
            "arguments": {"table": "t"},
        },
        {
            "t": 0.71,
            "kind": "tool_result",
            "tool": "describe_table",
            "call_id": "c1",
            "error": False,
            "text": "r1: 0 rows",
        },
        {
            "t": 0.72,
            "kind": "tool_result",
            "tool": "nope",
            "call_id": "c2",
            "error": True,
            "text": "not_found: no tool",
        },
        {"t": 0.80, "kind": "stage", "stage": "repair", "message": "plan 1: repairing c1 (1/3)"},
        {
            "t": 0.90,
            "kind": "candidate",
            "candidate_id": "c2",
            "plan_index": 0,
            "rows": 3,
            "repaired_from": "c1",
        },
        {"t": 0.95, "kind": "verdict", "candidate": "c2", "verdict": "ok", "feedback": "fine"},
        {"t": 0.99, "kind": "selection", "chosen": "c2", "reason": "the only result that ran"},
        {"t": 1.0, "kind": "a_new_kind", "detail": "from a later trace format", "n": 3},
        {"t": 1.1, "kind": "answer", "status": "answered"},
    ]
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in events) + "\n{not json\n")
    trace = read_trace(path)
    assert trace is not None
    items = trace["items"]
    models = [i for i in items if i["k"] == "model"]
    assert [m["tok"] for m in models] == [
        {"prompt": 900, "completion": 30, "cached": 512},
        {"prompt": 100, "completion": 5, "cached": 64},
    ]
    assert models[1]["d"] == 0.47 and models[0]["d"] == pytest.approx(0.58)  # elapsed_s, else reply - request
    tools = [i for i in items if i["k"] == "tool"]
    assert [(t["label"], t["outcome"], t.get("d")) for t in tools] == [
        ("describe_table", "empty", pytest.approx(0.1)),
        ("nope", "error", None),
    ]
    candidate = next(i for i in items if i["k"] == "candidate")
    assert candidate["repair"] and "repair of c1" in candidate["label"] and candidate["s"] == "repair"
    assert next(i for i in items if i["k"] == "selection")["detail"] == "the only result that ran"
    unknown = next(i for i in items if i["k"] == "other")
    assert unknown["label"] == "a_new_kind" and "from a later trace format" in unknown["detail"]
    assert trace["summary"]["tokens"] == {"prompt": 1000, "completion": 35, "cached": 576}
    assert read_trace(tmp_path / "missing.jsonl")["error"].startswith("the trace could not be read")
    assert read_trace(None) is None


def test_a_trace_without_cached_tokens_reports_none() -> None:
    trace = timeline([{"t": 0, "kind": "reply", "usage": {"prompt_tokens": 5, "completion_tokens": 1}}])
    assert trace["summary"]["tokens"] == {"prompt": 5, "completion": 1}
    assert "cached" not in trace["items"][0]["tok"]


def test_a_long_trace_is_cut_to_its_start_and_end() -> None:
    trace = timeline([{"t": i, "kind": "stage", "stage": f"s{i}"} for i in range(1000)])
    items = trace["items"]
    assert len(items) == 241 and items[200]["label"] == "760 items not shown" and items[-1]["s"] == "s999"


def test_failed_stage_of_each_outcome() -> None:
    ended_in_plan = timeline(
        [{"t": 0, "kind": "stage", "stage": "plan"}, {"t": 1, "kind": "failed", "error": "x"}]
    )
    ran_out = timeline(
        [{"t": 0, "kind": "stage", "stage": "run"}, {"t": 1, "kind": "budget", "exhausted": "60 s"}]
    )
    assert failed_stage({}, "setup", "no_database", None) == "setup"
    assert failed_stage({}, "wrong", "execution_error", None) == "execution"
    assert failed_stage({}, "wrong", "row_count", None) == "result"
    assert failed_stage({}, "no_answer", "no_prediction", None) == "runner"
    assert failed_stage({"status": "failed"}, "no_answer", "agent_failed", ended_in_plan) == "plan"
    assert failed_stage({"status": "failed"}, "no_answer", "agent_failed", ran_out) == "budget"
    assert failed_stage({"status": "unanswerable"}, "no_answer", "x", ended_in_plan) == "classify"


# -- the page in chromium ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chromium_or_skip()
    return builtin_run(tmp_path_factory.mktemp("report")) / "report.html"


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):
    with Browser(tmp_path_factory.mktemp("chromium")) as b:
        yield b


def _records(report: Path) -> dict[str, dict[str, Any]]:
    lines = (report.parent / "results.jsonl").read_text().splitlines()
    return {r["instance_id"]: r for r in map(json.loads, lines)}


def _shown(browser: Browser) -> list[str]:
    return browser.js(
        "return Array.from(document.querySelectorAll('tr.ex-row')).filter(r => !r.hidden)"
        ".map(r => r.querySelector('.ex-id').textContent)"
    )


def _open(browser: Browser, report: Path, fragment: str = "") -> None:
    browser.open(report.as_uri() + fragment)
    browser.wait_for(READY)


@pytest.mark.integration
def test_the_report_is_one_file_that_fetches_nothing(report: Path, browser: Browser) -> None:
    text = report.read_text()
    assert "<link" not in text and "<script src" not in text and "@import" not in text
    _open(browser, report)
    assert browser.js("return performance.getEntriesByType('resource').length") == 0
    assert browser.console_errors() == []
    # a question holding markup is shown as text: nothing it carries runs
    assert browser.js("return window.__pwned === undefined")
    browser.click('tr.ex-row[data-i="6"]')
    assert HOSTILE in browser.js("return document.querySelector('tr.ex-detail .ex-q').textContent")


@pytest.mark.integration
def test_filters_by_outcome_database_and_failed_stage(report: Path, browser: Browser, tmp_path: Path) -> None:
    records = _records(report)
    _open(browser, report)
    assert sorted(_shown(browser)) == sorted(records)
    browser.choose("#f-outcome", "failed")
    failed = sorted(i for i, r in records.items() if not (r.get("evaluated") and r["score"] == 1))
    assert sorted(_shown(browser)) == failed == ["1", "3", "5"]
    assert browser.js("return document.getElementById('f-count').textContent") == "3 of 7 tasks shown"
    browser.choose("#f-db", "shop")
    assert _shown(browser) == ["5"]
    # the charts follow the filters: one database, one kind of failure
    assert browser.js("return document.querySelectorAll('#chart-db .bar-row').length") == 1
    assert "row count differs" in browser.js("return document.getElementById('chart-kind').textContent")
    browser.click("#f-reset")
    browser.choose("#f-stage", "plan")
    assert _shown(browser) == ["3"]  # the task whose plans the model never wrote
    browser.choose("#f-stage", "result")
    assert sorted(_shown(browser)) == ["1", "5"]
    browser.click("#f-reset")
    browser.type("#f-q", "oldest first")
    assert _shown(browser) == ["1"]
    # the filters live in the address: a link opens the same view
    browser.click("#f-reset")
    browser.choose("#f-outcome", "passed")
    url = browser.js("return location.href")
    assert url.endswith("#outcome=passed")
    _open(browser, report, "#outcome=passed&db=concert_singer")
    assert sorted(_shown(browser)) == ["0", "2", "6"]
    assert browser.js("return document.getElementById('chart-db').textContent").count("%") == 1
    png = browser.screenshot(tmp_path / "filtered.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


@pytest.mark.integration
def test_a_task_shows_its_sql_results_with_the_first_difference_and_its_trace(
    report: Path, browser: Browser, tmp_path: Path
) -> None:
    _open(browser, report)
    browser.click('tr.ex-row[data-i="1"]')  # answered in the wrong order
    detail = "document.querySelector('tr.ex-detail')"
    pres = browser.js(f"return Array.from({detail}.querySelectorAll('pre')).map(p => p.textContent)")
    assert pres == [
        "SELECT name FROM singer WHERE country = 'France' ORDER BY age DESC",
        "SELECT name FROM singer WHERE country = 'France' ORDER BY age",
    ]
    assert browser.js(f"return {detail}.querySelector('p.firstdiff').textContent") == (
        "First difference: line 1, gold column 'name' (predicted 'name'): John Nizinik vs Tribal King"
    )
    first = browser.js(f"return Array.from({detail}.querySelectorAll('td.first')).map(td => td.textContent)")
    assert first == ["John Nizinik", "Tribal King"]  # marked on both sides
    assert "rex" in browser.js(f"return {detail}.querySelector('table.verdicts').textContent")
    # the trace: stages, model calls with tokens, tool calls with their outcome, the selection's reason
    items = browser.js(
        f"return Array.from({detail}.querySelectorAll('ol.timeline li')).map(li => [li.className, li.textContent])"
    )
    kinds = [c for c, _ in items]
    assert any("k-stage" in c for c in kinds) and sum("k-model" in c for c in kinds) >= 7
    assert any("k-tool" in c and "bad" not in c and "ok" in text for c, text in items)
    assert any("k-tool" in c and "bad" in c and "error" in text for c, text in items)
    assert any("k-model" in c and " tok" in text for c, text in items)
    assert any("k-selection" in c for c in kinds)
    browser.screenshot(tmp_path / "wrong-order.png")

    browser.click('tr.ex-row[data-i="1"]')  # folds
    browser.click('tr.ex-row[data-i="2"]')  # repaired after an execution error
    items = browser.js(
        "return Array.from(document.querySelectorAll('tr.ex-detail ol.timeline li.repair')).map(li => li.textContent)"
    )
    assert any("repair of" in text for text in items)
    assert any("no such table" in text for text in browser.js(
        "return Array.from(document.querySelectorAll('tr.ex-detail li.k-candidate.bad')).map(li => li.textContent)"
    ))  # fmt: skip
    assert browser.console_errors() == []


@pytest.mark.integration
def test_a_long_list_is_drawn_a_page_at_a_time(browser: Browser, tmp_path: Path) -> None:
    from flexsql.evals.report import html_report, summarize
    from flexsql.evals.tasks import Task

    records = [
        {
            "instance_id": str(i),
            "db": f"db{i % 3}",
            "question": f"question {i}",
            "evaluated": True,
            "score": i % 2,
            "scores": {"ex": i % 2},
            "categories": {"ex": "pass" if i % 2 else "rows"},
            "outcome": "scored",
        }
        for i in range(450)
    ]
    tasks = [
        Task(instance_id=r["instance_id"], db=r["db"], question=r["question"], benchmark="spider")
        for r in records
    ]
    page = tmp_path / "report.html"
    page.write_text(html_report(summarize(records, tasks, "ex"), records))
    _open(browser, page)
    assert len(_shown(browser)) == 200
    assert browser.js("return document.querySelector('tr.ex-more').textContent").startswith(
        "200 of 450 listed."
    )
    browser.click("#ex-more")
    assert len(_shown(browser)) == 400
    browser.click("#ex-all")
    assert _shown(browser) == [str(i) for i in range(450)]
    browser.choose("#f-outcome", "passed")  # a new filter lists its first page again
    assert len(_shown(browser)) == 200 and _shown(browser)[:2] == ["1", "3"]
    assert browser.js("return document.getElementById('f-count').textContent") == "225 of 450 tasks shown"
    browser.click('tr.ex-row[data-i="3"]')
    browser.click("#ex-more")  # an open task stays open when more of the list is drawn
    assert browser.js("return document.querySelectorAll('tr.ex-detail').length") == 1
