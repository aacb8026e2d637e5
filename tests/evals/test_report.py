"""The reports (evals/report.py): an interrupted run reads as unfinished, not as failed; every task's
question, predicted and gold SQL, model and latency; setup failures apart from wrong answers."""

from __future__ import annotations

from flexsql.evals.report import html_report, markdown, summarize
from flexsql.evals.tasks import Task

TASKS = [Task(instance_id=str(i), question=f"q{i}", db="shop", benchmark="spider") for i in range(4)]


def _record(i: int, **fields: object) -> dict[str, object]:
    return {
        "instance_id": str(i),
        "db": "shop",
        "question": f"How many orders in week {i}?",
        "model": "model-a",
        "timings": {"total_s": 1.25},
        **fields,
    }


def test_an_interrupted_run_shows_the_tasks_not_run_yet_neutrally() -> None:
    """Was: a big "0.00%" and "not run yet" as a red failure bar."""
    summary = summarize([], TASKS, "ex", interrupted=True, provenance={"model": "model-a"})
    page = html_report(summary, [])
    assert "not run yet" in page
    assert "0.00%" not in page and "#d8613b" not in page  # no accuracy of nothing, no failure bar
    assert summary["failure_reasons"] == {} and summary["not_run"] == ["0", "1", "2", "3"]
    assert "Model: model-a" in markdown(summary)


def test_the_html_report_shows_each_task_and_tells_setup_failures_from_wrong_answers() -> None:
    records = [
        _record(0, sql="SELECT 1", gold_sql="SELECT count(*) FROM orders", evaluated=True, score=1,
                scores={"ex": 1}, category="passed"),
        _record(1, sql="SELECT 2", gold_sql="SELECT 3", evaluated=True, score=0, scores={"ex": 0},
                categories={"ex": "wrong_values"}, category="wrong_values"),
        _record(2, evaluated=False, score=0, category="no_database", outcome="no_prediction"),
        _record(3, evaluated=False, score=0, category="model_error", outcome="no_prediction"),
    ]  # fmt: skip
    summary = summarize(records, TASKS, "ex", provenance={"model": "model-a", "plans": 2})
    assert summary["failure_kinds"] == {"model": 1, "infrastructure": 2}
    page = html_report(summary, records)
    # the tasks are data for the page's explorer (tests/evals/test_report_html.py opens it in chromium)
    for text in (
        "How many orders in week 0?",
        "SELECT count(*) FROM orders",
        "model-a",
        '"latency":1.25',
        "plans 2",
    ):
        assert text in page, text
    assert "Wrong answers (the model's): <b>1</b>" in page and "endpoint): <b>2</b>" in page


def test_the_accuracy_comes_with_a_95_percent_interval() -> None:
    from flexsql.evals.report import wilson_interval

    assert wilson_interval(0, 0) is None
    low, high = wilson_interval(40, 50)  # 80%: about 67% to 89%
    assert 66.0 < low < 68.0 and 88.0 < high < 90.0
    assert wilson_interval(5, 5)[1] == 100.0 and wilson_interval(5, 5)[0] > 50.0
    records = [_record(i, evaluated=True, score=1, scores={"ex": 1}) for i in range(4)]
    summary = summarize(records, TASKS, "ex")
    assert summary["ci95_evaluated"][1] == 100.0
    assert "95% interval" in markdown(summary) and "95% interval" in html_report(summary, records)
