"""`learn --history` against the real engines: PostgreSQL's pg_stat_statements (not installed; installed,
and then either loaded at server start or not) and Snowflake's QUERY_HISTORY on fakesnow."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from flexsql.errors import UnavailableError
from flexsql.tools.engines import open_source
from flexsql.tools.knowledge.learn import learn_history
from flexsql.tools.knowledge.store import read_store
from tests.support.engines import make_snowflake, require_pg


@pytest.mark.postgres
def test_postgres_without_pg_stat_statements_says_what_to_do(tmp_path: Path) -> None:
    import psycopg

    dsn = require_pg()
    with psycopg.connect(dsn, autocommit=True) as conn:
        installed = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements'").fetchone()
    assert installed is None  # the test databases never install it
    src = open_source(dsn, name="pg", knowledge=str(tmp_path / "k"))
    try:
        with pytest.raises(
            UnavailableError, match="pg_stat_statements is not installed in this database"
        ) as err:
            learn_history(src)
    finally:
        src.close()
    assert "shared_preload_libraries" in str(err.value) and "flexsql learn FILE" in str(err.value)
    assert not (tmp_path / "k").exists()


@pytest.fixture
def pgss_dsn() -> str:
    """A database of its own with the pg_stat_statements extension created in it (the extension adds
    views the shop tests must not see) and two tables a query joins."""
    import psycopg

    dsn = require_pg()
    parts = urlsplit(dsn)
    name = f"{parts.path.lstrip('/') or 'postgres'}_pgss"
    with psycopg.connect(dsn, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    own = urlunsplit(parts._replace(path=f"/{name}"))
    with psycopg.connect(own, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        conn.execute("CREATE TABLE IF NOT EXISTS team (team_id int, name text)")
        conn.execute("CREATE TABLE IF NOT EXISTS player (player_id int, club int, name text)")
        for _ in range(3):
            conn.execute("SELECT p.name FROM player p JOIN team t ON p.club = t.team_id").fetchall()
    return own


@pytest.mark.postgres
def test_postgres_history_is_read_or_the_missing_preload_is_explained(pgss_dsn: str, tmp_path: Path) -> None:
    import psycopg

    with psycopg.connect(pgss_dsn) as conn:
        row = conn.execute("SHOW shared_preload_libraries").fetchone()
    preloaded = row is not None and "pg_stat_statements" in row[0]
    src = open_source(pgss_dsn, name="pg", knowledge=str(tmp_path / "k"))
    try:
        if preloaded:  # a server started with it: the join the queries above ran is learned
            report = learn_history(src)
            joins = {(j.left, j.right): j for j in read_store(tmp_path / "k").facts.joins}
            join = joins[("public.player.club", "public.team.team_id")]
            assert join.count >= 3 and set(join.by) == {"pg_stat_statements"} and report.statements >= 1
        else:  # this server (the test machine's) does not preload it: the extension exists but cannot be read
            with pytest.raises(UnavailableError, match="installed but cannot be read") as err:
                learn_history(src)
            assert "shared_preload_libraries = 'pg_stat_statements'" in str(err.value)
            assert not (tmp_path / "k").exists()
    finally:
        src.close()


def test_snowflake_query_history_that_cannot_be_read_is_a_clear_error(tmp_path: Path) -> None:
    with make_snowflake() as url:
        src = open_source(url, name="sf", knowledge=str(tmp_path / "k"))
        try:
            with pytest.raises(UnavailableError, match="QUERY_HISTORY cannot be read here") as err:
                learn_history(src)
        finally:
            src.close()
    assert "export the history to a .sql file" in str(err.value)
    assert not (tmp_path / "k").exists()
