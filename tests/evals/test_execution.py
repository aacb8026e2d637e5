"""Running predictions (evals/execution.py): `--via-mcp` runs the SQL through `flexsql serve`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.evals import results, run_cli

pytestmark = pytest.mark.integration


def test_via_mcp_runs_sql_through_flexsql_serve(spider, tmp_path: Path) -> None:
    tasks, dbs = spider
    out = tmp_path / "out"
    code, output = run_cli(tasks, "--runner", "gold", "--dbs", dbs, "--out", out, "--via-mcp", "--jobs", "2")
    assert code == 0, output
    got = results(out)
    assert all(r["score"] == 1 for r in got.values()), [r["reason"] for r in got.values()]
    assert json.loads((out / "run.json").read_text())["executor"] == "mcp-stdio"
    assert list((out / "mcp-logs").glob("serve-*.log"))
