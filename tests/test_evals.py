"""The evaluation harness end to end on small self-made databases and task files: loaders, the
gold / predictions / command runners, resuming, reports, and the CLI contract."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from flexsql.evals.cli import eval_command
from flexsql.evals.tasks import DatabaseLocator, extract_sql, find_external_knowledge, load_tasks

FIXTURES = Path(__file__).parent / "fixtures" / "spider2"

QUESTIONS = [
    ("How many singers are there?", "SELECT count(*) FROM singer"),
    (
        "Names of singers from France, oldest first.",
        "SELECT name FROM singer WHERE country = 'France' ORDER BY age DESC",
    ),
    ("Average age per country.", "SELECT country, avg(age) FROM singer GROUP BY country"),
    ("Concerts per year.", "SELECT year, count(*) FROM concert GROUP BY year"),
    ("Singers with no concert.", "SELECT name FROM singer WHERE id NOT IN (SELECT singer_id FROM concert)"),
]


def make_db(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE singer (id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INTEGER);
        INSERT INTO singer VALUES (1,'Joe Sharp','Netherlands',52),(2,'Timbaland','United States',32),
            (3,'Justin Brown','France',29),(4,'Rose White','France',41),(5,'John Nizinik','France',43),
            (6,'Tribal King','France',25);
        CREATE TABLE concert (id INTEGER PRIMARY KEY, singer_id INTEGER REFERENCES singer(id), year INTEGER);
        INSERT INTO concert VALUES (1,1,2014),(2,2,2014),(3,3,2015),(4,3,2015),(5,4,2014);
    """)
    conn.commit()
    conn.close()
    return path


@pytest.fixture
def spider(tmp_path: Path) -> tuple[Path, Path]:
    """A Spider 1.0 style task file and a --dbs folder (<db>/<db>.sqlite, name in another case)."""
    make_db(tmp_path / "dbs" / "Concert_Singer" / "concert_singer.sqlite")
    tasks = tmp_path / "dev.json"
    tasks.write_text(
        json.dumps([{"db_id": "concert_singer", "question": q, "query": s} for q, s in QUESTIONS])
    )
    return tasks, tmp_path / "dbs"


