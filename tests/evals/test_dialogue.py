"""Dialogue evaluation end to end: a stand-in agent run by `--runner command` over a small CoSQL-style
file (tests/fixtures/dialogues), status-scored non-SQL turns, EX on SQL turns, dialogue context and
turn order, resuming by dialogue, and the per-type / confusion / interaction figures in the reports."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from flexsql.evals.cli import eval_command
from flexsql.evals.dialogue import read_status
from tests.support.paths import TESTS

FIXTURES = TESTS / "fixtures" / "dialogues"
TASKS = FIXTURES / "cosql_tiny.json"

RIGHT_BEST = (
    "SELECT T1.name FROM singer AS T1 JOIN concert AS T2 ON T1.id = T2.singer_id GROUP BY T1.id "
    "ORDER BY count(*) DESC LIMIT 1"
)
SCRIPT = {
    "How many singers are there?": {"status": "answered", "sql": "SELECT count(*) FROM singer"},
    "Which is the best one?": {"status": "needs_clarification"},
    "By number of concerts.": {
        "status": "answered",
        "sql": RIGHT_BEST,
        "needs_history": "Which is the best one?",
    },
    "Thanks!": {"status": "reply", "stdout_json": True},
    "List the singers from France.": {
        "status": "answered",
        "sql": "SELECT name FROM singer WHERE country = 'France'",
    },
    "What are their phone numbers?": {
        "status": "answered",
        "sql": "SELECT name FROM singer",
    },  # should refuse
    "Only those older than 40.": {
        "status": "answered",
        "needs_history": "List the singers from France.",
        "sql": "SELECT name FROM singer WHERE country = 'France' AND age > 40",
    },
    "Which one is the most famous?": {"status": "needs_clarification"},  # the gold answered with SQL
    "ok": {"status": "reply"},
}


def make_db(path: Path) -> None:
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE singer (id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INTEGER);
        INSERT INTO singer VALUES (1,'Joe Sharp','Netherlands',52),(2,'Timbaland','United States',32),
            (3,'Justin Brown','France',29),(4,'Rose White','France',41),(5,'John Nizinik','France',43);
        CREATE TABLE concert (id INTEGER PRIMARY KEY, singer_id INTEGER REFERENCES singer(id), year INTEGER);
        INSERT INTO concert VALUES (1,1,2014),(2,3,2014),(3,3,2015),(4,3,2015),(5,4,2014);
    """)
    conn.commit()
    conn.close()


