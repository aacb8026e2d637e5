"""The `flexsql` command line."""

from __future__ import annotations

import difflib
import json
import logging
import shutil
import sys
from collections.abc import Callable
from typing import Any

import click

from flexsql import __version__
from flexsql.agent.flags import model_options
from flexsql.config import key_variable_problem, load_settings
from flexsql.errors import ConfigError, FlexSQLError, NotFoundError
from flexsql.server.cli_support import (
    LOG_LEVELS,
    FlexGroup,
    console,
    exit_code,
    fail,
    make_sources,
    parse_db_option,  # noqa: F401 - imported from here by scripts and tests
    read_text,
    setup_logging,
    stderr_is_terminal,
)
from flexsql.server.exits import EXIT_USAGE

EXIT_CODES = """\b
Exit codes: 0 success; 1 a runtime error (a query, the model endpoint, an unreachable source);
2 a usage or configuration error (a flag, a setting, a missing file); 130 interrupted (Ctrl-C)."""

DB_HELP = (
    "source URL, repeatable; NAME=URL names it. Forms: duckdb:///path/to.duckdb, sqlite:///path/to.sqlite, "
    "postgresql://user@host:port/db, snowflake://user@account/DB/SCHEMA?warehouse=…&role=…. "
    "Default: the bundled demo database"
)


@click.group(cls=FlexGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_CODES)
@click.version_option(__version__, prog_name="flexsql")
@click.option("-v", "--verbose", count=True, help="more log lines on stderr (-v info, -vv debug)")
@click.option("-q", "--quiet", is_flag=True, help="errors only on stderr")
@click.option(
    "--log-level", type=click.Choice(LOG_LEVELS), default=None, help="the log level (overrides -v/-q)"
)
@click.option(
    "--log-file", type=click.Path(dir_okay=False), default=None, help="also write the log lines to this file"
)
def main(verbose: int, quiet: bool, log_level: str | None, log_file: str | None) -> None:
    """flexsql: FlexSQL-style database tools for LLM agents (MCP server, CLI, evaluation harness)."""
    setup_logging(verbose, quiet, log_level, log_file)


@main.command()
@click.option("--db", "db", multiple=True, help=DB_HELP)
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="flexsql.toml to read")
@click.option("--http", is_flag=True, help="serve streamable HTTP instead of stdio")
@click.option("--host", default=None, help="HTTP bind address (default 127.0.0.1; others need --auth-token)")
@click.option("--port", type=int, default=None, help="HTTP port (default 8000)")
@click.option(
    "--auth-token",
    default=None,
    envvar="FLEXSQL_AUTH_TOKEN",
    help="bearer token HTTP clients must send (env FLEXSQL_AUTH_TOKEN)",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME[:PORT]",
    help="another Host name HTTP clients use (a proxy's, a DNS alias); may repeat. The bind "
    "address's own names are always allowed (for 0.0.0.0: this machine's names and addresses)",
)
@click.option(
    "--python/--no-python",
    "python_flag",
    default=None,
    help="enable or disable run_python (default: on for stdio and loopback HTTP)",
)
def serve(
    db: tuple[str, ...],
    config_file: str | None,
    http: bool,
    host: str | None,
    port: int | None,
    auth_token: str | None,
    allowed_hosts: tuple[str, ...],
    python_flag: bool | None,
) -> None:
    """Run the MCP server (stdio by default)."""
    from flexsql.server.transport import serve_http, serve_stdio

    if not http:  # options of the HTTP server, given to a stdio one, would do nothing
        ctx = click.get_current_context()
        given = [
            flag
            for name, flag in (
                ("host", "--host"),
                ("port", "--port"),
                ("auth_token", "--auth-token"),
                ("allowed_hosts", "--allowed-host"),
            )
            if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE
        ]
        if given:
            fail(
                f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} to the HTTP server only: add "
                "--http (flexsql serve --http …), or leave "
                f"{'it' if len(given) == 1 else 'them'} out to serve MCP over stdio"
            )
    try:
        settings = load_settings(
            config_file,
            host=host,
            port=port,
            auth_token=auth_token,
            allowed_hosts=list(allowed_hosts) or None,
        )
        if python_flag is not None:
            settings.sandbox.enabled = python_flag
        sources = make_sources(settings, db)
        key_variable = settings.model.api_key_env
        if key_variable and key_variable_problem(key_variable):  # the server runs; only `ask` needs the key
            logging.getLogger("flexsql.server").warning(
                "the ask tool will fail: [model] api_key_env %s", key_variable_problem(key_variable)
            )
        if http:
            serve_http(settings, sources)
        else:
            if stderr_is_terminal():  # a person ran it: say why nothing happens
                click.echo(
                    "flexsql: serving MCP over stdio; an MCP client starts this command and talks on "
                    "stdin/stdout (see `flexsql mcp-config`). Ctrl-C stops it.",
                    err=True,
                )
            leave_on_ctrl_c()
            serve_stdio(settings, sources)
    except FlexSQLError as exc:
        fail(exc)


