"""Hardening (issue 13), security: PostgreSQL credential catalogs stay out of reach, `flexsql eval`
writes no database password to disk, and the value-index cache is private to its user."""

from __future__ import annotations

import json
import stat
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from engines import make_duckdb, require_pg

from flexsql.errors import QueryError, RefusedError
from flexsql.tools.engines import engine_for, open_source
from flexsql.tools.sql.guard import check_sql

# -- PostgreSQL credential catalogs -------------------------------------------------------------------

CREDENTIAL_QUERIES = [
    "SELECT rolname, rolpassword FROM pg_authid",
    "SELECT a.rolpassword FROM pg_authid AS a",
    "SELECT rolpassword FROM pg_catalog.pg_authid",
    'SELECT rolpassword FROM "pg_authid"',
    'SELECT rolpassword FROM pg_catalog."pg_authid"',
    "SELECT rolpassword FROM PG_AUTHID",
    "WITH r AS (SELECT * FROM pg_authid) SELECT rolpassword FROM r",
    "SELECT x FROM (SELECT rolpassword AS x FROM pg_authid) s",
    "SELECT 1 WHERE EXISTS (SELECT 1 FROM pg_authid WHERE rolpassword LIKE 'SCRAM%')",
    "SELECT (SELECT rolpassword FROM pg_authid LIMIT 1)",
    "SELECT c.oid FROM pg_class c JOIN pg_authid a ON a.oid = c.relowner",
    "SELECT * FROM pg_roles UNION ALL SELECT * FROM pg_authid",
    "SELECT passwd FROM pg_shadow",
    "SELECT umoptions FROM pg_user_mapping",
    "SELECT umoptions FROM pg_user_mappings",
    "SELECT subconninfo FROM pg_subscription",
    "SELECT stavalues1 FROM pg_statistic",
    "SELECT data FROM pg_largeobject",
    "SELECT setconfig FROM pg_db_role_setting",
    "EXPLAIN SELECT * FROM pg_authid",
    "SELECT /* c */ rolpassword FROM\npg_catalog . pg_authid",
]


@pytest.mark.parametrize("sql", CREDENTIAL_QUERIES)
def test_guard_refuses_postgres_credential_catalogs(sql):
    with pytest.raises(
        RefusedError, match=r"refused: the catalog pg_\w+ is not allowed — it holds credentials"
    ):
        check_sql(sql, engine_for("postgres"))


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT rolname, rolpassword FROM pg_roles",  # masked: '********'
        "SELECT usename FROM pg_user",
        "SELECT attname, most_common_vals FROM pg_stats",
        "SELECT relname FROM pg_class WHERE relname = 'pg_authid'",  # the name as data is fine
    ],
)
def test_guard_allows_the_masked_views(sql):
    assert check_sql(sql, engine_for("postgres")) == sql


def _pg_superuser_dsn() -> str:
    import psycopg

    dsn = require_pg()
    with psycopg.connect(dsn) as conn:
        if not conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[0]:
            pytest.skip("FLEXSQL_TEST_PG_DSN's role is not a superuser (needed to create the reader role)")
    return dsn


def _assert_hashes_unreachable(source) -> None:
    for sql in CREDENTIAL_QUERIES[:12]:
        with pytest.raises(RefusedError):
            source.execute(sql)
        # the engine layer on its own (the guard bypassed) refuses too
        with pytest.raises(QueryError) as info:
            source.execute(sql, guarded=False)
        assert "SCRAM" not in str(info.value) and "md5" not in str(info.value)


def test_postgres_superuser_connection_cannot_read_password_hashes():
    source = open_source(_pg_superuser_dsn())
    try:
        assert source.privileges()["drop_to"] == "pg_read_all_data"
        _assert_hashes_unreachable(source)
        assert source.execute("SELECT rolpassword FROM pg_roles WHERE rolname = current_user").rows == [
            ("********",)
        ]
    finally:
        source.close()


def test_recommended_read_only_role_reads_tables_but_not_password_hashes():
    import psycopg

    from flexsql.tools.engines.postgres_source import READ_ONLY_ROLE_SQL

    dsn = _pg_superuser_dsn()
    role, schema = "flexsql_r_" + uuid.uuid4().hex[:8], "flexsql_s_" + uuid.uuid4().hex[:8]
    db = urlsplit(dsn).path.lstrip("/") or "postgres"
    recommended = READ_ONLY_ROLE_SQL.format(db=db, schema=schema).replace("flexsql_reader", role)
    assert "pg_read_all_data TO" not in recommended  # it can read pg_authid
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
        admin.execute(f"CREATE TABLE {schema}.orders (id int)")
        admin.execute(f"INSERT INTO {schema}.orders VALUES (1), (2)")
        for statement in recommended.split(";"):
            code = "\n".join(line.split("--")[0] for line in statement.splitlines()).strip()
            if code:
                admin.execute(code.replace("'…'", "'pw'"))
    parts = urlsplit(dsn)
    url = urlunsplit((parts.scheme, f"{role}:pw@{parts.hostname}:{parts.port or 5432}", parts.path, "", ""))
    source = open_source(url)
    try:
        assert source.execute(f"SELECT count(*) FROM {schema}.orders").rows == [(2,)]
        assert source.safety().warnings == []
        _assert_hashes_unreachable(source)
    finally:
        source.close()
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")


