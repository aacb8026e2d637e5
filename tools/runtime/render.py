"""Compact text for the model: tables as pipe-separated rows, long cells cut, a character budget."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from flexsql.config import LimitsConfig

_LIMITS = LimitsConfig()


@dataclass(frozen=True)
class TextBudget:
    """How much of one result a model reads: [limits] output_chars in all, cell_chars per cell."""

    max_chars: int = _LIMITS.output_chars
    cell_chars: int = _LIMITS.cell_chars

    @classmethod
    def of(cls, limits: LimitsConfig) -> TextBudget:
        return cls(max_chars=limits.output_chars, cell_chars=limits.cell_chars)


_INFINITE_TIMES = {
    dt.datetime.max: "infinity",
    dt.datetime.min: "-infinity",
    dt.date.max: "infinity",
    dt.date.min: "-infinity",
}


def cell_text(value: Any, max_chars: int = _LIMITS.cell_chars) -> str:
    if value is None:
        text = "NULL"
    elif isinstance(value, str) and (not value.strip() or value.strip().upper() == "NULL"):
        text = "'" + value + "'"  # the text 'NULL' or '' must not read as NULL or as nothing
    elif isinstance(value, float):
        text = _single_precision_text(value) or float_text(value)
    elif isinstance(value, decimal.Decimal | int):
        text = str(value)
    elif isinstance(value, dt.datetime | dt.date) and _INFINITE_TIMES.get(
        value
    ):  # drivers' stand-in for ±infinity
        text = _INFINITE_TIMES[value]
    elif isinstance(value, dt.datetime | dt.date | dt.time):
        text = value.isoformat(sep=" ") if isinstance(value, dt.datetime) else value.isoformat()
    elif isinstance(value, bytes | bytearray | memoryview):  # the Snowflake connector returns bytearray
        text = "0x" + bytes(value[:64]).hex()
    elif isinstance(value, dict | list | tuple):
        text = json.dumps(value, default=str, ensure_ascii=False)
    else:
        text = str(value)
    text = text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", " ").replace("|", "¦")
    if len(text) > max_chars:
        text = text[: max_chars - 1] + "…"
    return text


def _single_precision_text(value: float) -> str | None:
    """A REAL (float32) read back as a double, 0.1 -> 0.10000000149011612, shown as the shortest
    text that is the same float32 ('0.1'); None for doubles that no float32 equals exactly."""
    if value != value or value in (float("inf"), float("-inf")) or value == 0 or abs(value) > 3.4e38:
        return None
    try:
        if struct.unpack("f", struct.pack("f", value))[0] != value:
            return None
    except OverflowError:
        return None
    for digits in range(1, 10):
        text = f"{value:.{digits}g}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == value:
            return text if len(text) < len(repr(value)) else None
    return None


def float_text(value: float) -> str:
    """A float as the shortest text that reads back as the same number, with binary noise beyond
    15 significant digits dropped (0.1 + 0.2 -> 0.3), but never rounded to zero (1e-20 stays)."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    short = f"{value:.15g}"
    return repr(value) if float(short) == value else short


def table_text(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    cell_chars: int = _LIMITS.cell_chars,
    max_chars: int = _LIMITS.output_chars,
) -> tuple[str, int]:
    """Render a header and as many rows as fit in `max_chars`; returns (text, rows_shown). A line wider
    than the room left (hundreds of columns) is cut with '…' — the header to half the room, so one row
    always shows — rather than overflowing: what callers append after the table must survive."""
    lines = [_fit(" | ".join(cell_text(c, cell_chars) for c in columns), max_chars // 2)]
    used = len(lines[0]) + 1
    shown = 0
    for row in rows:
        line = " | ".join(cell_text(v, cell_chars) for v in row)
        if used + len(line) + 1 > max_chars:
            if shown > 0:
                break
            line = _fit(line, max_chars - used - 1)
        lines.append(line)
        used += len(line) + 1
        shown += 1
    return "\n".join(lines), shown


def _fit(line: str, room: int) -> str:
    return line if len(line) <= room else line[: max(room - 1, 0)] + _CUT_MARK


def jsonable(value: Any) -> Any:
    """A JSON-safe form of a cell for structured output."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if isinstance(value, decimal.Decimal):
        # exact values stay exact: an int when integral (JSON integers have no size limit), the
        # decimal's own text otherwise, since a float would cut DECIMAL(38,19) to 17 digits
        if not value.is_finite():
            return str(value)
        return int(value) if value == value.to_integral_value() else str(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return "0x" + bytes(value).hex()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return str(value)


_CUT_MARK = "…"


def bounded_structured(data: dict[str, Any], max_bytes: int) -> tuple[dict[str, Any], bool]:
    """`data` (a model_dump) cut so that its JSON is at most `max_bytes`: long text cells first
    (each to an equal share, with an ellipsis), then trailing rows. Returns (data, truncated); a
    cut result says so with `truncated: true` and a `truncated_reason`, and keeps its handles
    (result_id) so the rest stays reachable."""
    size = _json_size(data)
    if size <= max_bytes:
        return data, False
    out = dict(data)
    out["truncated"] = True
    out["truncated_reason"] = f"structured result over {max_bytes:,} bytes: long cells and trailing rows cut"
    rows_key = next((k for k in ("rows", "values", "matches") if isinstance(out.get(k), list)), None)
    budget = max(max_bytes - _json_size({k: v for k, v in out.items() if k != rows_key}) - 64, 0)
    if rows_key is not None:
        rows = out[rows_key]
        cell_cap = max(budget // max(len(rows), 1) // 2, 16)
        while True:
            cut_rows = [_cut_cells(r, cell_cap) for r in rows]
            kept: list[Any] = []
            used = 2
            for row in cut_rows:
                row_size = _json_size(row) + 1
                if used + row_size > budget:
                    break
                kept.append(row)
                used += row_size
            if kept or cell_cap <= 16:
                break
            cell_cap //= 4  # even one row does not fit: cut its cells harder
        out[rows_key] = kept
        if "row_count" in out:
            out["row_count"] = len(kept)
    if _json_size(out) > max_bytes:  # something else is large (a long SQL text): cut every string
        out = _cut_cells(out, max(max_bytes // 8, 16))
    if _json_size(out) > max_bytes:
        out = {
            "truncated": True,
            "truncated_reason": out["truncated_reason"],
            **{k: out[k] for k in ("result_id",) if k in out},
        }
    return out, True


def _json_size(value: Any) -> int:
    return len(json.dumps(value, default=str, ensure_ascii=False).encode("utf-8"))


def _cut_cells(value: Any, cap: int) -> Any:
    """Strings longer than `cap` characters cut (a hex '0x…' BLOB string included), recursively."""
    if isinstance(value, str):
        return value if len(value) <= cap else value[: max(cap - 1, 1)] + _CUT_MARK
    if isinstance(value, list | tuple):
        return [_cut_cells(v, cap) for v in value]
    if isinstance(value, dict):
        return {k: _cut_cells(v, cap) for k, v in value.items()}
    return value
