"""run_python (tools/python_tool.py) at tool level: DataFrames in, results out, flexsql.sql() (on the
right source, within the store's caps and the call's deadline), output limits, errors, isolation
between calls.

Every test runs real code in the real sandbox (forked from the real template process) over results of real
queries on real databases."""

from __future__ import annotations

import datetime as dt
import decimal
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from flexsql.config import LimitsConfig, SandboxConfig, Settings
from flexsql.errors import InvalidArgument, NotFoundError, RefusedError
from flexsql.tools.engines import FetchLimits, SourceRegistry, open_source
from flexsql.tools.python_tool import PythonResult, RunPython, run_python
from flexsql.tools.query import RunQuery, run_query
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.toolbox import TOOLS
from tests.support.cells import LONG
from tests.support.engines import engine_url, make_duckdb
from tests.support.sandbox import TEST_SANDBOX

ORDER_LINES = """
SELECT o.order_id, c.country, o.quantity, p.price, o.status
FROM orders o JOIN customers c ON c.customer_id = o.customer_id JOIN products p ON p.product_id = o.product_id
"""


@pytest.fixture
def duck(tmp_path: Path):
    with engine_url("duckdb", tmp_path) as url:
        source = open_source(url, name="shop")
        yield source
        source.close()


@pytest.fixture
def ctx(duck) -> ToolContext:
    return ToolContext(sources=SourceRegistry([duck]), sandbox=TEST_SANDBOX)


def put_query(ctx: ToolContext, sql: str):
    """What run_query does: run the query on the source and keep its rows as a result."""
    result = ctx.source().execute(sql, limits=FetchLimits(max_rows=100_000))
    return ctx.results.put(
        columns=result.columns,
        types=result.types,
        rows=result.rows,
        total_rows=result.total_rows,
        sql=sql,
        source=ctx.source().name,
    )


def ok(result: PythonResult) -> PythonResult:
    assert result.ok, result.to_text()
    return result


@pytest.mark.integration
def test_pandas_computation_over_a_query_result_matches_sql(ctx):
    lines = put_query(ctx, ORDER_LINES)
    code = (
        "df['revenue'] = df['quantity'] * df['price']\n"
        "by_country = df[df.status == 'S'].groupby('country', dropna=False)['revenue'].sum()\n"
        "print('countries:', len(by_country))\n"
        "by_country.reset_index()\n"
    )
    result = ok(run_python(ctx, RunPython(code=code, result_ids=[lines.result_id])))
    assert result.stdout.strip() == "countries: 3"
    expected = ctx.source().execute(
        "SELECT c.country, sum(o.quantity * p.price) AS revenue FROM orders o "
        "JOIN customers c ON c.customer_id = o.customer_id JOIN products p ON p.product_id = o.product_id "
        "WHERE o.status = 'S' GROUP BY c.country"
    )
    stored = ctx.results.get(result.result_id)
    assert stored.origin == "python"
    assert stored.columns == ["country", "revenue"]
    assert sorted((c, round(v, 6)) for c, v in stored.rows) == sorted(
        (c, round(v, 6)) for c, v in expected.rows
    )
    assert result.total_rows == 3 and len(result.rows) == 3


@pytest.mark.integration
def test_results_arrive_as_dfs_and_df_only_when_there_is_one(ctx):
    customers = put_query(ctx, "SELECT * FROM customers")
    products = put_query(ctx, "SELECT * FROM products")
    c, p = customers.result_id, products.result_id
    both = ok(
        run_python(
            ctx,
            RunPython(
                code=f"sorted(dfs), len(dfs['{c}']), len(dfs['{p}']), 'df' in globals()", result_ids=[c, p]
            ),
        )
    )
    assert both.value_repr == repr((sorted([customers.result_id, products.result_id]), 5, 4, False))
    one = ok(run_python(ctx, RunPython(code="list(df.columns), df.shape", result_ids=[customers.result_id])))
    assert one.value_repr == "(['customer_id', 'name', 'country', 'segment'], (5, 4))"


