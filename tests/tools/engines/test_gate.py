"""The statement gate (tools/engines/gate.py): at most server_statements statements run at once over
all the sources of a server; one past them waits within its own timeout, then fails saying which limit
held it; a cancelled tool call stops waiting; a running statement holds its working memory of the
server's budget."""

from __future__ import annotations

import threading
import time

import pytest

from flexsql.config import LimitsConfig, Settings
from flexsql.errors import QueryTimeout
from flexsql.server.sessions import SessionState
from flexsql.tools.engines import (
    CancelHooks,
    SourceRegistry,
    active_cancel_hooks,
    open_source,
    statement_owner,
)

SLOW = "SELECT count(*) FROM range(100000000000) t(i) WHERE i % 7 = 3"  # minutes, unless cancelled


def _wait_until(check, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def _files(tmp_path, *names: str) -> list[str]:
    import duckdb

    for name in names:
        duckdb.connect(str(tmp_path / f"{name}.duckdb")).close()
    return [f"duckdb:///{tmp_path}/{name}.duckdb" for name in names]


class Slow(threading.Thread):
    """A statement that runs until its timeout cancels it, in a thread; `error` is what it raised."""

    def __init__(self, source, timeout_s: float, owner: str | None = None) -> None:
        super().__init__()
        self.source, self.timeout_s, self.owner = source, timeout_s, owner
        self.error: BaseException | None = None
        self.start()
        _wait_until(lambda: source.gate.running >= 1)

    def run(self) -> None:
        statement_owner.set(self.owner)  # as the server sets it for each tool call
        try:
            self.source.execute(SLOW, timeout_s=self.timeout_s)
        except BaseException as exc:
            self.error = exc

    def finish(self) -> None:
        self.join(15)
        assert isinstance(self.error, QueryTimeout), self.error


@pytest.fixture
def two_sources(tmp_path):
    """A server (SessionState) over two DuckDB sources, with one statement slot."""
    limits = LimitsConfig(server_statements=1)
    urls = _files(tmp_path, "a", "b")
    sources = SourceRegistry(
        [open_source(url, name=n, limits=limits) for url, n in zip(urls, "ab", strict=True)]
    )
    state = SessionState(sources, Settings(limits=limits))
    yield sources, state
    sources.close()


def test_a_statement_past_the_servers_slots_waits_then_says_which_limit(two_sources) -> None:
    sources, state = two_sources
    a, b = sources.get("a"), sources.get("b")
    runner = Slow(a, timeout_s=3)
    assert state.store_budget.bytes_working == 32 * 1024 * 1024  # its working memory is held
    started = time.monotonic()
    with pytest.raises(QueryTimeout, match=r"statement slots \(\[limits\] server_statements\)"):
        b.execute("SELECT 1", timeout_s=0.5)  # another source, the same server: it waits for the slot
    assert 0.4 < time.monotonic() - started < 2.5
    runner.finish()
    assert a.gate.running == 0 and state.store_budget.bytes_working == 0
    assert b.execute("SELECT 1", timeout_s=2).rows == [(1,)]  # the slot is free again


def test_a_waiting_statement_runs_as_soon_as_the_slot_frees(two_sources) -> None:
    sources, _ = two_sources
    a, b = sources.get("a"), sources.get("b")
    runner = Slow(a, timeout_s=1)
    result = b.execute("SELECT 42", timeout_s=10)  # waits ~1 s, then runs within what is left
    assert result.rows == [(42,)]
    runner.finish()


def test_a_cancelled_call_stops_waiting_for_a_slot(two_sources) -> None:
    sources, _ = two_sources
    a, b = sources.get("a"), sources.get("b")
    runner = Slow(a, timeout_s=3)
    hooks = CancelHooks()
    threading.Timer(0.2, hooks.cancel).start()
    token = active_cancel_hooks.set(hooks)
    started = time.monotonic()
    try:
        with pytest.raises(QueryTimeout, match="cancelled before it started"):
            b.execute("SELECT 1", timeout_s=30)
    finally:
        active_cancel_hooks.reset(token)
    assert time.monotonic() - started < 2
    runner.finish()


def test_without_a_server_each_source_has_its_own_slots(tmp_path) -> None:
    """A source opened directly (the CLI's one-shot commands, a script) is not held by another's."""
    limits = LimitsConfig(server_statements=1)
    a, b = (open_source(url, limits=limits) for url in _files(tmp_path, "a", "b"))
    runner = Slow(a, timeout_s=2)
    assert b.execute("SELECT 1", timeout_s=0.5).rows == [(1,)]
    runner.finish()
    a.close()
    b.close()


def test_one_client_holds_at_most_half_the_slots(tmp_path) -> None:
    """A client that keeps slow queries running waits for its own; another client's SELECT 1 runs."""
    limits = LimitsConfig(server_statements=2)
    urls = _files(tmp_path, "a")
    sources = SourceRegistry([open_source(urls[0], name="a", limits=limits)])
    SessionState(sources, Settings(limits=limits))
    a = sources.get("a")
    runner = Slow(a, timeout_s=3, owner="session:greedy")
    token = statement_owner.set("session:greedy")
    try:
        with pytest.raises(QueryTimeout, match="this client already runs 1 statements"):
            a.execute("SELECT 1", timeout_s=0.3)
    finally:
        statement_owner.reset(token)
    token = statement_owner.set("session:other")
    try:
        assert a.execute("SELECT 1", timeout_s=0.3).rows == [(1,)]
    finally:
        statement_owner.reset(token)
    runner.finish()
    sources.close()


def test_a_freed_slot_goes_to_the_waiting_client_that_runs_the_fewest(tmp_path) -> None:
    """Four slots held by clients A and B (two each, their most); C queues two statements, then D one.
    The first slot freed goes to C (it runs none, and came first); the second to D, which runs none
    while C runs one — not to C's second statement, which waited longer (issue 30, item 11: an idle
    client's SELECT 1 waited seconds behind busy sessions racing it for every freed slot)."""
    from flexsql.tools.engines import StatementGate

    gate = StatementGate(4)
    entered: list[str] = []
    release = {name: threading.Event() for name in ("A1", "A2", "B1", "B2", "C1", "C2", "D1")}

    def run(name: str) -> None:
        statement_owner.set(name[0])
        with gate.slot(30):
            entered.append(name)
            release[name].wait(30)

    def start(name: str) -> threading.Thread:
        thread = threading.Thread(target=run, args=(name,), daemon=True)
        thread.start()
        return thread

    threads = [start(name) for name in ("A1", "A2", "B1", "B2")]
    _wait_until(lambda: gate.running == 4)
    for name in ("C1", "C2", "D1"):  # queued in this order (each has reached the gate before the next)
        threads.append(start(name))
        time.sleep(0.3)
    release["A1"].set()
    _wait_until(lambda: len(entered) == 5)
    release["A2"].set()
    _wait_until(lambda: len(entered) == 6)
    for event in release.values():
        event.set()
    for thread in threads:
        thread.join(10)
    assert entered[4:] == ["C1", "D1", "C2"], entered
