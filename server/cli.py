"""The `flexsql` command line."""

from __future__ import annotations

import difflib
import json
import sys
from collections.abc import Callable
from typing import Any

import click

from flexsql import __version__
from flexsql.agent.flags import model_options
from flexsql.config import load_settings
from flexsql.errors import FlexSQLError, NotFoundError
from flexsql.server.cli_support import (
    LOG_LEVELS,
    FlexGroup,
    check_model_endpoint,
    console,
    exit_code,
    fail,
    make_sources,
    parse_db_option,  # noqa: F401 - imported from here by scripts and tests
    read_text,
    setup_logging,
    stderr_is_terminal,
)

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
        if http:
            serve_http(settings, sources)
        else:
            if stderr_is_terminal():  # a person ran it: say why nothing happens
                click.echo(
                    "flexsql: serving MCP over stdio; an MCP client starts this command and talks on "
                    "stdin/stdout (see `flexsql mcp-config`). Ctrl-C stops it.",
                    err=True,
                )
            serve_stdio(settings, sources)
    except FlexSQLError as exc:
        fail(exc)


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
    flags = ["--db", "--config", "--json"]
    if name in params:
        return f"no such option: {option}; tool arguments are key=value: write {name}=…"
    near = difflib.get_close_matches(option, flags, n=1) or [
        f"{m}=…" for m in difflib.get_close_matches(name, list(params), n=1)
    ]
    hint = f" (did you mean {near[0]}?)" if near else ""
    return (
        f"no such option: {option}{hint}; `flexsql call` takes --db, --config and --json, and the "
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
@click.option("--json", "as_json", is_flag=True, help="print the structured result as JSON")
def call(
    tool: str, args: tuple[str, ...], db: tuple[str, ...], config_file: str | None, as_json: bool
) -> None:
    """Call one tool and print its output, e.g. `flexsql call describe_table table=orders`.

    Values are JSON when they parse as JSON (limit=5, tables='["a","b"]'), text otherwise; text
    parameters always stay text, list parameters also take a comma list (tables=orders,customers)."""
    import anyio

    from flexsql.errors import error_text
    from flexsql.server.sessions import SessionState
    from flexsql.tools.runtime.registry import ToolEnv, python_enabled, result_text

    try:
        spec = _tool(tool)
        arguments = parse_call_args(args, spec)
        spec.parse(arguments)  # argument errors before any database is opened
        settings = load_settings(config_file)
        sources = make_sources(settings, db)
    except NotFoundError as exc:  # an unknown tool: a usage error
        fail(exc, 2)
    except FlexSQLError as exc:
        fail(exc)
    env = ToolEnv(settings=settings, python_enabled=python_enabled(settings, True))
    context = SessionState(sources, settings).new_context()
    try:
        model = anyio.run(spec.acall, context, arguments, env)
    except Exception as exc:  # FlexSQLError or a bug: printed the way an MCP client would show it
        text = error_text(exc)
        if isinstance(exc, NotFoundError) and "result_id" in str(exc) and not len(context.results):
            # this process has just started: nothing was evicted, the id is from another session
            text = (
                f"not_found: {str(exc).split(' is unknown', 1)[0]} does not exist here: result ids live in one "
                "server session, and each `flexsql call` is a new one. Run the query in the same call "
                "(run_query max_rows=…, or run_python with flexsql.sql()), or use `flexsql serve` with an "
                "MCP client to keep results between calls"
            )
        click.echo(text, err=True)
        sys.exit(exit_code(exc))  # a configuration error found at the call is still a 2
    finally:
        sources.close()
    if as_json:
        click.echo(json.dumps(model.model_dump(mode="json", by_alias=True), indent=2, ensure_ascii=False))
    else:
        click.echo(result_text(model, settings))


@main.command("tools")
@click.argument("name", required=False)
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="flexsql.toml to read")
def tools_command(name: str | None, config_file: str | None) -> None:
    """List the tools (`flexsql call` runs one), or show one tool's description and arguments."""
    from flexsql.server.app import SERVED

    try:
        settings = load_settings(config_file)
        specs = [_tool(name)] if name else [SERVED.get_tool(n) for n in SERVED]
    except NotFoundError as exc:
        fail(exc, 2)
    except FlexSQLError as exc:
        fail(exc)
    for spec in specs:
        text = spec.describe(settings)
        if name:
            click.echo(f"{spec.name}: {text}\narguments: {spec.signature()}")
            click.echo(f"example: flexsql call {spec.name} " + " ".join(f"{k}=…" for k in _required(spec)))
        else:
            click.echo(f"{spec.name:<17} {text.splitlines()[0][:100]}")


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

    from flexsql.agent.flags import apply_model_flags
    from flexsql.agent.models.base import ModelUnavailable
    from flexsql.agent.models.factory import configured
    from flexsql.agent.service import ask_question
    from flexsql.paths import cache_dir
    from flexsql.server.render_answer import print_answer
    from flexsql.server.sessions import SessionState

    # Everything the user gave is checked before the first model call (each one costs time and money).
    if not question.strip():
        fail('the question is empty: ask something, e.g. flexsql ask "How many orders shipped to France?"')
    try:
        settings = apply_model_flags(load_settings(config_file), base_url, model_name, api_key_env, plans)
        if not configured(settings.model):
            raise ModelUnavailable()
        check_model_endpoint(settings)
        if conversation_id and not settings.agent.conversations_dir:
            settings.agent.conversations_dir = str(cache_dir() / "conversations")
        document = read_text(external_knowledge, "--external-knowledge") if external_knowledge else None
        sources = make_sources(settings, db)
        sources.get(source_name)  # --source naming no --db
    except FlexSQLError as exc:
        fail(exc, 2)
    progress: Callable[[str, str], None] | None = None
    if progress_flag if progress_flag is not None else (stderr_is_terminal() and not as_json):
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
        run_demo(scale=scale)  # a walkthrough of panels and rules: laid out at the default width
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
