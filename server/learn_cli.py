"""`flexsql learn`: import verified queries, documents, a semantic model or a query log into a source's
knowledge store (flexsql.tools.knowledge), or read the engine's own query history."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from flexsql.errors import FlexSQLError, InvalidArgument
from flexsql.server.cli_support import console, fail, make_sources

if TYPE_CHECKING:  # imported when the command runs: `flexsql --help` must not build the tools
    from flexsql.tools.knowledge.learn import LearnReport

FORMATS_HELP = (
    "how to read FILE: spider (a JSON list of question + query/SQL, BIRD's evidence too), jsonl ({question, sql} "
    "per line), cortex (a Cortex Analyst semantic model: verified_queries, synonyms, descriptions, relationships), "
    "document (Markdown or text), sql (a query log). Default: from the extension (.json, .jsonl, .yaml, .md/.txt, .sql)"
)


@click.command()
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--db",
    "db",
    multiple=True,
    help="the source URL (or NAME=URL) whose store to fill; default: the configured one",
)
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="flexsql.toml to read")
@click.option(
    "--source", "source_name", default=None, metavar="NAME", help="which source, when several are configured"
)
@click.option(
    "--history",
    is_flag=True,
    help="read the engine's query history (PostgreSQL pg_stat_statements, Snowflake QUERY_HISTORY)",
)
@click.option("--format", "fmt", default=None, metavar="FORMAT", help=FORMATS_HELP)
@click.option(
    "--verified-by",
    default=None,
    metavar="NAME",
    help="who verified the imported queries (default: the file's, else your user name)",
)
@click.option(
    "--db-id",
    default=None,
    metavar="ID",
    help="of a file with several databases' questions, import this db_id's (default: the source's name)",
)
@click.option("--strict", is_flag=True, help="write nothing when any item is rejected")
@click.option("--json", "as_json", is_flag=True, help="print the reports as JSON")
def learn_command(
    files: tuple[Path, ...],
    db: tuple[str, ...],
    config_file: str | None,
    source_name: str | None,
    history: bool,
    fmt: str | None,
    verified_by: str | None,
    db_id: str | None,
    strict: bool,
    as_json: bool,
) -> None:
    """Teach flexsql a database: import FILEs into the source's knowledge store, or its --history.

    Each query is parsed and checked against the current schema; one naming what the schema lacks is kept
    as stale (never recalled as verified), one that does not parse is reported and left out. Importing the
    same file again changes nothing. The store is a folder of plain files (its path is printed): review and
    commit it like code.

    Example: flexsql learn verified.jsonl glossary.md --db duckdb:///shop.duckdb"""
    from flexsql.config import load_settings
    from flexsql.tools.knowledge.learn import learn, learn_history

    if not files and not history:
        fail("give FILE(s) to import or --history (flexsql learn --help shows the formats)")
    for file in files:
        if not file.is_file():
            fail(f"{file} does not exist or is not a file")
    reports: list[LearnReport] = []
    try:
        settings = load_settings(config_file)
        sources = make_sources(settings, db, demo_fallback=False)
        source = sources.get(source_name)
    except FlexSQLError as exc:
        fail(exc, 2)
    try:
        for file in files:
            reports.append(learn(source, file, fmt=fmt, verified_by=verified_by, db_id=db_id, strict=strict))
        if history:
            reports.append(learn_history(source, strict=strict))
    except InvalidArgument as exc:
        _print(reports, as_json)  # what was imported before the bad file stays imported: say so
        fail(exc, 2)
    except FlexSQLError as exc:
        _print(reports, as_json)
        fail(exc)
    finally:
        sources.close()
    _print(reports, as_json)


def _print(done: list[LearnReport], as_json: bool) -> None:
    if as_json:
        if done:
            click.echo(
                json.dumps(
                    {"reports": [r.model_dump(mode="json") for r in done]}, indent=2, ensure_ascii=False
                )
            )
        return
    out = console()
    for report in done:
        out.print(report.text(), markup=False, highlight=False)
    sys.stdout.flush()
