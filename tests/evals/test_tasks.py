"""Task files and databases (evals/tasks.py): Spider 2.0, BIRD and CoSQL formats, databases and
documents found case-insensitively, fenced SQL extracted, dialogue turns scored or counted by type."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flexsql.evals.tasks import DatabaseLocator, extract_sql, find_external_knowledge, load_tasks
from tests.support.evals import make_db, results, run_cli
from tests.support.paths import TESTS

FIXTURES = TESTS / "fixtures" / "spider2"


def test_task_formats_are_detected(tmp_path: Path) -> None:
    lite = load_tasks(FIXTURES / "spider2-lite.jsonl")
    assert lite[1].benchmark == "spider2-lite" and lite[1].db == "shopdb"
    assert lite[1].external_knowledge == "moving_average.md" and lite[1].flavor == "lite"
    snow = tmp_path / "snow.jsonl"
    snow.write_text(
        json.dumps(
            {
                "instance_id": "sf001",
                "instruction": "Top 5 zip codes",
                "db_id": "WEATHER",
                "external_knowledge": None,
            }
        )
        + "\n"
    )
    (task,) = load_tasks(snow)
    assert (task.benchmark, task.db, task.question, task.flavor) == (
        "spider2-snow",
        "WEATHER",
        "Top 5 zip codes",
        "snow",
    )
    bird = tmp_path / "bird.json"
    bird.write_text(
        json.dumps([{"question_id": 0, "db_id": "x", "question": "q", "evidence": "e", "SQL": "SELECT 1"}])
    )
    (task,) = load_tasks(bird)
    assert (task.instance_id, task.gold_sql, task.external_knowledge) == ("0", "SELECT 1", "e")


def test_databases_and_documents_are_found_case_insensitively(tmp_path: Path) -> None:
    make_db(tmp_path / "dbs" / "E_commerce.sqlite")
    make_db(tmp_path / "dbs" / "Baseball" / "baseball.sqlite")
    locator = DatabaseLocator(tmp_path / "dbs")
    assert locator.url_for("e_commerce").endswith("/dbs/E_commerce.sqlite")
    assert locator.url_for("BASEBALL").endswith("/Baseball/baseball.sqlite")
    with pytest.raises(Exception, match="did you mean e_commerce"):
        locator.url_for("ecommerce")
    assert (
        DatabaseLocator(db_url="snowflake://me@acct/{db}/PUBLIC").url_for("W")
        == "snowflake://me@acct/W/PUBLIC"
    )
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "Moving_Average.md").write_text("how to")
    task = load_tasks(FIXTURES / "spider2-lite.jsonl")[1]
    assert find_external_knowledge(task, docs) == docs / "Moving_Average.md"


def test_fenced_sql_is_extracted() -> None:
    assert extract_sql("Here:\n```sql\nSELECT 1\n```\nand\n```sql\nSELECT 2\n```") == "SELECT 1"
    assert extract_sql("SELECT 3;") == "SELECT 3;"


def test_dialogue_turns_are_scored_or_counted_by_type(tmp_path: Path) -> None:
    make_db(tmp_path / "dbs" / "concert_singer.sqlite")
    dialogues = [
        {
            "db_name": "concert_singer",
            "turns": [
                {"isUser": True, "text": "How many singers?", "type": "answerable"},
                {"isUser": False, "text": "", "query": "SELECT count(*) FROM singer"},
                {"isUser": True, "text": "Which is the best one?", "type": "ambiguous"},
                {"isUser": False, "text": "Best by what?", "query": ""},
                {"isUser": True, "text": "And from France?", "type": "answerable"},
                {
                    "isUser": False,
                    "text": "",
                    "query": "SELECT count(*) FROM singer WHERE country = 'France'",
                },
                {"isUser": True, "text": "Thanks!", "type": "improper"},
                {"isUser": False, "text": "Bye", "query": ""},
            ],
        }
    ]
    tasks = tmp_path / "cosql.json"
    tasks.write_text(json.dumps(dialogues))
    loaded = load_tasks(tasks)
    assert [t.instance_id for t in loaded] == ["0-0", "0-1", "0-2", "0-3"]
    assert [t.question for t in loaded[2].history] == ["How many singers?", "Which is the best one?"]
    out = tmp_path / "out"
    code, output = run_cli(tasks, "--runner", "gold", "--dbs", tmp_path / "dbs", "--out", out)
    assert code == 0, output
    got = results(out)
    assert got["0-2"]["score"] == 1 and got["0-1"]["status"] == "not_scored"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scored_tasks"] == 2 and summary["turn_types"]["ambiguous"]["turns"] == 1
    assert summary["turn_types"]["answerable"] == {"turns": 2, "scored": 2, "passed": 2, "answered_sql": 0}


def test_a_spider_item_without_a_question_is_a_clear_error(tmp_path) -> None:
    """Was: KeyError: 'question'."""
    import json

    from flexsql.errors import ConfigError
    from flexsql.evals.tasks import load_tasks

    path = tmp_path / "dev.json"
    path.write_text(
        json.dumps([{"db_id": "a", "question": "q", "query": "SELECT 1"}, {"db_id": "a", "query": "x"}])
    )
    with pytest.raises(ConfigError, match=r"task 1 \(counting from 0\) has no 'question'"):
        load_tasks(path)