def leave_on_ctrl_c() -> None:
    """Ctrl-C stops a stdio server at once. The MCP SDK reads stdin in a worker thread, which the
    KeyboardInterrupt cannot stop: in a terminal the server would wait for the next line (Enter, or a
    second Ctrl-C). A stdio server keeps nothing a client could lose by leaving now; the exit handlers
    still stop background work and cancel running statements."""
    import signal

    from flexsql.server.exits import EXIT_INTERRUPTED, leave

    def interrupted(signum: int, frame: object) -> None:
        click.echo("interrupted", err=True)
        leave(EXIT_INTERRUPTED)

    signal.signal(signal.SIGINT, interrupted)


@main.command()
@click.option("--db", "db", multiple=True, help=DB_HELP)
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="flexsql.toml to read")
@click.option("--json", "as_json", is_flag=True, help="print the sources and their safety as JSON")
def sources(db: tuple[str, ...], config_file: str | None, as_json: bool) -> None:
    """List the configured sources and how each is protected."""
    out = console()
    try:
        settings = load_settings(config_file)
        registry = make_sources(settings, db)
    except FlexSQLError as exc:
        fail(exc)
    unreachable = 0
    listing: list[dict[str, Any]] = []
    for source in registry:
        entry: dict[str, Any] = {"name": source.name, "dialect": source.dialect, "url": source.display_url}
        listing.append(entry)
        if not as_json:
            out.print(f"[bold]{source.name}[/bold] ({source.dialect}) {source.display_url}")
        try:
            report = source.safety()
            tables = len(source.catalog().tables)
        except FlexSQLError as exc:
            entry["error"] = str(exc)
            if not as_json:
                out.print(f"  [red]unreachable:[/red] {exc}")
            unreachable += 1
            continue
        entry.update(
            tables=tables,
            read_only_engine=report.read_only_engine,
            measures=list(report.measures),
            warnings=list(report.warnings),
        )
        if as_json:
            continue
        out.print(f"  tables and views: {tables}")
        status = (
            "read-only enforced by the engine"
            if report.read_only_engine
            else "read-only enforced by flexsql only"
        )
        out.print(f"  safety: {status}")
        for measure in report.measures:
            out.print(f"    - {measure}", markup=False)
        for warning in report.warnings:
            out.print("  warning: " + warning, style="yellow", markup=False)
    if as_json:
        click.echo(json.dumps({"sources": listing}, indent=2, ensure_ascii=False))
    if unreachable:  # scripts and CI checks read the exit status
        sys.exit(1)


def parse_call_args(pairs: tuple[str, ...], spec: Any = None) -> dict[str, Any]:
    """key=value pairs: JSON when a value parses as JSON (limit=5, tables='["a","b"]'), text otherwise.
    With the tool's spec, text parameters stay text (text=1234) and list parameters take a comma list
    (tables=orders,customers)."""
    fields = spec.args.model_fields if spec is not None else {}
    by_key = {(info.alias or name): info for name, info in fields.items()}
    args: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if key.startswith("-") and key.lstrip("-") and (not sep or key.lstrip("-") in by_key):
            raise click.UsageError(_option_hint(key, by_key))
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not key=value (example: table=orders limit=5)")
        annotation = str(by_key[key].annotation) if key in by_key else ""
        try:
            parsed: Any = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        if annotation in ("<class 'str'>", "str | None") or annotation.startswith("typing.Optional[str"):
            args[key] = value
        elif "list[" in annotation and not isinstance(parsed, list):
            args[key] = [part.strip() for part in value.split(",") if part.strip()]
        elif isinstance(parsed, list | dict | int | float | bool) or parsed is None:
            args[key] = parsed
        else:
            args[key] = value
    return args


