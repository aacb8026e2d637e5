"""The bundled demo database: deterministic, scalable, cached, and messy on purpose."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from flexsql.demo_db import build, cache
from flexsql.demo_db.build import build_demo_db
from flexsql.demo_db.cache import GENERATOR_VERSION, demo_db_path, demo_url
from flexsql.demo_db.questions import DEMO_QUESTIONS
from flexsql.demo_db.schema import WEB_EVENT_MONTHS
from flexsql.demo_db.sizes import FACT_ROWS_PER_SCALE
from flexsql.errors import InvalidArgument
from flexsql.tools.engines import open_source

SMALL = 0.1  # 10,000 order lines: builds in well under a second


@pytest.fixture(scope="module")
def demo_source(tmp_path_factory: pytest.TempPathFactory):
    """A SMALL demo database opened through flexsql's DuckDB source (read_only).

    Built with build_demo_db into its own folder: a module-scoped fixture runs before the
    function-scoped cache isolation of conftest, so it must not touch cache_dir()."""
    path = build_demo_db(tmp_path_factory.mktemp("demo") / "demo.duckdb", scale=SMALL)
    source = open_source("duckdb:///" + path.as_posix().lstrip("/"), name="demo")
    yield source
    source.close()


def rows(source, sql: str) -> list[tuple]:
    return source.execute(sql).rows


def checksum(path: Path) -> dict[str, tuple[int, int]]:
    """Row count and an order-insensitive hash sum of every table's full contents."""
    with duckdb.connect(str(path), read_only=True) as conn:
        tables = conn.execute(
            "SELECT schema_name || '.' || table_name FROM duckdb_tables() WHERE NOT internal ORDER BY 1"
        ).fetchall()
        return {
            t: tuple(conn.execute(f"SELECT count(*), sum(hash(x)) FROM {t} AS x").fetchone())
            for (t,) in tables
        }


# -- determinism and scale -----------------------------------------------------------------------


def test_same_seed_gives_same_content_and_another_seed_differs(tmp_path: Path) -> None:
    a = checksum(build_demo_db(tmp_path / "a.duckdb", scale=0.05, seed=7))
    b = checksum(build_demo_db(tmp_path / "b.duckdb", scale=0.05, seed=7))
    c = checksum(build_demo_db(tmp_path / "c.duckdb", scale=0.05, seed=8))
    assert a == b
    assert len(a) == 13 + 12
    differing = [t for t in a if a[t] != c[t]]
    # every generated table changes with the seed; only the fixed code/lookup tables stay put
    fixed = {"main.regions", "main.order_status", "main.product_categories"}
    assert set(a) - set(differing) == fixed


def test_fact_rows_scale_proportionally(tmp_path: Path) -> None:
    counts = {}
    for scale in (0.05, 0.2):
        path = build_demo_db(tmp_path / f"s{scale}.duckdb", scale=scale)
        with duckdb.connect(str(path), read_only=True) as conn:
            counts[scale] = [
                conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("order_items", "orders", "customers", "web.web_events_202406")
            ]
    assert counts[0.05][0] == round(FACT_ROWS_PER_SCALE * 0.05) == 5_000
    assert counts[0.2][0] == 20_000
    for small, large in zip(counts[0.05], counts[0.2], strict=True):
        assert large == pytest.approx(4 * small, rel=0.05)


@pytest.mark.parametrize("scale", [0, -1, float("nan"), float("inf"), "1"])
def test_invalid_scale_is_refused_with_a_hint(tmp_path: Path, scale) -> None:
    with pytest.raises(InvalidArgument, match="positive number"):
        build_demo_db(tmp_path / "x.duckdb", scale=scale)
    assert not list(tmp_path.iterdir())