def run_cli(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(eval_command, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.output


def results(out: Path) -> dict[str, dict]:
    lines = (out / "results.jsonl").read_text().splitlines()
    return {r["instance_id"]: r for r in map(json.loads, lines)}


def test_gold_runner_scores_every_task_and_writes_outputs(spider, tmp_path: Path) -> None:
    tasks, dbs = spider
    out = tmp_path / "out"
    code, output = run_cli(tasks, "--runner", "gold", "--dbs", dbs, "--jobs", "2", "--out", out)
    assert code == 0, output
    got = results(out)
    assert sorted(got) == ["0", "1", "2", "3", "4"]  # Spider 1.0 tasks are numbered in file order
    assert all(r["score"] == 1 and r["scorer"] == "ex" and r["sql"] for r in got.values())
    assert all(r["scores"] == {"spider2": 1, "spider2-strict": 1, "ex": 1} for r in got.values())
    assert "100.00% of evaluated (5/5)" in output
    assert (out / "submission" / "1.sql").read_text().startswith("SELECT name FROM singer")
    assert (out / "submission" / "1.csv").read_text().splitlines()[0] == "name"
    report = (out / "report.html").read_text()
    assert "<svg" in report and "concert_singer" in report and "http" not in report.split("<body>")[0].lower()
    assert "| concert_singer | 5 | 5 | 5 | 100.00% |" in (out / "report.md").read_text()


def write_predictions(folder: Path) -> None:
    folder.mkdir()
    (folder / "0.sql").write_text("```sql\nSELECT count(id) AS n FROM singer\n```\nThis counts the singers.")
    (folder / "1.sql").write_text(
        "SELECT name FROM singer WHERE country = 'France' ORDER BY age"
    )  # wrong order
    (folder / "2.csv").write_text("avg_age,country\n52.0,Netherlands\n32,United States\n34.5,France\n")
    (folder / "3.sql").write_text("SELECT year, count(*) FROM concerts GROUP BY year")  # no such table
    # 4 has no prediction


def test_predictions_runner_reasons_and_both_denominators(spider, tmp_path: Path) -> None:
    tasks, dbs = spider
    preds, out = tmp_path / "preds", tmp_path / "out"
    write_predictions(preds)
    code, output = run_cli(
        tasks, "--runner", "predictions", "--predictions", preds, "--dbs", dbs, "--out", out
    )
    assert code == 0, output
    got = results(out)
    assert (
        got["0"]["score"] == 1 and got["0"]["sql"] == "SELECT count(id) AS n FROM singer"
    )  # the fenced block
    assert got["1"]["score"] == 0 and got["1"]["category"] == "order"
    assert "different order" in got["1"]["reason"]
    # without an eval config, the spider2 scorers keep order exactly when the gold SQL sorts
    assert got["1"]["scores"] == {"spider2": 0, "spider2-strict": 0, "ex": 0}
    assert got["2"]["score"] == 1 and got["2"]["prediction_origin"].endswith("2.csv")
    assert got["3"]["score"] == 0 and got["3"]["reason"].startswith("execution error:")
    assert "concerts" in got["3"]["reason"]
    assert got["4"]["status"] == "no_prediction" and got["4"]["evaluated"] is False
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["evaluated"], summary["passed"], summary["scored_tasks"]) == (4, 2, 5)
    assert summary["accuracy_evaluated"] == 50.0 and summary["accuracy_all"] == 40.0
    md = (out / "report.md").read_text()
    assert "| 3 | concert_singer | execution error |" in md and "| 4 | concert_singer | no prediction |" in md


def test_rerun_resumes_and_no_resume_starts_over(spider, tmp_path: Path) -> None:
    tasks, dbs = spider
    preds, out = tmp_path / "preds", tmp_path / "out"
    write_predictions(preds)
    args = [tasks, "--runner", "predictions", "--predictions", preds, "--dbs", dbs, "--out", out]
    run_cli(*args, "--limit", "2")
    assert sorted(results(out)) == ["0", "1"]
    code, output = run_cli(*args)
    assert code == 0 and "2 task(s) already in" in output
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 5 and sorted(json.loads(x)["instance_id"] for x in lines) == [
        "0",
        "1",
        "2",
        "3",
        "4",
    ]
    run_cli(*args, "--no-resume", "--ids", "3")
    assert list(results(out)) == ["3"]


def test_resume_refuses_another_runs_folder(spider, tmp_path: Path) -> None:
    tasks, dbs = spider
    out = tmp_path / "out"
    run_cli(tasks, "--runner", "gold", "--dbs", dbs, "--out", out, "--limit", "1")
    preds = tmp_path / "preds"
    write_predictions(preds)
    code, output = run_cli(
        tasks, "--runner", "predictions", "--predictions", preds, "--dbs", dbs, "--out", out
    )
    assert code != 0 and "holds results of another run" in output


AGENT = textwrap.dedent("""
    import json, os, pathlib, sys, time
    answers = json.loads(pathlib.Path(sys.argv[1]).read_text())
    question = pathlib.Path(os.environ["FLEXSQL_QUESTION_FILE"]).read_text().strip()
    out = pathlib.Path(sys.argv[2])
    assert out == pathlib.Path(os.environ["FLEXSQL_OUT_DIR"])
    mcp = json.loads(pathlib.Path(os.environ["FLEXSQL_MCP_CONFIG"]).read_text())
    assert mcp["mcpServers"]["flexsql"]["args"][-2:] == ["--db", os.environ["FLEXSQL_DB_URL"]]
    kind, payload = answers[question]
    if kind == "sql":
        (out / "answer.sql").write_text(payload)
    elif kind == "idsql":
        (out / (sys.argv[3] + ".sql")).write_text(payload)
    elif kind == "csv":
        (out / "result.csv").write_text(payload)
    elif kind == "sleep":
        time.sleep(30)
    (out / "usage.json").write_text(json.dumps({"input_tokens": 100, "output_tokens": 7}))
""")


def test_command_runner_with_a_stand_in_agent(spider, tmp_path: Path) -> None:
    tasks, dbs = spider
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    answers = {
        QUESTIONS[0][0]: ["sql", QUESTIONS[0][1]],  # right
        QUESTIONS[1][0]: ["idsql", "SELECT name FROM singer"],  # wrong
        QUESTIONS[2][0]: ["csv", "country,a\nFrance,34.5\nNetherlands,52\nUnited States,32\n"],  # right
        QUESTIONS[3][0]: ["none", ""],  # writes nothing
        QUESTIONS[4][0]: ["sleep", ""],  # runs past the timeout
    }
    answers_file = tmp_path / "answers.json"
    answers_file.write_text(json.dumps(answers))
    out = tmp_path / "out"
    command = f"{sys.executable} {agent} {answers_file} {{out_dir}} {{instance_id}}"
    code, output = run_cli(
        tasks,
        "--runner",
        "command",
        "--command",
        command,
        "--dbs",
        dbs,
        "--out",
        out,
        "--jobs",
        "3",
        "--timeout",
        "3",
    )
    assert code == 0, output
    got = results(out)
    assert got["0"]["score"] == 1 and got["0"]["tokens"] == {"input_tokens": 100, "output_tokens": 7}
    assert got["1"]["score"] == 0 and "row count 4 vs 6" in got["1"]["reason"]
    assert got["2"]["score"] == 1 and got["2"]["prediction_origin"] == "command: result.csv"
    assert got["3"]["status"] == "no_prediction" and "wrote no 3.sql" in got["3"]["reason"]
    assert got["4"]["status"] == "no_prediction" and got["4"]["category"] == "timeout"
    task_dir = out / "tasks" / "0"
    assert (task_dir / "question.txt").read_text().strip() == QUESTIONS[0][0]
    assert json.loads((task_dir / "task.json").read_text())["db"] == "concert_singer"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["tokens"] == {"input_tokens": 400, "output_tokens": 28}


def test_builtin_runner_without_a_model_says_what_to_configure(spider, tmp_path: Path) -> None:
    tasks, dbs = spider
    code, output = run_cli(tasks, "--runner", "builtin", "--dbs", dbs, "--out", tmp_path / "out")
    assert code == 1
    assert "no model is configured" in output and "--base-url" in output


def test_builtin_runner_answers_through_a_real_endpoint(spider, tmp_path: Path) -> None:
    """The agent in-process against a real OpenAI-compatible HTTP server that plays a perfect model (the
    gold SQL per task, found by the X-FlexSQL-Run header): every answer scores, and each line carries the
    agent's status, calls, tokens and trace."""
    sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
    from openai_stub import OpenAIStub
    from scripted_endpoint import GoldScript

    tasks, dbs = spider
    with OpenAIStub(GoldScript(load_tasks(tasks))) as stub:
        code, output = run_cli(
            tasks,
            "--runner",
            "builtin",
            "--dbs",
            dbs,
            "--out",
            tmp_path / "out",
            "--jobs",
            "2",
            "--base-url",
            stub.base_url,
            "--model",
            "stub",
            "--plans",
            "2",
            "-q",
        )
        stages = {r.stage for r in stub.requests}
    assert code == 0, output
    got = results(tmp_path / "out")
    assert len(got) == len(QUESTIONS) and all(r["score"] == 1 for r in got.values()), output
    for record in got.values():
        assert record["status"] == "answered" and record["outcome"] == "scored"
        assert record["model_calls"] >= 7 and record["tokens"]["prompt"] > 0
        assert Path(record["trace"]).is_file()
    assert {"classify", "link", "plan", "implement", "evaluate"} <= stages
    report = (tmp_path / "out" / "report.md").read_text()
    assert (
        "## Agent usage" in report and "| spider |" in report
    )  # calls and tokens per task, accuracy per benchmark
    html = (tmp_path / "out" / "report.html").read_text()
    assert "Agent usage" in html and "model calls" in html


def test_help_documents_every_option_with_examples() -> None:
    code, output = run_cli("--help")
    assert code == 0
    for option in (
        "--runner",
        "--dbs",
        "--db",
        "--gold",
        "--eval-config",
        "--predictions",
        "--scorer",
        "--jobs",
        "--timeout",
        "--out",
        "--external-knowledge",
        "--command",
        "--via-mcp",
        "--flavor",
    ):
        assert option in output
    for example in ("spider2-lite.jsonl", "spider2-snow.jsonl", "dev.json", "cosql_dev.json", "claude -p"):
        assert example in output


def test_spider2_predictions_with_gold_csvs(tmp_path: Path) -> None:
    preds, out = tmp_path / "preds", tmp_path / "out"
    preds.mkdir()
    (preds / "t001.csv").write_text(
        "id,n,avg,weeks\n0a0a92,1,13664.08,1\n763c8b,2,7274.88,1.5\ndc4802,1,6929.31,1\n"
    )
    (preds / "t002.csv").write_text("x\n4339\n")
    code, output = run_cli(
        FIXTURES / "spider2-lite.jsonl",
        "--runner",
        "predictions",
        "--predictions",
        preds,
        "--gold",
        FIXTURES,
        "--out",
        out,
    )
    assert code == 0, output
    got = results(out)
    assert got["t001"]["scorer"] == "spider2" and got["t001"]["score"] == 1
    assert got["t002"]["score"] == 0 and got["t002"]["reason"].startswith("no gold variant matched (3)")
    assert got["t003"]["status"] == "no_prediction"
    assert (out / "submission" / "t001.csv").exists()
    assert "50.00% of evaluated (1/2), 33.33% of all (1/3)" in output


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


def test_via_mcp_runs_sql_through_flexsql_serve(spider, tmp_path: Path) -> None:
    tasks, dbs = spider
    out = tmp_path / "out"
    code, output = run_cli(tasks, "--runner", "gold", "--dbs", dbs, "--out", out, "--via-mcp", "--jobs", "2")
    assert code == 0, output
    got = results(out)
    assert all(r["score"] == 1 for r in got.values()), [r["reason"] for r in got.values()]
    assert json.loads((out / "run.json").read_text())["executor"] == "mcp-stdio"
    assert list((out / "mcp-logs").glob("serve-*.log"))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "zombie" in status.read_text())


