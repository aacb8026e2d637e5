"""Background work that must not outlive the interpreter's shutdown.

flexsql builds indexes, loads the embedding model and warms the sandbox in daemon threads. When the
process exits while one of them is inside native code (DuckDB's C++, the tokenizer), CPython ends the
thread as it comes back for the GIL, and the forced unwind through C++ aborts the whole process
("terminate called … FATAL: exception not rethrown", exit 134) after everything else succeeded. At
exit we therefore tell the builders to stop (`exiting()`, which their loops check between batches) and
wait a bounded time for them, so the process ends with its own exit code. Native work that is not a
builder's (a statement still running in a worker thread whose tool call was abandoned, a handle being
closed by an idle timer) is stopped through the hooks its owners register with `on_exit`.
"""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Callable
from typing import Any

EXIT_WAIT_S = 10.0  # the most interpreter exit waits for background threads, all together

_exiting = threading.Event()
_threads: list[threading.Thread] = []
_stoppers: list[Callable[[float], None]] = []
_lock = threading.Lock()


def exiting() -> bool:
    """True once the interpreter is shutting down: background loops stop at their next check."""
    return _exiting.is_set()


def start(target: Callable[..., Any], *args: Any, name: str) -> threading.Thread:
    """Start `target(*args)` in a daemon thread that interpreter exit waits for (bounded)."""
    thread = threading.Thread(target=target, args=args, daemon=True, name=name)
    with _lock:
        _threads[:] = [t for t in _threads if t.is_alive()]
        _threads.append(thread)
    thread.start()
    return thread


def on_exit(stop: Callable[[float], None]) -> None:
    """Call `stop(seconds_left)` at interpreter exit, after `exiting()` turns true: it interrupts native
    work of its own and waits for it at most `seconds_left`."""
    with _lock:
        _stoppers.append(stop)


def _wait_at_exit() -> None:
    _exiting.set()
    deadline = time.monotonic() + EXIT_WAIT_S
    with _lock:
        threads = list(_threads)
        stoppers = list(_stoppers)
    for stop in stoppers:
        try:
            stop(max(deadline - time.monotonic(), 0.0))
        except Exception:  # a stopper that fails must not keep the others from running
            pass
    for thread in threads:
        thread.join(max(deadline - time.monotonic(), 0.0))


atexit.register(_wait_at_exit)
