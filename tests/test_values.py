"""find_values, distinct_values, profile_column and the persistent value index, on every engine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from engines import content_checksum

from flexsql.errors import InvalidArgument, NotFoundError
from flexsql.tools.engines import SourceRegistry, all_engines, open_source
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.registry import ToolEnv
from flexsql.tools.toolbox import TOOLS
from flexsql.tools.values import index as vi
from flexsql.tools.values import index_scan
from flexsql.tools.values.distinct import DistinctValues, distinct_values
from flexsql.tools.values.find import FindValues, build_value_index, find_values
from flexsql.tools.values.profile import ProfileColumn, profile_column


@pytest.fixture
def ctx(shop) -> ToolContext:
    return ToolContext(sources=SourceRegistry([shop]))


def _where(match) -> tuple[str, str]:
    return match.table.split(".")[-1].lower(), match.column.lower()


# -- find_values ----------------------------------------------------------------------------------------


def test_find_values_case_insensitive(ctx: ToolContext) -> None:
    result = find_values(ctx, FindValues(text="france"))
    top = result.matches[0]
    assert _where(top) == ("customers", "country")
    assert (top.value, top.count, top.match) == ("France", 2, "case-insensitive")
    assert "customers" in result.to_text().lower() and "'France'" in result.to_text()


def test_find_values_typo_word_order_partial_accents(ctx: ToolContext) -> None:
    typo = find_values(ctx, FindValues(text="Germny")).matches[0]
    assert (_where(typo), typo.value, typo.match) == (("customers", "country"), "Germany", "fuzzy")
    order = find_values(ctx, FindValues(text="Lamp Desk")).matches[0]
    assert (_where(order), order.value, order.match) == (("products", "title"), "Desk Lamp", "word order")
    partial = find_values(ctx, FindValues(text="lamp")).matches[0]
    assert _where(partial) == ("products", "title") and partial.match == "partial"
    assert {partial.value, *partial.others} == {"Blue Lamp", "Desk Lamp"}
    accents = find_values(ctx, FindValues(text="chloe durand")).matches[0]
    assert (accents.value, accents.match) == ("Chloé Durand", "normalized")
    exact = find_values(ctx, FindValues(text="B2B")).matches[0]
    assert (_where(exact), exact.match, exact.count) == (("customers", "segment"), "exact", 2)


def test_find_values_nothing_found_says_so(ctx: ToolContext) -> None:
    result = find_values(ctx, FindValues(text="Zanzibar Quartz"))
    assert result.matches == [] and result.columns_matched == 0
    assert "no column holds a value like it" in result.to_text()


def test_find_values_falls_back_to_single_words(ctx: ToolContext) -> None:
    """No column holds 'B2C France', but two columns hold its words: say which."""
    result = find_values(ctx, FindValues(text="B2C France"))
    found = {(_where(m), m.value, m.word) for m in result.matches}
    assert found == {(("customers", "segment"), "B2C", "b2c"), (("customers", "country"), "France", "france")}
    assert all(m.match == "one word" for m in result.matches)
    assert "word 'france'" in result.to_text()


def test_find_values_scoped_to_tables(ctx: ToolContext) -> None:
    assert find_values(ctx, FindValues(text="France", tables=["products"])).matches == []
    scoped = find_values(ctx, FindValues(text="France", tables=["customers"]))
    assert [_where(m) for m in scoped.matches] == [("customers", "country")]
    with pytest.raises(NotFoundError, match="did you mean"):
        find_values(ctx, FindValues(text="France", tables=["custmers"]))


@pytest.mark.parametrize("engine", ["duckdb"])
@pytest.mark.parametrize("bad", [0, 101, -3, 2.5, "many"])
def test_bad_limits_are_clear_errors(ctx: ToolContext, bad) -> None:
    for name, arguments in (
        ("find_values", {"text": "France", "limit": bad}),
        ("distinct_values", {"table": "customers", "column": "country", "limit": bad}),
    ):
        with pytest.raises(InvalidArgument, match="limit"):
            TOOLS.call(ctx, name, arguments)


@pytest.mark.parametrize("engine", ["duckdb"])
def test_bad_text_and_names_are_clear_errors(ctx: ToolContext) -> None:
    with pytest.raises(InvalidArgument, match="text is required"):
        find_values(ctx, FindValues(text="  "))
    with pytest.raises(InvalidArgument, match="text takes at most 200 characters"):
        TOOLS.call(ctx, "find_values", {"text": "x" * 500})
    with pytest.raises(NotFoundError, match="did you mean: country"):
        distinct_values(ctx, DistinctValues(table="customers", column="countyr"))
    with pytest.raises(NotFoundError, match="did you mean"):
        profile_column(ctx, ProfileColumn(table="custommers", column="country"))
    with pytest.raises(InvalidArgument, match="column is required"):
        profile_column(ctx, ProfileColumn(table="customers", column=""))


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


@pytest.mark.parametrize("engine", ["duckdb"])
def test_refresh_picks_up_new_data(shop, shop_url: str) -> None:
    import duckdb

    build_value_index(ToolContext(sources=SourceRegistry([shop])))
    shop.close()
    from flexsql.tools.engines.urls import file_path_of

    conn = duckdb.connect(file_path_of(shop_url))
    conn.execute("INSERT INTO customers VALUES (6, 'Fran Ortiz', 'Spain', 'B2C')")
    conn.close()

    reopened = open_source(shop_url, name="shop")
    try:
        ctx = ToolContext(sources=SourceRegistry([reopened]))
        # the file changed: the index rebuilds on its own (issue 13: it once served the old values)
        seen = find_values(ctx, FindValues(text="Spain"))
        assert seen.index_tables_built == 3 and seen.matches[0].value == "Spain"
        stats = build_value_index(ctx, refresh=True)
        assert stats.tables_scanned == 3
        found = find_values(ctx, FindValues(text="Spain")).matches[0]
        assert (_where(found), found.value, found.count) == (("customers", "country"), "Spain", 1)
    finally:
        reopened.close()


@pytest.fixture
def wide_duckdb(tmp_path: Path) -> str:
    """A table with codes (unique, id-like), free text, a low-cardinality status, and 30k rows."""
    import duckdb

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
        text = find_values(ctx, FindValues(text="problem number 4242 and", tables=["tickets"]))
        assert any(m.column == "body" and m.match == "contains" for m in text.matches)
    finally:
        source.close()


# -- distinct_values ------------------------------------------------------------------------------------


def test_distinct_values_by_frequency(ctx: ToolContext) -> None:
    result = distinct_values(ctx, DistinctValues(table="customers", column="country"))
    assert (result.values[0].value, result.values[0].count) == ("France", 2)
    assert {(v.value, v.count) for v in result.values} == {
        ("France", 2),
        ("Germany", 1),
        ("united states", 1),
        (None, 1),
    }
    assert result.distinct_total == 4 and not result.truncated and not result.sampled
    assert "France | 2" in result.to_text()


def test_distinct_values_contains_is_case_insensitive_and_literal(ctx: ToolContext) -> None:
    assert {
        v.value
        for v in distinct_values(
            ctx, DistinctValues(table="customers", column="country", contains="AN")
        ).values
    } == {
        "France",
        "Germany",
    }
    assert distinct_values(ctx, DistinctValues(table="customers", column="name", contains="%")).values == []
    assert distinct_values(ctx, DistinctValues(table="customers", column="name", contains="_")).values == []
    limited = distinct_values(ctx, DistinctValues(table="customers", column="name", limit=2))
    assert len(limited.values) == 2 and limited.truncated and limited.distinct_total == 5
    assert "truncated: true" in limited.to_text()


# -- profile_column -------------------------------------------------------------------------------------


def test_profile_text_column(ctx: ToolContext) -> None:
    p = profile_column(ctx, ProfileColumn(table="customers", column="country"))
    assert (p.rows, p.nulls, p.null_fraction, p.distinct) == (5, 1, 0.2, 3)
    assert (p.min, p.max) == ("France", "united states")
    assert (p.top_values[0].value, p.top_values[0].count) == ("France", 2)
    assert p.patterns[0].pattern == "Aaaaaa" and p.patterns[0].count == 2
    assert (p.min_length, p.max_length) == (6, 13)
    text = p.to_text()
    assert "20.0%" in text and "patterns:" in text and not p.sampled


def test_profile_numeric_and_date_columns(ctx: ToolContext) -> None:
    q = profile_column(ctx, ProfileColumn(table="orders", column="quantity"))
    assert (q.rows, q.nulls, q.distinct, q.min, q.max) == (7, 0, 5, 1, 10)
    assert q.avg == pytest.approx(22 / 7)
    d = profile_column(ctx, ProfileColumn(table="orders", column="order_date"))
    assert str(d.min).startswith("2024-01-05") and str(d.max).startswith("2024-04-01")
    assert d.looks_like.get("date") == 1.0
    s = profile_column(ctx, ProfileColumn(table="orders", column="status"))
    assert s.patterns[0].pattern == "A" and s.patterns[0].count == 7


def test_big_tables_are_sampled_and_say_so(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    for each in all_engines().values():
        monkeypatch.setattr(type(each), "scan_above_rows", 0)
    table = ctx.source().catalog().resolve("orders")
    if not table.row_estimate:
        table.row_estimate = 7  # an engine without row estimates samples by reading the first rows
    d = distinct_values(ctx, DistinctValues(table="orders", column="status"))
    assert d.sampled and "sample" in d.to_text()
    assert sum(v.count for v in d.values) <= 7
    p = profile_column(ctx, ProfileColumn(table="orders", column="status"))
    assert p.sampled and p.distinct_approximate and "sampled" in p.to_text()


def test_user_text_never_writes(ctx: ToolContext, shop_url: str, engine: str) -> None:
    before = content_checksum(engine, shop_url)
    payloads = ["'; DROP TABLE customers; --", "x'); DELETE FROM orders; --", '" OR 1=1 --', "%' OR '1'='1"]
    for payload in payloads:
        assert (
            distinct_values(ctx, DistinctValues(table="customers", column="name", contains=payload)).values
            == []
        )
        find_values(
            ctx, FindValues(text=payload, tables=["customers", "orders"])
        )  # explicit tables: live checks run too
        with pytest.raises(NotFoundError):
            distinct_values(ctx, DistinctValues(table="customers", column=payload))
        with pytest.raises(NotFoundError):
            profile_column(ctx, ProfileColumn(table=f"customers; {payload}", column="name"))
    ctx.source().close()
    assert content_checksum(engine, shop_url) == before


def test_value_patterns_and_kinds() -> None:
    from flexsql.tools.values.patterns import looks_like, shape, value_patterns

    assert [(shape(v)) for v in ("AB-1234", "x9", "Alice Martin", "2024-01-05")] == [
        "AA-9999",
        "a9",
        "Aa+ Aa+",
        "9999-99-99",
    ]
    pats = value_patterns([("AB-1234", 5), ("CD-0001", 2), ("free form text here", 1)])
    assert (pats[0].pattern, pats[0].count, pats[0].example) == ("AA-9999", 7, "AB-1234")
    kinds = looks_like([("2024-01-05", 3), ("12.5", 3), ('{"a": 1}', 3), ("plain", 1)])
    assert kinds == {"date": 0.3, "number stored as text": 0.3, "json": 0.3}


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


@pytest.mark.parametrize("engine", ["duckdb", "postgres"])
def test_profile_and_distinct_on_booleans_json_and_arrays(shop, shop_url: str, engine: str) -> None:
    """min/max and GROUP BY do not exist for every type (PostgreSQL has no min(boolean) and cannot
    group json): such columns are profiled through their text."""
    ddl = [
        "CREATE TABLE flags (ok BOOLEAN, meta JSON, tags INTEGER[])",
        "INSERT INTO flags VALUES (true, '{\"a\": 1}', ARRAY[1, 2]), (false, '{\"a\": 2}', ARRAY[3]), "
        "(true, '{\"a\": 1}', ARRAY[1, 2]), (NULL, NULL, NULL)",
    ]
    shop.close()
    if engine == "duckdb":
        import duckdb

        from flexsql.tools.engines.urls import file_path_of

        conn = duckdb.connect(file_path_of(shop_url))
        for statement in ddl:
            conn.execute(statement)
        conn.close()
    else:
        import psycopg

        with psycopg.connect(shop_url, autocommit=True) as conn:
            for statement in ddl:
                conn.execute(statement)
    source = open_source(shop_url, name="shop")
    try:
        ctx = ToolContext(sources=SourceRegistry([source]))
        ok = profile_column(ctx, ProfileColumn(table="flags", column="ok"))
        assert (ok.rows, ok.nulls, ok.distinct) == (4, 1, 2)
        assert {str(ok.min).lower(), str(ok.max).lower()} == {"false", "true"}
        meta = distinct_values(ctx, DistinctValues(table="flags", column="meta", contains="1"))
        assert [v.count for v in meta.values] == [2] and "1" in str(meta.values[0].value)
        tags = profile_column(ctx, ProfileColumn(table="flags", column="tags"))
        assert (tags.rows, tags.nulls, tags.distinct) == (4, 1, 2) and tags.top_values[0].count == 2
    finally:
        source.close()
