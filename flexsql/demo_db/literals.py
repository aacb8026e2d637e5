"""Python values written as DuckDB SQL literals, for the generator's statements."""

from __future__ import annotations

from collections.abc import Sequence


def lit(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def lit_list(values: Sequence[object]) -> str:
    return "[" + ", ".join(lit(v) for v in values) + "]"