@pytest.mark.integration
def test_returned_dataframe_becomes_a_result_like_a_query_result(ctx):
    orders = put_query(ctx, "SELECT order_id, quantity, order_date FROM orders")
    result = ok(
        run_python(
            ctx, RunPython(code="df[df.quantity >= 2].sort_values('order_id')", result_ids=[orders.result_id])
        )
    )
    assert result.result_id is not None and result.result_id != orders.result_id
    stored = ctx.results.get(result.result_id)
    expected = ctx.source().execute(
        "SELECT order_id, quantity, order_date FROM orders WHERE quantity >= 2 ORDER BY order_id"
    )
    assert stored.rows == expected.rows  # same Python values, dates included
    assert stored.columns == expected.columns
    assert stored.types == ["BIGINT", "BIGINT", "DATE"]  # pandas holds integers as int64
    assert stored.ordered  # the code sorted: order is part of the answer
    text = result.to_text()
    assert f"{result.result_id}: 4 rows, 3 cols" in text and "order_id | quantity | order_date" in text


@pytest.mark.integration
def test_series_and_labelled_index_become_columns(ctx):
    customers = put_query(ctx, "SELECT * FROM customers")
    result = ok(
        run_python(ctx, RunPython(code="df['segment'].value_counts()", result_ids=[customers.result_id]))
    )
    stored = ctx.results.get(result.result_id)
    assert stored.columns == ["segment", "count"]
    assert sorted(stored.rows) == [("B2B", 2), ("B2C", 3)]
    described = ok(
        run_python(ctx, RunPython(code="df[['customer_id']].describe()", result_ids=[customers.result_id]))
    )
    labels = [row[0] for row in ctx.results.get(described.result_id).rows]
    assert labels[:2] == ["count", "mean"]


@pytest.mark.integration
def test_duckdb_queries_the_dataframes_in_process(ctx):
    orders = put_query(ctx, "SELECT * FROM orders")
    code = (
        "import duckdb\n"
        'duckdb.sql("SELECT status, sum(quantity) AS q FROM df GROUP BY status ORDER BY status").df()'
    )
    result = ok(run_python(ctx, RunPython(code=code, result_ids=[orders.result_id])))
    assert ctx.results.get(result.result_id).rows == [("C", 3), ("P", 4), ("S", 15)]


@pytest.mark.integration
def test_values_of_every_common_type_survive_the_round_trip(ctx):
    rows = [
        (1, "a", 1.5, decimal.Decimal("12.30"), dt.date(2024, 1, 5), dt.datetime(2024, 1, 5, 10, 30), True),
        (None, None, None, None, None, None, None),
        (
            -(2**40),
            "ünïcode ✓",
            float("inf"),
            decimal.Decimal("-0.01"),
            dt.date(1999, 12, 31),
            dt.datetime(1999, 12, 31, 23, 59, 59, 123456),
            False,
        ),
    ]
    stored = ctx.results.put(
        columns=["i", "s", "f", "d", "day", "ts", "b"], types=[], rows=rows, total_rows=3
    )
    result = ok(run_python(ctx, RunPython(code="df", result_ids=[stored.result_id])))
    back = ctx.results.get(result.result_id)
    assert back.rows == rows
    assert back.types == ["BIGINT", "VARCHAR", "DOUBLE", "DECIMAL(4,2)", "DATE", "TIMESTAMP", "BOOLEAN"]


@pytest.mark.integration
def test_nan_from_pandas_is_stored_as_null(ctx):
    result = ok(
        run_python(
            ctx, RunPython(code="import numpy as np\npd.DataFrame({'x': [1.0, np.nan], 'n': [1, None]})")
        )
    )
    assert ctx.results.get(result.result_id).rows == [(1.0, 1.0), (None, None)]


