"""`flexsql demo` (server/demo.py): the walkthrough on the bundled demo database over a real stdio
server, also when started from a folder that holds a `flexsql/` directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_demo_walks_through_every_step_over_a_real_stdio_server():
    result = subprocess.run(
        [sys.executable, "-m", "flexsql.server", "demo", "--scale", "0.1"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    for step in (
        "list_tables",
        "search_schema",
        "describe_table",
        "distinct_values",
        "find_values",
        "run_query",
        "compare_results",
        "run_python",
    ):
        assert f"{step}(" in out, step
    assert "web.web_events_*" in out  # the monthly shards collapse into one family
    assert "customer_addresses.country = 'France'" in out and "'FRANCE'" in out
    assert "not equivalent" in out  # the literal and the grounded readings disagree


def _flexsql_script() -> str:
    script = Path(sys.executable).parent / "flexsql"
    if not script.is_file():
        pytest.skip("no flexsql console script next to this interpreter (pip install -e . first)")
    return str(script)


@pytest.mark.integration
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
