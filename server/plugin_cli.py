"""`flexsql install-skills` and `flexsql mcp-config`: set flexsql up in Claude Code and other MCP
clients without the plugin."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
from importlib import resources
from pathlib import Path

import click

from flexsql.config import SourceConfig
from flexsql.tools.engines.urls import file_path_of, is_file_url, secrets_in

PLUGIN_TOOL_PREFIX = "mcp__plugin_flexsql_flexsql__"
CLIENTS = ("claude", "cursor", "vscode", "claude-desktop")


def shipped_skills() -> dict[str, str]:
    """Skill name -> SKILL.md text, as shipped in the flexsql.skills package."""
    root = resources.files("flexsql.skills")
    found: dict[str, str] = {}
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        skill = entry.joinpath("SKILL.md")
        if entry.is_dir() and skill.is_file():
            found[entry.name] = skill.read_text(encoding="utf-8")
    return found


def for_server_name(text: str, server_name: str) -> str:
    """Point allowed-tools at `claude mcp add <server_name>` tools instead of the plugin's.

    Claude Code names the plugin's tools mcp__plugin_flexsql_flexsql__<tool> and a server added
    with `claude mcp add NAME` mcp__NAME__<tool>; a skill that lists the wrong form would ask for
    permission on every call."""
    return text.replace(PLUGIN_TOOL_PREFIX, f"mcp__{server_name}__")


@click.command("install-skills")
@click.option(
    "--project", "scope", flag_value="project", default=True, help="install into ./.claude/skills (default)"
)
@click.option("--user", "scope", flag_value="user", help="install into ~/.claude/skills")
@click.option("--force", is_flag=True, help="replace skill files that differ from the shipped ones")
@click.option(
    "--server-name",
    default="flexsql",
    show_default=True,
    help="the name given to the server in `claude mcp add NAME`; allowed-tools use it",
)
def install_skills_command(scope: str, force: bool, server_name: str) -> None:
    """Copy flexsql's Claude Code skills into .claude/skills (for use without the plugin).

    The skills call flexsql's MCP tools, so add the server too (see `flexsql mcp-config`)."""
    if not re.fullmatch(r"[A-Za-z0-9_-]+", server_name):
        raise click.BadParameter("letters, digits, '-' and '_' only", param_hint="--server-name")
    base = (Path.home() if scope == "user" else Path.cwd()) / ".claude" / "skills"
    skills = {name: for_server_name(text, server_name) for name, text in shipped_skills().items()}
    if not skills:
        raise click.ClickException("no skills found in the installed flexsql package; reinstall flexsql")
    changed = [
        base / n / "SKILL.md"
        for n, text in skills.items()
        if (base / n / "SKILL.md").is_file() and (base / n / "SKILL.md").read_text(encoding="utf-8") != text
    ]
    if changed and not force:
        listing = "\n".join(f"  {p}" for p in changed)
        raise click.ClickException(
            f"these skill files exist and differ from the ones flexsql ships (edited, or from another "
            f"flexsql version):\n{listing}\nNothing was written. Rerun with --force to replace them."
        )
    for name, text in skills.items():
        target = base / name / "SKILL.md"
        if target.is_file() and target.read_text(encoding="utf-8") == text:
            click.echo(f"unchanged  {target}")
            continue
        state = "replaced" if target.exists() else "wrote"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        click.echo(f"{state:<10} {target}")
    click.echo(
        f"Skills use the tools of the MCP server named '{server_name}'; if you have not added it yet:\n"
        f"  {claude_add_line(server_name, launch_command('path', (), _config_path(None)), None)}\n"
        "(`flexsql mcp-config --client claude` prints it with the sources it will serve)"
    )