@pytest.mark.integration
def test_flexsql_sql_runs_read_only_queries_through_the_server(shop):
    ctx = ToolContext(sources=SourceRegistry([shop]), sandbox=TEST_SANDBOX)
    code = (
        "counts = {t: int(flexsql.sql(f'SELECT count(*) AS n FROM {t}').iloc[0, 0])\n"
        "          for t in ['customers', 'products', 'orders']}\n"
        "print(counts)\n"
        "flexsql.sql('SELECT customer_id, name FROM customers WHERE customer_id <= 2 ORDER BY customer_id')"
    )
    result = ok(run_python(ctx, RunPython(code=code)))
    assert result.sql_calls == 4
    assert result.stdout.strip() == "{'customers': 5, 'products': 4, 'orders': 7}"
    stored = ctx.results.get(result.result_id)
    assert [tuple(r) for r in stored.rows] == [(1, "Alice Martin"), (2, "Bob Stone")]


@pytest.mark.integration
def test_flexsql_sql_is_refused_for_writes(shop):
    ctx = ToolContext(sources=SourceRegistry([shop]), sandbox=TEST_SANDBOX)
    before = shop.execute("SELECT count(*) FROM orders").rows[0][0]
    code = (
        "try:\n"
        "    flexsql.sql('DELETE FROM orders')\n"
        "except flexsql.SQLError as exc:\n"
        "    print('refused:', exc)\n"
        "flexsql.sql('DROP TABLE customers')\n"
    )
    result = run_python(ctx, RunPython(code=code))
    assert not result.ok and result.error_type == "SQLError"
    assert "refused: RefusedError" in result.stdout
    assert "flexsql.SQLError: RefusedError" in result.error
    assert shop.execute("SELECT count(*) FROM orders").rows[0][0] == before
    assert shop.execute("SELECT count(*) FROM customers").rows[0][0] == 5


@pytest.mark.integration
def test_flexsql_sql_keeps_the_stores_row_cap_and_reports_truncation(duck):
    ctx = ToolContext(
        sources=SourceRegistry([duck]), sandbox=TEST_SANDBOX, limits=LimitsConfig(store_rows=1000)
    )
    code = "d = flexsql.sql('SELECT * FROM range(2500)')\nlen(d), d.attrs['total_rows'], d.attrs['truncated']"
    result = ok(run_python(ctx, RunPython(code=code)))
    assert result.value_repr == "(1000, 1001, True)"
    assert "only the first 1000 of 1001" in result.stderr


@pytest.mark.integration
def test_stdout_and_stderr_are_captured_and_cut_as_stated(ctx):
    code = "import sys\nprint('x' * 5000)\nprint('warn', file=sys.stderr)\n"
    result = ok(run_python(ctx, RunPython(code=code)))
    assert result.stdout == "x" * TEST_SANDBOX.max_output_chars
    assert result.stdout_truncated and result.stdout_chars == 5001
    assert result.stderr == "warn\n" and not result.stderr_truncated and result.stderr_chars == 5
    assert "stdout truncated: true — first 2000 of 5001 chars shown (limit 2000)" in result.to_text()


@pytest.mark.integration
def test_an_exception_returns_the_users_traceback_only(ctx):
    orders = put_query(ctx, "SELECT * FROM orders")
    code = "def pick(frame):\n    return frame['no_such_column']\n\nx = 1\npick(df)\n"
    result = run_python(ctx, RunPython(code=code, result_ids=[orders.result_id]))
    assert not result.ok and result.error_type == "KeyError"
    assert 'File "<cell>", line 5, in <module>' in result.error
    assert 'File "<cell>", line 2, in pick' in result.error
    assert "return frame['no_such_column']" in result.error
    assert "site-packages" not in result.error and "sandbox" not in result.error
    assert result.error.rstrip().endswith("KeyError: 'no_such_column'")
    assert len(result.error.splitlines()) <= 20


@pytest.mark.integration
def test_syntax_errors_point_at_the_line(ctx):
    result = run_python(ctx, RunPython(code="x = 1\ny = (2 +\n"))
    assert result.error_type == "SyntaxError" and 'File "<cell>", line 2' in result.error