def _option_hint(option: str, params: dict[str, Any]) -> str:
    """`flexsql call … --foo`: the tool's arguments are key=value; a flag of `call` or a near name."""
    name = option.lstrip("-").replace("-", "_")
    flags = ["--db", "--config", "--json", "--csv", "--url", "--auth-token"]
    group = {opt for param in main.params for opt in (*param.opts, *param.secondary_opts)}
    if option in group or (option.startswith("-v") and set(option[1:]) == {"v"}):
        return (
            f"no such option {option} for `flexsql call`: {option} is an option of flexsql itself and goes "
            f"before the command: flexsql {option} call …"
        )
    if name in params:
        return f"no such option: {option}; tool arguments are key=value: write {name}=…"
    near = difflib.get_close_matches(option, flags, n=1) or [
        f"{m}=…" for m in difflib.get_close_matches(name, list(params), n=1)
    ]
    hint = f" (did you mean {near[0]}?)" if near else ""
    return (
        f"no such option: {option}{hint}; `flexsql call` takes {', '.join(flags)}, and the "
        f"tool's arguments as key=value ({', '.join(params) or 'none'})"
    )


def _tool(name: str) -> Any:
    from flexsql.server.app import SERVED

    try:
        return SERVED.get_tool(name)
    except NotFoundError:
        names = list(SERVED)
        near = difflib.get_close_matches(name, names, n=1)
        hint = f"did you mean {near[0]}? " if near else ""
        raise NotFoundError(f"unknown tool {name!r}; {hint}tools: {', '.join(names)}") from None


@main.command(context_settings={"ignore_unknown_options": True})
@click.argument("tool")
@click.argument("args", nargs=-1)
@click.option("--db", "db", multiple=True, help=DB_HELP)
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="flexsql.toml to read")
@click.option(
    "--url",
    metavar="URL",
    default=None,
    help="call the tool on a running `flexsql serve --http` (e.g. http://127.0.0.1:8000/mcp) instead of "
    "opening the sources in this process",
)
@click.option(
    "--auth-token",
    default=None,
    envvar="FLEXSQL_AUTH_TOKEN",
    help="the bearer token the --url server requires (env FLEXSQL_AUTH_TOKEN)",
)
@click.option("--json", "as_json", is_flag=True, help="print the structured result (or the error) as JSON")
@click.option(
    "--csv",
    "as_csv",
    is_flag=True,
    help="print a table result (run_query, fetch_rows, sample_rows, run_python…) as CSV: every row it keeps",
)
def call(
    tool: str,
    args: tuple[str, ...],
    db: tuple[str, ...],
    config_file: str | None,
    url: str | None,
    auth_token: str | None,
    as_json: bool,
    as_csv: bool,
) -> None:
    """Call one tool and print its output, e.g. `flexsql call describe_table table=orders`.

    Values are JSON when they parse as JSON (limit=5, tables='["a","b"]'), text otherwise; text
    parameters always stay text, list parameters also take a comma list (tables=orders,customers).
    With --url the tool runs on a server already running over HTTP (its sources and settings)."""
    from flexsql.errors import error_code, error_text

    if as_json and as_csv:
        raise click.UsageError("give --json or --csv, not both")
    try:
        spec = _tool(tool)
        arguments = parse_call_args(args, spec)
        spec.parse(arguments)  # argument errors before any database is opened
        if url is not None:
            if db or config_file:
                raise ConfigError(
                    "--url calls a running server, which serves its own sources: drop --db and --config"
                )
            structured, text, table = call_remote(url, auth_token, tool, arguments, as_csv)
        else:
            structured, text, table = call_local(spec, arguments, config_file, db, as_csv)
    except click.ClickException:
        raise
    except (FlexSQLError, CallFailed) as exc:
        if isinstance(exc, CallFailed):
            code, kind, message = exc.exit_code, exc.code, exc.text
        else:
            unknown_tool = isinstance(exc, NotFoundError) and str(exc).startswith("unknown tool")
            code = (
                EXIT_USAGE if unknown_tool else exit_code(exc)
            )  # a configuration error at the call is a 2 too
            kind, message = error_code(exc), error_text(exc)
        if as_json:  # a program reading stdout gets JSON either way
            click.echo(
                json.dumps({"error": {"code": kind, "message": message}}, indent=2, ensure_ascii=False)
            )
        click.echo(message if message.startswith("error: ") else f"error: {message}", err=True)
        sys.exit(code)
    if as_csv:
        if table is None:
            fail(
                f"{tool} gives no table to print as CSV; --csv takes run_query, fetch_rows, sample_rows, "
                "run_python and other tools whose result has rows (use --json for the others)"
            )
        columns, rows, note = table
        write_csv(columns, rows)
        if note:
            click.echo(note, err=True)
    elif as_json:
        click.echo(json.dumps(structured, indent=2, ensure_ascii=False, default=str))
    else:
        click.echo(text)


