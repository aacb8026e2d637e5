"""search_schema on a generated 300-table catalog (DuckDB, several schemas) and on the shop database."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from flexsql.errors import InvalidArgument
from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.search.ranking import SearchSchema, search_schema
from flexsql.tools.search.text import identifier_terms, stem, text_terms
from flexsql.tools.toolbox import TOOLS
from flexsql.tools.values import index as vi
from flexsql.tools.values.find import build_value_index
from flexsql.tools.values.normalize import split_identifier

SCHEMAS = ["sales", "hr", "inventory", "music", "sports", "finance"]
FILLER_A = [
    "audit",
    "batch",
    "buffer",
    "cache",
    "event",
    "feed",
    "job",
    "ledger",
    "log",
    "metric",
    "queue",
    "snapshot",
    "staging",
    "task",
    "vendor",
    "widget",
    "region",
    "channel",
    "device",
    "session",
]
FILLER_B = [
    "entries",
    "history",
    "runs",
    "items",
    "stats",
    "links",
    "flags",
    "notes",
    "versions",
    "archive",
    "backlog",
    "errors",
    "quotas",
    "tokens",
    "windows",
]

TARGETS = """
CREATE TABLE hr.employees (emp_id INTEGER PRIMARY KEY, first_name VARCHAR, last_name VARCHAR, salary DOUBLE,
                           dept_no INTEGER, hire_dt DATE);
CREATE TABLE hr.departments (dept_no INTEGER PRIMARY KEY, dept_name VARCHAR, mgr_id INTEGER);
CREATE TABLE inventory."stockItems" ("itemId" INTEGER, "itemName" VARCHAR, "unitQty" INTEGER, "reorderLevel" INTEGER,
                                     "warehouseLoc" VARCHAR);
CREATE TABLE sales.customers (cust_id INTEGER PRIMARY KEY, cust_name VARCHAR, "custAddr" VARCHAR, country VARCHAR);
CREATE TABLE sales.customer_orders (order_id INTEGER, cust_id INTEGER REFERENCES sales.customers (cust_id),
                                    order_dt DATE, total_amt DOUBLE);
CREATE TABLE music.singer (singer_id INTEGER PRIMARY KEY, name VARCHAR, country VARCHAR, birth_year INTEGER);
CREATE TABLE music.concert (concert_id INTEGER PRIMARY KEY, concert_name VARCHAR, theme VARCHAR, year INTEGER);
CREATE TABLE music.lineup (slot INTEGER, artist INTEGER REFERENCES music.singer (singer_id),
                           gig INTEGER REFERENCES music.concert (concert_id));
CREATE TABLE music.performance (perf_id INTEGER, singer_id INTEGER, rating DOUBLE, venue VARCHAR);
CREATE TABLE sports.performance (athlete_id INTEGER, score DOUBLE, event_name VARCHAR);
CREATE TABLE sports.athletes (athlete_id INTEGER, full_name VARCHAR, nationality VARCHAR);
COMMENT ON TABLE finance.ledger_entries IS 'general ledger postings';
INSERT INTO music.singer VALUES (1, 'Joe Sharp', 'Netherlands', 1970), (2, 'Timbaland', 'United States', 1972),
    (3, 'Justin Brown', 'France', 1981), (4, 'Rose White', 'France', 1986), (5, 'John Nizinik', 'France', 1960);
