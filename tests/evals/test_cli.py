"""The `flexsql eval` command line (evals/cli.py): its help, and clear errors for unknown ids and an
unwritable --out."""

from __future__ import annotations

from tests.support.evals import run_cli, run_eval
from tests.support.paths import TESTS

FIXTURES = TESTS / "fixtures" / "spider2"


# 4 has no prediction


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


def test_eval_unknown_ids_is_an_error_naming_them(spider_tasks, tmp_path):
    """Was: 0/0 and exit 0."""
    tasks, dbs = spider_tasks
    code, output = run_eval(
        tasks, "--runner", "gold", "--dbs", dbs, "--out", tmp_path / "out", "--ids", "1,nosuch,zz"
    )
    assert code == 2, output
    assert "nosuch" in output and "zz" in output and "'1'" not in output
    assert not (tmp_path / "out").exists()


def test_eval_unwritable_out_is_a_clear_error(spider_tasks, tmp_path):
    """Was: a PermissionError/FileNotFoundError traceback."""
    tasks, dbs = spider_tasks
    code, output = run_eval(tasks, "--runner", "gold", "--dbs", dbs, "--out", "/proc/x", "-q")
    assert code != 0
    assert "/proc/x" in output and "--out" in output, output
    assert (
        "OSError" not in output and "PermissionError" not in output and "FileNotFoundError" not in output
    ), output


# -- a new user's afternoon, round two (issue 29), and hostile files in --out (issue 30, item 13) -------
# Through the real interface: `flexsql eval` in a subprocess.

import json  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from tests.support.evals import eval_results, flexsql_eval, gold_agent  # noqa: E402


def _scores(out: Path) -> dict[str, int]:
    return {i: r["score"] for i, r in eval_results(out).items()}


def _runner_args(runner: str, tasks: Path, dbs: Path, tmp: Path, stub_url: str) -> list[str | Path]:
    if runner == "gold":
        return ["--runner", "gold", "--dbs", dbs]
    if runner.startswith("predictions"):
        preds = tmp / "preds"
        if not preds.exists():  # the gold answers as a submission folder: SQL, or the CSVs they give
            done = flexsql_eval(tasks, "--runner", "gold", "--dbs", dbs, "--out", tmp / "gold-run")
            assert done.returncode == 0, done.stderr
            shutil.copytree(tmp / "gold-run" / "submission", preds)
            for name in preds.glob("*.sql" if runner.endswith("csv") else "*.csv"):
                name.unlink()
        return ["--runner", "predictions", "--predictions", preds, "--dbs", dbs]
    if runner == "command":
        return ["--runner", "command", "--command", gold_agent(tmp, tasks), "--dbs", dbs]
    return [
        "--runner",
        "builtin",
        "--dbs",
        dbs,
        "--base-url",
        stub_url,
        "--model",
        "gold-model",
        "--plans",
        "1",
    ]


@pytest.mark.integration
@pytest.mark.parametrize("runner", ["gold", "predictions-sql", "predictions-csv", "command", "builtin"])
def test_a_new_run_scores_as_the_first_and_the_earlier_run_stays_readable(spider_tasks, tmp_path, runner):
    """Was: --new-run / --no-resume moved the submission folder the new run wrote into aside with the old
    run: every task scored 0% ("prediction CSV could not be read"), filed as wrong answers, exit 0; a
    later plain re-run kept the zeros."""
    from benchmarks.scripted_endpoint import GoldScript
    from flexsql.evals.tasks import load_tasks
    from tests.support.openai_stub import OpenAIStub

    tasks, dbs = spider_tasks
    out = tmp_path / "runs" / "r"
    with OpenAIStub(GoldScript(load_tasks(tasks))) as stub:
        args = [tasks, *_runner_args(runner, tasks, dbs, tmp_path, stub.base_url), "--out", out]
        first = flexsql_eval(*args)
        assert first.returncode == 0, first.stderr
        assert "100.00% of evaluated (5/5), 100.00% of all (5/5)" in first.stderr, first.stderr
        for flag in ("--new-run", "--no-resume"):
            again = flexsql_eval(*args, flag)
            assert again.returncode == 0 and "moved to" in again.stderr, again.stderr
            assert "100.00% of all (5/5)" in again.stderr, again.stderr
            assert _scores(out) == {str(i): 1 for i in range(5)}
            assert "| ex | 5 | 5 | 5 | 100.00% | 100.00% |" in (out / "report.md").read_text()
        plain = flexsql_eval(*args)
        assert plain.returncode == 0 and "5 tasks already in" in plain.stderr, plain.stderr
        assert _scores(out) == {str(i): 1 for i in range(5)}
    earlier = sorted((out / "previous").iterdir())
    assert len(earlier) == 2
    for kept in earlier:  # each set-aside run is whole: its results, reports and submission
        assert _scores(kept) == {str(i): 1 for i in range(5)}
        assert "100.00%" in (kept / "report.md").read_text()
        assert sorted(p.name for p in (kept / "submission").glob("*.csv")) == [f"{i}.csv" for i in range(5)]


