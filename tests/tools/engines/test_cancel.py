"""Cancelling statements at their deadline (tools/engines/cancel.py): a long query on DuckDB, SQLite
and PostgreSQL is cancelled after its timeout, and the source stays usable."""

from __future__ import annotations

import time

import pytest

from flexsql.errors import QueryTimeout
from tests.support.engines import engine_params

pytestmark = pytest.mark.integration

LONG_QUERY = {
    "duckdb": "SELECT count(*) FROM range(1000000000000) a",
    "sqlite": "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r",
    "postgres": "SELECT count(*) FROM generate_series(1, 100000000000)",
}


@pytest.mark.parametrize("engine", engine_params("duckdb", "sqlite", "postgres"), indirect=True)
def test_timeout_cancels_long_query_and_source_stays_usable(shop, engine):
    started = time.monotonic()
    with pytest.raises(QueryTimeout, match="cancelled after 1 s"):
        shop.execute(LONG_QUERY[engine], timeout_s=1)
    # cancelled, not left running for minutes; benchmarks/timeouts.py measures how close to 1 s
    assert time.monotonic() - started < 6.0
    assert shop.execute("SELECT count(*) FROM orders").rows == [(7,)]


def test_a_cancel_that_lands_before_the_statement_starts_still_stops_it(tmp_path) -> None:
    """Was: a client that left while the query was being prepared (described, planned) lost its interrupt,
    and the statement then ran to its 600 s timeout (found by /healthz's calls_in_flight)."""
    import threading

    from flexsql.tools.engines import CancelHooks, active_cancel_hooks, open_source
    from tests.support.engines import make_duckdb

    source = open_source(make_duckdb(tmp_path), name="shop")
    hooks = CancelHooks()
    hooks.cancel()  # the call was cancelled before its statement reached the engine
    outcome: list[BaseException] = []

    def run() -> None:
        token = active_cancel_hooks.set(hooks)
        try:
            source.execute(LONG_QUERY["duckdb"], timeout_s=600)
        except BaseException as exc:
            outcome.append(exc)
        finally:
            active_cancel_hooks.reset(token)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "the statement ran on after its call was cancelled"
    assert outcome and isinstance(outcome[0], QueryTimeout)


EXIT_PROGRAM = """
import atexit, sys, threading, time
from pathlib import Path

workers = []
# registered before flexsql's own exit handler, so it runs after it (atexit runs last-in first-out):
# it gives the worker a moment to report how its statement ended
atexit.register(lambda: [w.join(3) for w in workers])

from flexsql import background
from flexsql.tools.engines import open_source

url, query, report, hook = sys.argv[1:5]
source = open_source(url, name="shop")
source.execute("SELECT 1")
if hook == "off":
    background._stoppers.clear()  # the positive control: no exit hooks
started = threading.Event()

def abandoned() -> None:  # a tool call's worker thread that nobody waits for any more
    started.set()
    try:
        source.execute(query, timeout_s=600)
    except BaseException as exc:
        Path(report).write_text(type(exc).__name__)

workers.append(threading.Thread(target=abandoned, daemon=True))
workers[0].start()
started.wait()
time.sleep(1.0)  # the statement is running on the engine
"""


@pytest.mark.parametrize("engine", engine_params("duckdb", "sqlite", "postgres"), indirect=True)
def test_exit_cancels_a_statement_left_running_and_waits_for_it(engine, tmp_path) -> None:
    """Was: the interpreter ended a worker thread still inside the engine at exit; when it came back
    from DuckDB's C++ then, the whole process aborted (exit 134) after every test had passed."""
    import subprocess
    import sys

    from tests.support.engines import make_duckdb, make_postgres, make_sqlite

    # on PostgreSQL a statement whose client is gone runs on in the server: one that sleeps, not one
    # that keeps a core busy for the rest of the test run
    query = "SELECT pg_sleep(20)" if engine == "postgres" else LONG_QUERY[engine]

    def run(url: str, hook: str) -> tuple[int, str | None]:
        report = tmp_path / f"{engine}-{hook}.txt"
        proc = subprocess.run(
            [sys.executable, "-P", "-c", EXIT_PROGRAM, url, query, str(report), hook],
            capture_output=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr.decode()[-2000:]
        return proc.returncode, report.read_text() if report.exists() else None

    if engine == "postgres":
        with make_postgres() as url:
            outcomes = run(url, "on"), run(url, "off")
    else:
        url = (make_duckdb if engine == "duckdb" else make_sqlite)(tmp_path)
        outcomes = run(url, "on"), run(url, "off")
    assert outcomes[0] == (0, "QueryTimeout")  # cancelled at exit and came back to Python
    if engine != "duckdb":  # DuckDB's own exit handler interrupts its statements (and races the exit)
        assert outcomes[1] == (0, None)  # without the hook the statement was still running at exit
