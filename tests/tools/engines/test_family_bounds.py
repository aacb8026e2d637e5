"""A statement's family references are bounded together, before anything is built (issue 30, item 2):
[limits] family_shards tables over all its references, [limits] family_cells cells (tables × their
union's distinct columns), the guard's characters; and the expansion is the statement's work, inside
its slot and its timeout. Through `flexsql call`, as a user or a script meets them."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from flexsql.config import LimitsConfig
from flexsql.errors import InvalidArgument, QueryTimeout
from flexsql.tools.engines import open_source
from tests.support.mcp_support import server_env

TABLES, WIDTH = 200, 40  # each table its own 40 columns: `"*"` unites 8,000 columns over 200 tables


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("wide") / "wide.duckdb"
    with duckdb.connect(str(path)) as conn:
        for i in range(TABLES):
            cols = ", ".join(f"c{i}_{j} INTEGER" for j in range(WIDTH))
            conn.execute(f"CREATE TABLE t{i:04d} ({cols})")
        conn.execute("INSERT INTO t0000 (c0_0) VALUES (7)")
    return f"duckdb:///{path}"


@pytest.fixture(scope="module")
def narrow(tmp_path_factory: pytest.TempPathFactory) -> str:
    """120 daily shards of two columns: e_0000 … e_0119."""
    path = tmp_path_factory.mktemp("narrow") / "narrow.duckdb"
    with duckdb.connect(str(path)) as conn:
        for i in range(120):
            conn.execute(f"CREATE TABLE e_{i:04d} (id INTEGER, name VARCHAR)")
        conn.execute("INSERT INTO e_0001 VALUES (1, 'one')")
    return f"duckdb:///{path}"


def call(
    db: str, tool: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "flexsql.server", "call", tool, *args, "--db", db, "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        env=server_env(env),
    )


@pytest.mark.integration
def test_a_quoted_star_over_wide_tables_is_refused_before_it_is_built(wide: str) -> None:
    """Was: `SELECT 1 FROM "*" a` built the union of every table (354 million characters on 500 tables),
    for minutes and a gigabyte, before the guard refused its length."""
    for tool, arg in (("run_query", 'sql=SELECT 1 FROM "*" a'), ("validate_sql", 'sql=SELECT 1 FROM "*" a')):
        proc = call(wide, tool, arg)
        assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
        text = proc.stderr
        assert f"{TABLES} tables of {TABLES * WIDTH:,} distinct columns" in text, text
        assert "[limits] family_cells" in text and "characters" not in text, text
    # positive control: a family within the bounds reads
    ok = call(wide, "run_query", "sql=SELECT count(*) AS n, max(c0_0) AS m FROM t000* a")
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert json.loads(ok.stdout)["rows"] == [[1, 7]]


@pytest.mark.integration
def test_every_reference_of_a_statement_counts_against_family_shards(narrow: str) -> None:
    """Was: family_shards bounded each reference alone; three references of 100 shards each read 300."""
    env = {"FLEXSQL_LIMITS__FAMILY_SHARDS": "250"}
    three = "sql=SELECT count(*) FROM e_00* a, e_00* b, e_00* c"
    proc = call(narrow, "run_query", three, env=env)
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert "read 300 tables (e_00* 100, e_00* 100, e_00* 100)" in proc.stderr, proc.stderr[-2000:]
    assert "250 one statement may read ([limits] family_shards)" in proc.stderr
    two = call(narrow, "run_query", "sql=SELECT count(*) FROM e_00* a, e_01* b", env=env)  # 120: within it
    assert two.returncode == 0, two.stderr[-2000:]
    assert json.loads(two.stdout)["rows"] == [[0]]


@pytest.mark.integration
def test_a_family_named_inside_an_escape_string_stays_text(narrow: str) -> None:
    """Was: the masker ended a string at its first unescaped-looking quote, so in `E'\\' FROM e_00* x'`
    (one string: `\\'` is a quote inside it) the family was expanded inside the literal (item 13)."""
    proc = call(narrow, "run_query", "sql=SELECT E'\\' FROM e_00* x' AS s, count(*) AS n FROM e_000* y")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["rows"] == [["' FROM e_00* x", 1]]


def test_expanding_and_checking_count_against_the_statements_timeout(wide: str) -> None:
    """Two unions of 10 tables of 400 columns each, 8,000 cells of ~33 characters: their expansion and
    the guard's parse take about a second, which counts against the statement's timeout like the
    engine's run."""
    source = open_source(wide)
    try:
        started = time.monotonic()
        with pytest.raises(QueryTimeout, match="before it reached the engine"):
            source.execute("SELECT count(*) FROM t000* a, t000* b", timeout_s=0.05)
        assert time.monotonic() - started < 120
        assert source.gate.running == 0  # the slot it held is free again
    finally:
        source.close()


def test_the_bound_counts_cells_of_every_reference_together(wide: str) -> None:
    source = open_source(wide, limits=LimitsConfig(family_cells=50_000))
    try:
        # t000*: 10 tables of 400 columns = 4,000 cells each; 13 references pass 50,000
        sql = "SELECT 1 FROM " + ", ".join(f"t000* x{i}" for i in range(13))
        with pytest.raises(InvalidArgument, match=r"with the other references: 52,000\).*family_cells"):
            source.expand(sql)
        assert len(source.expand("SELECT 1 FROM t000* x0, t000* x1")[1]) == 2
    finally:
        source.close()


def test_the_expansion_stops_at_the_guards_characters(tmp_path: Path) -> None:
    """Long column names: few cells, many characters. The expansion stops as it passes the guard's
    1,000,000 characters, not after building the whole union."""
    path = tmp_path / "long.duckdb"
    with duckdb.connect(str(path)) as conn:
        for i in range(40):
            cols = ", ".join(f'"{"x" * 200}_{i}_{j}" INTEGER' for j in range(30))
            conn.execute(f"CREATE TABLE s{i:03d} ({cols})")
    source = open_source(f"duckdb:///{path}", limits=LimitsConfig(family_cells=1_000_000))
    try:
        with pytest.raises(InvalidArgument, match="more than 1,000,000 characters"):
            source.expand("SELECT 1 FROM s0* a")
    finally:
        source.close()


def test_resolving_many_references_stops_at_the_timeout(wide: str) -> None:
    """Each reference is looked up against every table of the catalog (100,000 on a warehouse): a
    statement of thousands of references that match nothing stops at its timeout, not after them all."""
    source = open_source(wide)
    try:
        sql = "SELECT 1 FROM t0000 a, " + ", ".join(f"nothing{i}*" for i in range(20000))
        with pytest.raises(QueryTimeout, match="before it reached the engine"):
            source.execute(sql, timeout_s=0.05)
    finally:
        source.close()
