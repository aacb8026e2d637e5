"""Source URLs: parsing, opening, and keeping secrets out of every printed form."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit, urlunsplit

from flexsql.tools.engines.engine import engine_for_url

URL_FORMS = (
    "duckdb:///path/to.duckdb, duckdb://:memory:, sqlite:///path/to.sqlite, "
    "postgresql://user@host:port/db, snowflake://user@account/DATABASE/SCHEMA?warehouse=…&role=…"
)

_SECRET_QUERY_KEYS = {"password", "token", "private_key", "passcode", "private_key_file_pwd", "sslpassword"}


def is_file_url(url: str) -> bool:
    """Whether the URL names a one-file database (its rest is a path, which carries no secrets)."""
    engine = engine_for_url(url)
    return engine is not None and bool(engine.file_suffixes)


def redact(url: str) -> str:
    """Drop the password and secret query parameters from a URL."""
    if is_file_url(url):
        return url  # file URLs carry no secrets, and urlunsplit would mangle their slashes
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable url>"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:***@{host}" if ":" in userinfo else f"{user}@{host}"
    query = "&".join(
        f"{k}=***" if k.lower() in _SECRET_QUERY_KEYS else f"{k}={v}"
        for k, vs in parse_qs(parts.query, keep_blank_values=True).items()
        for v in vs
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def split_password(url: str) -> tuple[str, dict[str, str]]:
    """The URL without its password, and the environment that hands the password to a child process
    (PGPASSWORD, SNOWFLAKE_PASSWORD), so that files and command lines never hold it."""
    engine = engine_for_url(url)
    try:
        parts = urlsplit(url)
    except ValueError:
        return url, {}
    if parts.password is None or engine is None or engine.password_env is None:
        return url, {}
    userinfo, host = parts.netloc.rsplit("@", 1)
    netloc = f"{userinfo.split(':', 1)[0]}@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)), {
        engine.password_env: unquote(parts.password)
    }


def secrets_in(url: str) -> list[str]:
    """The secret strings inside a URL (password, token parameters), to scrub from messages."""
    found: list[str] = []
    try:
        parts = urlsplit(url)
    except ValueError:
        return found
    if parts.password:
        found += [parts.password, unquote(parts.password)]
    for key, values in parse_qs(parts.query).items():
        if key.lower() in _SECRET_QUERY_KEYS:
            found += values
    return [s for s in found if s]


def scrub_secrets(text: str, url: str) -> str:
    for secret in secrets_in(url):
        text = text.replace(secret, "***")
    # engine messages sometimes echo a whole connection string
    return re.sub(r"(password\s*=\s*)(\S+)", r"\1***", text, flags=re.IGNORECASE)


def source_name_for(url: str) -> str:
    """A short default name: the file stem or the database name."""
    parts = urlsplit(url)
    if is_file_url(url):
        path = url.split("://", 1)[1]
        if path in (":memory:", "/:memory:", ""):
            return "memory"
        return Path(path).stem or parts.scheme
    segments = [s for s in parts.path.split("/") if s]
    return (segments[0] if segments else parts.hostname or parts.scheme).lower()


def file_path_of(url: str) -> str:
    """The file path of a `duckdb:///…` or `sqlite:///…` URL (`:memory:` stays as is)."""
    rest = url.split("://", 1)[1]
    if rest in (":memory:", "/:memory:", ""):
        return ":memory:"
    if rest.startswith("/"):
        # duckdb:///abs/path -> /abs/path ; duckdb:////abs -> /abs ; duckdb:///./rel -> ./rel ;
        # duckdb:///C:/data/x.duckdb -> C:/data/x.duckdb (a Windows drive)
        if rest.startswith(("//", "/.")) or re.match(r"/[A-Za-z]:[/\\]", rest):
            rest = rest[1:]
    return unquote(rest)
