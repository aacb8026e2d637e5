"""The `flexsql` command line (server/cli.py): --db options, --version and --help, `call`, `sources`,
clear errors for bad URLs, files and FLEXSQL_* variables, and processes that start from a folder holding
a `flexsql/` directory (a checkout's parent) still importing the installed package."""

from __future__ import annotations

import json
import os
import re
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
    for command in ("serve", "demo", "sources", "call", "tools", "eval", "install-skills", "mcp-config"):
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


# -- a new user's first hour (issue 22) --------------------------------------------------------------


def test_a_missing_database_file_stops_each_command_at_start_with_exit_2(tmp_path: Path) -> None:
    """Was: `serve` started (exit 0, "✔ Connected") and every call failed; mcp-config wrote configs for it."""
    missing = f"duckdb://{tmp_path / 'shop.duckdb'}"
    runner = CliRunner()
    for args in (
        ["serve", "--db", missing],
        ["serve", "--http", "--port", "0", "--db", missing],
        ["sources", "--db", missing],
        ["mcp-config", "--db", missing],
        ["call", "list_tables", "--db", missing],
    ):
        result = runner.invoke(main, args)
        assert result.exit_code == 2, (args, result.output)
        assert f"no database file at {tmp_path / 'shop.duckdb'}" in result.output, (args, result.output)
    folder = runner.invoke(main, ["sources", "--db", f"sqlite://{tmp_path}"])
    assert (
        folder.exit_code == 2 and "is a folder, not a database file" in folder.output
    )  # was "disk I/O error"


@pytest.mark.parametrize(
    "value, suggestion",
    [
        ("duckdb:/tmp/x.duckdb", "duckdb:///tmp/x.duckdb"),  # was duckdb:///…/duckdb:/tmp/x.duckdb
        ("x=/data/shop.sqlite", "x=sqlite:///data/shop.sqlite"),  # was sqlite:///…/x=shop.sqlite
        ("/data/shop.duckdb", "duckdb:///data/shop.duckdb"),
    ],
)
def test_a_db_value_that_is_no_url_gets_the_right_suggestion(value: str, suggestion: str) -> None:
    from flexsql.errors import ConfigError

    with pytest.raises(ConfigError, match=f"write {re.escape(suggestion)} "):
        parse_db_option(value)


def test_call_says_how_to_pass_arguments_and_suggests_near_tools(tmp_path: Path) -> None:
    """Was: `--foo` "is not key=value" and an unknown tool got no did-you-mean."""
    url = make_duckdb(tmp_path)
    runner = CliRunner()
    flag = runner.invoke(main, ["call", "describe_table", "--table", "orders", "--db", url])
    assert flag.exit_code == 2 and "write table=…" in flag.output
    unknown = runner.invoke(main, ["call", "describe_table", "--jsn", "--db", url])
    assert unknown.exit_code == 2 and "did you mean --json?" in unknown.output
    tool = runner.invoke(main, ["call", "list_tabels", "--db", url])
    assert tool.exit_code == 2 and "did you mean list_tables?" in tool.output


def test_ask_checks_its_input_before_any_model_call(tmp_path: Path) -> None:
    """Was: an empty question spent a model call, a bad --base-url was retried 4 times, a missing --db file
    cost 2 model calls, and a non-UTF-8 --external-knowledge file was a traceback."""
    from tests.support.openai_stub import OpenAIStub

    latin1 = tmp_path / "terms.txt"
    latin1.write_bytes("Umsatz: la somme des ventes, année fiscale".encode("latin-1"))
    url = make_duckdb(tmp_path)
    with OpenAIStub(lambda request: {"type": "answerable"}) as stub:
        model = ["--base-url", stub.base_url, "--model", "m"]
        cases = {
            "the question is empty": ["ask", "  ", *model, "--db", url],
            "is not an http(s) URL": ["ask", "How many?", "--base-url", "not-a-url", "--model", "m"],
            "no database file at": ["ask", "How many?", *model, "--db", f"duckdb://{tmp_path / 'no.duckdb'}"],
            "is not UTF-8 text": ["ask", "How many?", *model, "--db", url, "--external-knowledge", str(latin1)],
            "source 'nope' not found": ["ask", "How many?", *model, "--db", url, "--source", "nope"],
        }  # fmt: skip
        for expected, args in cases.items():
            result = CliRunner().invoke(main, args)
            assert result.exit_code == 2 and expected in result.output, (expected, result.output)
            assert "Traceback" not in result.output
        assert stub.requests == []  # not one model call


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}


