"""DuckDB (tools/engines/duckdb_source.py) on real files: a file named like one of its schemas (issue 12
item 5), months, nanoseconds and infinities in text, errors that name the real cause (a SQLite file, a
lock held by another process), SHOW ALL, exact decimals, huge cells, memory and temp limits, and the
file lock released when idle."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from flexsql.config import LimitsConfig
from flexsql.errors import ConfigError, FlexSQLError
from flexsql.tools.catalog import DescribeTable, describe_table
from flexsql.tools.engines import open_source
from flexsql.tools.query import RunQuery, SampleRows, run_query, sample_rows
from flexsql.tools.values.distinct import DistinctValues, distinct_values
from flexsql.tools.values.find import FindValues, find_values
from flexsql.tools.values.profile import ProfileColumn, profile_column
from tests.support.contexts import context
from tests.support.numbers import BIG18, BIG38, FRAC38


def test_duckdb_file_named_like_its_schema(tmp_path: Path) -> None:
    path = tmp_path / "sales.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute("CREATE SCHEMA sales")
    conn.execute("CREATE TABLE sales.sales.orders (id INTEGER, city VARCHAR)")
    conn.execute("INSERT INTO sales.sales.orders VALUES (1, 'Lyon'), (2, 'Nantes')")
    conn.close()
    ctx = context(f"duckdb:///{path}")
    assert sample_rows(ctx, SampleRows(table="sales.orders")).rows == [[1, "Lyon"], [2, "Nantes"]]
    assert describe_table(ctx, DescribeTable(table="sales.orders")).columns[1].examples == ["Lyon", "Nantes"]
    found = find_values(ctx, FindValues(text="Nantes"))
    assert [(m.table, m.column) for m in found.matches] == [("sales.orders", "city")], found.to_text()
    assert profile_column(ctx, ProfileColumn(table="sales.orders", column="city")).distinct == 2
    assert distinct_values(ctx, DistinctValues(table="sales.orders", column="city")).distinct_total == 2


def test_duckdb_text_keeps_months_nanoseconds_and_infinity(tmp_path: Path) -> None:
    ctx = context("duckdb://:memory:")
    out = run_query(
        ctx,
        RunQuery(
            sql="SELECT INTERVAL 1 MONTH AS m, '2024-01-01 12:00:00.123456789'::TIMESTAMP_NS AS ns, "
            "'infinity'::TIMESTAMP AS inf, 0.1::REAL AS r, 1e-20::DOUBLE AS tiny, 'NULL' AS s, NULL AS n"
        ),
    )
    text = out.to_text()
    row = text.splitlines()[2]
    cells = [c.strip() for c in row.split("|")]
    assert cells[0] == "1 month", text
    assert cells[1] == "2024-01-01 12:00:00.123456789", text
    assert cells[2] == "infinity", text
    assert cells[3] == "0.1" and cells[4] == "1e-20", text
    assert cells[5] != cells[6], text


@pytest.mark.integration
def test_duckdb_errors_name_the_real_cause(tmp_path: Path) -> None:
    lite = tmp_path / "file.sqlite"
    sqlite3.connect(lite).execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(ConfigError, match="SQLite file.*sqlite:///"):
        open_source(f"duckdb:///{lite}").catalog()
    locked_dir = tmp_path / "version-2"  # a path holding "version" must not read as a version mismatch
    locked_dir.mkdir()
    path = locked_dir / "held.duckdb"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
            "c.execute('CREATE TABLE t (x INT)'); print('ready', flush=True); time.sleep(60)",
            str(path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(ConfigError) as info:
            open_source(f"duckdb:///{path}").catalog()
        assert "lock" in str(info.value) and "different DuckDB version" not in str(info.value)
    finally:
        holder.kill()
        holder.wait()


def test_duckdb_show_all_is_not_an_index_error() -> None:
    ctx = context("duckdb://:memory:")
    with pytest.raises(FlexSQLError) as info:
        run_query(ctx, RunQuery(sql="SHOW ALL"))
    assert "list index out of range" not in str(info.value) and "SHOW" in str(info.value)


def test_duckdb_decimals_reach_the_agent_exactly(duck_ctx):
    out = run_query(
        duck_ctx,
        RunQuery(
            sql=f"SELECT {BIG18}::DECIMAL(18,0) AS a, {BIG38}::DECIMAL(38,0) AS b, '{FRAC38}'::DECIMAL(38,19) AS c"
        ),
    )
    assert out.rows == [[int(BIG18), int(BIG38), FRAC38]]
    structured = json.loads(out.model_dump_json())
    assert structured["rows"] == [[int(BIG18), int(BIG38), FRAC38]]
    text = out.to_text()
    assert BIG18 in text and BIG38 in text and FRAC38 in text


def test_a_huge_duckdb_cell_is_cut_not_reported_as_zero_rows(duck_ctx):
    out = run_query(duck_ctx, RunQuery(sql="SELECT repeat('y', 20000000) AS s"))
    assert out.row_count == 1 and out.total_rows == 1
    assert "rows 1-0" not in out.to_text()
    assert len(out.rows[0][0]) < 20_000_000


def test_duckdb_gets_memory_and_temp_limits_from_limits():
    assert LimitsConfig().engine_memory_mb == 2048
    src = open_source("duckdb://:memory:")
    try:
        rows = src.execute(
            "SELECT current_setting('memory_limit'), current_setting('max_temp_directory_size')"
        ).rows
        memory, temp = rows[0]
        assert memory.replace(" ", "").upper() in ("2.0GIB", "1.9GIB", "2048.0MIB", "2.0GB", "1.9GB")
        assert temp not in ("", None)
    finally:
        src.close()


def _write_from_another_process(path: str) -> subprocess.CompletedProcess[str]:
    code = (
        f"import duckdb; c = duckdb.connect({path!r}); c.execute('CREATE TABLE added (a INTEGER)'); c.close()"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


@pytest.mark.integration
def test_duckdb_releases_its_file_lock_when_idle(tmp_path, monkeypatch):
    from flexsql.tools.engines import open_source
    from flexsql.tools.engines.duckdb_source import DuckDBSource
    from tests.support.engines import make_duckdb

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


def test_duckdb_reports_its_own_memory_without_holding_its_handle(tmp_path, monkeypatch):
    """engine_memory (what /healthz reports): DuckDB's count of what it holds — the file's blocks a
    scan cached — under [limits] engine_memory_mb; nothing for a handle not open, and asking neither
    opens the handle nor keeps it from being released when idle."""
    from flexsql.tools.engines.duckdb_source import DuckDBSource

    path = tmp_path / "big.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE big AS SELECT i, md5(i::VARCHAR) AS h FROM range(300000) r(i)")
    monkeypatch.setattr(DuckDBSource, "IDLE_RELEASE_S", None)
    source = open_source(f"duckdb:///{path}", limits=LimitsConfig(engine_memory_mb=256))
    try:
        memory = source.engine_memory()
        assert memory is not None and memory.used_bytes == 0 and memory.limit_bytes == 256 * 1024 * 1024
        assert source._conn is None  # not opened to be asked
        source.execute("SELECT count(DISTINCT h) FROM big")
        memory = source.engine_memory()
        assert memory is not None and 1024 * 1024 < memory.used_bytes <= memory.limit_bytes
        source.close()
        assert source.engine_memory() == type(memory)(used_bytes=0, limit_bytes=256 * 1024 * 1024)
    finally:
        source.close()

    monkeypatch.setattr(DuckDBSource, "IDLE_RELEASE_S", 0.2)
    polled = open_source(f"duckdb:///{path}")
    try:
        polled.execute("SELECT count(*) FROM big")
        deadline = time.monotonic() + 30
        while polled._conn is not None and time.monotonic() < deadline:
            polled.engine_memory()  # a poll every 20 ms, as a busy /healthz: the handle still goes
            time.sleep(0.02)
        assert polled._conn is None
    finally:
        polled.close()


EXIT_PROGRAM = """
import atexit, subprocess, sys
from pathlib import Path

