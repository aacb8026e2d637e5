"""The `flexsql` command line (server/cli.py): --db options, --version and --help, `call`, `sources`,
clear errors for bad URLs, files and FLEXSQL_* variables, and processes that start from a folder holding
a `flexsql/` directory (a checkout's parent) still importing the installed package."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from flexsql.server.cli import main, parse_db_option
from tests.support.engines import make_duckdb, require_pg
from tests.support.mcp_support import server_env


def test_db_option_names():
    assert parse_db_option("sales=postgresql://u@h/db").name == "sales"
    unnamed = parse_db_option("snowflake://u@acct/DB/S?warehouse=W&role=R")
    assert unnamed.name is None and unnamed.url.endswith("role=R")


def test_version_and_help():
    runner = CliRunner()
    assert "0.1.0" in runner.invoke(main, ["--version"]).output
    out = runner.invoke(main, ["--help"]).output
    for command in ("serve", "demo", "sources", "call", "eval", "install-skills", "mcp-config"):
        assert command in out


def test_call_prints_text_and_json(tmp_path):
    from tests.support.engines import make_duckdb

    url = make_duckdb(tmp_path)
    runner = CliRunner()
    result = runner.invoke(main, ["call", "describe_table", "table=orders", "--db", url])
    assert result.exit_code == 0, result.output
    assert "order_id" in result.output and "PK" in result.output
    result = runner.invoke(
        main, ["call", "run_query", "sql=SELECT count(*) AS n FROM orders", "--json", "--db", url]
    )
    assert json.loads(result.output)["rows"] == [[7]]
    result = runner.invoke(main, ["call", "run_query", "sql=DROP TABLE orders", "--db", url])
    assert result.exit_code == 1 and "refused: DROP" in result.output
    result = runner.invoke(main, ["call", "no_such_tool", "--db", url])
    assert result.exit_code == 2 and "unknown tool" in result.output


def test_sources_command_reports_safety(tmp_path):
    from tests.support.engines import make_sqlite

    url = make_sqlite(tmp_path)
    result = CliRunner().invoke(main, ["sources", "--db", url])
    assert result.exit_code == 0
    assert "read-only enforced by the engine" in result.output and "mode=ro" in result.output


@pytest.mark.postgres
def test_sources_command_warns_about_postgres_superuser():

    dsn = require_pg()
    result = CliRunner().invoke(main, ["sources", "--db", dsn])
    assert "superuser" in result.output and "CREATE ROLE flexsql_reader" in result.output


@pytest.mark.integration
def test_bad_source_url_is_a_clear_error():
    result = subprocess.run(
        [sys.executable, "-m", "flexsql.server", "sources", "--db", "mysql://x@y/z"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "unsupported source scheme 'mysql'" in result.stderr


@pytest.mark.integration
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


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FLEXSQL_CONFIG": ""}
    env.pop("FLEXSQL_CONFIG")
    return subprocess.run(
        [sys.executable, "-m", "flexsql.server", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=env,
    )


@pytest.mark.integration
def test_cli_sources_errors_are_clear(tmp_path: Path) -> None:
    duck = tmp_path / "file.duckdb"
    duckdb.connect(str(duck)).close()
    lite = tmp_path / "file.sqlite"
    sqlite3.connect(lite).execute("CREATE TABLE t (x)").connection.close()
    cases = [
        ("sources", "--db", f"sqlite:///{duck}"),
        ("sources", "--db", str(duck)),
        ("sources", "--db", ""),
        ("sources", "--db", f"duckdb:///{lite}"),
    ]
    for args in cases:
        proc = _cli(*args, cwd=tmp_path)
        assert "Traceback" not in proc.stderr, (args, proc.stderr[-2000:])
        assert proc.returncode != 0, (args, proc.stdout, proc.stderr)
    sqlite_as_duck = _cli("sources", "--db", f"duckdb:///{lite}", cwd=tmp_path)
    assert "sqlite:///" in sqlite_as_duck.stderr + sqlite_as_duck.stdout
    duck_as_sqlite = _cli("sources", "--db", f"sqlite:///{duck}", cwd=tmp_path)
    assert "duckdb:///" in duck_as_sqlite.stderr + duck_as_sqlite.stdout


def flexsql_cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-P", "-m", "flexsql.server", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=server_env(env),
        cwd=cwd,
    )


@pytest.mark.integration
def test_a_bad_flexsql_sources_variable_is_named_as_the_environment_variable(tmp_path):
    """Was: 'cannot read the configuration flexsql.toml: error parsing value for field "sources"…'."""
    proc = flexsql_cli("sources", env={"FLEXSQL_SOURCES": "duckdb:///x.duckdb"}, cwd=tmp_path)
    assert proc.returncode == 2
    assert "environment variable FLEXSQL_SOURCES" in proc.stderr and "JSON" in proc.stderr, proc.stderr
    assert "flexsql.toml" not in proc.stderr


@pytest.mark.integration
def test_fetch_rows_in_a_fresh_flexsql_call_explains_sessions(tmp_path):
    """Was: 'unknown or was evicted to save memory (kept now: none yet)' in a process that just started."""
    proc = flexsql_cli("call", "fetch_rows", "result_id=r1", "--db", make_duckdb(tmp_path))
    assert proc.returncode == 1
    assert "evicted" not in proc.stderr and "flexsql serve" in proc.stderr and "same call" in proc.stderr, (
        proc.stderr
    )
