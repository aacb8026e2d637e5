"""A column in SQL, by its declared type: which types hold text or numbers, and the expressions the
value tools group, compare, cut and match it with on every engine."""

from __future__ import annotations

import re
from typing import Any

from flexsql.tools.engines import Engine

TEXT_VALUE_CHARS = 1000  # longer values are grouped whole but returned cut (a 10 MB cell is not a value)

_TEXT_TYPE = re.compile(r"CHAR|TEXT|STRING|CLOB|CITEXT|ENUM|NAME\b", re.IGNORECASE)
_NON_TEXT_SQLITE = re.compile(r"INT|REAL|FLOA|DOUB|NUM|DEC|BOOL|DATE|TIME|BLOB", re.IGNORECASE)
_NUMERIC_TYPE = re.compile(r"INT|DEC|NUM|REAL|FLOAT|DOUBLE|HUGEINT", re.IGNORECASE)
_ORDERED_TYPE = re.compile(
    r"INT|DEC|NUM|REAL|FLOAT|DOUBLE|MONEY|DATE|TIME|INTERVAL|CHAR|TEXT|STRING|NAME", re.IGNORECASE
)
# names that contain INT, TIME or NUM without being numbers or ordered scalars (no avg, no min/max)
_NOT_SCALAR = re.compile(r"INTERVAL|POINT|RANGE|MULTIRANGE|TSVECTOR|TSQUERY|ENUM|INET|CIDR", re.IGNORECASE)
_UNORDERED_TYPE = re.compile(r"POINT|RANGE|TSVECTOR|TSQUERY|TIMETZ|TIME WITH TIME ZONE", re.IGNORECASE)
_NESTED_TYPE = re.compile(r"JSON|ARRAY|\[\]|VARIANT|OBJECT|STRUCT|MAP|GEO", re.IGNORECASE)
_BINARY_TYPE = re.compile(r"BLOB|BYTEA|BINARY|BYTES", re.IGNORECASE)


def is_text_type(type_name: str, engine: Engine) -> bool:
    if engine.dynamic_types:
        # SQLite affinity: no declared type holds anything; TEXT-like names hold text
        return (
            not type_name.strip()
            or bool(_TEXT_TYPE.search(type_name))
            or not _NON_TEXT_SQLITE.search(type_name)
        )
    if re.search(r"UUID|VARIANT|OBJECT", type_name, re.IGNORECASE):
        return False
    # JSON documents and arrays are searched through their text (PostgreSQL's enums carry '(enum)')
    return bool(_TEXT_TYPE.search(type_name)) or bool(re.search(r"JSON|ARRAY|\[\]", type_name, re.IGNORECASE))


def is_number_type(type_name: str, engine: Engine) -> bool:
    """A number the engine can average (not a nested, text or interval-like type named with INT/NUM)."""
    return (
        bool(_NUMERIC_TYPE.search(type_name))
        and not is_text_type(type_name, engine)
        and not _NESTED_TYPE.search(type_name)
        and not _NOT_SCALAR.search(type_name)
    )


def value_sql(column_sql: str, ctype: str, engine: Engine) -> str:
    """The column as something every engine can compare, group and take min/max of: itself when
    ordered (numbers, text, dates), `0x…` hex for binary (as every tool shows bytes), else its text
    (booleans, JSON, arrays, UUIDs…)."""
    if _BINARY_TYPE.search(ctype) and not engine.dynamic_types:
        return engine.binary_text(column_sql)
    if engine.dynamic_types or (
        _ORDERED_TYPE.search(ctype) and not _NESTED_TYPE.search(ctype) and not _UNORDERED_TYPE.search(ctype)
    ):
        return column_sql
    return engine.as_text(column_sql)


def cut_sql(csql: str, ctype: str, engine: Engine) -> str:
    """The first TEXT_VALUE_CHARS + 1 characters of a value (text, or the text of a BLOB/other type),
    so one huge cell cannot push a result past the fetch's byte cap."""
    return engine.prefix(csql, TEXT_VALUE_CHARS + 1)


def cut_value(value: Any) -> Any:
    if isinstance(value, str) and len(value) > TEXT_VALUE_CHARS:
        return value[:TEXT_VALUE_CHARS] + "…"
    return value


def like_pattern(text: str) -> str:
    escaped = text.lower().replace("!", "!!").replace("%", "!%").replace("_", "!_")
    return f"%{escaped}%"