@pytest.mark.integration
def test_ctrl_c_exits_130_without_a_traceback(tmp_path: Path) -> None:
    """Was: serve and ask printed "Aborted!" and exited 1 (eval exited 130)."""
    import signal
    import time

    from tests.support.openai_stub import Hang, OpenAIStub

    url = make_duckdb(tmp_path)
    with OpenAIStub(lambda request: Hang(60)) as stub:
        commands = [
            ["serve", "--db", url],
            ["ask", "How many orders?", "--db", url, "--base-url", stub.base_url, "--model", "m"],
        ]
        for args in commands:
            proc = subprocess.Popen(
                [sys.executable, "-P", "-m", "flexsql.server", *args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=server_env(),
            )
            # interrupted once it is at work: serving a client, or waiting for the model
            if args[0] == "serve":
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
                proc.stdin.flush()
                assert b'"result"' in proc.stdout.readline()
            deadline = time.monotonic() + 60
            while args[0] == "ask" and stub.in_flight == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=30)
            assert proc.returncode == 130, (args, err.decode())
            assert b"Traceback" not in err and b"Aborted" not in err, err.decode()


@pytest.mark.integration
def test_piped_output_is_plain_and_unwrapped(tmp_path: Path) -> None:
    """Was: hard-wrapped at 80 columns when piped (the GRANT script's comment split into SQL)."""
    deep = tmp_path / ("a-rather-long-folder-name-" * 4) / "shop.duckdb"
    deep.parent.mkdir()
    make_duckdb(tmp_path)
    (tmp_path / "shop.duckdb").rename(deep)
    proc = flexsql_cli("sources", "--db", f"duckdb://{deep}")
    assert proc.returncode == 0, proc.stderr
    assert f"duckdb://{deep}" in proc.stdout.splitlines()[0]  # one line, however long
    assert "\x1b[" not in proc.stdout  # no colour codes
    listed = json.loads(flexsql_cli("sources", "--json", "--db", f"duckdb://{deep}").stdout)
    assert listed["sources"][0]["tables"] >= 1 and listed["sources"][0]["read_only_engine"] is True


def test_verbosity_and_log_file(tmp_path: Path) -> None:
    """-q keeps warnings off stderr, --log-file keeps them in a file, and the default shows them."""
    from flexsql import config

    url = make_duckdb(tmp_path)
    config._warned.clear()  # each variable is warned about once per process
    env = {"FLEXSQL_LIMITS_QUERY_TIMEOUT_S": "5"}  # a misspelled variable: one warning
    runner = CliRunner(env=env)
    default = runner.invoke(main, ["sources", "--db", url])
    assert "did you mean FLEXSQL_LIMITS__QUERY_TIMEOUT_S?" in default.stderr
    config._warned.clear()
    log = tmp_path / "flexsql.log"
    quiet = runner.invoke(main, ["-q", "--log-file", str(log), "sources", "--db", url])
    assert quiet.exit_code == 0 and "FLEXSQL_LIMITS_QUERY_TIMEOUT_S" not in quiet.stderr
    assert "FLEXSQL_LIMITS_QUERY_TIMEOUT_S is not a flexsql setting" in log.read_text()


def test_ask_shows_its_stages_only_when_asked_or_on_a_terminal(tmp_path: Path) -> None:
    from benchmarks.scripted_endpoint import GoldScript
    from tests.support.openai_stub import OpenAIStub

    url = make_duckdb(tmp_path)
    with OpenAIStub(GoldScript([], fixed_sql="SELECT count(*) AS n FROM orders")) as stub:
        args = ["ask", "How many orders?", "--db", url, "--base-url", stub.base_url, "--model", "m"]
        piped = CliRunner().invoke(main, args)
        shown = CliRunner().invoke(main, [*args, "--progress"])
    assert piped.exit_code == 0 and shown.exit_code == 0, piped.output + shown.output
    assert "classify" not in piped.stderr and "classify" in shown.stderr
    assert "SELECT count(*) AS n FROM orders" in piped.stdout and "┃ n ┃" in piped.stdout
    assert max(len(line) for line in piped.stdout.splitlines()) < 120  # laid out at the content's width
    assert "\x1b[" not in piped.stdout


def test_tools_lists_the_tools_and_shows_one() -> None:
    runner = CliRunner()
    listing = runner.invoke(main, ["tools"])
    assert listing.exit_code == 0 and "describe_table " in listing.output and "run_query " in listing.output
    one = runner.invoke(main, ["tools", "describe_table"])
    assert one.exit_code == 0 and "arguments: table (str, required)" in one.output
    assert "flexsql call describe_table table=…" in one.output
    near = runner.invoke(main, ["tools", "descibe_table"])
    assert near.exit_code == 2 and "did you mean describe_table?" in near.output
