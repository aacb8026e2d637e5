"""Processes flexsql starts are isolated from the working directory: run from a folder that holds a
`flexsql/` directory (a checkout's parent, say), they still import the installed package."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture
def shadowing_cwd(tmp_path: Path) -> Path:
    decoy = tmp_path / "flexsql"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("# not flexsql: a folder that happens to share its name\n")
    return tmp_path


def _flexsql_script() -> str:
    script = Path(sys.executable).parent / "flexsql"
    if not script.is_file():
        pytest.skip("no flexsql console script next to this interpreter (pip install -e . first)")
    return str(script)


@pytest.mark.slow
def test_demo_runs_from_a_folder_containing_flexsql(shadowing_cwd):
    result = subprocess.run(
        [_flexsql_script(), "demo", "--scale", "0.1"],
        cwd=shadowing_cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "run_python(" in result.stdout and "compare_results(" in result.stdout


def test_stdio_server_child_starts_from_a_folder_containing_flexsql(shadowing_cwd):
    """`python -m flexsql.server` the way the demo, the plugin's fallback and the evals start it."""
    from flexsql.evals.execution import flexsql_command

    command = flexsql_command()
    assert command[0] != sys.executable or command[1] == "-P"  # the script, or an isolated interpreter
    for argv in (command, [sys.executable, "-P", "-m", "flexsql.server"]):
        result = subprocess.run(
            [*argv, "--version"], cwd=shadowing_cwd, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, (argv, result.stderr[-2000:])
