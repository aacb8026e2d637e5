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
    assert "SELECT count(*) AS n FROM orders" in piped.stdout and "\nn\n7\n" in piped.stdout  # plain, no box
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


# -- a new user's afternoon, round two (issue 29): through the real interface, in a subprocess ----------

KEY = "sk-proj-Zq81mXc0vB7nL2kW9pRt4yUe"  # a made-up key that must never be printed, traced or sent


def _in_terminal(
    argv: list[str], env: dict[str, str], until: bytes, typed: bytes = b"", reply: bytes = b""
) -> tuple[int, bytes]:
    """Run argv with a pseudo-terminal as its stdin, stdout and stderr (as in a terminal window); once
    `until` is printed, type `typed` and wait for `reply`, then type Ctrl-C once. Returns the exit code
    and everything printed."""
    timeout = 60
    import pty
    import select
    import signal
    import time

    pid, fd = pty.fork()
    if pid == 0:  # the child: the terminal's foreground process, as a shell starts it
        os.execve(argv[0], argv, env)
    seen = b""
    deadline = time.monotonic() + timeout

    def read(seconds: float) -> None:
        nonlocal seen
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            ready, _, _ = select.select([fd], [], [], 0.05)
            if ready:
                try:
                    seen += os.read(fd, 65536)
                except OSError:  # the child has gone: its end of the terminal is closed
                    return

    try:
        while until not in seen and time.monotonic() < deadline:
            read(0.1)
        assert until in seen, seen.decode(errors="replace")
        if typed:
            os.write(fd, typed)
            while reply not in seen and time.monotonic() < deadline:
                read(0.1)
            assert reply in seen, seen.decode(errors="replace")
        os.write(fd, b"\x03")  # Ctrl-C: the terminal sends SIGINT to the foreground process
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                read(0.2)
                return os.waitstatus_to_exitcode(status), seen
            read(0.05)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise AssertionError("one Ctrl-C did not stop it within 20 s: " + seen.decode(errors="replace"))
    finally:
        os.close(fd)


@pytest.mark.integration
def test_one_ctrl_c_stops_a_stdio_server_in_a_terminal(tmp_path: Path) -> None:
    """Issue 29, item 4. Was: the first Ctrl-C was ignored until Enter or a second Ctrl-C (the SDK reads
    stdin in a thread the KeyboardInterrupt cannot stop)."""
    url = make_duckdb(tmp_path)
    argv = [sys.executable, "-P", "-m", "flexsql.server", "serve", "--db", url]
    # a request typed in and answered: the server now waits for the next line from the terminal
    typed = json.dumps(INITIALIZE).encode() + b"\n"
    code, seen = _in_terminal(argv, server_env({"TERM": "xterm"}), b"Ctrl-C stops it", typed, b'"result"')
    assert code == 130, seen.decode(errors="replace")
    assert b"Traceback" not in seen and b"interrupted" in seen


