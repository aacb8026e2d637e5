"""The persistent value index (tools/values/index.py): private to its user, persisted across contexts,
skipping id-like and free-text columns (checked live instead), and sampling big tables."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import duckdb
import pytest

from flexsql.tools.engines import SourceRegistry, all_engines, open_source
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.registry import ToolEnv
from flexsql.tools.values import index as vi
from flexsql.tools.values import index_scan
from flexsql.tools.values.find import FindValues, build_value_index, find_values
from tests.support.engines import make_duckdb


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


def test_index_persists_across_contexts(shop, shop_url: str) -> None:
    progress: list[tuple[float, float, str]] = []
    first = ToolContext(sources=SourceRegistry([shop]))
    result = find_values(
        first, FindValues(text="France"), ToolEnv(progress=lambda d, t, m: progress.append((d, t, m)))
    )
    assert result.index_tables_built == 3
    assert progress[-1][0] == progress[-1][1] == 3 and "ready" in progress[-1][2]
    index = vi.index_path(shop)
    assert index.exists() and str(index).startswith(os.environ["FLEXSQL_CACHE_DIR"])
    stamp = index.stat().st_mtime_ns
    shop.close()  # DuckDBSource cannot open a file a live source of this process holds (config locked)

    other = open_source(shop_url, name="shop")
    try:
        second = ToolContext(sources=SourceRegistry([other]))
        again = find_values(second, FindValues(text="Germny"))
        assert again.index_tables_built == 0 and again.matches[0].value == "Germany"
        assert second.caches["values:shop"].queries_sent == 0  # nothing was scanned again
        assert index.stat().st_mtime_ns == stamp
        stats = build_value_index(second)
        assert stats.tables_scanned == 0 and stats.tables_indexed == 3 and stats.values > 0
    finally:
        other.close()


@pytest.fixture
def wide_duckdb(tmp_path: Path) -> str:
    """A table with codes (unique, id-like), free text, a low-cardinality status, and 30k rows."""

    path = tmp_path / "wide.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute("""
        CREATE TABLE tickets AS
        SELECT i AS ticket_no,
               'TCK-' || lpad(CAST(i AS VARCHAR), 6, '0') AS ticket_code,
               'Customer wrote a long message about problem number ' || i || ' and asked for a refund soon' AS body,
               CASE i % 3 WHEN 0 THEN 'Open' WHEN 1 THEN 'Closed' ELSE 'Waiting on customer' END AS status,
               'owner-' || (i % 50) AS owner_uuid
        FROM range(30000) t(i)
    """)
    conn.close()
    return f"duckdb:///{path}"


def test_index_skips_id_like_and_free_text_and_checks_them_live(wide_duckdb: str) -> None:
    source = open_source(wide_duckdb, name="wide")
    try:
        ctx = ToolContext(sources=SourceRegistry([source]))
        stats = build_value_index(ctx)
        assert stats.columns_indexed == 1  # status only
        assert stats.columns_skipped["free text"] == 1
        assert stats.columns_skipped["id-like"] == 2  # unique codes, and a column named like an id
        assert "free text" in stats.to_text()
        status = find_values(ctx, FindValues(text="waiting on customer")).matches[0]
        assert (status.column, status.value, status.count, status.via) == (
            "status",
            "Waiting on customer",
            10000,
            "index",
        )
        code = find_values(ctx, FindValues(text="tck-000042"))
        assert [(m.column, m.value, m.via) for m in code.matches] == [("ticket_code", "TCK-000042", "live")]
        assert "checked" in code.to_text() and "live" in code.to_text()
        # a plain word or a phrase is no code: the id-like columns are not scanned for it
        word = find_values(ctx, FindValues(text="refund"))
        assert word.live_checked == [] and word.not_checked == 0
        text = find_values(ctx, FindValues(text="problem number 4242 and", tables=["tickets"]))
        assert any(m.column == "body" and m.match == "contains" for m in text.matches)
    finally:
        source.close()


def test_index_samples_big_tables_and_marks_them(ctx: ToolContext, monkeypatch: pytest.MonkeyPatch) -> None:
    for each in all_engines().values():
        monkeypatch.setattr(type(each), "scan_above_rows", 0)
    monkeypatch.setattr(index_scan, "SMALL_TABLE_ROWS", 0)
    for table in ctx.source().catalog().tables:
        table.row_estimate = table.row_estimate or 5  # engines without estimates sample the first rows
    stats = build_value_index(ctx)
    assert stats.columns_sampled == stats.columns_indexed > 0
    assert stats.columns_incomplete == stats.columns_indexed  # a sample never proves a value is absent
    match = find_values(ctx, FindValues(text="France")).matches[0]
    assert match.sampled and "sampled" in find_values(ctx, FindValues(text="France")).to_text()