path, report, hook = sys.argv[1:4]
WRITE = "import duckdb, sys; duckdb.connect(sys.argv[1]).execute('CREATE TABLE w AS SELECT 1')"


def after_flexsql_exit() -> None:  # registered first, so it runs after flexsql's handler
    writer = subprocess.run([sys.executable, "-c", WRITE, path], capture_output=True)
    Path(report).write_text("free" if writer.returncode == 0 else "held")


atexit.register(after_flexsql_exit)
from flexsql import background
from flexsql.tools.engines import open_source
from flexsql.tools.engines.duckdb_source import DuckDBSource

DuckDBSource.IDLE_RELEASE_S = 600  # the handle is still open when the process exits
source = open_source(f"duckdb:///{path}", name="shop")
source.execute("SELECT count(*) FROM orders")
if hook == "off":
    background._stoppers.clear()  # the positive control: no exit hooks
"""


@pytest.mark.integration
def test_exit_closes_the_handle_itself_instead_of_leaving_it_to_an_idle_timer(tmp_path) -> None:
    """Was: each source's idle timer closed its handle in a daemon thread; a timer that fired while the
    interpreter shut down ended inside DuckDB's C++ close and aborted the process (exit 134 after every
    test had passed, 5 runs in 5 of `pytest tests/tools/search tests/tools/values`). Now exit closes the
    handles from the main thread first: the file is free for a writer before the interpreter goes down."""
    from tests.support.engines import make_duckdb

    path = make_duckdb(tmp_path).removeprefix("duckdb:///")
    outcomes = {}
    for hook in ("on", "off"):
        report = tmp_path / f"{hook}.txt"
        proc = subprocess.run(
            [sys.executable, "-P", "-c", EXIT_PROGRAM, "/" + path.lstrip("/"), str(report), hook],
            capture_output=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr.decode()[-2000:]
        outcomes[hook] = report.read_text()
    assert outcomes == {"on": "free", "off": "held"}
