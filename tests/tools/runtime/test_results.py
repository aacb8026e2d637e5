"""The result stores (tools/runtime/results.py) and the server-wide budget they draw from: every
session's store counts against one StoreBudget, the least recently used result of any store is
evicted first, a store that goes away gives its bytes back, and no one result may be bigger than what
one session may hold (the fetch stops there, and says so)."""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from flexsql.config import LimitsConfig
from flexsql.errors import NotFoundError
from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.query import FetchRows, RunQuery, fetch_rows, run_query
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.results import ResultStore, StoreBudget

MB = 1024 * 1024


def rows(megabytes: float) -> list[tuple[str]]:
    """About `megabytes` of rows as the store estimates them."""
    return [("x" * 1000,)] * int(megabytes * MB / 1009)


def test_stores_share_the_budget_and_evict_the_least_recently_used_of_any_store() -> None:
    budget = StoreBudget(max_bytes=10 * MB)
    a, b = ResultStore(max_bytes=8 * MB, budget=budget), ResultStore(max_bytes=8 * MB, budget=budget)
    a1 = a.put(columns=["s"], rows=rows(4), total_rows=1)
    b1 = b.put(columns=["s"], rows=rows(4), total_rows=1)
    assert budget.bytes_used == a.bytes_used + b.bytes_used <= 10 * MB
    a.get(a1.result_id)  # a's result is now the more recently used
    b.put(columns=["s"], rows=rows(4), total_rows=1)  # over 10 MB: the oldest of all goes, b1
    with pytest.raises(NotFoundError, match="evicted to save memory"):
        b.get(b1.result_id)
    assert a.get(a1.result_id) is a1
    assert budget.bytes_used == a.bytes_used + b.bytes_used <= 10 * MB


def test_a_store_that_goes_away_gives_its_bytes_back() -> None:
    budget = StoreBudget(max_bytes=10 * MB)
    store = ResultStore(budget=budget)
    store.put(columns=["s"], rows=rows(3), total_rows=1)
    assert budget.bytes_used > 0
    del store
    gc.collect()
    assert budget.bytes_used == 0


def test_one_result_is_never_bigger_than_a_sessions_share(duck_ctx) -> None:
    """A 16 MB server budget under the default 512 MB store: a 40 MB result keeps the rows that fit
    in 16 MB, says it was cut, and fetch_rows says why the rest is not there."""
    budget = StoreBudget(max_bytes=16 * MB)
    ctx = ToolContext(
        sources=duck_ctx.sources,
        limits=LimitsConfig(),
        results=ResultStore(max_bytes=512 * MB, budget=budget),
    )
    out = run_query(ctx, RunQuery(sql="SELECT i, repeat('x', 1000) AS pad FROM range(40000) t(i)"))
    stored = ctx.results.get(out.result_id)
    assert stored.truncated and 0 < len(stored.rows) < 40000 and out.total_rows == 40000
    assert stored.size_bytes <= 16 * MB and budget.bytes_used <= 16 * MB
    rest = fetch_rows(ctx, FetchRows(result_id=out.result_id, offset=len(stored.rows) - 1, limit=10))
    assert rest.hint and f"only the first {len(stored.rows)} rows were kept" in rest.hint


def test_max_rows_bounds_what_is_kept(duck_ctx) -> None:
    """A caller asking for 20 rows does not store a million: the result keeps max(max_rows,
    [limits] keep_rows) rows; the total is still counted; without max_rows it keeps up to store_rows."""
    ctx = ToolContext(sources=duck_ctx.sources, limits=LimitsConfig(keep_rows=1000))
    out = run_query(ctx, RunQuery(sql="SELECT i FROM range(1000000) t(i)", max_rows=20))
    assert out.row_count == 20 and out.total_rows == 1_000_000 and not out.total_is_lower_bound
    assert len(ctx.results.get(out.result_id).rows) == 1000
    page = fetch_rows(ctx, FetchRows(result_id=out.result_id, offset=990, limit=50))
    assert [r[0] for r in page.rows] == list(range(990, 1000))
    assert page.hint and "max_rows" in page.hint and "without max_rows" in page.hint
    bigger = run_query(ctx, RunQuery(sql="SELECT i FROM range(1000000) t(i)", max_rows=5000))
    assert len(ctx.results.get(bigger.result_id).rows) == 5000
    default = run_query(ctx, RunQuery(sql="SELECT i FROM range(1000000) t(i)"))
    assert len(ctx.results.get(default.result_id).rows) == 1_000_000


