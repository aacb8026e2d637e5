"""The evaluation harness (evals/harness.py) through `flexsql eval`: scores and outputs of a gold run,
resuming (and re-running what an infrastructure failure lost), refusing another run's folder, Ctrl-C
keeping finished tasks, and run.json without the password."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.support.evals import eval_results, results, run_cli, run_eval, write_predictions


def test_eval_run_json_redacts_the_password(tmp_path):
    from flexsql.evals.harness import EvalOptions, Evaluation

    tasks = tmp_path / "dev.json"
    tasks.write_text(json.dumps([{"db_id": "shop", "question": "q", "query": "SELECT 1"}]))
    options = EvalOptions(
        tasks=tasks,
        runner="gold",
        db="postgresql://reader:s3cr3t-pw@127.0.0.1:1/{db}",
        out=tmp_path / "out",
        jobs=1,
        timeout=5,
    )
    (tmp_path / "out").mkdir()
    evaluation = Evaluation(options)
    evaluation._write_run_info(1)
    run_json = tmp_path / "out" / "run.json"
    text = run_json.read_text()
    assert "s3cr3t" not in text and "postgresql://reader:***@127.0.0.1:1/{db}" in text
    assert stat.S_IMODE(run_json.stat().st_mode) == 0o600


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


@pytest.mark.integration
def test_ctrl_c_stops_agents_keeps_finished_tasks_and_resumes(spider, tmp_path: Path) -> None:
    import signal

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


def test_resume_runs_again_the_tasks_a_wrong_dbs_failed(spider_tasks, tmp_path):
    """Was: the second run (right --dbs) skipped all 5 tasks and kept their 0 scores."""
    tasks, dbs = spider_tasks
    empty, out = tmp_path / "empty", tmp_path / "out"
    empty.mkdir()
    code, output = run_eval(tasks, "--runner", "gold", "--dbs", empty, "--out", out, "-q")
    assert code == 0, output
    first = eval_results(out)
    assert all(r["score"] == 0 and "not found" in r["reason"] for r in first.values()), first
    code, output = run_eval(tasks, "--runner", "gold", "--dbs", dbs, "--out", out, "-q")
    assert code == 0, output
    assert "already in" not in output  # nothing was kept from the failed run
    again = eval_results(out)
    assert sorted(again) == ["0", "1", "2", "3", "4"] and all(r["score"] == 1 for r in again.values()), again
    # a task that really ran keeps its result on the next resume
    code, output = run_eval(tasks, "--runner", "gold", "--dbs", dbs, "--out", out, "-q")
    assert code == 0 and "5 task(s) already in" in output
