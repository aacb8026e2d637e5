"""The `flexsql` command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from flexsql import __version__
from flexsql.agent.flags import model_options
from flexsql.config import Settings, SourceConfig, load_settings
from flexsql.errors import ConfigError, FlexSQLError, NotFoundError
from flexsql.tools.engines import SourceRegistry, default_engine, engine_for_path, open_source

DB_HELP = (
    "source URL, repeatable; NAME=URL names it. Forms: duckdb:///path/to.duckdb, sqlite:///path/to.sqlite, "
    "postgresql://user@host:port/db, snowflake://user@account/DB/SCHEMA?warehouse=…&role=…. "
    "Default: the bundled demo database"
)


def parse_db_option(value: str) -> SourceConfig:
    head, sep, rest = value.partition("=")
    if sep and "://" not in head and "://" in rest:
        return SourceConfig(name=head.strip(), url=rest.strip())
    if "://" not in value:  # a bare path or nothing: say which URL to write instead of a traceback
        path = value.strip()
        if not path:
            raise ConfigError("--db is empty: give a source URL such as duckdb:///abs/path/shop.duckdb")
        scheme = (engine_for_path(path) or default_engine()).url_schemes[0]
        raise ConfigError(
            f"--db {path!r} is not a source URL: write {scheme}:///{str(Path(path).resolve()).lstrip('/')} "
            "(or postgresql://user@host/db, snowflake://…)"
        )
    return SourceConfig(url=value.strip())


def make_sources(settings: Settings, db: tuple[str, ...] = (), demo_fallback: bool = True) -> SourceRegistry:
    configs = [parse_db_option(v) for v in db] if db else list(settings.sources)
    registry = SourceRegistry()
    if not configs and demo_fallback:
        from flexsql.demo_db.cache import demo_url

        registry.add(
            open_source(
                demo_url(),
                name="demo",
                description="the bundled retail demo database",
                limits=settings.limits,
            )
        )
        return registry
    for cfg in configs:
        registry.add(open_source(cfg.url, name=cfg.name, description=cfg.description, limits=settings.limits))
    return registry


def fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="flexsql")
def main() -> None:
    """flexsql: FlexSQL-style database tools for LLM agents (MCP server, CLI, evaluation harness)."""


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
            serve_stdio(settings, sources)
    except FlexSQLError as exc:
        fail(str(exc))


@main.command()
@click.option("--db", "db", multiple=True, help=DB_HELP)
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="flexsql.toml to read")
def sources(db: tuple[str, ...], config_file: str | None) -> None:
    """List the configured sources and how each is protected."""
    from rich.console import Console

    console = Console()
    try:
        settings = load_settings(config_file)
        registry = make_sources(settings, db)
    except FlexSQLError as exc:
        fail(str(exc))
        return
    unreachable = 0
    for source in registry:
        console.print(f"[bold]{source.name}[/bold] ({source.dialect}) {source.display_url}")
        try:
            report = source.safety()
            tables = len(source.catalog().tables)
            console.print(f"  tables and views: {tables}")
        except FlexSQLError as exc:
            console.print(f"  [red]unreachable:[/red] {exc}")
            unreachable += 1
            continue
        status = (
            "read-only enforced by the engine"
            if report.read_only_engine
            else "read-only enforced by flexsql only"
        )
        console.print(f"  safety: {status}")
        for measure in report.measures:
            console.print(f"    - {measure}")
        for warning in report.warnings:
            console.print("  warning: " + warning, style="yellow", markup=False)
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
    from flexsql.server.app import SERVED
    from flexsql.server.sessions import SessionState
    from flexsql.tools.runtime.registry import ToolEnv, python_enabled, result_text

    try:
        spec = SERVED.get_tool(tool)
        arguments = parse_call_args(args, spec)
        spec.parse(arguments)  # argument errors before any database is opened
        settings = load_settings(config_file)
        sources = make_sources(settings, db)
    except FlexSQLError as exc:
        fail(error_text(exc))
        return
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
        sys.exit(1)
    finally:
        sources.close()
    if as_json:
        click.echo(json.dumps(model.model_dump(mode="json", by_alias=True), indent=2, ensure_ascii=False))
    else:
        click.echo(result_text(model, settings))


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
) -> None:
    """Answer QUESTION with the FlexSQL agent (needs a model endpoint: --base-url and --model, or [model]).

    Example: flexsql ask "How many orders shipped to France?" --base-url http://127.0.0.1:8000/v1
    --model openai/gpt-oss-120b"""
    import anyio

    from flexsql.agent.flags import apply_model_flags
    from flexsql.agent.service import ask_question
    from flexsql.errors import error_text
    from flexsql.paths import cache_dir
    from flexsql.server.render_answer import print_answer
    from flexsql.server.sessions import SessionState

    try:
        settings = apply_model_flags(load_settings(config_file), base_url, model_name, api_key_env, plans)
        if conversation_id and not settings.agent.conversations_dir:
            settings.agent.conversations_dir = str(cache_dir() / "conversations")
        document = open(external_knowledge, encoding="utf-8").read() if external_knowledge else None
        sources = make_sources(settings, db)
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
            )
        )
    except FlexSQLError as exc:
        fail(error_text(exc))
        return
    if as_json:
        click.echo(json.dumps(result.model_dump(mode="json"), indent=2, ensure_ascii=False))
    else:
        print_answer(result)
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
        run_demo(scale=scale)
    except FlexSQLError as exc:
        fail(str(exc))


def _register_optional_commands() -> None:
    """Subcommands that live beside their feature's code."""
    from flexsql.evals.cli import eval_command
    from flexsql.server.plugin_cli import install_skills_command, mcp_config_command

    main.add_command(eval_command, "eval")
    main.add_command(install_skills_command, "install-skills")
    main.add_command(mcp_config_command, "mcp-config")


_register_optional_commands()


if __name__ == "__main__":  # pragma: no cover
    main()
