"""A small music database without declared keys (SQLite file), a ToolContext over it, and a knowledge
store of its own in the test's temp folder."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.runtime.context import ToolContext

DDL = [
    "CREATE TABLE singer (singer_id INTEGER, name TEXT, country TEXT, age INTEGER)",
    "CREATE TABLE concert (concert_id INTEGER, concert_name TEXT, venue_code TEXT, year INTEGER)",
    "CREATE TABLE performs (concert_ref INTEGER, artist INTEGER)",
    "CREATE TABLE venue (code TEXT, location TEXT, capacity INTEGER)",
    "INSERT INTO singer VALUES (1, 'Joe Sharp', 'Netherlands', 52), (2, 'Timbaland', 'United States', 32), "
    "(3, 'Justin Brown', 'France', 29), (4, 'Rose White', 'France', 41)",
    "INSERT INTO concert VALUES (10, 'Auditions', 'V1', 2014), (11, 'Super bootcamp', 'V2', 2014), "
    "(12, 'Home Visits', 'V1', 2015)",
    "INSERT INTO performs VALUES (10, 1), (10, 2), (11, 3), (12, 4), (12, 1)",
    "INSERT INTO venue VALUES ('V1', 'Raith Rovers', 10104), ('V2', 'Ayr United', 11998)",
]


def make_music(path: Path) -> str:
    conn = sqlite3.connect(path)
    for statement in DDL:
        conn.execute(statement)
    conn.commit()
    conn.close()
    return f"sqlite:///{path}"


@pytest.fixture
def music_url(tmp_path: Path) -> str:
    return make_music(tmp_path / "music.sqlite")


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "knowledge"


@pytest.fixture
def music(music_url: str, store: Path):
    src = open_source(music_url, name="music", knowledge=str(store))
    yield src
    src.close()


@pytest.fixture
def ctx(music) -> ToolContext:
    return ToolContext(sources=SourceRegistry([music]))
