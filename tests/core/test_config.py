"""Configuration (flexsql/config.py): flags, FLEXSQL_* variables and flexsql.toml, and the errors that
explain a bad file or a misspelt key."""

from __future__ import annotations

from pathlib import Path

import pytest

from flexsql.config import LimitsConfig, load_settings
from flexsql.errors import ConfigError


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


def test_misspelled_config_key_is_rejected(tmp_path: Path) -> None:
    from flexsql.config import load_settings

    config = tmp_path / "flexsql.toml"
    config.write_text("[limits]\nquery_timout_s = 5\n")
    with pytest.raises(ConfigError, match="query_timout_s"):
        load_settings(config)
    config.write_text("[[sources]]\nurl = 'duckdb://:memory:'\nnmae = 'x'\n")
    with pytest.raises(ConfigError, match="nmae"):
        load_settings(config)


def test_structured_cap_setting_defaults_to_one_mebibyte():
    assert LimitsConfig().structured_kb == 1024


def test_a_config_error_says_where_the_value_came_from_and_suggests_the_key(tmp_path, monkeypatch):
    """Was: the same message for a bad variable and a bad TOML value, and `query_timeout` got "Extra inputs
    are not permitted" with no file and no did-you-mean."""
    config = tmp_path / "flexsql.toml"
    config.write_text("[limits]\nquery_timeout = 5\n")
    with pytest.raises(ConfigError) as from_file:
        load_settings(config)
    assert f"(from {config.resolve()})" in str(from_file.value)
    assert "did you mean query_timeout_s?" in str(from_file.value)
    config.write_text("[limits]\nquery_timeout_s = 5\n")
    monkeypatch.setenv("FLEXSQL_LIMITS__QUERY_TIMEOUT_S", "soon")
    with pytest.raises(ConfigError, match=r"from the environment variable FLEXSQL_LIMITS__QUERY_TIMEOUT_S"):
        load_settings(config)


def test_a_misspelled_flexsql_variable_is_warned_about(monkeypatch, caplog):
    """Was: ignored silently, the default used."""
    from flexsql import config

    config._warned.clear()
    monkeypatch.setenv("FLEXSQL_LIMITS_QUERY_TIMEOUT_S", "5")  # one underscore: not a setting
    monkeypatch.setenv("FLEXSQL_CACHE_DIR", str(Path.cwd()))  # read elsewhere: no warning
    with caplog.at_level("WARNING", logger="flexsql.config"):
        load_settings()
    warned = [r.getMessage() for r in caplog.records]
    assert any("did you mean FLEXSQL_LIMITS__QUERY_TIMEOUT_S?" in m for m in warned), warned
    assert not any("FLEXSQL_CACHE_DIR" in m for m in warned)