@pytest.mark.integration
def test_last_expression_value_and_no_value(ctx):
    assert ok(run_python(ctx, RunPython(code="x = 21\nx * 2"))).value_repr == "42"
    quiet = ok(run_python(ctx, RunPython(code="x = 21")))
    assert quiet.value_repr is None and quiet.result_id is None
    assert "no output" in quiet.to_text()
    long = ok(run_python(ctx, RunPython(code="'y' * 10000")))
    assert len(long.value_repr) < 2100 and long.value_repr.endswith("(10000 chars)")


@pytest.mark.integration
def test_asyncio_works_inside_the_sandbox(ctx):
    # asyncio needs a socketpair; the sandbox refuses new sockets but not socketpairs
    assert (
        ok(
            run_python(
                ctx, RunPython(code="import asyncio\nasync def f():\n    return 6 * 7\nasyncio.run(f())")
            )
        ).value_repr
        == "42"
    )


@pytest.mark.integration
def test_nothing_survives_from_one_call_to_the_next(ctx):
    ok(
        run_python(
            ctx,
            RunPython(code="import builtins\nbuiltins.leak = 1\nx = 1\nopen('note.txt', 'w').write('hi')"),
        )
    )
    result = run_python(
        ctx,
        RunPython(code="import os\nimport builtins\n(os.path.exists('note.txt'), hasattr(builtins, 'leak'))"),
    )
    assert ok(result).value_repr == "(False, False)"
    assert run_python(ctx, RunPython(code="x")).error_type == "NameError"


@pytest.mark.integration
def test_working_directory_is_private_and_removed(ctx):
    result = ok(
        run_python(
            ctx,
            RunPython(
                code="import os, stat\nst = os.stat('.')\n"
                "os.getcwd(), oct(stat.S_IMODE(st.st_mode)), st.st_uid, os.getuid()"
            ),
        )
    )
    cwd, mode, owner, uid = eval(result.value_repr)  # noqa: S307 - our own repr of plain values
    assert mode == "0o700" and owner == uid
    assert not os.path.exists(cwd)
    if os.geteuid() == 0:
        assert uid != 0  # the code never runs as root


@pytest.mark.integration
def test_environment_is_empty(ctx, monkeypatch):
    monkeypatch.setenv("FLEXSQL_TEST_SECRET_TOKEN", "hunter2")
    result = ok(run_python(ctx, RunPython(code="import os\nsorted(os.environ)")))
    assert "FLEXSQL_TEST_SECRET_TOKEN" not in result.value_repr
    assert eval(result.value_repr) == sorted(
        [
            "HOME",
            "TMPDIR",
            "LANG",
            "LC_ALL",
            "OPENBLAS_NUM_THREADS",  # noqa: S307
            "OMP_NUM_THREADS",
            "MKL_NUM_THREADS",
        ]
    )


def test_disabled_sandbox_refuses(duck):
    ctx = ToolContext(sources=SourceRegistry([duck]), sandbox=SandboxConfig(enabled=False))
    with pytest.raises(RefusedError, match="disabled"):
        run_python(ctx, RunPython(code="1"))


@pytest.mark.integration
def test_bad_arguments_are_explained(ctx):
    with pytest.raises(NotFoundError, match="r999"):
        run_python(ctx, RunPython(code="df", result_ids=["r999"]))
    with pytest.raises(InvalidArgument, match="code is empty"):
        run_python(ctx, RunPython(code="   "))
    with pytest.raises(InvalidArgument, match="timeout_s=-1 is out of range: use a value of at least 0"):
        TOOLS.call(ctx, "run_python", {"code": "1", "timeout_s": -1})
    capped = ok(run_python(ctx, RunPython(code="1", timeout_s=9999)))
    assert "lowered to the server's limit of 10 s" in capped.to_text()


def test_description_states_the_configured_limits():
    text = TOOLS.get_tool("run_python").describe(Settings(sandbox=TEST_SANDBOX))
    assert "10 s, 512 MB, output ≤ 2,000 characters" in text


@pytest.mark.integration
def test_concurrent_calls_are_isolated_from_each_other(ctx):
    codes = [
        f"import os\nopen('mine.txt', 'w').write('{i}')\nimport time\ntime.sleep(0.3)\n"
        f"sorted(os.listdir('.')), open('mine.txt').read()"
        for i in range(4)
    ]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda code: run_python(ctx, RunPython(code=code)), codes))
    assert [ok(r).value_repr for r in results] == [f"(['mine.txt'], '{i}')" for i in range(4)]