@pytest.mark.integration
def test_mcp_config_serves_the_configured_sources_from_any_folder(tmp_path: Path) -> None:
    """Issue 29, items 5 and 11. Was: with a flexsql.toml naming two sources, the config said
    `"args": ["serve"]` (the demo database); there was no --config; --launcher uvx wrote a bare `uvx`."""
    import anyio
    from mcp import Client, StdioServerParameters

    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    make_duckdb(project / "data")
    lite = sqlite3.connect(project / "data" / "app.sqlite")
    lite.execute("CREATE TABLE visits (id INTEGER, page TEXT)")
    lite.commit()
    lite.close()
    (project / "flexsql.toml").write_text(
        '[[sources]]\nname = "shop"\nurl = "duckdb:///./data/shop.duckdb"\n\n'
        '[[sources]]\nname = "web"\nurl = "sqlite:///./data/app.sqlite"\n'
    )
    done = flexsql_cli("mcp-config", "--client", "cursor", cwd=project)
    assert done.returncode == 0, done.stderr
    entry = json.loads(done.stdout)["mcpServers"]["flexsql"]
    assert entry["args"] == ["serve", "--config", str(project / "flexsql.toml")]
    assert Path(entry["command"]).is_absolute()
    assert (
        "serve 2 sources" in done.stderr
        and "shop (duckdb://" in done.stderr
        and "web (sqlite://" in done.stderr
    )

    async def listed() -> str:  # the client starts the server in a folder of its own, as desktop clients do
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        params = StdioServerParameters(
            command=entry["command"], args=entry["args"], cwd=elsewhere, env=server_env()
        )
        async with Client(params) as client:
            result = await client.call_tool("list_sources", {})
            return "\n".join(getattr(b, "text", "") for b in result.content)

    sources = anyio.run(listed)
    assert "shop" in sources and "web" in sources, sources

    from_env = flexsql_cli(
        "mcp-config", "--client", "claude", env={"FLEXSQL_SOURCES": '[{"url": "sqlite:///./data/app.sqlite"}]'},
        cwd=project,
    )  # fmt: skip
    assert f"--db sqlite://{project / 'data' / 'app.sqlite'}" in from_env.stdout, from_env.stdout
    uvx = flexsql_cli("mcp-config", "--client", "cursor", "--launcher", "uvx", cwd=project)
    if uvx.returncode == 0:
        command = json.loads(uvx.stdout)["mcpServers"]["flexsql"]["command"]
        assert Path(command).is_absolute() and Path(command).name == "uvx", command
    no_uvx = flexsql_cli(
        "mcp-config", "--launcher", "uvx", env={"PATH": str(Path(sys.executable).parent.parent / "nowhere")}
    )
    assert no_uvx.returncode == 2 and "uvx is not on PATH" in no_uvx.stderr, no_uvx.stderr


