"""Engines: what each engine class renders, that every engine module declares one complete
engine, and that the rendered SQL runs on the real engines (PostgreSQL via FLEXSQL_TEST_PG_DSN,
Snowflake via fakesnow)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
import sqlglot

from flexsql.errors import ConfigError
from flexsql.tools.engines import (
    Engine,
    Source,
    TableInfo,
    all_engines,
    engine_for,
    engine_for_url,
    open_source,
)
from flexsql.tools.engines.engine import engine_modules
from flexsql.tools.engines.registry import source_class
from flexsql.tools.values.sampling import sample_from
from tests.support.paths import ROOT

# what each trait renders, per engine: (dialect, trait call, expected SQL)
RENDERED = [
    ("duckdb", "as_text", "CAST(x AS VARCHAR)"),
    ("duckdb", "average", "avg(CAST(x AS DOUBLE))"),
    ("duckdb", "approx", "approx_count_distinct(x)"),
    ("duckdb", "exact", "count(DISTINCT x)"),
    ("duckdb", "explain", "EXPLAIN SELECT 1"),
    ("duckdb", "like", "ILIKE"),
    ("duckdb", "regex", "regexp_matches(x, 'a+')"),
    ("duckdb", "prefix", "substr(CAST(x AS VARCHAR), 1, 5)"),
    ("duckdb", "sample table", "t TABLESAMPLE SYSTEM (1.5 PERCENT)"),
    ("duckdb", "sample view", "t TABLESAMPLE SYSTEM (1.5 PERCENT)"),
    ("duckdb", "sample_from", '"shop"."main"."orders" TABLESAMPLE SYSTEM (1.5 PERCENT) | ~1.5% block sample'),
    ("duckdb", "fold", None),
    ("duckdb", "quote", '"Or""der"'),
    ("duckdb", "table name", '"shop"."main"."orders"'),
    ("duckdb", "scan above", 50_000_000),
    ("sqlite", "as_text", "CAST(x AS TEXT)"),
    ("sqlite", "average", "avg(x)"),
    ("sqlite", "approx", "count(DISTINCT x)"),
    ("sqlite", "exact", "count(DISTINCT x)"),
    ("sqlite", "explain", "EXPLAIN QUERY PLAN SELECT 1"),
    ("sqlite", "like", "LIKE"),
    ("sqlite", "regex", None),
    ("sqlite", "prefix", "CASE WHEN typeof(x) IN ('text', 'blob') THEN substr(x, 1, 5) ELSE x END"),
    ("sqlite", "sample table", None),
    ("sqlite", "sample view", None),
    (
        "sqlite",
        "sample_from",
        '(SELECT "status" FROM "orders" LIMIT 1000000) AS sampled | first 1,000,000 rows',
    ),
    ("sqlite", "fold", None),
    ("sqlite", "quote", '"Or""der"'),
    ("sqlite", "table name", '"orders"'),
    ("sqlite", "scan above", 2_000_000),
    ("postgres", "as_text", "CAST(x AS TEXT)"),
    ("postgres", "average", "avg(CAST(x AS DOUBLE PRECISION))"),
    ("postgres", "approx", "count(DISTINCT x)"),
    ("postgres", "exact", "count(DISTINCT x)"),
    ("postgres", "explain", "EXPLAIN SELECT 1"),
    ("postgres", "like", "ILIKE"),
    ("postgres", "regex", "x ~ 'a+'"),
    ("postgres", "prefix", "substr(CAST(x AS TEXT), 1, 5)"),
    ("postgres", "sample table", "t TABLESAMPLE SYSTEM (1.5)"),
    ("postgres", "sample view", None),
    ("postgres", "sample_from", '"shop"."main"."orders" TABLESAMPLE SYSTEM (1.5) | ~1.5% block sample'),
    ("postgres", "fold", "orders"),
    ("postgres", "quote", '"Or""der"'),
    ("postgres", "table name", '"shop"."main"."orders"'),
    ("postgres", "scan above", 2_000_000),
    ("snowflake", "as_text", "CAST(x AS VARCHAR)"),
    ("snowflake", "average", "avg(x)"),
    ("snowflake", "approx", "approx_count_distinct(x)"),
    ("snowflake", "exact", "count(DISTINCT x)"),
    ("snowflake", "explain", "EXPLAIN SELECT 1"),
    ("snowflake", "like", "ILIKE"),
    ("snowflake", "regex", "REGEXP_INSTR(x, 'a+') > 0"),
    ("snowflake", "prefix", "substr(CAST(x AS VARCHAR), 1, 5)"),
    ("snowflake", "sample table", "t SAMPLE SYSTEM (1.5)"),
    ("snowflake", "sample view", "t SAMPLE BERNOULLI (1.5)"),
    ("snowflake", "sample_from", '"shop"."main"."orders" SAMPLE SYSTEM (1.5) | ~1.5% sample'),
    ("snowflake", "fold", "ORDERS"),
    ("snowflake", "quote", '"Or""der"'),
    ("snowflake", "table name", '"shop"."main"."orders"'),
    ("snowflake", "scan above", 2_000_000),
]

ORDERS = TableInfo(database="shop", schema="main", name="orders", kind="table", row_estimate=66_666_667)


def render(traits: Engine, what: str) -> object:
    if what == "as_text":
        return traits.as_text("x")
    if what == "average":
        return traits.average("x")
    if what == "approx":
        return traits.distinct_count("x", approximate=True)
    if what == "exact":
        return traits.distinct_count("x", approximate=False)
    if what == "explain":
        return traits.explain("SELECT 1")
    if what == "like":
        return traits.like_operator
    if what == "regex":
        return traits.regex("x", "'a+'")
    if what == "prefix":
        return traits.prefix("x", 5)
    if what == "sample table":
        return traits.sample_clause("t", "table", "1.5")
    if what == "sample view":
        return traits.sample_clause("t", "view", "1.5")
    if what == "sample_from":
        return " | ".join(sample_from(ORDERS, traits, 1_000_000, ["status"]))
    if what == "fold":
        return traits.fold("Orders")
    if what == "quote":
        return traits.quote('Or"der')
    if what == "table name":
        return traits.quote_table(ORDERS)
    if what == "scan above":
        return traits.scan_above_rows
    raise AssertionError(what)


@pytest.mark.parametrize(("dialect", "what", "expected"), RENDERED, ids=[f"{d}-{w}" for d, w, _ in RENDERED])
def test_each_trait_renders_per_engine(dialect: str, what: str, expected: object) -> None:
    assert render(engine_for(dialect), what) == expected


def test_the_table_covers_every_engine_and_trait() -> None:
    kinds = {w for _, w, _ in RENDERED}
    assert {d for d, _, _ in RENDERED} == set(all_engines())
    for dialect in all_engines():
        assert {w for d, w, _ in RENDERED if d == dialect} == kinds, dialect


@pytest.mark.parametrize("module_name", engine_modules())
def test_every_engine_module_declares_one_engine_and_one_source(module_name: str) -> None:
    module = importlib.import_module(module_name)
    classes = [
        c
        for c in vars(module).values()
        if isinstance(c, type) and issubclass(c, Source) and c.__module__ == module_name
    ]
    assert len(classes) == 1, f"{module_name} defines {len(classes)} Source subclasses"
    cls = classes[0]
    engine = cls.engine
    assert isinstance(engine, Engine) and type(engine) is not Engine, f"{module_name}: engine = <subclass>()"
    assert type(engine).__module__ == module_name, "an engine's class lives in its own module"
    sqlglot.Dialect.get_or_raise(engine.dialect)  # a dialect sqlglot parses and generates
    assert engine.name.strip() and engine.notes.strip() and engine.text_type.strip()
    assert engine.url_schemes and all(s == s.lower() and "://" not in s for s in engine.url_schemes)
    assert all(s.startswith(".") and s == s.lower() for s in engine.file_suffixes)
    assert engine.unquoted_case in ("lower", "upper", "insensitive")
    assert engine.scan_above_rows > 0 and engine.explain_prefix.endswith(" ")
    for name, fields in (
        ("sample_table", {"table", "pct"}),
        ("sample_view", {"table", "pct"}),
        ("approx_distinct", {"expr"}),
        ("regex_match", {"expr", "pattern"}),
        ("binary_hex", {"expr"}),
    ):
        template = getattr(engine, name)
        if template is not None:
            assert set(re.findall(r"{(\w+)}", template)) == fields, f"{module_name}: {name} = {template!r}"
    # the engine's Source connects to it, and every URL scheme opens that Source
    assert cls.dialect is not None and source_class(engine) is cls and engine_for(engine.dialect) is engine
    for scheme in engine.url_schemes:
        url = f"{scheme}://reader@account/DB/SCHEMA"
        assert type(open_source(url)) is cls, f"{url} does not open {cls.__name__}"
        assert engine_for_url(url) is engine


def test_engines_override_only_what_differs() -> None:
    """An engine class sets an attribute only where it differs from the shared default, so each
    class reads as the list of its engine's differences."""
    for engine in all_engines().values():
        for name, value in vars(type(engine)).items():
            if name.startswith("_") or callable(value) or isinstance(value, property):
                continue
            if name in ("name", "dialect", "url_schemes"):
                continue
            assert getattr(Engine, name) != value, (
                f"{type(engine).__name__}.{name} repeats the default {value!r}"
            )


