"""Compact text for the model: tables as pipe-separated rows, long cells cut, a character budget."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections.abc import Sequence
from typing import Any


def cell_text(value: Any, max_chars: int = 200) -> str:
    if value is None:
        text = "NULL"
    elif isinstance(value, float):
        text = repr(round(value, 10)) if value == value else "NaN"
    elif isinstance(value, decimal.Decimal | int):
        text = str(value)
    elif isinstance(value, dt.datetime | dt.date | dt.time):
        text = value.isoformat(sep=" ") if isinstance(value, dt.datetime) else value.isoformat()
    elif isinstance(value, bytes):
        text = "0x" + value[:64].hex()
    elif isinstance(value, dict | list | tuple):
        text = json.dumps(value, default=str, ensure_ascii=False)
    else:
        text = str(value)
    text = text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", " ").replace("|", "¦")
    if len(text) > max_chars:
        text = text[: max_chars - 1] + "…"
    return text


def table_text(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, cell_chars: int = 200,
               max_chars: int = 4000) -> tuple[str, int]:
    """Render a header and as many rows as fit in `max_chars`; returns (text, rows_shown)."""
    lines = [" | ".join(cell_text(c, cell_chars) for c in columns)]
    used = len(lines[0]) + 1
    shown = 0
    for row in rows:
        line = " | ".join(cell_text(v, cell_chars) for v in row)
        if used + len(line) + 1 > max_chars and shown > 0:
            break
        lines.append(line)
        used += len(line) + 1
        shown += 1
    return "\n".join(lines), shown


def jsonable(value: Any) -> Any:
    """A JSON-safe form of a cell for structured output."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if isinstance(value, decimal.Decimal):
        return float(value) if value == value.to_integral_value() or abs(value) < 1e15 else str(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes):
        return "0x" + value.hex()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return str(value)