@pytest.mark.integration
def test_relative_paths_in_flexsql_toml_are_relative_to_the_file(tmp_path: Path) -> None:
    """Issue 29, item 12. Was: resolved against the current folder, and the error called the value `--db …`."""
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    make_duckdb(project / "data")
    (project / "flexsql.toml").write_text(
        '[[sources]]\nname = "shop"\nurl = "duckdb:///./data/shop.duckdb"\n'
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    found = flexsql_cli("sources", "--config", "../project/flexsql.toml", cwd=elsewhere)
    assert found.returncode == 0 and f"duckdb://{project / 'data' / 'shop.duckdb'}" in found.stdout, (
        found.stderr
    )
    (project / "flexsql.toml").write_text(
        '[[sources]]\nname = "gone"\nurl = "duckdb:///./data/gone.duckdb"\n'
    )
    missing = flexsql_cli("sources", "--config", "../project/flexsql.toml", cwd=elsewhere)
    assert missing.returncode == 2, missing.stderr
    assert (
        f"{project / 'flexsql.toml'}, [[sources]] entry 1 (url = 'duckdb:///./data/gone.duckdb')"
        in missing.stderr
    )
    assert "--db" not in missing.stderr and str(project / "data" / "gone.duckdb") in missing.stderr


@pytest.mark.integration
def test_an_api_key_given_as_the_variable_name_or_an_unset_variable_is_refused_at_start(
    tmp_path: Path,
) -> None:
    """Issue 29, item 6. Was: the key given as --api-key-env was accepted, printed in the error ("read from
    the variable sk-…") and written twice into the trace; an unset variable sent `Bearer EMPTY`."""
    from tests.support.openai_stub import OpenAIStub

    url = make_duckdb(tmp_path)
    trace = tmp_path / "trace.jsonl"
    toml = tmp_path / "flexsql.toml"
    toml.write_text(f'[model]\napi_key_env = "{KEY.replace("-", "")}"\n')  # a key that could be a name
    with OpenAIStub(lambda request: {"type": "answerable"}) as stub:
        model = ["--base-url", stub.base_url, "--model", "m", "--db", url, "--trace", str(trace)]
        runs = {
            "not the key itself": flexsql_cli("ask", "How many orders?", *model, "--api-key-env", KEY),
            "MY_UNSET_KEY, which is not set": flexsql_cli(
                "ask", "How many?", *model, "--api-key-env", "MY_UNSET_KEY"
            ),
            "looks like a key": flexsql_cli("ask", "How many?", *model, "--config", str(toml)),
        }
        (tmp_path / "tasks.json").write_text(
            json.dumps([{"db_id": "shop", "question": "q", "query": "SELECT 1"}])
        )
        runs["not the key itself "] = flexsql_cli(
            "eval", str(tmp_path / "tasks.json"), "--runner", "builtin", "--db", url, "--base-url",
            stub.base_url, "--model", "m", "--api-key-env", KEY, "--out", str(tmp_path / "out"),
        )  # fmt: skip
        for expected, done in runs.items():
            assert done.returncode == 2, (expected, done.stderr)
            assert expected.strip() in done.stderr, (expected, done.stderr)
            assert (
                KEY not in done.stdout + done.stderr and KEY.replace("-", "") not in done.stdout + done.stderr
            )
            assert "Traceback" not in done.stderr
        assert stub.requests == []  # nothing sent: no Bearer EMPTY, no key
    assert not trace.exists() and not (tmp_path / "out").exists()


@pytest.mark.integration
def test_serving_http_with_a_token_prints_no_deprecation_warnings(tmp_path: Path) -> None:
    """Issue 29, item 7. Was: two MCPDeprecationWarning blocks about validate_token_resource at every start."""
    from tests.support.mcp_support import http_server

    with http_server(make_duckdb(tmp_path), token="t" * 24) as (_, proc):
        pass  # it accepts connections: the start is over
    err = proc.stderr.read().decode()  # type: ignore[union-attr]
    assert "serving streamable HTTP" in err, err
    assert "Warning" not in err and "validate_token_resource" not in err, err


@pytest.mark.integration
def test_piped_output_is_plain_text_whole_lines_and_no_boxes(tmp_path: Path) -> None:
    """Issue 29, item 8. Was: `flexsql demo > file` wrapped at 80 columns (breaking its own copyable
    command) inside panel borders, and `flexsql ask … > file` drew box tables."""
    from benchmarks.scripted_endpoint import GoldScript
    from tests.support.openai_stub import OpenAIStub

    demo = flexsql_cli("demo", "--scale", "0.1", env={"COLUMNS": "80"})
    assert demo.returncode == 0, demo.stderr
    assert "One tool: flexsql call describe_table table=orders\n" in demo.stdout
    assert "customer_addresses.country" in demo.stdout.split("Grounding that mattered:")[1].splitlines()[0]
    boxes = set("╭╮╰╯│─┃━┏┓┗┛┡┩└┘")
    assert not boxes & set(demo.stdout), [line for line in demo.stdout.splitlines() if boxes & set(line)][:3]
    url = make_duckdb(tmp_path)
    with OpenAIStub(
        GoldScript([], fixed_sql="SELECT status, count(*) AS n FROM orders GROUP BY status")
    ) as stub:
        ask = flexsql_cli(
            "ask", "Orders by status?", "--db", url, "--base-url", stub.base_url, "--model", "m"
        )
    assert ask.returncode == 0, ask.stderr
    assert not boxes & set(ask.stdout), ask.stdout
    assert re.search(r"^status\s+n$", ask.stdout, re.M) and "3 rows" in ask.stdout, ask.stdout


@pytest.mark.integration
def test_options_that_would_do_nothing_or_belong_elsewhere_say_so(tmp_path: Path) -> None:
    """Issue 29, item 10. Was: `serve --port N` without --http served stdio without a word; `serve --http -v`
    said "No such option '-v'"; -q meant "errors only" on flexsql and "no progress bar" on eval."""
    url = make_duckdb(tmp_path)
    port = flexsql_cli("serve", "--port", "8123", "--db", url)
    assert port.returncode == 2 and "--port applies to the HTTP server only: add --http" in port.stderr
    for args in (
        ["serve", "--http", "-v"],
        ["sources", "--log-file", "x.log"],
        ["call", "list_tables", "-q"],
    ):
        placed = flexsql_cli(*args, "--db", url, cwd=tmp_path)
        assert placed.returncode == 2, (args, placed.stderr)
        assert (
            f"goes before the command: flexsql {args[-1] if args[-1].startswith('-') else args[-2]} {args[0]}"
            in (placed.stderr)
        ), placed.stderr
    tasks = tmp_path / "dev.json"
    tasks.write_text(json.dumps([{"db_id": "shop", "question": "q", "query": "SELECT count(*) FROM orders"}]))
    said = {}
    for name, args in {"eval -q": ["eval", str(tasks), "-q"], "-q eval": ["-q", "eval", str(tasks)],
                       "eval": ["eval", str(tasks)]}.items():  # fmt: skip
        out = tmp_path / name.replace(" ", "")
        assert (
            flexsql_cli("eval", str(tasks), "--runner", "gold", "--db", url, "--out", str(out)).returncode
            == 0
        )
        with (out / "results.jsonl").open("a") as results:
            results.write("{not json\n")  # a damaged line: a warning on stderr, unless errors only
        done = flexsql_cli(*args, "--runner", "gold", "--db", url, "--out", str(out))
        assert done.returncode == 0 and "100.00% of evaluated (1/1)" in done.stderr, done.stderr  # the result
        said[name] = "could not be read" in done.stderr
    assert said == {"eval -q": False, "-q eval": False, "eval": True}  # -q means the same in both places


@pytest.mark.integration
def test_model_errors_name_what_is_missing_and_a_hung_endpoint_fails_within_timeout_s(tmp_path: Path) -> None:
    """Issue 29, item 13. Was: --base-url without --model gave the generic "no model is configured";
    `flexsql call ask` said "pass --base-url and --model", which call does not take; with timeout_s = 2 a
    hung endpoint took 19.8 s (each of 4 attempts per stage had 2 s of its own)."""
    from tests.support.openai_stub import Hang, OpenAIStub

    url = make_duckdb(tmp_path)
    no_model = flexsql_cli("ask", "How many orders?", "--db", url, "--base-url", "http://127.0.0.1:9/v1")
    assert no_model.returncode == 2 and "no model name: add --model NAME" in no_model.stderr, no_model.stderr
    no_url = flexsql_cli("ask", "How many orders?", "--db", url, "--model", "m")
    assert no_url.returncode == 2 and "no endpoint: add --base-url URL" in no_url.stderr, no_url.stderr
    call_ask = flexsql_cli("call", "ask", "question=How many orders?", "--db", url, cwd=tmp_path)
    assert call_ask.returncode == 2 and "[model] in flexsql.toml" in call_ask.stderr, call_ask.stderr
    assert "--base-url" not in call_ask.stderr
    (tmp_path / "flexsql.toml").write_text("[model]\ntimeout_s = 2\n")
    with OpenAIStub(lambda request: Hang(60)) as stub:
        hung = flexsql_cli("ask", "How many orders?", "--db", url, "--base-url", stub.base_url, "--model", "m",
                           cwd=tmp_path)  # fmt: skip
        stages = [r.stage for r in stub.requests]
    assert hung.returncode == 1, hung.stderr
    assert (
        "did not answer within 2 s ([model] timeout_s, the bound of one request with its retries)"
        in hung.stdout
    )
    assert len(stages) == len(set(stages)), stages  # one attempt per stage: no retry past the bound


@pytest.mark.integration
def test_tools_json_call_json_errors_csv_and_a_running_http_server(tmp_path: Path) -> None:
    """Issue 29, item 14. Was: no `flexsql tools --json`; `flexsql tools` cut descriptions mid-token; a tool
    error under `call --json` was plain text on stderr and nothing on stdout; no CSV; `call` could not
    reach an already running HTTP server."""
    import csv
    import io

    from flexsql.server.app import SERVED
    from tests.support.mcp_support import http_server

    listing = json.loads(flexsql_cli("tools", "--json").stdout)["tools"]
    assert {t["name"] for t in listing} == set(SERVED)
    one = next(t for t in listing if t["name"] == "describe_table")
    assert (
        one["input_schema"]["required"] == ["table"]
        and one["example"] == "flexsql call describe_table table=…"
    )
    piped = flexsql_cli("tools").stdout.splitlines()  # piped: whole first lines, not cut mid-token
    for spec_name, line in zip(SERVED, piped, strict=True):
        assert (
            line.split(None, 1)[1]
            == SERVED.get_tool(spec_name)
            .describe(__import__("flexsql.config", fromlist=["Settings"]).Settings())
            .splitlines()[0]
        )

    url = make_duckdb(tmp_path)
    failed = flexsql_cli("call", "run_query", "sql=SELECT * FROM nope", "--db", url, "--json")
    assert failed.returncode == 1
    error = json.loads(failed.stdout)["error"]
    assert error["code"] == "engine_error" and "nope" in error["message"] and "nope" in failed.stderr
    unknown = flexsql_cli("call", "describe_tabel", "--json")
    assert unknown.returncode == 2 and json.loads(unknown.stdout)["error"]["code"] == "not_found"

    big = "sql=SELECT range AS n, 'row ' || range AS label FROM range(2500)"
    local = flexsql_cli("call", "run_query", big, "--db", url, "--csv")
    assert local.returncode == 0, local.stderr
    rows = list(csv.reader(io.StringIO(local.stdout)))
    assert rows[0] == ["n", "label"] and len(rows) == 2501 and rows[-1] == ["2499", "row 2499"]
    no_table = flexsql_cli("call", "describe_table", "table=orders", "--db", url, "--csv")
    assert no_table.returncode == 2 and "no table to print as CSV" in no_table.stderr

    token = "s" * 24
    with http_server(url, token=token) as (server, _):
        remote = flexsql_cli("call", "--url", server, "--auth-token", token, "run_query", big, "--csv")
        assert remote.returncode == 0 and remote.stdout == local.stdout, remote.stderr
        text = flexsql_cli(
            "call", "--url", server, "describe_table", "table=orders", env={"FLEXSQL_AUTH_TOKEN": token}
        )
        assert text.returncode == 0 and "status" in text.stdout, text.stderr
        refused = flexsql_cli("call", "--url", server, "list_tables")
        assert refused.returncode == 1 and "refused the request (HTTP 401)" in refused.stderr, refused.stderr
        remote_error = flexsql_cli("call", "--url", server, "--auth-token", token, "describe_table", "table=nope",
                                   "--json")  # fmt: skip
        assert (
            remote_error.returncode == 1 and json.loads(remote_error.stdout)["error"]["code"] == "not_found"
        )
    gone = flexsql_cli("call", "--url", server, "list_tables")
    assert gone.returncode == 1 and "is `flexsql serve --http` running there?" in gone.stderr, gone.stderr


@pytest.mark.integration
def test_a_damaged_sqlite_file_is_named_as_damaged_not_a_flexsql_bug(tmp_path: Path) -> None:
    """Issue 30, item 13. Was: a truncated SQLite file was reported as "flexsql bug … retry" (and
    `flexsql sources` printed a traceback)."""
    whole = tmp_path / "whole.sqlite"
    conn = sqlite3.connect(whole)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, s TEXT)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, "x" * 200) for i in range(5000)])
    conn.commit()
    conn.close()
    data = whole.read_bytes()
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(data[: len(data) // 2])  # a copy that did not finish
    for args in (["sources"], ["serve"], ["call", "list_tables"]):
        done = flexsql_cli(*args, "--db", f"sqlite:///{cut}")
        assert done.returncode == 2, (args, done.stderr)
        assert f"the SQLite file {cut} is damaged (the file has {len(data) // 2:,} bytes" in done.stderr
        assert "flexsql bug" not in done.stderr and "Traceback" not in done.stderr
    rotten = tmp_path / "rotten.sqlite"  # a whole header, a page of garbage inside
    rotten.write_bytes(data[:8192] + b"\xff" * 4096 + data[12288:])
    done = flexsql_cli(
        "call", "run_query", "sql=SELECT count(*), max(length(s)) FROM t", "--db", f"sqlite:///{rotten}"
    )
    assert done.returncode == 1 and f"the SQLite file {rotten} is damaged" in done.stderr, done.stderr
    assert "flexsql bug" not in done.stderr and "Traceback" not in done.stderr
