"""Cancelling statements on the engine: per tool call (the client went away) and per deadline."""

from __future__ import annotations

import threading
import time
from contextvars import ContextVar
from typing import Any

from flexsql import background
from flexsql.errors import QueryTimeout


class CancelHooks:
    """Cancel callbacks of the statements running on behalf of one tool call. The server sets it
    (through a context variable, which worker threads inherit) so that a client's cancellation
    stops the query on the engine, not just the waiting coroutine."""

    def __init__(self) -> None:
        self._hooks: set[Any] = set()
        self._lock = threading.Lock()
        self.cancelled = False

    def add(self, hook: Any) -> None:
        with self._lock:
            self._hooks.add(hook)
            run_now = self.cancelled
        if run_now:
            hook()

    def discard(self, hook: Any) -> None:
        with self._lock:
            self._hooks.discard(hook)

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            hooks = list(self._hooks)
        for hook in hooks:
            hook()


active_cancel_hooks: ContextVar[CancelHooks | None] = ContextVar("flexsql_cancel_hooks", default=None)


class Deadline:
    """Calls `cancel` once if the guarded block runs past `seconds` (or when the surrounding tool
    call is cancelled); `fired` says whether it did."""

    RETRY_S = 0.1  # a cancel that lands between two statements of the block is sent again this often

    def __init__(self, seconds: float, cancel: Any) -> None:
        self.fired = False
        self._cancel = cancel
        self._timer = threading.Timer(max(seconds, 0.001), self._fire)
        self._timer.daemon = True
        self._hooks = active_cancel_hooks.get()
        self._done = threading.Event()

    def _fire(self) -> None:
        if self.fired:
            return
        self.fired = True
        # An interrupt reaches only the statement running at that moment: one that lands while the
        # block prepares (describing the query, planning cells) would be lost and the next statement
        # would run to its end. So it is repeated until the block exits.
        threading.Thread(target=self._keep_cancelling, daemon=True, name="flexsql-cancel").start()

    def _keep_cancelling(self) -> None:
        while not self._done.is_set():
            try:
                self._cancel()
            except Exception:  # cancelling a finished query is harmless
                pass
            self._done.wait(self.RETRY_S)

    def __enter__(self) -> Deadline:
        with _RUNNING_LOCK:
            _RUNNING.add(self)
        self._timer.start()
        if self._hooks is not None:
            self._hooks.add(self._fire)
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._timer.cancel()
        if self._hooks is not None:
            self._hooks.discard(self._fire)
        with _RUNNING_LOCK:
            _RUNNING.discard(self)


# Statements running now, in any thread. A worker thread whose tool call was abandoned may still be
# inside an engine's native code when the interpreter exits; CPython ends such a thread as it comes
# back for the GIL, and unwinding through C++ there aborts the process (exit 134). So exit cancels
# them all and waits, bounded, until each has come back to Python.
_RUNNING: set[Deadline] = set()
_RUNNING_LOCK = threading.Lock()


def _cancel_running_at_exit(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    with _RUNNING_LOCK:
        running = list(_RUNNING)
    for statement in running:
        statement._fire()
    for statement in running:
        statement._done.wait(max(deadline - time.monotonic(), 0.0))


background.on_exit(_cancel_running_at_exit)


def timeout_error(seconds: float) -> QueryTimeout:
    return QueryTimeout(
        f"query cancelled after {seconds:g} s (timeout_s={seconds:g}); simplify it, add filters or LIMIT"
    )