SLOW_AGENT = textwrap.dedent("""
    import os, pathlib, time
    question = pathlib.Path(os.environ["FLEXSQL_QUESTION_FILE"]).read_text()
    if "How many" in question:
        (pathlib.Path(os.environ["FLEXSQL_OUT_DIR"]) / "answer.sql").write_text("SELECT count(*) FROM singer")
    else:
        pathlib.Path(os.environ["FLEXSQL_TASK_DIR"], "started").write_text(str(os.getpid()))
        time.sleep(60)
""")


def test_ctrl_c_stops_agents_keeps_finished_tasks_and_resumes(spider, tmp_path: Path) -> None:
    import signal
    import subprocess
    import time

    tasks, dbs = spider
    agent = tmp_path / "agent.py"
    agent.write_text(SLOW_AGENT)
    out = tmp_path / "out"
    args = [
        sys.executable,
        "-c",
        "from flexsql.evals.cli import eval_command; eval_command()",
        str(tasks),
        "--runner",
        "command",
        "--command",
        f"{sys.executable} {agent}",
        "--dbs",
        str(dbs),
        "--out",
        str(out),
        "--jobs",
        "2",
        "--timeout",
        "120",
        "-q",
    ]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(list(out.glob("tasks/*/started"))) < 2:
        time.sleep(0.1)
    started = [int(p.read_text()) for p in out.glob("tasks/*/started")]
    assert len(started) == 2
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130, output.decode()
    assert b"interrupted" in output
    finished = results(out)
    assert finished["0"]["score"] == 1 and all(r["status"] == "scored" for r in finished.values())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(pid) for pid in started):
        time.sleep(0.1)
    assert not any(alive(pid) for pid in started)  # the agents that were running were stopped
    assert "Interrupted" in (out / "report.md").read_text()
    fast = tmp_path / "fast.py"
    fast.write_text(
        "import os, pathlib\n(pathlib.Path(os.environ['FLEXSQL_OUT_DIR']) / 'answer.sql')"
        ".write_text('SELECT 1')\n"
    )
    code, output = run_cli(
        tasks, "--runner", "command", "--command", f"{sys.executable} {fast}", "--dbs", dbs, "--out", out
    )
    assert code == 0 and f"{len(finished)} task(s) already in" in output
    resumed = results(out)
    assert sorted(resumed) == ["0", "1", "2", "3", "4"]
    assert all(resumed[i] == finished[i] for i in finished)


def test_claude_code_json_output_gives_sql_and_tokens(tmp_path: Path) -> None:
    from flexsql.evals.runners import read_answer

    out = tmp_path / "output"
    out.mkdir()
    stdout = tmp_path / "stdout.txt"
    final = "First I tried\n```sql\nSELECT 1\n```\nThe answer:\n```sql\nSELECT count(*) FROM singer\n```"
    stdout.write_text(
        json.dumps(
            {
                "type": "result",
                "result": final,
                "total_cost_usd": 0.0123,
                "usage": {
                    "input_tokens": 1200,
                    "output_tokens": 85,
                    "server_tool_use": {"web_search_requests": 0},
                },
            }
        )
    )
    answer = read_answer(out, "7", stdout)
    assert answer.sql == "SELECT count(*) FROM singer" and answer.origin.endswith("final answer")
    assert answer.tokens == {"input_tokens": 1200, "output_tokens": 85} and answer.cost_usd == 0.0123
    (out / "answer.sql").write_text("SELECT 2")
    assert read_answer(out, "7", stdout).sql == "SELECT 2"  # a written file wins over the final text
