"""psycopg loaders for PostgreSQL values that Python's types cannot hold.

Without them one such value fails the whole query ('infinity'::timestamp, '24:00'::time, years
past 9999) or a later step (numeric NaN breaks decimal arithmetic), and intervals lose their
months ('1 mon' would become 30 days). Values a Python type holds exactly are loaded as usual;
the others come back as PostgreSQL's own text ('infinity', '24:00:00', '1 mon'), or as a float
for numeric NaN/±Infinity, so the tools show what the database holds. A json/jsonb document nested
deeper than Python parses comes back as its text.
"""

from __future__ import annotations

import json
from typing import Any

_SPECIAL_NUMERIC = {b"NaN": float("nan"), b"Infinity": float("inf"), b"-Infinity": float("-inf")}


def register(conn: Any) -> None:
    """Install the loaders on one connection (text format, which flexsql's cursors use)."""
    import psycopg
    from psycopg.types.datetime import (
        DateLoader,
        TimeLoader,
        TimestampLoader,
        TimestamptzLoader,
        TimetzLoader,
    )
    from psycopg.types.json import set_json_loads
    from psycopg.types.numeric import NumericLoader

    def tolerant(base: type) -> type:
        # one subclass per psycopg loader, made at run time: mypy cannot check a base held in a variable
        class Tolerant(base):  # type: ignore[misc]
            def load(self, data: Any) -> Any:
                try:
                    return super().load(data)
                except (psycopg.DataError, ValueError, OverflowError):
                    return bytes(data).decode("utf-8", "replace")

        Tolerant.__name__ = f"Tolerant{base.__name__}"
        return Tolerant

    class ExactNumericLoader(NumericLoader):
        def load(self, data: Any) -> Any:
            special = _SPECIAL_NUMERIC.get(bytes(data))
            return special if special is not None else super().load(data)

    class IntervalTextLoader(psycopg.adapt.Loader):
        def load(self, data: Any) -> Any:
            return bytes(data).decode("utf-8", "replace")

    adapters = conn.adapters
    for name, base in (
        ("date", DateLoader),
        ("timestamp", TimestampLoader),
        ("timestamptz", TimestamptzLoader),
        ("time", TimeLoader),
        ("timetz", TimetzLoader),
    ):
        adapters.register_loader(name, tolerant(base))
    adapters.register_loader("numeric", ExactNumericLoader)
    set_json_loads(_loads, conn)
    adapters.register_loader("interval", IntervalTextLoader)


def _loads(data: str | bytes) -> Any:
    """json.loads, or the text itself for a document nested too deep to parse (RecursionError)."""
    try:
        return json.loads(data)
    except RecursionError:
        return data.decode("utf-8", "replace") if isinstance(data, bytes) else data
