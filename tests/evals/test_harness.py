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
    assert all(r["scores"] == {"spider2": 1, "spider2-strict": 1, "ex": 1, "rex": 1} for r in got.values())
    assert all(r["similarities"] == {"rex": 1.0} for r in got.values())
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scorers"]["rex"]["mean_similarity_evaluated"] == 1.0
    assert "| rex | 5 | 5 | 5 | 100.00% | 100.00% | 1.0000 |" in (out / "report.md").read_text()
    assert "rex mean similarity 1.0000" in output
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
    elif pathlib.Path(__file__).with_name("fast").exists():  # the resumed run: answer at once
        (pathlib.Path(os.environ["FLEXSQL_OUT_DIR"]) / "answer.sql").write_text("SELECT 1")
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
    other = tmp_path / "other.py"
    other.write_text("")
    code, output = run_cli(
        tasks, "--runner", "command", "--command", f"{sys.executable} {other}", "--dbs", dbs, "--out", out
    )
    assert code == 2 and "other model settings" in output and "--new-run" in output  # no silent mix
    (tmp_path / "fast").write_text("")
    code, output = run_cli(
        tasks, "--runner", "command", "--command", f"{sys.executable} {agent}", "--dbs", dbs, "--out", out
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


def _eval_process(*args: str | Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-c", "from flexsql.server.cli import main; main()", "eval", *map(str, args)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


@pytest.mark.integration
@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_an_interrupt_ends_a_builtin_evaluation_at_once_with_the_reports(spider, tmp_path, signame) -> None:
    """Was: Ctrl-C waited ~95 s for the open model requests to time out; SIGTERM wrote no report."""
    import signal

    from tests.support.openai_stub import Hang, OpenAIStub

    tasks, dbs = spider
    out = tmp_path / "out"
    with OpenAIStub(lambda request: Hang(120)) as stub:
        proc = _eval_process(
            tasks, "--runner", "builtin", "--dbs", dbs, "--out", out, "--jobs", "2", "-q",
            "--base-url", stub.base_url, "--model", "stub", "--timeout", "600",
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and stub.in_flight < 2:
            time.sleep(0.05)
        assert stub.in_flight == 2  # both workers wait on the model
        proc.send_signal(getattr(signal, signame))
        output, _ = proc.communicate(timeout=15)  # the model would answer in 120 s
    text = output.decode()
    assert proc.returncode == 130, text
    assert "Traceback" not in text
    for name in ("report.md", "report.html", "summary.json"):
        assert (out / name).is_file(), name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] and len(summary["not_run"]) == 5 and summary["failures"] == []
    assert "Not run yet: 5 task(s)" in (out / "report.md").read_text()


STUCK_GOLD = textwrap.dedent("""
    import sys, time
    from flexsql.evals import runners
    def predict(self, task):  # a task that cannot be cancelled (an engine call that ignores interrupts)
        time.sleep(600)
    runners.GoldRunner.predict = predict
    from flexsql.server.cli import main
    sys.argv[0] = "flexsql"
    main()
""")


@pytest.mark.integration
def test_a_second_ctrl_c_leaves_at_once_without_a_traceback(spider, tmp_path: Path) -> None:
    """Was: the first Ctrl-C waited for the running tasks; a second one printed a threading traceback."""
    import signal

    tasks, dbs = spider
    out = tmp_path / "out"
    script = tmp_path / "stuck.py"
    script.write_text(STUCK_GOLD)
    argv = [sys.executable, str(script), "eval", str(tasks), "--runner", "gold", "--dbs", str(dbs)]
    proc = subprocess.Popen(
        [*argv, "--out", str(out), "-q"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (out / "run.json").exists():
        time.sleep(0.05)
    time.sleep(0.5)  # the workers are inside predict
    proc.send_signal(signal.SIGINT)
    assert proc.stdout is not None
    first = proc.stdout.readline().decode()
    assert "stopping the running tasks" in first and "Ctrl-C again" in first
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=15)  # the stuck tasks would hold it for 600 s
    assert proc.returncode == 130, rest.decode()
    assert b"Traceback" not in rest
    assert (out / "report.html").is_file() and (out / "summary.json").is_file()


def test_a_results_file_cut_mid_line_is_repaired_and_the_task_runs_once(spider_tasks, tmp_path) -> None:
    """Was: the next resume appended onto the cut line (pandas and jq failed) and re-ran it every time."""
    tasks, dbs = spider_tasks
    out = tmp_path / "out"
    assert run_eval(tasks, "--runner", "gold", "--dbs", dbs, "--out", out, "-q")[0] == 0
    path = out / "results.jsonl"
    text = path.read_text()
    path.write_text(text[: len(text) - 40])  # a crash while writing the last line
    code, output = run_eval(tasks, "--runner", "gold", "--dbs", dbs, "--out", out, "-q")
    assert code == 0 and "4 task(s) already in" in output, output
    lines = path.read_text().splitlines()
    assert len(lines) == 5 and all(isinstance(json.loads(line), dict) for line in lines)
    code, output = run_eval(tasks, "--runner", "gold", "--dbs", dbs, "--out", out, "-q")
    assert code == 0 and "5 task(s) already in" in output, output


def test_a_resume_with_other_model_settings_is_refused_and_records_name_their_model(
    spider, tmp_path: Path
) -> None:
    """Was: a resume with another --model or --plans silently mixed two models into one accuracy, records
    named no model, and run.json was overwritten."""
    from benchmarks.scripted_endpoint import GoldScript
    from flexsql.evals.tasks import load_tasks
    from tests.support.openai_stub import OpenAIStub

    tasks, dbs = spider
    out = tmp_path / "out"
    with OpenAIStub(GoldScript(load_tasks(tasks))) as stub:
        base = ["--runner", "builtin", "--dbs", dbs, "--out", out, "--base-url", stub.base_url, "-q"]
        code, output = run_eval(tasks, *base, "--model", "model-a", "--plans", "1", "--limit", "2")
        assert code == 0, output
        first = json.loads((out / "run.json").read_text())
        assert all(r["model"] == "model-a" and r["plans"] == 1 for r in eval_results(out).values())
        assert "model-a" in (out / "report.md").read_text() and "model-a" in (out / "report.html").read_text()
        for changed in (["--model", "model-b", "--plans", "1"], ["--model", "model-a", "--plans", "3"]):
            code, output = run_eval(tasks, *base, *changed)
            assert code == 2 and "other model settings" in output and "--new-run" in output, output
        assert len(eval_results(out)) == 2  # nothing was added
        code, output = run_eval(tasks, *base, "--model", "model-a", "--plans", "1", "--limit", "3")
        assert code == 0 and "2 task(s) already in" in output, output
        resumed = json.loads((out / "run.json").read_text())
        assert resumed["started_at"] == first["started_at"] and len(resumed["resumed_at"]) == 1
        code, output = run_eval(
            tasks, *base, "--model", "model-b", "--plans", "1", "--limit", "1", "--new-run"
        )
        assert code == 0 and "moved to" in output, output
    assert [r["model"] for r in eval_results(out).values()] == ["model-b"]
    (kept,) = (out / "previous").iterdir()
    assert len((kept / "results.jsonl").read_text().splitlines()) == 3
    assert json.loads((kept / "run.json").read_text())["started_at"] == first["started_at"]


def test_eval_json_prints_the_summary_on_stdout(spider_tasks, tmp_path) -> None:
    from click.testing import CliRunner

    from flexsql.evals.cli import eval_command

    tasks, dbs = spider_tasks
    args = [str(tasks), "--runner", "gold", "--dbs", str(dbs), "--out", str(tmp_path / "out"), "-q", "--json"]
    result = CliRunner().invoke(eval_command, args)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["passed"] == 5 and summary["model"] == "gold SQL"