def test_unknown_engines_are_explained() -> None:
    with pytest.raises(
        ConfigError, match="no engine has dialect 'mysql'; known: duckdb, postgres, snowflake, sqlite"
    ):
        engine_for("mysql")
    assert engine_for_url("mysql://u@h/db") is None


def test_model_instructions_carry_each_engines_notes(tmp_path: Path) -> None:
    from flexsql.config import Settings
    from flexsql.server.app import build_server
    from flexsql.tools.engines import SourceRegistry

    sources = SourceRegistry(
        [open_source("duckdb://:memory:"), open_source(f"sqlite:///{tmp_path / 'a.sqlite'}")]
    )
    text = build_server(Settings(), sources).instructions
    assert engine_for("duckdb").notes in text and engine_for("sqlite").notes in text
    assert engine_for("postgres").notes not in text  # only the engines configured


def test_no_engine_branches_outside_the_engine_modules() -> None:
    """Engine-specific SQL and conventions live in the engine classes: no other module of the
    package tests an engine by name."""
    branch = re.compile(
        r"""dialect\s*(==|!=|in\s*[(\[{])|["'](duckdb|sqlite3?|postgres(ql)?|snowflake)["']"""
    )
    allowed = {
        "tools/sandbox/worker",  # the sandbox imports the duckdb *module* by name for user code
    }
    offenders = []
    for folder in ("flexsql", "tools", "agent", "server", "evals", "prompts"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("tools/engines/") or any(rel.startswith(a) for a in allowed):
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                code = line.split("#", 1)[0]
                if branch.search(code) and not code.lstrip().startswith(('"', "'")):
                    offenders.append(f"{rel}:{number}: {line.strip()}")
    assert not offenders, "engine branches outside tools/engines (declare it on the Engine):\n" + "\n".join(
        offenders
    )


# -- the rendered SQL runs on the real engines ------------------------------------------------------


def test_traits_sql_runs_on_the_engine(shop: Source, engine: str) -> None:
    t = shop.engine
    assert t is engine_for(shop.dialect)
    catalog = shop.catalog()
    customers, orders, view = (catalog.resolve(n) for n in ("customers", "orders", "shipped_orders"))
    q = t.quote
    (name, country, cid) = (q(customers.column(c).name) for c in ("name", "country", "customer_id"))
    row = shop.execute(
        f"SELECT {t.distinct_count(country, approximate=True)}, {t.average(cid)}, min({t.prefix(name, 5)}), "
        f"count(CASE WHEN {name} {t.like_operator} {engine_for(t.dialect).literal('%MARTIN%')} THEN 1 END), "
        f"max({t.as_text(cid)}) FROM {engine_for(t.dialect).quote_table(customers)}"
    ).rows[0]
    assert (int(row[0]), float(row[1]), row[2], int(row[3]), row[4]) == (3, 3.0, "Alice", 1, "5")
    if t.regex_match is not None:
        cond = t.regex(name, engine_for(t.dialect).literal("W[a-z]$"))
        hits = shop.execute(
            f"SELECT {name} FROM {engine_for(t.dialect).quote_table(customers)} WHERE {cond}"
        ).rows
        assert [r[0] for r in hits] == ["Dan Wu"]
    # the plan-only statement checks a query without running it (fakesnow has no EXPLAIN)
    if engine != "snowflake":
        assert shop.execute(t.explain(f"SELECT * FROM {engine_for(t.dialect).quote_table(orders)}")).rows
    # sampling 100% reads every row, of a table and (where the engine samples views) of a view
    for table, rows in ((orders, 7), (view, 5)):
        clause = t.sample_clause(engine_for(t.dialect).quote_table(table), table.kind, "100")
        if clause is not None:
            assert int(shop.execute(f"SELECT count(*) FROM {clause}").rows[0][0]) == rows, clause
    # an unquoted name folds the way the engine stored it
    assert t.fold("Customers") in (None, customers.name)
    if t.fold("Customers") is None:
        assert shop.execute(f"SELECT count(*) FROM {customers.name.upper()}").rows[0][0] == 5
