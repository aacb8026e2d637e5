"""The exit codes every `flexsql` command uses (docs/cli.md): 0 success; 1 a runtime error (a query, the
model endpoint, an unreachable source); 2 a usage or configuration error (a flag, a setting, a missing
file), whenever it is found; 130 interrupted (Ctrl-C, or SIGTERM for `flexsql eval`). A module of its
own, importing nothing of flexsql, so the process entry can use them before anything else is imported."""

from __future__ import annotations

import atexit
import os
import sys
from typing import NoReturn

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def leave(code: int) -> NoReturn:
    """Flush the output, run the exit handlers (background work stops, statements are cancelled) and exit
    at once (server/entry.py says why interrupted runs do not leave through the interpreter's shutdown)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more to say
            pass
    atexit._run_exitfuncs()
    os._exit(code)