def launch_command(launcher: str, dbs: tuple[str, ...], config: Path | None = None) -> list[str]:
    """The argv an MCP client runs to start `flexsql serve`: every path in it absolute, since clients
    start servers in a folder of their own and often without the shell's PATH."""
    args = ["serve"]
    if config is not None:
        args += ["--config", str(config.resolve())]
    for db in dbs:
        args += ["--db", absolute_db(db)]
    if launcher == "uvx":  # flexsql is not on PyPI: uvx builds it from this checkout
        uvx = shutil.which("uvx")
        if uvx is None:
            raise click.UsageError(
                "--launcher uvx: uvx is not on PATH (pip install uv, or see https://docs.astral.sh/uv/); "
                "or use --launcher path"
            )
        # by absolute path: desktop clients (Claude Desktop, Cursor) do not read the shell's PATH
        return [str(Path(uvx).resolve()), "--from", str(source_checkout()), "flexsql", *args]
    if launcher == "flexsql":
        return ["flexsql", *args]
    # This installation's own script, by absolute path: clients such as Claude Desktop do not
    # inherit the shell's PATH or an activated virtual environment.
    script = Path(sys.argv[0]).resolve()
    if script.name != "flexsql" or not script.is_file():
        script = Path(sys.executable).parent / "flexsql"
    if not script.is_file():
        return [sys.executable, "-P", "-m", "flexsql.server", *args]  # -P: cwd cannot shadow flexsql
    return [str(script), *args]


def source_checkout() -> Path:
    """The checkout this flexsql runs from (what `uvx --from` builds), or a usage error."""
    import flexsql

    root = Path(flexsql.__file__).resolve().parent.parent
    if not (root / "pyproject.toml").is_file():
        raise click.UsageError(
            "--launcher uvx needs flexsql's source folder (flexsql is not on PyPI) and this installation "
            "is not a checkout; use --launcher path"
        )
    return root


def split_name(value: str) -> tuple[str, str]:
    """`NAME=URL` -> ("NAME=", URL); a plain URL -> ("", URL) (as `flexsql serve --db` reads it)."""
    head, sep, rest = value.partition("=")
    return (head + "=", rest) if sep and "://" not in head and "://" in rest else ("", value)


def absolute_db(value: str) -> str:
    """Make a file URL's relative path absolute: clients start servers in a directory of their own."""
    prefix, url = split_name(value)
    scheme = url.partition("://")[0].lower()
    if is_file_url(url):
        path = file_path_of(url)
        if path != ":memory:" and not Path(path).is_absolute():
            url = f"{scheme}://{Path(path).resolve()}"
    return prefix + url


def claude_add_line(name: str, argv: list[str], scope: str | None) -> str:
    scope_part = f" --scope {scope}" if scope else ""
    # the server name goes before `--`: options after it belong to the server command
    return f"claude mcp add{scope_part} {shlex.quote(name)} -- " + " ".join(shlex.quote(a) for a in argv)


def client_snippet(client: str, name: str, argv: list[str]) -> str:
    entry = {"command": argv[0], "args": argv[1:]}
    if client == "vscode":
        return json.dumps({"servers": {name: {"type": "stdio", **entry}}}, indent=2)
    return json.dumps({"mcpServers": {name: entry}}, indent=2)


WHERE = {
    "claude": "Claude Code (run in a shell; --scope user makes it available in every project)",
    "cursor": "Cursor: .cursor/mcp.json in the project, or ~/.cursor/mcp.json",
    "vscode": "VS Code: .vscode/mcp.json in the workspace",
    "claude-desktop": "Claude Desktop: claude_desktop_config.json (Settings > Developer > Edit Config)",
}


