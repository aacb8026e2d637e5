"""Source URLs: parsing, opening, and keeping secrets out of every printed form."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit, urlunsplit

from flexsql.errors import ConfigError

URL_FORMS = (
    "duckdb:///path/to.duckdb, duckdb://:memory:, sqlite:///path/to.sqlite, "
    "postgresql://user@host:port/db, snowflake://user@account/DATABASE/SCHEMA?warehouse=…&role=…"
)

_SECRET_QUERY_KEYS = {"password", "token", "private_key", "passcode", "private_key_file_pwd", "sslpassword"}


def redact(url: str) -> str:
    """Drop the password and secret query parameters from a URL."""
    if url.split("://", 1)[0].lower() in ("duckdb", "sqlite", "sqlite3"):
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


# Where each engine's client reads a password from the environment.
_PASSWORD_ENV = {
    "postgresql": "PGPASSWORD",
    "postgres": "PGPASSWORD",
    "postgresql+psycopg": "PGPASSWORD",
    "snowflake": "SNOWFLAKE_PASSWORD",
}


def split_password(url: str) -> tuple[str, dict[str, str]]:
    """The URL without its password, and the environment that hands the password to a child process
    (PGPASSWORD, SNOWFLAKE_PASSWORD), so that files and command lines never hold it."""
    scheme = url.split("://", 1)[0].lower()
    try:
        parts = urlsplit(url)
    except ValueError:
        return url, {}
    if parts.password is None or scheme not in _PASSWORD_ENV:
        return url, {}
    userinfo, host = parts.netloc.rsplit("@", 1)
    netloc = f"{userinfo.split(':', 1)[0]}@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)), {
        _PASSWORD_ENV[scheme]: unquote(parts.password)
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
    if parts.scheme in ("duckdb", "sqlite"):
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


def open_source(url: str, name: str | None = None, description: str = ""):  # -> Source
    """Open a source from its URL (lazily: nothing connects until first use)."""
    if "://" not in url:
        raise ConfigError(f"not a source URL: {redact(url)!r}; use one of: {URL_FORMS}")
    from flexsql.tools.engines.traits import source_class, traits_for_url

    scheme = url.split("://", 1)[0].lower()
    name = name or source_name_for(url)
    traits = traits_for_url(url)  # each engine module's traits name the URL schemes it opens
    if traits is not None:
        return source_class(traits)(name, url, description)
    raise ConfigError(f"unsupported source scheme {scheme!r} in {redact(url)!r}; use one of: {URL_FORMS}")
