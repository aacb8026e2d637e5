"""The `flexsql` module offered to user code in place of the real package: `flexsql.sql(query, source=None)`
sends the query to the server, which runs it through the guard and the source's limits and answers with an
Arrow file in the working directory. The child never receives connection details; and as this module has no
submodules, `import flexsql.tools…` fails in user code."""

from __future__ import annotations

import os
import sys
import types
from typing import Any

from .channels import Rpc
from .frames import read_frame


def flexsql_module(rpc: Rpc, counter: list[int]) -> types.ModuleType:
    """`flexsql` for user code: `sql()` asks the server over fd 3; the child never holds a connection."""
    module = types.ModuleType(
        "flexsql",
        "run_python helpers: flexsql.sql(query, source=None) runs one read-only "
        "query through the server (guarded, row-capped) and returns a DataFrame; "
        "by default on the source of the results given.",
    )

    class SQLError(RuntimeError):
        """The server refused or failed the query (the message says why)."""

    def sql(query: str, source: str | None = None) -> Any:
        if not isinstance(query, str) or not query.strip():
            raise TypeError(
                "flexsql.sql() takes one SQL string, e.g. flexsql.sql('SELECT count(*) FROM orders')"
            )
        if source is not None and not isinstance(source, str):
            raise TypeError("source= names a configured source, e.g. flexsql.sql('SELECT 1', source='sales')")
        counter[0] += 1
        rpc.send({"op": "sql", "sql": query, "source": source})
        reply = rpc.receive()
        if not reply.get("ok"):
            raise SQLError(str(reply.get("error") or "the query failed"))
        name = str(reply["file"])
        frame = read_frame(name)
        os.remove(name)
        meta = {
            k: reply.get(k)
            for k in ("total_rows", "total_is_lower_bound", "truncated", "cells_cut", "elapsed_ms")
        }
        frame.attrs.update(meta)
        if reply.get("truncated"):
            total = f"{reply.get('total_rows')}{'+' if reply.get('total_is_lower_bound') else ''}"
            print(
                f"flexsql.sql: only the first {len(frame)} of {total} rows were returned "
                f"(server row cap); aggregate in SQL to see everything",
                file=sys.stderr,
            )
        if reply.get("cells_cut"):
            print(
                f"flexsql.sql: {reply.get('cells_cut')} value(s) were too big to return whole and end in a "
                f"'…' marker (server cell cap); select a part of them (substr) to work on",
                file=sys.stderr,
            )
        return frame

    sql.__module__ = SQLError.__module__ = "flexsql"
    SQLError.__qualname__ = "SQLError"
    module.__dict__.update(sql=sql, SQLError=SQLError)
    return module
