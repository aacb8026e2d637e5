"""Where flexsql keeps its files (flexsql/paths.py): an unwritable cache folder falls back or says what
to do, never a PermissionError traceback or "internal error … flexsql bug"."""

from __future__ import annotations

import os

import pytest

from flexsql.errors import ConfigError
from flexsql.paths import cache_dir


def test_an_unwritable_flexsql_cache_dir_is_a_configuration_error(tmp_path, monkeypatch) -> None:
    target = tmp_path / "file-not-folder"
    target.write_text("")  # a file where the folder should be: unwritable even for root
    monkeypatch.setenv("FLEXSQL_CACHE_DIR", str(target / "cache"))
    with pytest.raises(
        ConfigError, match="FLEXSQL_CACHE_DIR .* cannot be created or written.*set FLEXSQL_CACHE_DIR"
    ):
        cache_dir()


def test_an_unwritable_home_falls_back_to_a_private_temp_folder(tmp_path, monkeypatch) -> None:
    """Was: PermissionError traceback (and "internal error … This is a flexsql bug" from find_values)."""
    home = tmp_path / "home-file"
    home.write_text("")  # HOME is not a folder that can hold .cache
    monkeypatch.delenv("FLEXSQL_CACHE_DIR")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    found = cache_dir()
    assert found.is_dir() and os.access(found, os.W_OK) and not str(found).startswith(str(home))