@pytest.mark.integration
def test_an_evaluation_without_its_databases_stops_before_any_work_with_exit_2(spider_tasks, tmp_path):
    """Was: exit 0 with "0.00%", every task filed under "no gold" (the README: exit 2 before any work)."""
    tasks, dbs = spider_tasks
    empty, out = tmp_path / "empty", tmp_path / "out"
    empty.mkdir()
    preds = tmp_path / "preds"
    preds.mkdir()
    (preds / "0.sql").write_text("SELECT count(*) FROM singer")
    cases = {
        "database 'concert_singer' not found under": ["--runner", "gold", "--dbs", empty],
        "pass --dbs DIR": ["--runner", "predictions", "--predictions", preds],  # the gold SQL needs it
        "no database file at": ["--runner", "gold", "--db", f"sqlite:///{tmp_path}/nowhere/{{db}}.sqlite"],
    }
    for expected, args in cases.items():
        done = flexsql_eval(tasks, *args, "--out", out)
        assert done.returncode == 2, (args, done.stderr)
        assert expected in done.stderr and "Nothing was run" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
        assert not out.exists()  # nothing written
    # an earlier run in --out is left as it was
    assert flexsql_eval(tasks, "--runner", "gold", "--dbs", dbs, "--out", out).returncode == 0
    before = (out / "results.jsonl").read_text()
    done = flexsql_eval(tasks, "--runner", "gold", "--dbs", empty, "--out", out, "--new-run")
    assert done.returncode == 2 and (out / "results.jsonl").read_text() == before
    assert not (out / "previous").exists()


@pytest.mark.integration
def test_an_interrupted_report_counts_the_tasks_that_ran_and_the_share_not_run_apart(spider_tasks, tmp_path):
    """Was: "Not run yet: 3 (not counted as failures)" above "40.00% of all tasks (2/5)"."""
    tasks, dbs = spider_tasks
    out = tmp_path / "out"
    argv = [sys.executable, "-P", "-m", "flexsql.server", "eval", str(tasks), "--runner", "command"]
    argv += ["--command", gold_agent(tmp_path, tasks), "--dbs", str(dbs), "--out", str(out), "--jobs", "1"]
    env = {**__import__("os").environ, "FLEXSQL_TEST_DELAYS": json.dumps({"2": -1})}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (out / "tasks" / "2" / "started").exists():
        time.sleep(0.05)
    assert (out / "tasks" / "2" / "started").exists()  # tasks 0 and 1 finished, 2 hangs
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    report = (out / "report.md").read_text()
    assert "2 of 5 tasks ran; 3 (60.00%) not run yet" in report, report
    assert "**100.00%** of the tasks run (2/2)" in report and "(2/5)" not in report, report
    assert "100.00% of the tasks run (2/2)" in err and "3 of 5 tasks not run yet (60.00%)" in err, err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["accuracy_all"] == 100.0 and summary["not_run"] == ["2", "3", "4"]
    html = (out / "report.html").read_text()
    assert "2 / 2 tasks" in html and "2 / 5" not in html


@pytest.mark.integration
def test_reports_state_the_effective_run_settings_and_a_resume_compares_them(spider_tasks, tmp_path):
    """Was: without --plans run.json said "plans": null, a resume with --plans 4 (the default) was refused as
    another setting, and report.md never stated K, temperature or reasoning effort."""
    from benchmarks.scripted_endpoint import GoldScript
    from flexsql.evals.tasks import load_tasks
    from tests.support.openai_stub import OpenAIStub

    tasks, dbs = spider_tasks
    out = tmp_path / "out"
    with OpenAIStub(GoldScript(load_tasks(tasks))) as stub:
        base = [tasks, "--runner", "builtin", "--dbs", dbs, "--out", out, "--base-url", stub.base_url]
        base += ["--model", "m", "--limit", "1"]
        first = flexsql_eval(*base)
        assert first.returncode == 0, first.stderr
        assert json.loads((out / "run.json").read_text())["provenance"]["plans"] == 4
        report = (out / "report.md").read_text()
        for row in (
            "| plans (K) | 4 |",
            "| temperature | not sent (the endpoint's default) |",
            "| reasoning effort | not sent (the endpoint's default) |",
            "| timeout per task | 120 s |",
        ):
            assert row in report, report
        assert "model: m (K 4, temperature default, reasoning default)" in first.stderr, first.stderr
        same = flexsql_eval(*base, "--plans", "4", "--limit", "2")  # the default, given: the same setting
        assert same.returncode == 0 and "1 task already in" in same.stderr, same.stderr
        # a run recorded before effective values were ("plans": null) resumes with the default too
        info = json.loads((out / "run.json").read_text())
        info["provenance"]["plans"] = None
        (out / "run.json").write_text(json.dumps(info))
        assert flexsql_eval(*base, "--plans", "4").returncode == 0
        other = flexsql_eval(*base, "--plans", "2")
        assert other.returncode == 2 and "plans 4 -> 2" in other.stderr, other.stderr
        toml = tmp_path / "flexsql.toml"
        toml.write_text('[model]\ntemperature = 0.7\nreasoning_effort = "low"\n')
        tuned = flexsql_eval(*base, "--config", toml, "--out", tmp_path / "tuned")
        assert tuned.returncode == 0, tuned.stderr
        tuned_report = (tmp_path / "tuned" / "report.md").read_text()
        assert "| temperature | 0.7 |" in tuned_report and "| reasoning effort | low |" in tuned_report