def test_a_failed_build_leaves_the_previous_file_and_no_temporary_files(tmp_path: Path, monkeypatch) -> None:
    path = build_demo_db(tmp_path / "demo.duckdb", scale=0.02)
    before = checksum(path)
    real_fill = build.fill
    # a statement that fails half-way through the build, after the fact table is written
    monkeypatch.setattr(
        build, "fill", lambda sizes: [*real_fill(sizes), ("main.returns", "SELECT error('disk on fire')")]
    )
    with pytest.raises(duckdb.Error, match="disk on fire"):
        build_demo_db(path, scale=0.02, seed=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.duckdb"]
    assert checksum(path) == before


# -- the cache ------------------------------------------------------------------------------------


def test_default_demo_db_is_built_once_then_reused() -> None:
    path = demo_db_path()
    assert path.parent == cache.cache_dir()
    assert f"v{GENERATOR_VERSION}" in path.name and "scale1-" in path.name
    first = path.stat().st_mtime_ns
    assert demo_db_path() == path
    assert path.stat().st_mtime_ns == first
    with duckdb.connect(str(path), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM order_items").fetchone()[0] == 100_000
    assert demo_url() == "duckdb:///" + path.resolve().as_posix().lstrip("/")
    assert demo_db_path(SMALL) != path
    source = open_source(demo_url())
    try:
        assert source.catalog().resolve("order_items").row_estimate == 100_000
    finally:
        source.close()


@pytest.mark.integration
def test_two_processes_asking_at_once_share_one_build(tmp_path: Path) -> None:
    script = (
        "from flexsql.demo_db.cache import demo_db_path\n"
        "p = demo_db_path(0.03)\n"
        "st = p.stat()\n"
        "print(p, st.st_ino, st.st_mtime_ns)\n"
    )
    env = {**os.environ, "FLEXSQL_CACHE_DIR": str(tmp_path)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        outputs.append(out.split())
    # same file, same inode: the second process waited and reused the first one's build
    assert outputs[0] == outputs[1]
    path = Path(outputs[0][0])
    assert str(path.stat().st_ino) == outputs[0][1]
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert leftovers == []


# -- what the catalog shows -------------------------------------------------------------------------


def test_catalog_has_keys_and_comments(demo_source) -> None:
    catalog = demo_source.catalog()
    main = {t.name: t for t in catalog.tables if t.schema_name == "main"}
    assert len(main) == 13
    fks = {(t.name, tuple(fk.columns), fk.ref_table) for t in main.values() for fk in t.foreign_keys}
    for expected in [
        ("order_items", ("order_id",), "orders"),
        ("order_items", ("product_id",), "products"),
        ("orders", ("status",), "order_status"),
        ("orders", ("customer_id",), "customers"),
        ("orders", ("ship_address_id",), "customer_addresses"),
        ("stores", ("region_id",), "regions"),
        ("product_categories", ("parent_category_id",), "product_categories"),
        ("returns", ("order_item_id",), "order_items"),
    ]:
        assert expected in fks
    assert all(t.primary_key for t in main.values())
    assert all(t.comment for t in catalog.tables)
    columns = [c for t in catalog.tables for c in t.columns]
    commented = [c for c in columns if c.comment]
    assert len(commented) / len(columns) > 0.8
    assert "MM/DD/YYYY" in main["customers"].column("signup_date").comment


def test_sharded_monthly_family_has_identical_columns(demo_source) -> None:
    web = {t.name: t for t in demo_source.catalog().tables if t.schema_name == "web"}
    assert sorted(web) == [f"web_events_{m}" for m in WEB_EVENT_MONTHS]
    shapes = {tuple((c.name, c.type) for c in t.columns) for t in web.values()}
    assert len(shapes) == 1
    # each month's table only holds that month
    months = rows(demo_source, "SELECT DISTINCT strftime(event_ts, '%Y%m') FROM web.web_events_202402")
    assert months == [("202402",)]


# -- messy values, on purpose --------------------------------------------------------------------------


def test_country_is_a_messy_name_in_addresses_and_an_iso_code_in_stores(demo_source) -> None:
    spellings = {
        r[0]
        for r in rows(
            demo_source,
            "SELECT DISTINCT country FROM customer_addresses WHERE lower(trim(country)) = 'france'",
        )
    }
    assert {"France", "france", "FRANCE", "France "} <= spellings
    assert ("UK",) in rows(demo_source, "SELECT DISTINCT country FROM customer_addresses")
    codes = {r[0] for r in rows(demo_source, "SELECT DISTINCT country_code FROM stores")}
    assert {"FR", "DE", "GB", "US", None} <= codes
    cities = {
        r[0]
        for r in rows(demo_source, "SELECT DISTINCT city FROM customer_addresses WHERE lower(city) = 'paris'")
    }
    assert {"Paris", "paris"} <= cities


def test_status_codes_map_to_names_through_the_code_table(demo_source) -> None:
    used = {r[0] for r in rows(demo_source, "SELECT DISTINCT status FROM orders")}
    assert used == {"P", "S", "C", "R"}
    names = dict(rows(demo_source, "SELECT status_code, status_name FROM order_status"))
    assert names["S"] == "Shipped" and names["C"] == "Cancelled"


def test_dates_as_text_nulls_json_and_free_text(demo_source) -> None:
    signups = [r[0] for r in rows(demo_source, "SELECT signup_date FROM customers LIMIT 50")]
    assert all(re.fullmatch(r"\d\d/\d\d/\d{4}", s) for s in signups)
    assert demo_source.catalog().resolve("customers").column("signup_date").type == "VARCHAR"
    nulls = rows(
        demo_source, "SELECT count(*) - count(email), count(*) - count(loyalty_tier) FROM customers"
    )[0]
    assert all(n > 0 for n in nulls)
    assert rows(demo_source, "SELECT count(*) FROM stores WHERE city IS NULL") == [(1,)]
    attributes = demo_source.catalog().resolve("products").column("attributes")
    assert attributes.type == "JSON"
    colors = {r[0] for r in rows(demo_source, "SELECT DISTINCT attributes ->> 'color' FROM products")}
    assert "red" in colors
    sample = rows(
        demo_source, "SELECT attributes FROM products WHERE attributes ->> 'color' = 'red' LIMIT 1"
    )[0][0]
    assert json.loads(sample)["color"] == "red"
    notes = rows(demo_source, "SELECT count(notes) FROM customers")[0][0]
    assert notes > 0
    methods = {r[0] for r in rows(demo_source, "SELECT DISTINCT payment_method FROM payments")}
    assert {"credit_card", "Credit Card", "CARD"} <= methods


def test_payments_add_up_to_the_order_lines(demo_source) -> None:
    mismatches = rows(
        demo_source,
        """
        WITH lines AS (SELECT order_id, sum(quantity * unit_price - discount_amount) AS net
                       FROM order_items GROUP BY order_id),
             paid AS (SELECT order_id, sum(amount) AS amount FROM payments GROUP BY order_id)
        SELECT count(*) FROM orders o JOIN lines USING (order_id) JOIN paid USING (order_id)
        WHERE paid.amount <> lines.net + coalesce(o.shipping_cost, 0)""",
    )
    assert mismatches == [(0,)]
    assert rows(
        demo_source, "SELECT count(*) FROM payments JOIN orders USING (order_id) WHERE status = 'C'"
    ) == [(0,)]


# -- the demo questions -----------------------------------------------------------------------------------


@pytest.mark.parametrize("question", DEMO_QUESTIONS, ids=lambda q: q.id)
def test_demo_question_reference_sql_answers(demo_source, question) -> None:
    result = demo_source.execute(question.sql)
    assert result.total_rows > 0
    assert all(cell is not None for row in result.rows for cell in row)


def test_walkthrough_answer_depends_on_the_messy_spellings(demo_source) -> None:
    reference = DEMO_QUESTIONS[0]
    assert "'S'" in reference.sql
    naive = reference.sql.replace("LOWER(TRIM(a.country)) = 'france'", "a.country = 'France'")
    assert naive != reference.sql
    assert demo_source.execute(naive).rows != demo_source.execute(reference.sql).rows