class CallFailed(Exception):
    """A tool call that ended in an error result (over --url: as the server said it)."""

    def __init__(self, text: str, code: str = "error", exit_code: int = 1) -> None:
        super().__init__(text)
        self.text, self.code, self.exit_code = text, code, exit_code


Table = tuple[list[str], list[Any], str | None]  # columns, rows, a note when rows are left out


def call_local(
    spec: Any, arguments: dict[str, Any], config_file: str | None, db: tuple[str, ...], as_csv: bool
) -> tuple[Any, str, Table | None]:
    """Run the tool in this process on the configured sources: (structured, text, table)."""
    import anyio

    from flexsql.server.sessions import SessionState
    from flexsql.tools.runtime.registry import ToolEnv, python_enabled, result_text

    settings = load_settings(config_file)
    sources = make_sources(settings, db)
    env = ToolEnv(settings=settings, python_enabled=python_enabled(settings, True))
    context = SessionState(sources, settings).new_context()
    try:
        model = anyio.run(spec.acall, context, arguments, env)
        structured = model.model_dump(mode="json", by_alias=True)
        table: Table | None = None
        result_id = structured.get("result_id")
        stored = context.results.get(result_id) if as_csv and isinstance(result_id, str) else None
        if stored is not None:
            left = stored.total_rows - len(stored.rows)
            note = (
                f"note: {len(stored.rows):,} of {stored.total_rows:,} rows written: the result keeps at most "
                "[limits] store_rows rows"
                if left > 0 or stored.total_is_lower_bound
                else None
            )
            table = (list(stored.columns), list(stored.rows), note)
        elif as_csv:
            table = _table_of(structured)
        return structured, result_text(model, settings), table
    except FlexSQLError as exc:
        if isinstance(exc, NotFoundError) and "result_id" in str(exc) and not len(context.results):
            # this process has just started: nothing was evicted, the id is from another session
            raise NotFoundError(
                f"{str(exc).split(' is unknown', 1)[0]} does not exist here: result ids live in one server "
                "session, and each `flexsql call` is a new one. Run the query in the same call (run_query "
                "max_rows=…, or run_python with flexsql.sql()), use `flexsql call --url` against a running "
                "`flexsql serve --http`, or an MCP client to keep results between calls"
            ) from None
        raise
    finally:
        sources.close()


def _table_of(structured: dict[str, Any]) -> Table | None:
    columns, rows = structured.get("columns"), structured.get("rows")
    if not isinstance(columns, list) or not isinstance(rows, list):
        return None
    total = structured.get("total_rows")
    note = (
        f"note: {len(rows):,} of {total:,} rows written"
        if isinstance(total, int) and total > len(rows)
        else None
    )
    return [str(c) for c in columns], rows, note


