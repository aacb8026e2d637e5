"""`flexsql config`: every setting's value and where it came from (a flag, a FLEXSQL_* variable, the
TOML file, or the default), so "which timeout is in force, and why" has one answer."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

import click

from flexsql.config import load_settings
from flexsql.errors import FlexSQLError
from flexsql.server.cli_support import fail

SECRET_KEYS = {"auth_token"}  # shown as set / unset, never printed


def _leaves(value: Any, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    if isinstance(value, dict) and value and prefix[:1] != ("sources",):
        found: list[tuple[tuple[str, ...], Any]] = []
        for key, inner in value.items():
            found += _leaves(inner, (*prefix, str(key)))
        return found
    return [(prefix, value)]


def _in_toml(data: dict[str, Any], keys: tuple[str, ...]) -> bool:
    node: Any = data
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


def origin(keys: tuple[str, ...], toml: dict[str, Any], path: Path) -> str:
    environ = {k.upper() for k in os.environ}
    for i in range(len(keys), 0, -1):
        name = "FLEXSQL_" + "__".join(keys[:i]).upper()
        if name in environ:
            return f"env {name}"
    if _in_toml(toml, keys):
        return str(path)
    return "default"


@click.command("config")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="flexsql.toml to read")
@click.option("--json", "as_json", is_flag=True, help="print the settings and their origins as JSON")
def config_command(config_file: str | None, as_json: bool) -> None:
    """Show every setting's value and where it came from (env variable, TOML file, or default)."""
    try:
        settings = load_settings(config_file)
    except FlexSQLError as exc:
        fail(exc)
    path = Path(config_file or os.environ.get("FLEXSQL_CONFIG") or "flexsql.toml")
    toml: dict[str, Any] = {}
    if path.is_file():
        with path.open("rb") as handle:
            toml = tomllib.load(handle)
    rows = []
    for keys, value in _leaves(settings.model_dump(mode="json")):
        if keys[-1] in SECRET_KEYS:
            value = "(set)" if value else None
        rows.append({"key": ".".join(keys), "value": value, "from": origin(keys, toml, path.resolve())})
    if as_json:
        click.echo(json.dumps({"file": str(path.resolve()) if toml else None, "settings": rows}, indent=2))
        return
    click.echo(f"# file: {path.resolve() if path.is_file() else 'none (no flexsql.toml here)'}")
    for row in rows:
        click.echo(f"{row['key']} = {json.dumps(row['value'], ensure_ascii=False)}    # {row['from']}")
