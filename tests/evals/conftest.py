"""Fixtures of the evaluation tests: Spider 1.0 style task files with their --dbs folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.evals import QUESTIONS, make_db


@pytest.fixture
def spider(tmp_path: Path) -> tuple[Path, Path]:
    """A Spider 1.0 style task file and a --dbs folder (<db>/<db>.sqlite, name in another case)."""
    make_db(tmp_path / "dbs" / "Concert_Singer" / "concert_singer.sqlite")
    tasks = tmp_path / "dev.json"
    tasks.write_text(
        json.dumps([{"db_id": "concert_singer", "question": q, "query": s} for q, s in QUESTIONS])
    )
    return tasks, tmp_path / "dbs"


@pytest.fixture
def spider_tasks(tmp_path: Path) -> tuple[Path, Path]:
    """The same task file, with the database folder named exactly as the tasks name it."""
    make_db(tmp_path / "dbs" / "concert_singer" / "concert_singer.sqlite")
    tasks = tmp_path / "dev.json"
    tasks.write_text(
        json.dumps([{"db_id": "concert_singer", "question": q, "query": s} for q, s in QUESTIONS])
    )
    return tasks, tmp_path / "dbs"