def run_eval(tmp_path: Path, out: Path) -> tuple[dict[str, dict], dict, str]:
    make_db(tmp_path / "dbs" / "concert_singer.sqlite")
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    command = f"{sys.executable} {FIXTURES / 'agent.py'} {script} {tmp_path / 'order.log'}"
    result = CliRunner().invoke(
        eval_command,
        [
            str(TASKS),
            "--runner",
            "command",
            "--command",
            command,
            "--dbs",
            str(tmp_path / "dbs"),
            "--out",
            str(out),
            "--jobs",
            "4",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    records = {}
    for line in (out / "results.jsonl").read_text().splitlines():
        r = json.loads(line)
        records[r["instance_id"]] = r
    return records, json.loads((out / "summary.json").read_text()), result.output


@pytest.mark.integration
def test_dialogues_are_scored_by_status_and_ex_with_context_and_in_order(tmp_path: Path) -> None:
    out = tmp_path / "out"
    got, summary, _ = run_eval(tmp_path, out)
    # status turns
    assert (got["0-1"]["score"], got["0-1"]["expected_status"], got["0-1"]["returned_status"]) == (
        1,
        "needs_clarification",
        "needs_clarification",
    )
    assert (
        got["0-3"]["score"] == 1 and got["0-3"]["returned_status"] == "reply"
    )  # from a JSON object on stdout
    assert got["1-1"]["score"] == 0 and got["1-1"]["category"] == "wrong_status"
    assert got["1-1"]["reason"] == "unanswerable turn: expected status unanswerable, got answered"
    # SQL turns, follow-ups answered only because the earlier questions were handed over
    assert got["0-2"]["score"] == 1 and got["1-2"]["score"] == 1
    assert got["1-3"]["status"] == "no_prediction" and got["1-3"]["returned_status"] == "needs_clarification"
    assert got["1-4"]["status"] == "not_scored"  # answerable, but the gold has no SQL
    # each dialogue ran turn by turn, with its earlier questions
    runs = [tuple(map(int, line.split())) for line in (tmp_path / "order.log").read_text().splitlines()]
    for d in (0, 1):
        mine = [(turn, seen) for dialogue, turn, seen in runs if dialogue == d]
        assert mine == [(i, i) for i in range(len(mine))]
    history = json.loads((out / "tasks" / "1-2" / "history.json").read_text())
    assert history == [
        {"question": "List the singers from France."},
        {"question": "What are their phone numbers?"},
    ]

    d = summary["dialogue"]
    assert d["question"] == {"scored": 8, "passed": 6, "not_scored": 1, "not_run": 0, "accuracy": 75.0}
    assert d["interaction"] == {"dialogues": 2, "passed": 1, "accuracy": 50.0}
    assert d["per_type"]["answerable"] == {"turns": 5, "scored": 4, "passed": 4, "accuracy": 100.0}
    assert d["per_type"]["ambiguous"] == {"turns": 2, "scored": 2, "passed": 1, "accuracy": 50.0}
    assert d["per_type"]["unanswerable"]["accuracy"] == 0.0 and d["per_type"]["improper"]["accuracy"] == 100.0
    assert d["confusion"] == {
        "answered": {"answered": 4, "needs_clarification": 1},
        "needs_clarification": {"needs_clarification": 1},
        "reply": {"reply": 1},
        "unanswerable": {"answered": 1},
    }
    assert (
        summary["accuracy_evaluated"] == 100.0 and summary["accuracy_all"] == 80.0
    )  # EX over the 5 SQL turns

    md = (out / "report.md").read_text()
    assert "- question-level accuracy: **75.00%** (6/8 scored turns; 1 not scored, 0 not run)" in md
    assert "- interaction-level accuracy: **50.00%** (1/2 dialogues with every scored turn right)" in md
    assert "| ambiguous | 2 | 2 | 1 | 50.00% |" in md
    assert "| expected \\ returned | answered | needs_clarification | reply |" in md
    assert "| unanswerable | 1 | 0 | 0 |" in md
    page = (out / "report.html").read_text()
    assert "interaction-level accuracy" in page and "<th class=n>needs_clarification</th>" in page


@pytest.mark.integration
def test_resume_reruns_an_unfinished_dialogue_from_its_first_turn(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_eval(tmp_path, out)
    results = out / "results.jsonl"
    kept = [line for line in results.read_text().splitlines() if json.loads(line)["instance_id"] != "1-3"]
    results.write_text("\n".join(kept) + "\n")
    (tmp_path / "order.log").unlink()
    got, summary, _ = run_eval(tmp_path, out)
    runs = [tuple(map(int, line.split())) for line in (tmp_path / "order.log").read_text().splitlines()]
    assert runs == [(1, i, i) for i in range(5)]  # dialogue 1 again, whole; dialogue 0 untouched
    assert len(got) == 9 and summary["dialogue"]["question"]["scored"] == 8


def test_status_is_read_from_files_or_stdout(tmp_path: Path) -> None:
    out = tmp_path / "o"
    out.mkdir()
    stdout = tmp_path / "stdout.txt"
    stdout.write_text("working\nStatus: Needs-Clarification\n")
    assert read_status(out, stdout) == "needs_clarification"
    (out / "status.txt").write_text("unanswerable\n")
    assert read_status(out, stdout) == "unanswerable"
    (out / "status.json").write_text(json.dumps({"status": "reply", "reply": "hi"}))
    assert read_status(out, stdout) == "reply"
    assert read_status(tmp_path / "missing", None) is None
