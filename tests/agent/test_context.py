"""What the model reads (agent/context.py): the source block names only the rules that apply to this
source; the thread alternates user and assistant messages and forks without touching the trunk;
reasoning leaves the thread at the next instruction; the prefix meter counts whole cache blocks."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from flexsql.agent.context import CACHE_BLOCK, PrefixMeter, Thread, common_prefix, fill, flat, source_block
from flexsql.tools.engines import open_source
from tests.support.engines import make_sqlite


def _block(url: str) -> str:
    source = open_source(url, name="db")
    try:
        return source_block(
            "db", source.dialect, source.catalog(), True, frozenset({"describe_table", "run_python"})
        )
    finally:
        source.close()


def test_a_small_sqlite_file_gets_no_word_about_families_or_nested_paths(tmp_path: Path) -> None:
    text = _block(make_sqlite(tmp_path))
    assert "source `db` (sqlite" in text and "no ILIKE" in text
    assert "*" not in text and "Nested" not in text and "VARIANT" not in text


def test_a_warehouse_with_shards_and_json_gets_the_rules_and_its_dialect_functions(tmp_path: Path) -> None:
    path = tmp_path / "wh.duckdb"
    con = duckdb.connect(str(path))
    for day in ("20240101", "20240102", "20240103"):
        con.execute(f"CREATE TABLE events_{day} (id INTEGER, payload JSON)")
    for day in ("20240104", "20240105"):  # a second column set of the same family
        con.execute(f"CREATE TABLE events_{day} (id INTEGER, payload JSON, region VARCHAR)")
    con.close()
    text = _block(f"duckdb:///{path}")
    # the family by the name that reads all of it, qualified; not its column sets
    assert "main.events_* (5 tables)" in text and "`FROM events_*`" in text
    assert "20240101" not in text
    assert "Nested columns" in text and "JSON_EXTRACT_STRING" in text
    assert "json_each" not in text and "LATERAL FLATTEN" not in text  # other dialects' functions


def test_user_text_merges_until_the_model_answers_and_a_fork_leaves_the_trunk_alone() -> None:
    trunk = Thread([{"role": "user", "content": "Question: q"}])
    trunk.say("[classify] decide")
    assert trunk.messages == [{"role": "user", "content": "Question: q\n\n[classify] decide"}]
    trunk.add({"role": "assistant", "content": "{}", "reasoning": "thinking"})
    branch = trunk.fork()
    branch.say("[implement] plan 1")
    assert [m["role"] for m in branch.messages] == ["user", "assistant", "user"]
    assert "reasoning" not in branch.messages[1]  # dropped at the next instruction
    assert trunk.messages[1]["reasoning"] == "thinking" and len(trunk.messages) == 2


def test_fill_replaces_each_slot_once() -> None:
    assert fill("[repair] {program}\nError: {error}", program="x = '{error}'", error="boom") == (
        "[repair] x = '{error}'\nError: boom"
    )


def test_the_meter_counts_the_prefix_shared_with_an_earlier_request_in_whole_blocks() -> None:
    meter = PrefixMeter()
    first = flat("system", [], [{"role": "user", "content": "a" * 9_000}])
    assert meter.measure("m1", first, None) == 0
    second = flat(
        "system", [], [{"role": "user", "content": "a" * 9_000}, {"role": "assistant", "content": "b"}]
    )
    shared = meter.measure("m2", second, "m1")
    assert shared % CACHE_BLOCK == 0 and len(first) - CACHE_BLOCK < shared <= len(first)
    for i in range(3, 10):  # other threads' requests in between: the thread's own last one still counts
        meter.measure(f"m{i}", flat("other", [], []), None)
    third = second + "\nU:more"
    assert meter.measure("m10", third, "m2") == len(second) // CACHE_BLOCK * CACHE_BLOCK


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 4097, 20_000])
def test_the_common_prefix_is_exact_at_every_chunk_boundary(size: int) -> None:
    a = "x" * size + "tail-a"
    b = "x" * size + "tail-b"
    assert common_prefix(a, b) == size + len("tail-")
    assert common_prefix(a, a) == len(a) and common_prefix(a, "") == 0
