"""Statements at once in one server, and the working memory each holds while it runs.

Memory a running statement needs outside of anything the result store counts — DuckDB's streaming
buffer and the chunks its threads build (DuckDB's own count, bounded by its memory_limit, leaves them
out), the batch a fetch holds before it is counted — grows with the number of statements running at
once, and no engine setting bounds that number. The gate does: at most `slots` statements run at once
over all the sources of a server ([limits] server_statements), a statement past them waits (within its
own timeout), and each running statement holds `allowance` bytes ([limits] statement_mb) of the
server's memory budget (`WorkingMemory`, the result store's budget), which evicts stored results to
make room for it."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Protocol

from flexsql.errors import QueryError, QueryTimeout
from flexsql.tools.engines.cancel import active_cancel_hooks


class WorkingMemory(Protocol):
    """The server's memory budget as the gate uses it: room for one running statement."""

    def hold_working(self, size: int) -> None: ...

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
        self._cond = threading.Condition()

    @contextlib.contextmanager
    def slot(self, timeout_s: float) -> Iterator[float]:
        """Hold one slot for the block; yields the seconds spent waiting for it (the statement's
        timeout keeps counting from the call). Raises QueryTimeout when no slot frees in `timeout_s`,
        QueryError when the tool call is cancelled while waiting."""
        started = time.monotonic()
        hooks = active_cancel_hooks.get()
        cancelled = threading.Event()

        def wake() -> None:
            cancelled.set()
            with self._cond:
                self._cond.notify_all()

        if hooks is not None:
            hooks.add(wake)
        try:
            with self._cond:
                while self.running >= self.slots and not cancelled.is_set():
                    left = timeout_s - (time.monotonic() - started)
                    if left <= 0:
                        raise QueryTimeout(
                            f"the statement waited {timeout_s:g} s for one of this server's {self.slots} "
                            "statement slots ([limits] server_statements): other queries held them all; "
                            "try again when they finish"
                        )
                    self._cond.wait(left)
                if cancelled.is_set():
                    raise QueryError("the query was cancelled while it waited for a statement slot")
                self.running += 1
        finally:
            if hooks is not None:
                hooks.discard(wake)
        if self.memory is not None and self.allowance:
            self.memory.hold_working(self.allowance)
        try:
            yield time.monotonic() - started
        finally:
            if self.memory is not None and self.allowance:
                self.memory.release_working(self.allowance)
            with self._cond:
                self.running -= 1
                self._cond.notify()


__all__ = ["StatementGate", "WorkingMemory"]
