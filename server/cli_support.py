"""What every `flexsql` command shares: exit codes (server/exits.py), errors, logging and output that
behaves when piped, and the checks run before any work starts (source files exist, URLs are URLs)."""

from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path
from typing import IO, Any, NoReturn
from urllib.parse import urlsplit

import click
from rich.console import Console

from flexsql.config import Settings, SourceConfig
from flexsql.errors import ConfigError, FlexSQLError, InvalidArgument, error_text
from flexsql.server.exits import EXIT_INTERRUPTED, EXIT_RUNTIME, EXIT_USAGE
from flexsql.tools.engines import SourceRegistry, open_source

USAGE_ERRORS = (ConfigError, InvalidArgument)


class FlexGroup(click.Group):
    """The `flexsql` group: Ctrl-C exits 130 with one line instead of click's "Aborted!" and 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            raise click.exceptions.Exit(EXIT_INTERRUPTED) from None


def exit_code(exc: BaseException) -> int:
    return EXIT_USAGE if isinstance(exc, USAGE_ERRORS) else EXIT_RUNTIME


def fail(problem: BaseException | str, code: int | None = None) -> NoReturn:
    """Print `error: …` on stderr and exit: 2 for a usage or configuration error, else 1."""
    if isinstance(problem, BaseException):
        text = error_text(problem) if isinstance(problem, FlexSQLError) else str(problem)
        code = exit_code(problem) if code is None else code
    else:
        text, code = problem, EXIT_USAGE if code is None else code
    click.echo(f"error: {text}", err=True)
    sys.exit(code)


# -- output and logging ----------------------------------------------------------------------------


def console(stderr: bool = False) -> Console:
    """A rich Console that prints plain text when its stream is not a terminal: no colour, no wrapping
    at 80 columns (a piped GRANT script or table stays whole)."""
    stream: IO[str] = sys.stderr if stderr else sys.stdout
    terminal = stream.isatty()
    if terminal:
        return Console(stderr=stderr, soft_wrap=True)
    return Console(
        stderr=stderr,
        file=stream,
        soft_wrap=True,
        width=100_000,  # tables are laid out at their content's width
        no_color=True,
        highlight=False,
        emoji=False,
        color_system=None,
    )


LOG_LEVELS = ("debug", "info", "warning", "error")


def setup_logging(verbose: int, quiet: bool, level: str | None, log_file: str | None) -> None:
    """One plain handler on stderr (and one on --log-file): a line per record, never wrapped. Set up
    before the MCP SDK would install its rich handler (logging.basicConfig keeps the first one).

    stderr shows warnings by default, errors only with -q, more with -v / -vv; --log-level sets both
    streams' level unless -q/-v say otherwise for stderr; the file records info and up by default."""
    named = getattr(logging, level.upper()) if level else None
    if quiet:
        on_stderr = logging.ERROR
    elif verbose:
        on_stderr = logging.INFO if verbose == 1 else logging.DEBUG
    else:
        on_stderr = named or logging.WARNING
    in_file = named or logging.INFO
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_flexsql", False):
            root.removeHandler(handler)
    handlers: list[tuple[logging.Handler, int]] = [(logging.StreamHandler(sys.stderr), on_stderr)]
    if log_file:
        try:
            handlers.append((logging.FileHandler(log_file, encoding="utf-8"), in_file))
        except OSError as exc:
            fail(ConfigError(f"--log-file {log_file}: {exc.strerror or exc}; give a file you can write"))
    stamp = "%(asctime)s " if log_file or not sys.stderr.isatty() else ""
    for handler, handler_level in handlers:
        handler.setFormatter(logging.Formatter(f"{stamp}%(levelname)s %(name)s: %(message)s"))
        handler.setLevel(handler_level)
        handler._flexsql = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    root.setLevel(min(level for _, level in handlers))


# -- checks before any work ------------------------------------------------------------------------