# -- flexsql eval keeps passwords out of files ----------------------------------------------------------

AGENT_DUMPING_ENV = """
import json, os, sys
out = sys.argv[1]
json.dump({k: v for k, v in os.environ.items() if k in ("PGPASSWORD", "FLEXSQL_DB_URL")},
          open(os.path.join(out, "..", "env_seen.json.tmp"), "w"))
open(os.path.join(out, "answer.sql"), "w").write("SELECT 1")
"""


def _files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


def test_eval_command_runner_writes_no_password_and_hands_it_over_in_the_environment(tmp_path):
    from flexsql.evals.runners import CommandRunner
    from flexsql.evals.tasks import DatabaseLocator, Task

    secret = "s3cr3t-Pw%21"  # URL-encoded '!': the child gets the decoded password
    locator = DatabaseLocator(db_url=f"postgresql://reader:{secret}@127.0.0.1:5432/{{db}}")
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT_DUMPING_ENV)
    out = tmp_path / "out"
    runner = CommandRunner(
        f"{sys.executable} {agent} {{out_dir}} --url {{db_url}}", locator, out, timeout_s=30
    )
    task = Task(instance_id="t1", question="How many?", db="shop", benchmark="spider")
    prediction = runner.predict(task)
    assert prediction.sql == "SELECT 1"
    task_dir = out / "tasks" / "t1"
    seen = json.loads((task_dir / "env_seen.json.tmp").read_text())
    assert seen["PGPASSWORD"] == "s3cr3t-Pw!"
    assert seen["FLEXSQL_DB_URL"] == "postgresql://reader@127.0.0.1:5432/shop"
    for path in _files_under(out):
        if path.name == "env_seen.json.tmp":  # what the stand-in agent dumped of its environment
            continue
        text = path.read_text(errors="replace")
        assert "s3cr3t" not in text, f"{path} holds the password"
    mcp = json.loads((task_dir / "mcp.json").read_text())
    assert mcp["mcpServers"]["flexsql"]["env"] == {"PGPASSWORD": "${PGPASSWORD}"}
    for name in ("task.json", "mcp.json"):
        assert stat.S_IMODE((task_dir / name).stat().st_mode) == 0o600, name


def test_eval_run_json_redacts_the_password(tmp_path):
    from flexsql.evals.harness import EvalOptions, Evaluation

    tasks = tmp_path / "dev.json"
    tasks.write_text(json.dumps([{"db_id": "shop", "question": "q", "query": "SELECT 1"}]))
    options = EvalOptions(
        tasks=tasks,
        runner="gold",
        db="postgresql://reader:s3cr3t-pw@127.0.0.1:1/{db}",
        out=tmp_path / "out",
        jobs=1,
        timeout=5,
    )
    (tmp_path / "out").mkdir()
    evaluation = Evaluation(options)
    evaluation._write_run_info(1)
    run_json = tmp_path / "out" / "run.json"
    text = run_json.read_text()
    assert "s3cr3t" not in text and "postgresql://reader:***@127.0.0.1:1/{db}" in text
    assert stat.S_IMODE(run_json.stat().st_mode) == 0o600


# -- the value-index cache is private -------------------------------------------------------------------


def test_value_index_cache_is_private_to_its_user(tmp_path, monkeypatch):
    from flexsql.tools.values.index import ValueIndex

    cache = tmp_path / "cache"
    monkeypatch.setenv("FLEXSQL_CACHE_DIR", str(cache))
    source = open_source(make_duckdb(tmp_path))
    try:
        index = ValueIndex(source)
        index.ensure(source.catalog().tables)
        assert index.path.exists()
        for folder in (cache, index.path.parent):
            assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
        files = [p for p in index.path.parent.iterdir() if p.is_file()]
        assert files
        for path in files:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        index.close()
    finally:
        source.close()


def test_existing_world_readable_cache_is_tightened(tmp_path, monkeypatch):
    from flexsql.tools.values.index import ValueIndex

    cache = tmp_path / "cache"
    (cache / "value_index").mkdir(parents=True, mode=0o755)
    cache.chmod(0o755)
    source = open_source(make_duckdb(tmp_path))
    monkeypatch.setenv("FLEXSQL_CACHE_DIR", str(cache))
    try:
        old = ValueIndex(source).path
        old.write_bytes(b"")
        old.chmod(0o644)
        index = ValueIndex(source)
        index.ensure(source.catalog().tables)
        assert stat.S_IMODE(cache.stat().st_mode) == 0o700
        assert stat.S_IMODE((cache / "value_index").stat().st_mode) == 0o700
        assert stat.S_IMODE(index.path.stat().st_mode) == 0o600
        index.close()
    finally:
        source.close()