@pytest.mark.integration
def test_run_python_timeout_bounds_its_flexsql_sql_queries(tmp_path):
    """Was: timeout_s=2 returned after 31 s — the inner query had the full 30 s query timeout."""
    source = open_source(make_duckdb(tmp_path), name="shop")
    try:
        ctx = ToolContext(
            sources=SourceRegistry([source]),
            limits=LimitsConfig(query_timeout_s=30),
            sandbox=SandboxConfig(timeout_s=20, cpu_s=20, memory_mb=512),
        )
        started = time.monotonic()
        result = run_python(
            ctx, RunPython(code="flexsql.sql('SELECT count(*) FROM range(1000000000000)')", timeout_s=2)
        )
        took = time.monotonic() - started
        assert result.ok is False and "timeout" in result.limits_hit, result.to_text()
        assert "2 s wall-clock limit" in result.to_text()
        assert took < 12, f"run_python(timeout_s=2) took {took:.1f} s"
        # the engine was interrupted, not left running: the source answers at once
        assert source.execute("SELECT count(*) FROM orders").rows == [(7,)]
        # a query that fits in the time left still runs
        fits = run_python(ctx, RunPython(code="len(flexsql.sql('SELECT * FROM orders'))", timeout_s=10))
        assert fits.ok and fits.value_repr == "7", fits.to_text()
    finally:
        source.close()


def _ctx(source, **limits) -> ToolContext:
    return ToolContext(sources=SourceRegistry([source]), limits=LimitsConfig(**limits))


@pytest.mark.integration
def test_flexsql_sql_in_python_follows_store_cell_kb_and_says_values_were_cut(notes):
    code = (
        "df = flexsql.sql('SELECT body FROM notes WHERE id = 2')\n"
        "print(len(df.body[0]), df.attrs['cells_cut'], df.attrs['truncated'])"
    )
    cut = run_python(_ctx(notes, store_cell_kb=1), RunPython(code=code))
    assert cut.ok, cut.error
    length, cells, truncated = cut.stdout.split()
    assert int(length) <= 1024 and cells == "1" and truncated == "False"
    assert "too big to return whole" in cut.stderr and "rows were returned" not in cut.stderr
    whole = run_python(_ctx(notes), RunPython(code=code))
    assert whole.ok and whole.stdout.split() == [str(LONG), "0", "False"] and whole.stderr == ""


@pytest.mark.integration
def test_flexsql_sql_uses_the_source_of_the_result_it_was_given(tmp_path):
    from tests.support.engines import make_duckdb, make_sqlite
    from tests.support.sandbox import TEST_SANDBOX

    (tmp_path / "d").mkdir()
    (tmp_path / "s").mkdir()
    duck = open_source(make_duckdb(tmp_path / "d"), name="duck")
    lite = open_source(make_sqlite(tmp_path / "s"), name="lite")
    ctx = ToolContext(sources=SourceRegistry([duck, lite]), sandbox=TEST_SANDBOX)
    q = run_query(ctx, RunQuery(sql="SELECT 1 AS one", source="lite"))
    # sqlite_version() exists only on SQLite: it runs on the result's source, not the default (DuckDB)
    py = run_python(
        ctx, RunPython(code="flexsql.sql('SELECT sqlite_version() AS v')['v'][0]", result_ids=[q.result_id])
    )
    assert py.ok and py.value_repr and py.value_repr.strip("'")[0].isdigit(), py.error
    explicit = run_python(
        ctx, RunPython(code="flexsql.sql('SELECT sqlite_version() AS v', source='lite')['v'][0]")
    )
    assert explicit.ok, explicit.error
    default = run_python(ctx, RunPython(code="flexsql.sql('SELECT sqlite_version() AS v')"))
    assert not default.ok  # no result given: the default source (DuckDB) answers, and has no sqlite_version()