def db_hint(value: str) -> str:
    """What to write instead of a --db value that is no source URL (a bare path, `duckdb:/x`, `N=path`)."""
    from flexsql.tools.engines import default_engine, engine_for_path, engine_for_url

    head, sep, rest = value.partition("=")
    if sep and head.strip() and re.fullmatch(r"[A-Za-z_][\w-]*", head.strip()) and "://" not in rest:
        return f"{head.strip()}={db_hint(rest)}"
    path = value.strip()
    scheme_only = re.match(r"^([A-Za-z][\w+.-]*):/*(.+)$", path)
    if (
        scheme_only
        and engine_for_url(f"{scheme_only.group(1)}://x") is not None
        and len(scheme_only.group(1)) > 1
    ):
        scheme = scheme_only.group(1).lower()
        rest_path = scheme_only.group(2)
        if path[len(scheme) + 1 :].startswith("/"):
            rest_path = "/" + rest_path
        return f"{scheme}://{Path(rest_path).resolve()}"
    scheme = (engine_for_path(path) or default_engine()).url_schemes[0]
    return f"{scheme}://{Path(path).resolve()}"


def parse_db_option(value: str) -> SourceConfig:
    head, sep, rest = value.partition("=")
    if sep and "://" not in head and "://" in rest:
        return SourceConfig(name=head.strip(), url=rest.strip())
    if "://" not in value:  # a bare path, `duckdb:/x`, `NAME=path`: say which URL to write, no traceback
        if not value.strip():
            raise ConfigError("--db is empty: give a source URL such as duckdb:///abs/path/shop.duckdb")
        raise ConfigError(
            f"--db {value.strip()!r} is not a source URL: write {db_hint(value)} "
            "(or postgresql://user@host/db, snowflake://…)"
        )
    return SourceConfig(url=value.strip())


def check_files(configs: list[SourceConfig]) -> None:
    """A file source must exist and be a file when the command starts, not at the first tool call
    (a server that starts on a missing file looks connected and fails every call)."""
    from flexsql.tools.engines.urls import file_path_of, is_file_url

    for cfg in configs:
        if not is_file_url(cfg.url):
            continue
        path = file_path_of(cfg.url)
        if path == ":memory:":
            continue
        file = Path(path)
        label = f"--db {cfg.name + '=' if cfg.name else ''}{cfg.url}"
        if file.is_dir():
            raise ConfigError(
                f"{label}: {file} is a folder, not a database file; name the .duckdb / .sqlite file inside it"
            )
        if not file.exists():
            relative = "" if file.is_absolute() else f" (relative to the current folder {Path.cwd()})"
            raise ConfigError(
                f"{label}: no database file at {file.resolve()}{relative}. Check the path; URLs take "
                "three slashes before an absolute path (duckdb:///data/shop.duckdb is /data/shop.duckdb) "
                "and duckdb:///./shop.duckdb is relative"
            )


def check_model_endpoint(settings: Settings) -> None:
    """--base-url must be an http(s) URL: a typo would otherwise be retried against nothing."""
    url = settings.model.base_url
    if url is None:
        return
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(
            f"the model base URL {url!r} is not an http(s) URL; give e.g. --base-url http://127.0.0.1:8000/v1"
        )


def read_text(path: str, what: str) -> str:
    """A UTF-8 text file the user named, or a ConfigError saying what is wrong with it."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{what} {path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
            f"convert it, e.g. iconv -f latin1 -t utf-8 {path} > {Path(path).stem}.utf8.txt"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{what} {path}: {exc.strerror or exc}") from None


def stderr_is_terminal() -> bool:
    return sys.stderr.isatty() and os.environ.get("TERM") != "dumb"


def make_sources(settings: Settings, db: tuple[str, ...] = (), demo_fallback: bool = True) -> SourceRegistry:
    """The sources a command serves: its --db options, else [[sources]], else (`demo_fallback`) the demo
    database; each with its knowledge store's folder when one is configured."""
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
    check_files(configs)  # a missing file stops the command now (exit 2), not at the first tool call
    for cfg in configs:
        registry.add(
            open_source(
                cfg.url,
                name=cfg.name,
                description=cfg.description,
                limits=settings.limits,
                knowledge=settings.knowledge_of(cfg),
            )
        )
    return registry
