"""find_join_path (tools/joins.py): joins inferred from names through intermediate tables, every condition
between two tables offered with why, values confirming, demoting or finding links, disconnected tables
reported, inference following a catalog refresh; describe_table marking inferred keys."""

from __future__ import annotations

from flexsql.tools import joins, query
from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.joins import FindJoinPath, find_join_path
from flexsql.tools.query import RunQuery
from flexsql.tools.runtime.context import ToolContext


def test_join_path_infers_from_names_and_goes_through_intermediate_tables(warehouse):
    path = joins.find_join_path(warehouse, FindJoinPath(tables=["invoice_line", "customer"]))
    conditions = [j.condition() for j in path.joins]
    assert path.connected and path.via == ["main.invoice"]
    assert any("invoice_id" in c for c in conditions) and any("customer_id" in c for c in conditions)
    assert all(j.kind == "inferred" for j in path.joins) and "check one" in (path.note or "")
    # the snippet runs
    result = query.run_query(warehouse, RunQuery(sql=f"SELECT count(*) {path.sql}"))
    assert result.rows == [[2]]


def test_join_path_reports_disconnected_tables(warehouse):
    path = joins.find_join_path(warehouse, FindJoinPath(tables=["customer", "analytics.ga_sessions_summary"]))
    assert not path.connected and "no join path" in path.to_text()


def test_join_inference_follows_a_catalog_refresh(tmp_path):
    import sqlite3

    from tests.support.engines import make_sqlite

    url = make_sqlite(tmp_path)
    ctx = ToolContext(sources=SourceRegistry([open_source(url, name="shop")]))
    before = find_join_path(ctx, FindJoinPath(tables=["orders", "customers"]))
    assert before.connected
    conn = sqlite3.connect(url.removeprefix("sqlite:///"))
    conn.execute(
        "CREATE TABLE refunds (refund_id INTEGER PRIMARY KEY, order_id INTEGER REFERENCES orders(order_id))"
    )
    conn.commit()
    conn.close()
    ctx.source().catalog(refresh=True)
    after = find_join_path(ctx, FindJoinPath(tables=["refunds", "customers"]))
    assert after.connected and "orders" in " ".join(after.via), after


def _sqlite(tmp_path, name: str, *statements: str) -> ToolContext:
    import sqlite3

    path = tmp_path / f"{name}.sqlite"
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()
    return ToolContext(sources=SourceRegistry([open_source(f"sqlite:///{path}", name=name)]))


AIRLINES = [
    "CREATE TABLE airports (city TEXT, airportcode TEXT, airportname TEXT)",
    "CREATE TABLE airlines (uid INTEGER, airline TEXT, abbreviation TEXT)",
    "CREATE TABLE flights (airline INTEGER, flightno INTEGER, sourceairport TEXT, destairport TEXT)",
    "INSERT INTO airports VALUES ('Aberdeen', 'APG', 'Phillips'), ('Abilene', 'ABI', 'Municipal'), "
    "('Albany', 'ALB', 'Albany Intl')",
    "INSERT INTO airlines VALUES (1, 'United', 'UAL'), (2, 'Delta', 'DAL')",
    "INSERT INTO flights VALUES (1, 28, 'APG', 'ABI'), (2, 29, 'ABI', 'ALB'), (1, 44, 'ALB', 'APG')",
]


def test_every_condition_between_two_tables_is_offered_with_why(tmp_path):
    ctx = _sqlite(tmp_path, "flights", *AIRLINES)
    path = find_join_path(ctx, FindJoinPath(tables=["flights", "airports"]))
    [edge] = path.joins
    conditions = [edge.condition()] + [alt.condition() for alt in edge.alternatives]
    assert "main.flights.sourceairport = main.airports.airportcode" in conditions
    assert (
        "main.flights.destairport = main.airports.airportcode" in conditions
    )  # arrivals, not only departures
    assert edge.kind == "inferred" and "role prefix" in (edge.evidence or "")
    assert "values overlap 100% (sampled)" in (edge.evidence or "")
    text = path.to_text()
    assert "  or main.flights." in text and "[inferred: role prefix" in text

    airline = find_join_path(ctx, FindJoinPath(tables=["flights", "airlines"])).joins[0]
    assert airline.condition() == "main.flights.airline = main.airlines.uid"
    assert (airline.evidence or "").startswith("named after table airlines")


