"""flexsql through a TypeScript MCP client (the MCP Inspector's CLI, on the same SDK as Claude Code).

The TypeScript client checks every result's structured content against the tool's output schema —
error results included — which the Python client does not: a result it rejects never reaches the
model. Each tool is called once for a result and, where it can fail, once for an error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.engines import make_duckdb

pytestmark = pytest.mark.integration

INSPECTOR = "@modelcontextprotocol/inspector@0.15.0"  # the version .ci/run installs


def inspector_command() -> list[str]:
    if shutil.which("mcp-inspector"):
        return ["mcp-inspector", "--cli"]
    if shutil.which("npx"):
        return ["npx", "-y", INSPECTOR, "--cli"]
    pytest.skip(
        "neither mcp-inspector nor npx is installed: the TypeScript client tests need Node.js "
        f"(npm install -g {INSPECTOR})"
    )


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_duckdb(tmp_path_factory.mktemp("ts"))


def call(db: str, tool: str, **arguments: object) -> tuple[int, dict | None, str]:
    args = [
        *inspector_command(),
        sys.executable,
        "-P",
        "-m",
        "flexsql.server",
        "serve",
        "--db",
        db,
        "--method",
        "tools/call",
        "--tool-name",
        tool,
    ]
    for key, value in arguments.items():
        args += ["--tool-arg", f"{key}={value if isinstance(value, str) else json.dumps(value)}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEXSQL_") or k == "FLEXSQL_CACHE_DIR"}
    done = subprocess.run(
        args, capture_output=True, text=True, timeout=180, env=env, cwd=Path(db[len("duckdb:///") :]).parent
    )
    start = done.stdout.find("{")
    try:
        payload = json.loads(done.stdout[start:]) if start >= 0 else None
    except json.JSONDecodeError:
        payload = None
    return done.returncode, payload, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("list_tables", {}),
        ("describe_table", {"table": "orders"}),
        (
            "run_query",
            {"sql": "SELECT 1.25::DECIMAL(10,2) AS x, NULL AS y, 12345678901234567::BIGINT AS big"},
        ),
        ("find_values", {"text": "France"}),
        ("profile_column", {"table": "orders", "column": "status"}),
    ],
)
def test_results_pass_the_typescript_clients_schema_check(db: str, tool: str, arguments: dict) -> None:
    code, payload, output = call(db, tool, **arguments)
    assert code == 0 and payload is not None, output
    assert payload.get("isError") is False and payload.get("structuredContent"), output


@pytest.mark.parametrize(
    ("tool", "arguments", "error_code"),
    [
        ("describe_table", {"table": "nosuch"}, "not_found"),
        ("run_query", {"sql": "DELETE FROM orders"}, "refused"),
        ("select_result", {"result_ids": ["r1"]}, "not_found"),
        ("ask", {"question": "How many orders?"}, "config"),
    ],
)
def test_errors_reach_the_typescript_client_with_their_code(
    db: str, tool: str, arguments: dict, error_code: str
) -> None:
    code, payload, output = call(db, tool, **arguments)
    assert payload is not None and "Failed to call tool" not in output, output
    assert payload["isError"] is True
    assert payload["_meta"]["flexsql/error"]["code"] == error_code
    assert payload["content"][0]["text"].startswith(f"{error_code}: ")
