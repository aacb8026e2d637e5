"""The runners of `flexsql eval` (evals/runners.py, evals/builtin.py): predictions, a stand-in agent run
by `--runner command` (given the password in its environment, never on disk), the built-in agent with
and without a model, and Claude Code's JSON output."""

from __future__ import annotations

import json
import stat
import sys
import textwrap
from pathlib import Path

import pytest

from flexsql.evals.tasks import DatabaseLocator, load_tasks
from tests.support.evals import QUESTIONS, results, run_cli, write_predictions

AGENT_DUMPING_ENV = """
import json, os, sys
out = sys.argv[1]
json.dump({k: v for k, v in os.environ.items() if k in ("PGPASSWORD", "FLEXSQL_DB_URL")},
          open(os.path.join(out, "..", "env_seen.json.tmp"), "w"))
open(os.path.join(out, "answer.sql"), "w").write("SELECT 1")
"""


def _files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


@pytest.mark.integration
def test_eval_command_runner_writes_no_password_and_hands_it_over_in_the_environment(tmp_path):
    from flexsql.evals.runners import CommandRunner
    from flexsql.evals.tasks import Task

    secret = "s3cr3t-Pw%21"  # URL-encoded '!': the child gets the decoded password
    locator = DatabaseLocator(db_url=f"postgresql://reader:{secret}@127.0.0.1:5432/{{db}}")
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT_DUMPING_ENV)
    out = tmp_path / "out"
    runner = CommandRunner(
        f"{sys.executable} {agent} {{out_dir}} --url {{db_url}}", locator, out, timeout_s=30
    )
    task = Task(instance_id="t1", question="How many?", db="shop", benchmark="spider")
    prediction = runner.predict(task)
    assert prediction.sql == "SELECT 1"
    task_dir = out / "tasks" / "t1"
    seen = json.loads((task_dir / "env_seen.json.tmp").read_text())
    assert seen["PGPASSWORD"] == "s3cr3t-Pw!"
    assert seen["FLEXSQL_DB_URL"] == "postgresql://reader@127.0.0.1:5432/shop"
    for path in _files_under(out):
        if path.name == "env_seen.json.tmp":  # what the stand-in agent dumped of its environment
            continue
        text = path.read_text(errors="replace")
        assert "s3cr3t" not in text, f"{path} holds the password"
    mcp = json.loads((task_dir / "mcp.json").read_text())
    assert mcp["mcpServers"]["flexsql"]["env"] == {"PGPASSWORD": "${PGPASSWORD}"}
    for name in ("task.json", "mcp.json"):
        assert stat.S_IMODE((task_dir / name).stat().st_mode) == 0o600, name


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
    assert got["1"]["scores"] == {"spider2": 0, "spider2-strict": 0, "ex": 0, "rex": 0}
    # REX grades it: no row is where the gold SQL's ORDER BY puts it, and calls it a matter of order
    assert got["1"]["similarities"] == {"rex": 0.0} and got["1"]["categories"]["rex"] == "order"
    assert got["0"]["similarities"] == {"rex": 1.0}
    assert got["2"]["score"] == 1 and got["2"]["prediction_origin"].endswith("2.csv")
    assert got["3"]["score"] == 0 and got["3"]["reason"].startswith("execution error:")
    assert "concerts" in got["3"]["reason"]
    assert got["4"]["status"] == "no_prediction" and got["4"]["evaluated"] is False
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["evaluated"], summary["passed"], summary["scored_tasks"]) == (4, 2, 5)
    assert summary["accuracy_evaluated"] == 50.0 and summary["accuracy_all"] == 40.0
    md = (out / "report.md").read_text()
    assert "| 3 | concert_singer | execution error |" in md and "| 4 | concert_singer | no prediction |" in md


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


@pytest.mark.integration
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
    assert code == 2  # a configuration error (docs/cli.md: exit codes)
    assert "no model is configured" in output and "--base-url" in output


def test_builtin_runner_answers_through_a_real_endpoint(spider, tmp_path: Path) -> None:
    """The agent in-process against a real OpenAI-compatible HTTP server that plays a perfect model (the
    gold SQL per task, found by the X-FlexSQL-Run header): every answer scores, and each line carries the
    agent's status, calls, tokens and trace."""
    from benchmarks.scripted_endpoint import GoldScript
    from tests.support.openai_stub import OpenAIStub

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
