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
