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
