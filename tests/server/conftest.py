"""Fixtures of the server tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def shadowing_cwd(tmp_path: Path) -> Path:
    """A working directory holding a `flexsql/` folder (a checkout's parent, say): processes flexsql
    starts from it must still import the installed package."""
    decoy = tmp_path / "flexsql"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("# not flexsql: a folder that happens to share its name\n")
    return tmp_path


@pytest.fixture
def duck_url(tmp_path):
    from tests.support.engines import make_duckdb

    return make_duckdb(tmp_path)