def call_remote(
    url: str, token: str | None, tool: str, arguments: dict[str, Any], as_csv: bool
) -> tuple[Any, str, Table | None]:
    """Call the tool on a running HTTP server, as an MCP client: (structured, text, table). With --csv the
    rows a result keeps beyond the first page are read with fetch_rows in the same session."""
    import anyio

    async def run() -> tuple[Any, str, Table | None]:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        headers = {"Authorization": f"Bearer {token}"} if token else {}

        async def record(response: Any) -> None:  # the SDK's error does not say the HTTP status
            statuses.append(response.status_code)

        async with (
            httpx2.AsyncClient(
                headers=headers, timeout=httpx2.Timeout(30.0, read=3600.0), event_hooks={"response": [record]}
            ) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            result = await client.call_tool(tool, arguments)
            text = "\n".join(getattr(block, "text", "") for block in result.content)
            if result.is_error:
                code = _code_of(text)
                raise CallFailed(text, code, EXIT_USAGE if code in ("config", "invalid_argument") else 1)
            structured = (
                result.structured_content if result.structured_content is not None else {"text": text}
            )
            table = _table_of(structured) if as_csv else None
            result_id = structured.get("result_id")
            if table is not None and isinstance(result_id, str):
                columns, rows, _ = table
                kept = structured.get("kept_rows") or structured.get("total_rows") or len(rows)
                while isinstance(kept, int) and len(rows) < kept:
                    page = await client.call_tool(
                        "fetch_rows", {"result_id": result_id, "offset": len(rows), "limit": 1000}
                    )
                    more = (page.structured_content or {}).get("rows") or []
                    if page.is_error or not more:
                        break
                    rows = [*rows, *more]
                total = structured.get("total_rows")
                note = (
                    f"note: {len(rows):,} of {total:,} rows written: the result keeps at most [limits] "
                    "store_rows rows"
                    if isinstance(total, int) and total > len(rows)
                    else None
                )
                table = (columns, rows, note)
            return structured, text, table

    statuses: list[int] = []
    try:
        return anyio.run(run)
    except Exception as exc:  # the tool's error, or: connection refused, a 401, not an MCP server
        found: BaseException = exc
        while isinstance(found, BaseExceptionGroup) and found.exceptions:  # the SDK's task groups
            found = found.exceptions[0]
        if isinstance(found, CallFailed):
            raise found from None
        raise CallFailed(_remote_problem(url, found, statuses), "unavailable") from None


def _remote_problem(url: str, found: BaseException, statuses: list[int]) -> str:
    text = f"{type(found).__name__}: {found}"
    if 401 in statuses or 403 in statuses:
        return (
            f"the server at {url} refused the request (HTTP {401 if 401 in statuses else 403}): pass the "
            "token it was started with, --auth-token TOKEN or FLEXSQL_AUTH_TOKEN"
        )
    if 421 in statuses:
        return f"the server at {url} refused this Host name (HTTP 421): use the address it serves on"
    return (
        f"cannot call the flexsql server at {url} ({text[:300]}); is `flexsql serve --http` running "
        "there? The URL ends in /mcp, e.g. http://127.0.0.1:8000/mcp"
    )


def _code_of(text: str) -> str:
    head = text.split(":", 1)[0].strip()
    return head if head.replace("_", "").isalpha() and len(head) < 30 else "error"


def write_csv(columns: list[str], rows: list[Any]) -> None:
    """Rows as CSV on stdout: NULL as an empty field, nested values (JSON, lists) as JSON text."""
    import csv

    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(
            [
                ""
                if v is None
                else json.dumps(v, ensure_ascii=False, default=str)
                if isinstance(v, dict | list)
                else v
                for v in row
            ]
        )


@main.command("tools")
@click.argument("name", required=False)
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="flexsql.toml to read")
@click.option(
    "--json", "as_json", is_flag=True, help="print the tools' descriptions and input schemas as JSON"
)
def tools_command(name: str | None, config_file: str | None, as_json: bool) -> None:
    """List the tools (`flexsql call` runs one), or show one tool's description and arguments."""
    from flexsql.server.app import SERVED

    try:
        settings = load_settings(config_file)
        specs = [_tool(name)] if name else [SERVED.get_tool(n) for n in SERVED]
    except NotFoundError as exc:
        fail(exc, 2)
    except FlexSQLError as exc:
        fail(exc)
    if as_json:
        listing = [
            {
                "name": spec.name,
                "description": spec.describe(settings),
                "input_schema": spec.input_schema(),
                "example": f"flexsql call {spec.name} " + " ".join(f"{k}=…" for k in _required(spec)),
            }
            for spec in specs
        ]
        click.echo(json.dumps(listing[0] if name else {"tools": listing}, indent=2, ensure_ascii=False))
        return
    width = max(40, shutil.get_terminal_size().columns - 19) if sys.stdout.isatty() else None
    for spec in specs:
        text = spec.describe(settings)
        if name:
            click.echo(f"{spec.name}: {text}\narguments: {spec.signature()}")
            click.echo(f"example: flexsql call {spec.name} " + " ".join(f"{k}=…" for k in _required(spec)))
        else:
            click.echo(f"{spec.name:<17} {_first_line(text, width)}")


def _first_line(text: str, width: int | None) -> str:
    """A description's first line; on a terminal cut at a word boundary to fit, with an ellipsis."""
    line = text.splitlines()[0] if text else ""
    if width is None or len(line) <= width:
        return line
    cut = line[: width - 1].rsplit(" ", 1)[0].rstrip(" ,;:—-(")
    return cut + "…"


def _required(spec: Any) -> list[str]:
    return [info.alias or key for key, info in spec.args.model_fields.items() if info.is_required()]


