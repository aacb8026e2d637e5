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
