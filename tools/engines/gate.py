"""Statements at once in one server, and the working memory each holds while it runs.

Memory a running statement needs outside of anything the result store counts — DuckDB's streaming
buffer and the chunks its threads build (DuckDB's own count, bounded by its memory_limit, leaves them
out), the batch a fetch holds before it is counted — grows with the number of statements running at
once, and no engine setting bounds that number. The gate does: at most `slots` statements run at once
over all the sources of a server ([limits] server_statements), a statement past them waits (within its
own timeout), and each running statement holds `allowance` bytes ([limits] statement_mb) of the
server's memory budget (`WorkingMemory`, the result store's budget), which evicts stored results to
make room for it.

One client (`statement_owner`, the server's principal for the call: an HTTP session or token) holds
at most half of the slots: a client that keeps slow queries running cannot make every other client's
`SELECT 1` wait. The one local client (stdio, the CLI) is not told apart: it may hold them all.

When a slot frees, the waiters take turns fairly: the next to run is the waiting statement of the client
running the fewest statements now, the earliest of those first. So a client that sends one `SELECT 1`
while sixteen others keep every slot busy runs as soon as one slot frees, instead of racing every
waiter for it (the red team's idle client waited 1.5-6.5 s, at worst 44 s, behind 16 busy sessions)."""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Protocol

from flexsql.errors import QueryTimeout
from flexsql.tools.engines.cancel import active_cancel_hooks

statement_owner: ContextVar[str | None] = ContextVar("flexsql_statement_owner", default=None)
"""Who the statements of the current tool call run for (set by the server per call; worker threads
inherit it); None: no client to tell apart (a script, the CLI)."""


class WorkingMemory(Protocol):
    """The server's memory budget as the gate uses it: room for one running statement (False: none
    now, the fetches in progress and the other statements fill it)."""

    def hold_working(self, size: int) -> bool: ...

    def release_working(self, size: int) -> None: ...


class StatementGate:
    """At most `slots` statements at once; each holds `allowance` bytes of `memory` while it runs."""

    def __init__(self, slots: int, allowance: int = 0, memory: WorkingMemory | None = None) -> None:
        if slots < 1:
            raise ValueError("a gate needs at least one slot")
        self.slots = slots
        self.allowance = allowance
        self.memory = memory
        self.running = 0
        self.per_owner = max(slots // 2, 1)
        self._owners: Counter[str | None] = Counter()  # running statements by client (None: local)
        self._waiting: dict[int, str | None] = {}  # waiting statements in arrival order -> their client
        self._tickets = itertools.count()
        self._cond = threading.Condition()

    def _capped(self, owner: str | None) -> bool:
        return owner is not None and self._owners[owner] >= self.per_owner

    def _full_for(self, owner: str | None) -> bool:
        return self.running >= self.slots or self._capped(owner)

    def _turn_of(self, ticket: int) -> bool:
        """Under the lock: whether the waiting statement `ticket` is next — among those whose client may
        run one more, the one whose client runs the fewest now, the earliest of those."""
        turns = [
            (self._owners[owner], waiting)
            for waiting, owner in self._waiting.items()
            if not self._capped(owner)
        ]
        return bool(turns) and min(turns)[1] == ticket

    @contextlib.contextmanager
    def slot(self, timeout_s: float) -> Iterator[float]:
        """Hold one slot, and the statement's working memory, for the block; yields the seconds spent
        waiting for them (the statement's timeout keeps counting from the call). Raises QueryTimeout
        when they do not free in `timeout_s`, or when the tool call is cancelled while waiting."""
        started = time.monotonic()
        owner = statement_owner.get()
        hooks = active_cancel_hooks.get()
        cancelled = threading.Event()

        def wake() -> None:
            cancelled.set()
            with self._cond:
                self._cond.notify_all()

        if hooks is not None:
            hooks.add(wake)
        try:
            self._enter(owner, started + timeout_s, cancelled, timeout_s)
            try:
                self._hold_memory(started + timeout_s, cancelled)
            except BaseException:
                self._leave(owner)
                raise
        finally:
            if hooks is not None:
                hooks.discard(wake)
        try:
            yield time.monotonic() - started
        finally:
            if self.memory is not None and self.allowance:
                self.memory.release_working(self.allowance)
            self._leave(owner)

    def _enter(
        self, owner: str | None, deadline: float, cancelled: threading.Event, timeout_s: float
    ) -> None:
        with self._cond:
            ticket = next(self._tickets)
            self._waiting[ticket] = owner
            try:
                while (self._full_for(owner) or not self._turn_of(ticket)) and not cancelled.is_set():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise QueryTimeout(self._busy(timeout_s, owner))
                    self._cond.wait(left)
                if cancelled.is_set():  # as an engine reports a statement cancelled before it started
                    raise QueryTimeout("the query was cancelled before it started")
            finally:
                del self._waiting[ticket]
                self._cond.notify_all()  # the next in line: another free slot, or the turn passed on
            self.running += 1
            self._owners[owner] += 1

    def _leave(self, owner: str | None) -> None:
        with self._cond:
            self.running -= 1
            self._owners[owner] -= 1
            if not self._owners[owner]:
                del self._owners[owner]
            self._cond.notify_all()  # the waiter whose turn it is now can be any client's

    MEMORY_POLL_S = 0.05  # rare (fetches in progress fill the budget): polled rather than signalled

    def _hold_memory(self, deadline: float, cancelled: threading.Event) -> None:
        if self.memory is None or not self.allowance:
            return
        while not self.memory.hold_working(self.allowance):
            if cancelled.is_set():
                raise QueryTimeout("the query was cancelled before it started")
            if time.monotonic() >= deadline:
                raise QueryTimeout(
                    "the statement waited for memory to run in: fetches in progress fill the server's "
                    "result budget ([limits] server_store_mb); try again when they finish"
                )
            cancelled.wait(self.MEMORY_POLL_S)

    def _busy(self, timeout_s: float, owner: str | None) -> str:
        if owner is not None and self._owners[owner] >= self.per_owner:
            return (
                f"the statement waited {timeout_s:g} s: this client already runs {self._owners[owner]} "
                f"statements, the most one client may run at once (half of [limits] server_statements = "
                f"{self.slots}); wait for them to finish"
            )
        return (
            f"the statement waited {timeout_s:g} s for one of this server's {self.slots} statement slots "
            "([limits] server_statements): other queries held them all; try again when they finish"
        )


__all__ = ["StatementGate", "WorkingMemory", "statement_owner"]
