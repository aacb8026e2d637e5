"""`flexsql config` (server/config_cli.py): each setting's value and where it came from."""

from __future__ import annotations

import json

from click.testing import CliRunner

from flexsql.server.cli import main


def test_config_shows_each_value_and_its_origin(tmp_path) -> None:
    toml = tmp_path / "flexsql.toml"
    toml.write_text("[limits]\nquery_timeout_s = 12\n")
    env = {"FLEXSQL_PORT": "9000", "FLEXSQL_AUTH_TOKEN": "a-secret-token-0123456789"}
    result = CliRunner(env=env).invoke(main, ["config", "--config", str(toml), "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["key"]: r for r in json.loads(result.stdout)["settings"]}
    assert rows["limits.query_timeout_s"] == {
        "key": "limits.query_timeout_s",
        "value": 12.0,
        "from": str(toml),
    }
    assert rows["port"]["value"] == 9000 and rows["port"]["from"] == "env FLEXSQL_PORT"
    assert rows["sandbox.memory_mb"]["from"] == "default"
    assert rows["auth_token"]["value"] == "(set)" and "a-secret-token" not in result.output
    text = CliRunner(env=env).invoke(main, ["config", "--config", str(toml)]).output
    assert f"limits.query_timeout_s = 12.0    # {toml}" in text
