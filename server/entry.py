"""The `flexsql` command's process entry: the one place that decides how an interrupted run exits.

Output never dies on a character its stream cannot encode (flexsql/surrogates.py). Ctrl-C exits 130
with one line ("interrupted", printed by the command group) and no traceback, also
while the command is still importing. The exit itself is made here rather than left to the interpreter's
shutdown: under load, a server that had handled Ctrl-C and asked for 130 was seen ending by SIGINT
during shutdown instead (exit -2, CPython's way of reporting an unhandled KeyboardInterrupt), and a
thread still inside an engine's native code can abort a shutdown too. So an interrupted run flushes its
output, runs the exit handlers (they stop background work and cancel statements still running) and
leaves with `os._exit`.
"""

from __future__ import annotations

import sys

from flexsql.server.exits import EXIT_INTERRUPTED, leave


def run() -> None:
    _replace_what_cannot_be_printed()
    try:
        from flexsql.server.cli import main

        main()
    except KeyboardInterrupt:  # before the command group's own handler exists (imports)
        print("interrupted", file=sys.stderr)
        leave(EXIT_INTERRUPTED)
    except SystemExit as exc:
        if exc.code == EXIT_INTERRUPTED:
            leave(EXIT_INTERRUPTED)
        raise


def _replace_what_cannot_be_printed() -> None:
    """stdout and stderr write what their encoding cannot (a lone surrogate from a model's reply, any
    non-ASCII on an ASCII terminal) as U+FFFD or '?', instead of dying mid-answer."""
    from flexsql.surrogates import ERRORS

    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors=ERRORS)