def test_fetches_in_flight_count_against_the_budget_too(duck_ctx) -> None:
    """Five sessions fetching at once must not together pass the budget before any result is stored:
    a fetch claims room as it keeps rows; when the others' claims fill the budget it keeps what fits,
    and says why."""
    budget = StoreBudget(max_bytes=16 * MB)
    busy = ResultStore(budget=budget)
    ctx = ToolContext(sources=duck_ctx.sources, results=ResultStore(budget=budget))
    with busy.reservation() as reserve:
        assert reserve is not None and reserve(12 * MB)  # another session's fetch, still running
        out = run_query(ctx, RunQuery(sql="SELECT i, repeat('x', 1000) AS pad FROM range(10000) t(i)"))
        stored = ctx.results.get(out.result_id)
        assert 0 < len(stored.rows) < 10000 and out.total_rows == 10000
        assert any("server_store_mb" in note for note in out.notes), out.notes
        assert budget.bytes_used + 12 * MB <= 16 * MB + 1024 * 1024  # the stored part fits beside it
    again = run_query(ctx, RunQuery(sql="SELECT i, repeat('x', 1000) AS pad FROM range(10000) t(i)"))
    assert len(ctx.results.get(again.result_id).rows) == 10000 and not again.notes


def test_one_result_holds_at_most_store_mb_in_memory(tmp_path) -> None:
    """store_mb bounds what a result holds in Python (its data and the tuples and objects around it),
    as the store charges it — not only the data's printed size, which let a 512 MB store keep 588 MB."""
    import duckdb

    path = tmp_path / "big.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE big AS SELECT i, repeat('x', 1000) || i AS pad FROM range(40000) r(i)")
    source = open_source(f"duckdb:///{path}", name="big")
    try:
        limits = LimitsConfig(store_mb=16, server_store_mb=1024)
        ctx = ToolContext(
            sources=SourceRegistry([source]), limits=limits, results=ResultStore(max_bytes=16 * MB)
        )
        out = run_query(ctx, RunQuery(sql="SELECT i, pad FROM big"))
        stored = ctx.results.get(out.result_id)
        assert stored.truncated and 0 < len(stored.rows) < 40000 and out.total_rows == 40000
        assert stored.size_bytes <= 16 * MB, stored.size_bytes
    finally:
        source.close()


def test_a_stored_result_is_held_once_while_it_is_fetched_and_kept(tmp_path) -> None:
    """Python's memory for a stored result, traced while run_query fetches and keeps 200,000 rows,
    never passes what the store charges for it: the rows are not copied on their way into the store (a
    validated QueryResult built every tuple again), and the cut of big cells does not build the columns
    and a list of their lengths (15 MB more here, 56 MB at a million rows)."""
    import duckdb

    path = tmp_path / "t.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE t AS SELECT i, repeat('x', 100) || i AS s FROM range(200000) r(i)")
    source = open_source(f"duckdb:///{path}", name="t")
    try:
        ctx = ToolContext(sources=SourceRegistry([source]))
        run_query(ctx, RunQuery(sql="SELECT i, s FROM t LIMIT 10"))  # catalog and guard loaded first
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            out = run_query(ctx, RunQuery(sql="SELECT i, s FROM t"))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        stored = ctx.results.get(out.result_id)
        assert len(stored.rows) == 200_000
        assert peak - before <= stored.size_bytes, (peak - before, stored.size_bytes)
    finally:
        source.close()


def test_a_stored_result_takes_its_fetchs_claim_in_one_step() -> None:
    """The bytes a fetch claimed become its result's charge under one lock: never counted twice (the
    result evicting others for its own claim), never free in between (another fetch claiming them while
    the rows are still held)."""
    budget = StoreBudget(max_bytes=16 * MB)
    other = ResultStore(budget=budget)
    kept = other.put(columns=["s"], rows=rows(6), total_rows=1)
    store = ResultStore(budget=budget)
    with store.reservation() as reserve:
        assert reserve is not None and reserve(8 * MB)
        stored = store.put(columns=["s"], rows=rows(8), total_rows=1, reservation=reserve)
        assert budget.bytes_reserved == 0
        assert budget.bytes_used == stored.size_bytes + kept.size_bytes <= 16 * MB
        assert other.get(kept.result_id) is kept  # 6 + 8 MB fit: nothing evicted for a double count


