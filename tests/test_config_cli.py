"""Configuration (flags, FLEXSQL_* variables, flexsql.toml) and the CLI commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from flexsql.config import load_settings
from flexsql.errors import ConfigError
from flexsql.server.cli import main, parse_db_option


def test_toml_sources_env_and_overrides(tmp_path, monkeypatch):
    config = tmp_path / "flexsql.toml"
    config.write_text(
        '[[sources]]\nname = "a"\nurl = "duckdb:///x.duckdb"\n\n[limits]\nquery_timeout_s = 12\n'
        "[sandbox]\nmemory_mb = 512\n"
    )
    settings = load_settings(config)
    assert settings.sources[0].name == "a" and settings.limits.query_timeout_s == 12
    assert settings.sandbox.memory_mb == 512
    monkeypatch.setenv("FLEXSQL_LIMITS__QUERY_TIMEOUT_S", "7")
    assert load_settings(config).limits.query_timeout_s == 7  # environment beats the file
    assert load_settings(config, port=9001).port == 9001  # flags beat both


@pytest.mark.parametrize(
    "text, message",
    [
        ("[limits]\nquery_timeout_s = -1\n", "query_timeout_s"),
        ('[[sources]]\nurl = "not a url"\n', "source URL looks like"),
        ("this is = = not toml", "cannot read"),
    ],
)
def test_invalid_configuration_is_explained(tmp_path, text, message):
    config = tmp_path / "flexsql.toml"
    config.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_settings(config)


def test_missing_config_file_is_explained(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_settings(tmp_path / "nope.toml")


def test_db_option_names():
    assert parse_db_option("sales=postgresql://u@h/db").name == "sales"
    unnamed = parse_db_option("snowflake://u@acct/DB/S?warehouse=W&role=R")
    assert unnamed.name is None and unnamed.url.endswith("role=R")


def test_version_and_help():
    runner = CliRunner()
    assert "0.1.0" in runner.invoke(main, ["--version"]).output
    out = runner.invoke(main, ["--help"]).output
    for command in ("serve", "demo", "sources", "call", "eval", "install-skills", "mcp-config"):
        assert command in out


def test_call_prints_text_and_json(tmp_path):
    from engines import make_duckdb

    url = make_duckdb(tmp_path)
    runner = CliRunner()
    result = runner.invoke(main, ["call", "describe_table", "table=orders", "--db", url])
    assert result.exit_code == 0, result.output
    assert "order_id" in result.output and "PK" in result.output
    result = runner.invoke(
        main, ["call", "run_query", "sql=SELECT count(*) AS n FROM orders", "--json", "--db", url]
    )
    assert json.loads(result.output)["rows"] == [[7]]
    result = runner.invoke(main, ["call", "run_query", "sql=DROP TABLE orders", "--db", url])
    assert result.exit_code == 1 and "refused: DROP" in result.output
    result = runner.invoke(main, ["call", "no_such_tool", "--db", url])
    assert result.exit_code == 2 and "unknown tool" in result.output


def test_sources_command_reports_safety(tmp_path):
    from engines import make_sqlite

    url = make_sqlite(tmp_path)
    result = CliRunner().invoke(main, ["sources", "--db", url])
    assert result.exit_code == 0
    assert "read-only enforced by the engine" in result.output and "mode=ro" in result.output


def test_sources_command_warns_about_postgres_superuser():
    from engines import require_pg

    dsn = require_pg()
    result = CliRunner().invoke(main, ["sources", "--db", dsn])
    assert "superuser" in result.output and "CREATE ROLE flexsql_reader" in result.output


def test_bad_source_url_is_a_clear_error():
    result = subprocess.run(
        [sys.executable, "-m", "flexsql.server", "sources", "--db", "mysql://x@y/z"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "unsupported source scheme 'mysql'" in result.stderr


def test_demo_walks_through_every_step_over_a_real_stdio_server():
    result = subprocess.run(
        [sys.executable, "-m", "flexsql.server", "demo", "--scale", "0.1"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    for step in (
        "list_tables",
        "search_schema",
        "describe_table",
        "distinct_values",
        "find_values",
        "run_query",
        "compare_results",
        "run_python",
    ):
        assert f"{step}(" in out, step
    assert "web.web_events_*" in out  # the monthly shards collapse into one family
    assert "customer_addresses.country = 'France'" in out and "'FRANCE'" in out
    assert "not equivalent" in out  # the literal and the grounded readings disagree