@main.command()
@click.argument("question")
@click.option("--db", "db", multiple=True, help=DB_HELP)
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="flexsql.toml to read")
@model_options
@click.option(
    "--conversation",
    "conversation_id",
    default=None,
    metavar="ID",
    help="continue conversation ID (kept in [agent] conversations_dir, default the user cache)",
)
@click.option(
    "--external-knowledge",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="a document defining the question's terms",
)
@click.option(
    "--trace", "trace_path", type=click.Path(dir_okay=False), default=None, help="write the JSONL trace here"
)
@click.option(
    "--source", "source_name", default=None, metavar="NAME", help="which --db to ask (default: the first)"
)
@click.option("--json", "as_json", is_flag=True, help="print the whole answer as JSON")
@click.option(
    "--remember",
    is_flag=True,
    help="store the answer's SQL in the source's knowledge store as verified by you (recall offers it later)",
)
@click.option(
    "--progress/--no-progress",
    "progress_flag",
    default=None,
    help="print each stage on stderr as it runs (default: when stderr is a terminal)",
)
def ask(
    question: str,
    db: tuple[str, ...],
    config_file: str | None,
    base_url: str | None,
    model_name: str | None,
    api_key_env: str | None,
    plans: int | None,
    conversation_id: str | None,
    external_knowledge: str | None,
    trace_path: str | None,
    source_name: str | None,
    as_json: bool,
    remember: bool,
    progress_flag: bool | None,
) -> None:
    """Answer QUESTION with the FlexSQL agent (needs a model endpoint: --base-url and --model, or [model]).

    Example: flexsql ask "How many orders shipped to France?" --base-url http://127.0.0.1:8000/v1
    --model openai/gpt-oss-120b"""
    import anyio

    from flexsql.agent.flags import apply_model_flags, check_model_settings
    from flexsql.agent.service import ask_question
    from flexsql.paths import cache_dir
    from flexsql.server.render_answer import print_answer
    from flexsql.server.sessions import SessionState

    # Everything the user gave is checked before the first model call (each one costs time and money).
    if not question.strip():
        fail('the question is empty: ask something, e.g. flexsql ask "How many orders shipped to France?"')
    try:
        settings = apply_model_flags(load_settings(config_file), base_url, model_name, api_key_env, plans)
        check_model_settings(settings)
        if conversation_id and not settings.agent.conversations_dir:
            settings.agent.conversations_dir = str(cache_dir() / "conversations")
        document = read_text(external_knowledge, "--external-knowledge") if external_knowledge else None
        sources = make_sources(settings, db)
        sources.get(source_name)  # --source naming no --db
    except FlexSQLError as exc:
        fail(exc, 2)
    progress: Callable[[str, str], None] | None = None
    quiet = bool(click.get_current_context().find_root().params.get("quiet"))  # `flexsql -q ask`: errors only
    if progress_flag if progress_flag is not None else (stderr_is_terminal() and not as_json and not quiet):
        err = console(stderr=True)

        def print_stage(stage: str, message: str) -> None:
            err.print(f"{stage}: {message}", style="dim", highlight=False, markup=False)

        progress = print_stage

    try:
        context = SessionState(sources, settings).new_context()
        result = anyio.run(
            lambda: ask_question(
                context,
                settings,
                question,
                source=source_name,
                conversation_id=conversation_id,
                external_knowledge=document,
                trace_path=trace_path,
                on_stage=progress,
                remember="flexsql ask --remember" if remember else None,
            )
        )
    except FlexSQLError as exc:
        sources.close()
        fail(exc)
    if as_json:
        click.echo(json.dumps(result.model_dump(mode="json"), indent=2, ensure_ascii=False))
    else:
        print_answer(result, console())
    sources.close()
    if result.status == "failed":
        sys.exit(1)


@main.command()
@click.option(
    "--scale", type=float, default=1.0, show_default=True, help="demo database size (1 = 100k order items)"
)
def demo(scale: float) -> None:
    """Walk through the FlexSQL way on the bundled demo database (no model needed)."""
    from flexsql.server.demo import run_demo

    try:
        run_demo(scale=scale, console=console())  # panels on a terminal, plain unwrapped text when piped
    except FlexSQLError as exc:
        fail(exc)


def _register_optional_commands() -> None:
    """Subcommands that live beside their feature's code."""
    from flexsql.evals.cli import eval_command
    from flexsql.server.config_cli import config_command
    from flexsql.server.learn_cli import learn_command
    from flexsql.server.plugin_cli import install_skills_command, mcp_config_command

    main.add_command(eval_command, "eval")
    main.add_command(config_command, "config")
    main.add_command(learn_command, "learn")
    main.add_command(install_skills_command, "install-skills")
    main.add_command(mcp_config_command, "mcp-config")


_register_optional_commands()


if __name__ == "__main__":  # pragma: no cover
    main()