def test_a_stored_result_makes_room_for_the_fetches_in_progress() -> None:
    """Results and the claims of fetches still running together stay within the budget: a result stored
    beside a claim evicts the least recently used result of another store."""
    budget = StoreBudget(max_bytes=16 * MB)
    old, busy, store = (ResultStore(budget=budget) for _ in range(3))
    first = old.put(columns=["s"], rows=rows(6), total_rows=1)
    with busy.reservation() as reserve:
        assert reserve is not None and reserve(8 * MB)  # another session's fetch, still running
        store.put(columns=["s"], rows=rows(6), total_rows=1)
        assert budget.bytes_used + budget.bytes_reserved <= 16 * MB
        with pytest.raises(NotFoundError, match="evicted to save memory"):
            old.get(first.result_id)


# -- the working memory of running statements (tools/engines/gate.py) --------------------------------


def test_a_starting_statement_evicts_results_for_its_working_memory() -> None:
    """A statement that starts holds statement_bytes of the budget: the least recently used result goes
    to make room, and the room comes back when the statement ends."""
    budget = StoreBudget(max_bytes=16 * MB, statements=2, statement_bytes=4 * MB)
    store = ResultStore(budget=budget)
    old = store.put(columns=["s"], rows=rows(7), total_rows=1)
    new = store.put(columns=["s"], rows=rows(7), total_rows=1)
    assert budget.hold_working(budget.statement_bytes)
    assert budget.bytes_working == 4 * MB
    assert budget.bytes_used + budget.bytes_working <= 16 * MB
    with pytest.raises(NotFoundError, match="evicted to save memory"):
        store.get(old.result_id)
    assert store.get(new.result_id) is new
    budget.release_working(budget.statement_bytes)
    assert budget.bytes_working == 0


def test_a_statement_finds_no_room_while_fetches_in_progress_fill_the_budget() -> None:
    """Claims of fetches in progress cannot be evicted: a statement starting beside them is refused its
    working memory (the gate waits) rather than pushing the server over its budget."""
    budget = StoreBudget(max_bytes=16 * MB, statements=2, statement_bytes=4 * MB)
    store = ResultStore(budget=budget)
    assert budget.hold_working(budget.statement_bytes)  # one statement running, fetching
    with store.reservation() as reserve:
        assert reserve is not None and reserve(12 * MB) and not reserve(1)
        assert not budget.hold_working(budget.statement_bytes)  # 4 + 12 + 4 > 16
        assert budget.bytes_working == 4 * MB
    assert budget.hold_working(budget.statement_bytes)  # the claim is released: room again
    assert budget.bytes_reserved + budget.bytes_working <= 16 * MB


def test_a_statement_waits_for_memory_then_runs(tmp_path) -> None:
    """Through a source behind the server's gate: while fetches in progress hold the whole budget, a
    statement waits (it does not run over budget) and runs once they let go."""
    import threading

    import duckdb

    from flexsql.tools.engines import StatementGate

    duckdb.connect(str(tmp_path / "w.duckdb")).close()
    budget = StoreBudget(max_bytes=16 * MB, statements=2, statement_bytes=4 * MB)
    source = open_source(f"duckdb:///{tmp_path}/w.duckdb")
    source.gate = StatementGate(2, budget.statement_bytes, budget)
    claim = ResultStore(budget=budget).reservation()
    reserve = claim.__enter__()
    assert reserve is not None and reserve(16 * MB)
    released = threading.Event()

    def release() -> None:
        claim.__exit__(None, None, None)
        released.set()

    threading.Timer(0.3, release).start()
    assert source.execute("SELECT 7", timeout_s=5).rows == [(7,)]
    assert released.is_set()  # it ran only once the claims let go
    assert budget.bytes_working == 0
    source.close()


def test_running_statements_hold_at_most_half_the_budget() -> None:
    """statement_mb × server_statements over half of a small server_store_mb: each slot's share shrinks,
    so results keep half of the budget."""
    budget = StoreBudget(max_bytes=64 * MB, statements=8, statement_bytes=32 * MB)
    assert budget.statement_bytes == 4 * MB
    assert ResultStore(max_bytes=512 * MB, budget=budget).max_result_bytes == 60 * MB