@click.command("mcp-config")
@click.option(
    "--db",
    "dbs",
    multiple=True,
    help="source URL to serve, repeatable (NAME=URL names it); default: the configured sources "
    "(flexsql.toml, FLEXSQL_SOURCES), else the demo database",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="flexsql.toml to serve with (default: FLEXSQL_CONFIG, else ./flexsql.toml when it exists); "
    "written into the client's config by absolute path",
)
@click.option(
    "--client",
    type=click.Choice([*CLIENTS, "all"]),
    default="all",
    show_default=True,
    help="which client's configuration to print",
)
@click.option("--name", default="flexsql", show_default=True, help="the server's name in the client")
@click.option(
    "--launcher",
    type=click.Choice(["path", "flexsql", "uvx"]),
    default="path",
    show_default=True,
    help="path: this installation's flexsql by absolute path; flexsql: `flexsql` on the client's PATH; "
    "uvx: uv's uvx by absolute path, building this checkout (`uvx --from <checkout> flexsql`)",
)
@click.option(
    "--scope",
    type=click.Choice(["local", "project", "user"]),
    default=None,
    help="Claude Code scope for `claude mcp add` (its default: local)",
)
def mcp_config_command(
    dbs: tuple[str, ...], config_file: str | None, client: str, name: str, launcher: str, scope: str | None
) -> None:
    """Print the `claude mcp add` line and JSON for Cursor, VS Code and Claude Desktop.

    The server it configures serves what `flexsql serve` would serve here: --db, else the sources of
    flexsql.toml (passed on as an absolute --config, so its relative paths and other settings hold
    wherever the client starts the server) or of FLEXSQL_SOURCES (passed on as --db), else the demo
    database. Which sources that is goes to stderr."""
    from flexsql.config import load_settings
    from flexsql.errors import FlexSQLError
    from flexsql.server.cli_support import anchored, check_files, fail, parse_db_option

    try:
        settings = load_settings(config_file)
        config = _config_path(config_file)
        given = [parse_db_option(db) for db in dbs]
        configured = [anchored(cfg) for cfg in (given or settings.sources)]
        # a config for a file that does not exist would show "connected" and fail every call
        check_files(configured)
    except FlexSQLError as exc:
        fail(exc)
    carried: tuple[str, ...] = dbs
    if not dbs and settings.sources and (config is None or _from_environment()):
        # FLEXSQL_SOURCES is not in the client's environment: its sources go in as --db
        carried = tuple(f"{cfg.name}={cfg.url}" if cfg.name else cfg.url for cfg in configured)
    argv = launch_command(launcher, carried, config)
    if any(secrets_in(cfg.url) for cfg in configured):
        click.echo(
            "warning: a source URL contains a password, which the client stores in plain text; "
            "prefer PGPASSWORD or the Snowflake connector's connections.toml",
            err=True,
        )
    click.echo(_serves_text(configured, config, bool(dbs)), err=True)
    chosen = CLIENTS if client == "all" else (client,)
    parts = []
    for c in chosen:
        body = claude_add_line(name, argv, scope) if c == "claude" else client_snippet(c, name, argv)
        parts.append(f"# {WHERE[c]}\n{body}" if client == "all" else body)
    click.echo("\n\n".join(parts))


def _config_path(config_file: str | None) -> Path | None:
    """The flexsql.toml `flexsql serve` would read here, or None."""
    import os

    named = config_file or os.environ.get("FLEXSQL_CONFIG")
    path = Path(named) if named else Path("flexsql.toml")
    return path.resolve() if path.is_file() else None


def _from_environment() -> bool:
    import os

    return "FLEXSQL_SOURCES" in {k.upper() for k in os.environ}


def _serves_text(configured: list[SourceConfig], config: Path | None, from_flags: bool) -> str:
    from flexsql.tools.engines.urls import redact

    if not configured:
        where = f" ({config} names none)" if config else ""
        return f"the server will serve the demo database{where}; add sources with --db or [[sources]] in flexsql.toml"
    origin = (
        "--db" if from_flags else (f"{config}" if config and not _from_environment() else "FLEXSQL_SOURCES")
    )
    listing = ", ".join(f"{cfg.name or 'unnamed'} ({redact(cfg.url)})" for cfg in configured)
    return f"the server will serve {len(configured)} source{'s' if len(configured) != 1 else ''} (from {origin}): {listing}"