INSERT INTO sales.customers VALUES (1, 'Acme', '1 Main St', 'Canada'), (2, 'Globex', '5 Elm Rd', 'Mexico');
INSERT INTO sports.athletes VALUES (1, 'Ana Lopez', 'Spain'), (2, 'Kim Berg', 'Norway');
INSERT INTO music.concert VALUES (1, 'Auditions', 'Free choice', 2014), (2, 'Super bootcamp', 'Happy tonight', 2015);
"""


@pytest.fixture(scope="module")
def catalog_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """300 tables in six schemas: a few meaningful ones among generated filler tables."""
    import duckdb

    path = tmp_path_factory.mktemp("catalog") / "big_catalog.duckdb"
    conn = duckdb.connect(str(path))
    rng = random.Random(7)
    statements = [f"CREATE SCHEMA {s}" for s in SCHEMAS]
    names = [f"{a}_{b}" for a in FILLER_A for b in FILLER_B]
    rng.shuffle(names)
    for i, name in enumerate(names[:289]):
        schema = SCHEMAS[i % len(SCHEMAS)]
        cols = [
            "id INTEGER",
            "created_at TIMESTAMP",
            f"{name.split('_')[0]}_code VARCHAR",
            "amount DOUBLE",
            "note VARCHAR",
            f"{rng.choice(FILLER_A)}_ref INTEGER",
        ]
        statements.append(f"CREATE TABLE {schema}.{name} ({', '.join(cols)})")
    statements.append(
        "CREATE TABLE finance.ledger_entries (entry_id INTEGER, account_no VARCHAR, debit DOUBLE)"
    )
    statements += [s for s in TARGETS.split(";\n") if s.strip()]
    conn.execute("BEGIN")
    for statement in statements:
        conn.execute(statement)
    conn.execute("COMMIT")
    count = conn.execute("SELECT count(*) FROM duckdb_tables()").fetchone()[0]
    conn.close()
    assert count == 301
    return f"duckdb:///{path}"


@pytest.fixture
def big(catalog_url: str):
    source = open_source(catalog_url, name="big")
    yield ToolContext(sources=SourceRegistry([source]))
    source.close()


def _names(result) -> list[str]:
    return [t.table for t in result.tables]


# -- words ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("StuID", ["stu", "id"]),
        ("orderDate2", ["order", "date", "2"]),
        ("HTTPServerURL", ["http", "server", "url"]),
        ("customer_first_name", ["customer", "first", "name"]),
        ("Song_release_year", ["song", "release", "year"]),
        ("Émission", ["emission"]),
    ],
)
def test_identifier_splitting(name: str, words: list[str]) -> None:
    assert split_identifier(name) == words


@pytest.mark.parametrize(
    ("name", "means"),
    [
        ("unitQty", "unit quantity"),
        ("custAddr", "customer address"),
        ("dept_no", "department number"),
        ("Fname", "first name"),
        ("hire_dt", "hire date"),
        ("FirstName", "first names"),
    ],
)
def test_abbreviations_and_stems_match_plain_words(name: str, means: str) -> None:
    assert [t.term for t in identifier_terms(name)] == [t.term for t in text_terms(means)]


def test_glued_words_split_against_the_catalog_vocabulary() -> None:
    vocabulary = frozenset({"first", "name", "course"})
    assert [t.term for t in identifier_terms("firstname", vocabulary)] == ["first", "name"]
    assert [t.term for t in identifier_terms("coursename", vocabulary)] == ["cours", "name"]
    assert [t.term for t in identifier_terms("firstname")] == ["firstnam"]  # nothing to split against


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("singers", "singer"),
        ("located", "location"),
        ("countries", "country"),
        ("departments", "department"),
        ("running", "run"),
    ],
)
def test_stemming_conflates_forms(a: str, b: str) -> None:
    assert stem(a) == stem(b)


# -- ranking on a large catalog --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "first", "because"),
    [
        ("employee salary by department", "hr.employees", "salary"),
        ("stock item quantity", "inventory.stockItems", "quantity"),
        ("customer address", "sales.customers", "address"),
        ("general ledger postings", "finance.ledger_entries", "comment mentions"),
        ("concert themes", "music.concert", "concert"),
    ],
)
def test_right_table_first_with_reason(big: ToolContext, query: str, first: str, because: str) -> None:
    result = search_schema(big, SearchSchema(query=query, limit=5))
    assert _names(result)[0] == first
    assert because in " ".join(result.tables[0].why)
    assert result.tables_matched > 5 and result.truncated
    text = result.to_text()
    assert text.splitlines()[1].startswith(f"1. {first}") and "truncated: true" in text


def test_columns_are_ranked_with_reasons(big: ToolContext) -> None:
    result = search_schema(big, SearchSchema(query="customer address"))
    top = result.columns[0]
    assert (top.table, top.column) == ("sales.customers", "custAddr")
    assert "name matches 'customer', 'address'" in top.why
    qty = search_schema(big, SearchSchema(query="unit quantity of stock items")).columns[0]
    assert (qty.table, qty.column) == ("inventory.stockItems", "unitQty")


def test_value_hits_link_demonyms_to_stored_values(big: ToolContext) -> None:
    before = search_schema(big, SearchSchema(query="Which singers are French?"))
    assert before.value_index == "not built" and "value index not built" in before.to_text()
    assert not vi.index_path(big.source()).exists()  # searching never scans or builds
    build_value_index(big)
    after = search_schema(big, SearchSchema(query="Which singers are French?"))
    assert after.value_index == "used"
    assert _names(after)[0] == "music.singer"
    assert "column country holds value 'France' (for 'French')" in after.tables[0].why
    col = after.columns[0]
    assert (col.table, col.column) == ("music.singer", "country")
    assert "holds value 'France' (for 'French')" in col.why
    # a value alone is enough to find the table holding it
    spain = search_schema(big, SearchSchema(query="Spain"))
    assert _names(spain)[0] == "sports.athletes" and "holds value 'Spain'" in spain.tables[0].why[0]


def test_foreign_key_neighbours_join_the_hits(big: ToolContext) -> None:
    result = search_schema(big, SearchSchema(query="singers and the concerts they sang at", limit=5))
    names = _names(result)
    assert {"music.singer", "music.concert"} <= set(names[:2])
    assert "music.lineup" in names[:4]
    lineup = next(t for t in result.tables if t.table == "music.lineup")
    assert any(w.startswith("FK neighbour of") for w in lineup.why)


def test_tables_of_one_schema_reinforce_each_other(big: ToolContext) -> None:
    names = _names(search_schema(big, SearchSchema(query="singer performance rating")))
    assert names.index("music.performance") < names.index("sports.performance")
    names = _names(search_schema(big, SearchSchema(query="athlete performance score")))
    assert names.index("sports.performance") < names.index("music.performance")


def test_search_index_is_cached_per_catalog_load(big: ToolContext) -> None:
    search_schema(big, SearchSchema(query="singer"))
    index = big.caches["search:big"]
    search_schema(big, SearchSchema(query="concert"))
    assert big.caches["search:big"] is index
    big.source().catalog(refresh=True)
    search_schema(big, SearchSchema(query="concert"))
    assert big.caches["search:big"] is not index


@pytest.mark.parametrize("engine", ["duckdb"])
def test_bad_arguments_are_clear_errors(shop) -> None:
    ctx = ToolContext(sources=SourceRegistry([shop]))
    with pytest.raises(InvalidArgument, match="query is required"):
        search_schema(ctx, SearchSchema(query="   "))
    with pytest.raises(InvalidArgument, match="limit=0 is out of range: use a value from 1 to 100"):
        TOOLS.call(ctx, "search_schema", {"query": "customers", "limit": 0})
    with pytest.raises(InvalidArgument, match="limit"):
        TOOLS.call(ctx, "search_schema", {"query": "customers", "limit": 1000})
    with pytest.raises(InvalidArgument, match="query takes at most 2000 characters"):
        TOOLS.call(ctx, "search_schema", {"query": "x" * 5000})
    assert search_schema(ctx, SearchSchema(query="zebra unicorn")).tables == []


# -- every engine -----------------------------------------------------------------------------------------


def test_search_on_every_engine(shop) -> None:
    ctx = ToolContext(sources=SourceRegistry([shop]))
    orders = search_schema(ctx, SearchSchema(query="order status and date"))
    assert _names(orders)[0].split(".")[-1].lower() == "orders"
    assert {c.column.lower() for c in orders.columns[:2]} == {"status", "order_date"}
    build_value_index(ctx)
    french = search_schema(ctx, SearchSchema(query="French customers"))
    top = french.tables[0]
    assert top.table.split(".")[-1].lower() == "customers"
    assert any("holds value 'France'" in w for w in top.why)


def test_text_output_is_compact(big: ToolContext, tmp_path: Path) -> None:
    result = search_schema(big, SearchSchema(query="employee salary by department", limit=3))
    text = result.to_text()
    assert len(text) < 1200
    assert text.count("\n") <= 1 + 3 + 1 + 3 + 1
