"""Cancelling statements on the engine: per tool call (the client went away) and per deadline."""

from __future__ import annotations

import threading
from contextvars import ContextVar
from typing import Any

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

    def __init__(self, seconds: float, cancel: Any) -> None:
        self.fired = False
        self._cancel = cancel
        self._timer = threading.Timer(max(seconds, 0.001), self._fire)
        self._timer.daemon = True
        self._hooks = active_cancel_hooks.get()

    def _fire(self) -> None:
        if self.fired:
            return
        self.fired = True
        try:
            self._cancel()
        except Exception:  # cancelling a finished query is harmless
            pass

    def __enter__(self) -> Deadline:
        self._timer.start()
        if self._hooks is not None:
            self._hooks.add(self._fire)
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        if self._hooks is not None:
            self._hooks.discard(self._fire)


def timeout_error(seconds: float) -> QueryTimeout:
    return QueryTimeout(
        f"query cancelled after {seconds:g} s (timeout_s={seconds:g}); simplify it, add filters or LIMIT"
    )