@pytest.mark.integration
def test_results_are_in_task_order_counts_read_right_and_files_end_with_a_newline(spider_tasks, tmp_path):
    """Was: results.jsonl in finishing order, "1 tasks", "4533.93 tasks/s" when nothing ran, report.md
    without a final newline."""
    tasks, dbs = spider_tasks
    out = tmp_path / "out"
    env = {"FLEXSQL_TEST_DELAYS": json.dumps({"0": 1.5})}  # task 0 finishes last
    args = [tasks, "--runner", "command", "--command", gold_agent(tmp_path, tasks), "--dbs", dbs]
    done = flexsql_eval(*args, "--out", out, "--jobs", "3", env=env)
    assert done.returncode == 0, done.stderr
    lines = (out / "results.jsonl").read_text().splitlines()
    assert [json.loads(line)["instance_id"] for line in lines] == ["0", "1", "2", "3", "4"]
    assert (
        sorted(json.loads(line)["finished_at"] for line in lines)[-1] == json.loads(lines[0])["finished_at"]
    )
    for name in ("results.jsonl", "report.md", "report.html", "summary.json", "run.json"):
        assert (out / name).read_text().endswith("\n"), name
    one = flexsql_eval(tasks, "--runner", "gold", "--dbs", dbs, "--out", tmp_path / "one", "--limit", "1")
    assert "1 task in" in one.stderr and "1 tasks" not in one.stderr and "tasks/s" not in one.stderr, (
        one.stderr
    )
    again = flexsql_eval(tasks, "--runner", "gold", "--dbs", dbs, "--out", tmp_path / "one", "--limit", "1")
    assert "1 task already in" in again.stderr and "tasks/s" not in again.stderr, again.stderr


@pytest.mark.integration
def test_hostile_task_ids_and_damaged_run_files_get_a_clear_message(spider_tasks, tmp_path):
    """Issue 30, item 13. Was: exit 1 with a traceback on a 300-character instance id, a broken run.json,
    and a results.jsonl line nested 100k deep."""
    tasks, dbs = spider_tasks
    long_id = tmp_path / "long.jsonl"
    long_id.write_text(
        json.dumps({"instance_id": "x" * 300, "db": "concert_singer", "question": "q?"}) + "\n"
    )
    done = flexsql_eval(long_id, "--runner", "gold", "--dbs", dbs, "--out", tmp_path / "long")
    assert done.returncode == 2 and "is 300 bytes long (at most 200)" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "long").exists()

    out = tmp_path / "out"
    args = [tasks, "--runner", "gold", "--dbs", dbs, "--out", out]
    assert flexsql_eval(*args).returncode == 0
    good = (out / "run.json").read_text()
    (out / "run.json").write_text(good[: len(good) // 2])  # cut by a crash or an editor
    broken = flexsql_eval(*args)
    assert broken.returncode == 2 and "run.json cannot be read" in broken.stderr, broken.stderr
    assert "--new-run" in broken.stderr and "Traceback" not in broken.stderr
    restarted = flexsql_eval(*args, "--new-run")
    assert restarted.returncode == 0 and "100.00% of all (5/5)" in restarted.stderr, restarted.stderr

    lines = (out / "results.jsonl").read_text().splitlines()
    nested = "[" * 100_000 + "]" * 100_000
    lines[3] = '{"instance_id": "3", "sql": ' + nested + "}"
    (out / "results.jsonl").write_text("\n".join(lines) + "\n")
    resumed = flexsql_eval(*args)
    assert resumed.returncode == 0 and "4 tasks already in" in resumed.stderr, resumed.stderr
    assert "Traceback" not in resumed.stderr and "results.rejected.jsonl" in resumed.stderr
    assert _scores(out) == {str(i): 1 for i in range(5)}  # task 3 ran again
    assert (out / "results.rejected.jsonl").read_text().count("[") == 100_000  # kept, not dropped