def test_two_declared_keys_to_one_table_are_both_offered(tmp_path):
    ctx = _sqlite(
        tmp_path,
        "routes",
        "CREATE TABLE airports (code TEXT PRIMARY KEY, name TEXT)",
        "CREATE TABLE routes (id INTEGER PRIMARY KEY, src TEXT REFERENCES airports(code), "
        "dst TEXT REFERENCES airports(code))",
    )
    [edge] = find_join_path(ctx, FindJoinPath(tables=["routes", "airports"])).joins
    assert edge.kind == "declared" and [a.kind for a in edge.alternatives] == ["declared"]
    assert {edge.condition(), edge.alternatives[0].condition()} == {
        "main.routes.src = main.airports.code",
        "main.routes.dst = main.airports.code",
    }


def test_values_demote_a_name_whose_values_do_not_match(tmp_path):
    ctx = _sqlite(
        tmp_path,
        "shop",
        "CREATE TABLE customers (customer_id INTEGER, zone_id INTEGER, name TEXT)",
        "CREATE TABLE zones (zone_id INTEGER, label TEXT)",
        "CREATE TABLE orders (order_id INTEGER, customer_id INTEGER, zone_id INTEGER)",
        "INSERT INTO customers VALUES (1, 7, 'a'), (2, 8, 'b'), (3, 9, 'c')",
        "INSERT INTO zones VALUES (7, 'x'), (8, 'y'), (9, 'z')",
        # orders.zone_id holds other numbers: the name says zone, the values say no
        "INSERT INTO orders VALUES (10, 1, 501), (11, 2, 502), (12, 3, 503)",
    )
    path = find_join_path(ctx, FindJoinPath(tables=["orders", "zones"]))
    assert path.via == ["main.customers"], path.to_text()
    assert "values overlap 100%" in (path.joins[0].evidence or "")


def test_tables_no_name_connects_are_joined_by_values(tmp_path):
    ctx = _sqlite(
        tmp_path,
        "wedding",
        "CREATE TABLE people (people_id INTEGER, name TEXT, age INTEGER)",
        "CREATE TABLE wedding (church_id INTEGER, male_id INTEGER, female_id INTEGER, year INTEGER)",
        "INSERT INTO people VALUES (11, 'A', 20), (12, 'B', 21), (13, 'C', 22), (14, 'D', 23), "
        "(15, 'E', 24), (16, 'F', 25)",
        "INSERT INTO wedding VALUES (1, 11, 12, 2014), (2, 13, 14, 2015), (3, 15, 16, 2016)",
    )
    path = find_join_path(ctx, FindJoinPath(tables=["wedding", "people"]))
    assert path.connected
    conditions = {e.condition(): e.evidence for e in [path.joins[0], *path.joins[0].alternatives]}
    assert conditions == {
        "main.wedding.male_id = main.people.people_id": "values overlap 100% (sampled)",
        "main.wedding.female_id = main.people.people_id": "values overlap 100% (sampled)",
    }


def test_describe_table_marks_inferred_keys_as_inferred(tmp_path):
    from flexsql.tools.catalog import DescribeTable, describe_table

    ctx = _sqlite(tmp_path, "flights", *AIRLINES)
    text = describe_table(ctx, DescribeTable(table="flights")).to_text()
    assert "- sourceairport TEXT FK?→airports.airportcode (inferred: role prefix source stripped)" in text
    assert "- airline INTEGER FK?→airlines.uid (inferred: named after table airlines)" in text
    declared = _sqlite(
        tmp_path,
        "routes",
        "CREATE TABLE airports (code TEXT PRIMARY KEY)",
        "CREATE TABLE routes (src TEXT REFERENCES airports(code))",
    )
    assert "- src TEXT FK→airports.code" in describe_table(declared, DescribeTable(table="routes")).to_text()
