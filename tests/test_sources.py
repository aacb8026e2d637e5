"""The same behaviour on all four engines: introspection, execution, caps, timeouts."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from flexsql.errors import NotFoundError, QueryError, QueryTimeout
from flexsql.tools.engines import FetchLimits

LONG_QUERY = {
    "duckdb": "SELECT count(*) FROM range(1000000000000) a",
    "sqlite": "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r",
    "postgres": "SELECT count(*) FROM generate_series(1, 100000000000)",
}


def test_catalog_lists_tables_views_keys_and_comments(shop, engine):
    catalog = shop.catalog()
    names = {t.name.lower() for t in catalog.tables}
    assert {"customers", "orders", "products", "shipped_orders"} <= names
    orders = catalog.resolve("orders")
    assert [c.name.lower() for c in orders.columns][:3] == ["order_id", "customer_id", "product_id"]
    assert [c.lower() for c in orders.primary_key] == ["order_id"]
    view = catalog.resolve("SHIPPED_ORDERS")
    assert view.kind == "view"
    if engine != "snowflake":  # fakesnow has no foreign-key metadata
        refs = {fk.ref_table.lower() for fk in orders.foreign_keys}
        assert refs == {"customers", "products"}
    if engine != "sqlite":  # SQLite has no comments
        assert catalog.resolve("customers").comment == "people who bought something"
    customers = catalog.resolve("customers")
    assert customers.row_estimate is None or customers.row_estimate <= 1000


def test_catalog_is_cached_until_refresh(shop):
    first = shop.catalog()
    assert shop.catalog() is first
    assert shop.catalog(refresh=True) is not first


def test_resolve_suggests_near_names(shop):
    with pytest.raises(NotFoundError, match="(?i)did you mean.*orders"):
        shop.catalog().resolve("ordrs")


def test_execute_returns_rows_and_counts(shop):
    result = shop.execute("SELECT order_id, quantity FROM orders ORDER BY order_id")
    assert [c.lower() for c in result.columns] == ["order_id", "quantity"]
    assert result.rows[0] == (100, 2)
    assert result.total_rows == 7 and not result.truncated and not result.total_is_lower_bound


def test_fetch_caps_rows_and_reports_true_total(shop):
    result = shop.execute("SELECT * FROM orders", limits=FetchLimits(max_rows=3, count_limit=100))
    assert len(result.rows) == 3
    assert result.total_rows == 7 and result.truncated and not result.total_is_lower_bound


def test_fetch_reports_lower_bound_past_count_limit(shop):
    result = shop.execute("SELECT * FROM orders", limits=FetchLimits(max_rows=2, count_limit=5))
    assert result.total_rows == 5 and result.total_is_lower_bound and result.truncated


def test_fetch_caps_bytes(shop):
    result = shop.execute("SELECT * FROM customers", limits=FetchLimits(max_rows=100, max_bytes=60))
    assert 0 < len(result.rows) < 5
    assert result.truncated and "max_bytes" in (result.truncated_reason or "")


def test_engine_error_is_clear(shop):
    with pytest.raises(QueryError) as info:
        shop.execute("SELECT no_such_column FROM orders")
    assert "no_such_column" in str(info.value).lower()


@pytest.mark.parametrize("engine", ["duckdb", "sqlite", "postgres"], indirect=True)
def test_timeout_cancels_long_query_and_source_stays_usable(shop, engine):
    started = time.monotonic()
    with pytest.raises(QueryTimeout, match="cancelled after 1 s"):
        shop.execute(LONG_QUERY[engine], timeout_s=1)
    # cancelled, not left running for minutes; benchmarks/timeouts.py measures how close to 1 s
    assert time.monotonic() - started < 6.0
    assert shop.execute("SELECT count(*) FROM orders").rows == [(7,)]


def test_repr_and_errors_hide_password(tmp_path):
    from flexsql.tools.engines import open_source

    source = open_source("postgresql://reader:s3cr3t-pw@127.0.0.1:1/nowhere")
    assert "s3cr3t-pw" not in repr(source) and "s3cr3t-pw" not in source.display_url
    with pytest.raises(Exception) as info:
        source.catalog()
    assert "s3cr3t-pw" not in str(info.value)


def _write_from_another_process(path: str) -> subprocess.CompletedProcess[str]:
    code = (
        f"import duckdb; c = duckdb.connect({path!r}); c.execute('CREATE TABLE added (a INTEGER)'); c.close()"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_duckdb_releases_its_file_lock_when_idle(tmp_path, monkeypatch):
    from engines import make_duckdb

    from flexsql.tools.engines import open_source
    from flexsql.tools.engines.duckdb_source import DuckDBSource

    url = make_duckdb(tmp_path)
    path = str(tmp_path / "shop.duckdb")
    monkeypatch.setattr(DuckDBSource, "IDLE_RELEASE_S", None)
    holding = open_source(url)
    holding.execute("SELECT 1")
    blocked = _write_from_another_process(path)
    assert blocked.returncode != 0 and "lock" in blocked.stderr.lower()  # a held handle keeps writers out
    holding.close()

    monkeypatch.setattr(DuckDBSource, "IDLE_RELEASE_S", 0.2)
    source = open_source(url)
    assert source.execute("SELECT count(*) FROM orders").rows == [(7,)]
    time.sleep(0.6)
    written = _write_from_another_process(path)
    assert written.returncode == 0, written.stderr
    assert source.catalog(refresh=True).resolve("added").name == "added"
    assert source.execute("SELECT count(*) FROM orders").rows == [(7,)]
    source.close()


@pytest.mark.parametrize(
    "url, path",
    [
        ("duckdb:///abs/shop.duckdb", "/abs/shop.duckdb"),
        ("duckdb:////abs/shop.duckdb", "/abs/shop.duckdb"),
        ("sqlite:///./rel/shop.sqlite", "./rel/shop.sqlite"),
        ("duckdb://rel.duckdb", "rel.duckdb"),
        ("duckdb:///C:/data/shop.duckdb", "C:/data/shop.duckdb"),
        ("duckdb://:memory:", ":memory:"),
        ("sqlite:///my%20data/x.sqlite", "/my data/x.sqlite"),
    ],
)
def test_file_urls_map_to_paths(url, path):
    from flexsql.tools.engines.urls import file_path_of

    assert file_path_of(url) == path
