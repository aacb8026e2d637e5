"""Compact text for the model: tables as pipe-separated rows, long cells cut, a character budget."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pydantic_core

from flexsql.config import LimitsConfig
from flexsql.tools.runtime.compact_json import parse_json, shorten_json

_LIMITS = LimitsConfig()


@dataclass(frozen=True)
class TextBudget:
    """How much of one result a model reads: [limits] output_chars in all, cell_chars per cell."""

    max_chars: int = _LIMITS.output_chars
    cell_chars: int = _LIMITS.cell_chars
    # the tools the reader can call (an agent stage offers a few); None: every tool. A hint names
    # only these, so a model is never sent after a tool it does not have.
    tools: frozenset[str] | None = None

    @classmethod
    def of(cls, limits: LimitsConfig, tools: frozenset[str] | None = None) -> TextBudget:
        return cls(max_chars=limits.output_chars, cell_chars=limits.cell_chars, tools=tools)

    def offers(self, name: str) -> bool:
        return self.tools is None or name in self.tools

    def offered(self, *names: str) -> list[str]:
        """Those of `names` the reader can call, in order."""
        return [n for n in names if self.offers(n)]


def cell_text(value: Any, max_chars: int = _LIMITS.cell_chars) -> str:
    return _cell(value, max_chars)[0]


def _cell(value: Any, max_chars: int) -> tuple[str, bool]:
    """A cell as one line of at most `max_chars` characters, and whether a nested value (JSON, a
    struct, a list) was shortened keeping its structure (compact_json.py)."""
    shortened = False
    if value is None:
        text = "NULL"
    elif isinstance(value, str) and (
        not value.strip() or value.strip().upper() == "NULL" or value != value.strip()
    ):
        # the text 'NULL' or '' must not read as NULL or as nothing, and 'France ' (stored with a
        # trailing space) not as France: a query on the printed value would find nothing
        text = "'" + value + "'"
    elif isinstance(value, float):
        text = _single_precision_text(value) or float_text(value)
    elif isinstance(value, decimal.Decimal | int):
        text = str(value)
    elif isinstance(value, dt.datetime | dt.date | dt.time):
        # far dates are dates (9999-12-31 is the usual "still valid" sentinel); engines hand a real
        # ±infinity over as the text 'infinity' / '-infinity' (DuckDB's driver cannot: duckdb_source.py)
        text = value.isoformat(sep=" ") if isinstance(value, dt.datetime) else value.isoformat()
    elif isinstance(value, bytes | bytearray | memoryview):  # the Snowflake connector returns bytearray
        text = "0x" + bytes(value[:64]).hex()
    elif isinstance(value, dict | list | tuple):
        text, shortened = shorten_json(list(value) if isinstance(value, tuple) else value, max_chars)
    elif isinstance(value, str) and value[:1] in ("{", "[") and len(value) > 2:
        # JSON text (JSON, VARIANT columns): compact, keys that matter first, shortened keeping its keys
        parsed = parse_json(value)
        if parsed is None:
            text = value
        else:
            text, shortened = shorten_json(parsed, max_chars)
    else:
        text = str(value)
    text = text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", " ").replace("|", "¦")
    if len(text) > max_chars:
        text = text[: max_chars - 1] + "…"
    return text, shortened


def nested_like(value: Any) -> bool:
    """Whether a cell may be a nested value (a dict, a list, JSON text): the cells shortened keeping
    their structure, which get more room than a plain cell."""
    return isinstance(value, dict | list | tuple) or (
        isinstance(value, str) and value[:1] in ("{", "[") and len(value) > 2
    )


JSON_NOTE = (
    "nested cells shortened keeping every key: a value ending in '…' is cut, '…N more' counts the array "
    "items not shown, '{…N keys}' is an object folded"
)


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
    notes: list[str] | None = None,
) -> tuple[str, int]:
    """Render a header and as many rows as fit in `max_chars`; returns (text, rows_shown). A line wider
    than the room left (hundreds of columns) is cut with '…' — the header to half the room, so one row
    always shows — rather than overflowing: what callers append after the table must survive.
    Nested cells (JSON, structs, lists) get more room than `cell_chars` — up to four times, less when a
    row has several — so that their keys survive; when one shown was shortened, JSON_NOTE is appended
    to `notes` (once)."""
    lines = [_fit(" | ".join(cell_text(c, cell_chars) for c in columns), max_chars // 2)]
    used = len(lines[0]) + 1
    shown = 0
    nested = sum(1 for i in range(len(columns)) if any(nested_like(r[i]) for r in rows[:20] if i < len(r)))
    json_chars = max(cell_chars, min(4 * cell_chars, max_chars // (3 * max(nested, 1))))
    shortened = False
    for row in rows:
        cells = [_cell(v, json_chars if nested and nested_like(v) else cell_chars) for v in row]
        line = " | ".join(text for text, _ in cells)
        if used + len(line) + 1 > max_chars:
            if shown > 0:
                break
            line = _fit(line, max_chars - used - 1)
        shortened |= any(cut for _, cut in cells)
        lines.append(line)
        used += len(line) + 1
        shown += 1
    if shortened and notes is not None and JSON_NOTE not in notes:
        notes.append(JSON_NOTE)
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
        # exact values stay exact: an int when the type has no scale (JSON integers have no size
        # limit), the decimal's own text otherwise — a float would cut DECIMAL(38,19) to 17 digits, and
        # 52577.00 shown as 52577 hides that the column is money at two decimals
        if not value.is_finite():
            return str(value)
        exponent = value.as_tuple().exponent
        return int(value) if isinstance(exponent, int) and exponent >= 0 else str(value)
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


def wire_size(value: Any) -> int:
    """Bytes of `value` as the MCP SDK writes it, an exact bound for both of its encoders: compact
    JSON with non-ASCII escaped (`json.dumps`, the 2026 transport: é is 6 bytes) and compact UTF-8
    JSON (pydantic's, the SSE sessions and stdio, which prints 1e-05 as 0.00001): the larger."""
    escaped = len(json.dumps(value, separators=(",", ":"), default=str))  # ASCII only: chars are bytes
    return max(escaped, len(pydantic_core.to_json(value, fallback=str)))


@dataclass(frozen=True)
class StructuredCut:
    """What `bounded_structured` left out of one structured result, for the note the text carries."""

    max_bytes: int
    rows_key: str | None = None  # the list of rows (or values, matches…) cut to its leading items
    rows_kept: int | None = None
    rows_given: int | None = None
    values_cut: int = 0  # strings kept as their first part, ending in '…'
    lists_cut: bool = False  # other lists were cut to their leading items too

    def note(self, result_id: str | None = None, offset: int = 0) -> str:
        """One line for the text: what was cut, and (rows of a stored result) how to read the rest."""
        parts = [f"structured content cut to fit {self.max_bytes:,} bytes"]
        if self.rows_key is not None and self.rows_kept is not None and self.rows_kept != self.rows_given:
            parts.append(f"{self.rows_key} {offset + 1}-{offset + self.rows_kept} kept")
            if result_id and self.rows_key == "rows":
                parts.append(
                    f"fetch_rows(result_id={result_id!r}, offset={offset + self.rows_kept}) for the rest"
                )
        if self.values_cut:
            parts.append(f"{self.values_cut} long value(s) end in '…'")
        if self.lists_cut:
            parts.append("long lists keep their first items")
        return "; ".join(parts)


class StructuredTooLarge(ValueError):
    """Even cut to its required fields, a structured result does not fit: its fields are too many."""


_ROW_KEYS = ("rows", "values", "matches", "tables", "results")


def bounded_structured(data: dict[str, Any], max_bytes: int) -> tuple[dict[str, Any], StructuredCut | None]:
    """`data` (a JSON-mode model_dump) cut so that `wire_size` of it is at most `max_bytes`, keeping
    every field (so it still validates as the tool's result): long strings beside the rows first,
    then the rows to their leading items that fit whole (the first row's cells cut when not even it
    fits), then every string, then every other list. `truncated` (and `<field>_truncated` for a cut
    text field) is set, `row_count` follows the rows kept and `cells_cut` counts the cells cut.
    Returns (data, None) when it fits as it is; raises StructuredTooLarge when nothing cut fits."""
    if _size_within(data, max_bytes) <= max_bytes:
        return data, None
    out = dict(data)
    rows_key = next((k for k in _ROW_KEYS if isinstance(out.get(k), list)), None)
    if rows_key is None:
        lists = [k for k, v in out.items() if isinstance(v, list) and v]
        rows_key = max(lists, key=lambda k: _size_within(out[k], max_bytes), default=None)
    rows: list[Any] = out[rows_key] if rows_key is not None else []
    if rows_key is not None:
        out[rows_key] = []
    # 1. long strings beside the rows (an echoed SQL text, a traceback): to a sixteenth of the cap each
    out = _cut_strings(out, max(max_bytes // 16, 16), skip=rows_key)
    kept = len(rows)
    if rows_key is not None:
        # 2. the leading rows that fit whole (compact JSON adds a comma between rows, nothing else)
        room = max_bytes - wire_size(out)
        kept, used = 0, 0
        for row in rows:
            used += wire_size(row) + (1 if kept else 0)
            if used > room:
                break
            kept += 1
        out[rows_key] = rows[:kept]
        if kept == 0 and rows:  # not even the first row fits whole: it, with its cells cut
            first = _fit_strings(rows[0], lambda candidate: wire_size(candidate) <= room)
            if first is not None:
                out[rows_key] = [first]
                kept = 1
                if isinstance(out.get("cells_cut"), int):  # a cell the store cut already counts once
                    out["cells_cut"] += _count_cut(rows[0], first, recut=False)
        if isinstance(out.get("row_count"), int):
            out["row_count"] = kept
    lists_cut = False
    if wire_size(out) > max_bytes:  # 3. every string, to the longest cap that fits
        fitted = _fit_strings(out, lambda candidate: wire_size(candidate) <= max_bytes, skip=rows_key)
        if fitted is not None:
            out = fitted
    if wire_size(out) > max_bytes:  # 4. every other list, to the most first items that fit
        lists_cut = True
        out = _cut_strings(out, 16, skip=rows_key)
        low, high = 0, _longest_list(out, rows_key)
        if wire_size(_trim_lists(out, 0, rows_key)) > max_bytes:
            raise StructuredTooLarge(f"the result does not fit in {max_bytes:,} bytes even cut")
        while low < high:
            mid = (low + high + 1) // 2
            if wire_size(_trim_lists(out, mid, rows_key)) <= max_bytes:
                low = mid
            else:
                high = mid - 1
        out = _trim_lists(out, low, rows_key)
    if isinstance(out.get("truncated"), bool):
        out["truncated"] = True
    for key, value in data.items():
        flag = f"{key}_truncated"
        if isinstance(value, str) and isinstance(out.get(flag), bool) and out.get(key) != value:
            out[flag] = True
    return out, StructuredCut(
        max_bytes=max_bytes,
        rows_key=rows_key,
        rows_kept=kept if rows_key is not None else None,
        rows_given=len(rows) if rows_key is not None else None,
        values_cut=_count_cut(data, out),
        lists_cut=lists_cut,
    )


def _size_within(value: Any, limit: int) -> int:
    """`wire_size(value)`, or an upper bound of it that stops counting once past `limit` (a result of
    a hundred thousand rows is measured a row at a time, and only as far as the cap). Compact JSON
    is additive: braces, commas and colons, plus the parts."""
    if isinstance(value, dict):
        size = 1 + len(value)  # braces, and a comma between items
        for key, item in value.items():
            size += wire_size(str(key)) + 1 + _size_within(item, limit - size)
            if size > limit:
                return size
        return size
    if isinstance(value, list) and len(value) > 8:
        size = 1  # the brackets, and a comma between items: 1 + len(value) in all
        for start in range(0, len(value), 256):  # a chunk's JSON is its items, their commas and []
            size += wire_size(value[start : start + 256]) - 1
            if size > limit:
                return size
        return size
    return wire_size(value)


def _cut_strings(value: Any, cap: int, skip: str | None = None) -> Any:
    """Strings longer than `cap` characters cut to a prefix ending in '…', recursively (dict keys
    stay; the top-level field `skip` is left as it is)."""
    if isinstance(value, str):
        return value if len(value) <= cap else value[: max(cap - 1, 1)] + _CUT_MARK
    if isinstance(value, list | tuple):
        return [_cut_strings(v, cap) for v in value]
    if isinstance(value, dict):
        return {k: v if k == skip else _cut_strings(v, cap) for k, v in value.items()}
    return value


def _fit_strings(value: Any, fits: Callable[[Any], bool], skip: str | None = None) -> Any | None:
    """`value` with every string cut to the longest cap under which `fits(cut value)` holds (a binary
    search over the cap); None when not even 16 characters fit."""
    low, high = 16, max(_longest_string(value, skip), 16)
    best: Any | None = None
    while low <= high:
        mid = (low + high) // 2
        candidate = _cut_strings(value, mid, skip=skip)
        if fits(candidate):
            best, low = candidate, mid + 1
        else:
            high = mid - 1
    return best


def _longest_string(value: Any, skip: str | None = None) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list | tuple):
        return max((_longest_string(v) for v in value), default=0)
    if isinstance(value, dict):
        return max((_longest_string(v) for k, v in value.items() if k != skip), default=0)
    return 0


def _longest_list(value: Any, skip: str | None = None) -> int:
    if isinstance(value, list):
        return max([len(value), *(_longest_list(v) for v in value)])
    if isinstance(value, dict):
        return max((_longest_list(v) for k, v in value.items() if k != skip), default=0)
    return 0


def _trim_lists(value: dict[str, Any], items: int, skip: str | None) -> dict[str, Any]:
    """Every list in `value` (the rows list `skip` aside) cut to its first `items` items, recursively."""

    def trim(v: Any) -> Any:
        if isinstance(v, list):
            return [trim(x) for x in v[:items]]
        if isinstance(v, dict):
            return {k: trim(x) for k, x in v.items()}
        return v

    return {k: v if k == skip else trim(v) for k, v in value.items()}


def _count_cut(original: Any, cut: Any, recut: bool = True) -> int:
    """How many strings of `original` are shorter in `cut` (same shape, lists maybe shorter);
    `recut=False`: not those that already ended in the cut mark (cut before, counted then)."""
    if isinstance(original, str):
        return int(isinstance(cut, str) and cut != original and (recut or not original.endswith(_CUT_MARK)))
    if isinstance(original, list | tuple) and isinstance(cut, list | tuple):
        return sum(_count_cut(a, b, recut) for a, b in zip(original, cut, strict=False))
    if isinstance(original, dict) and isinstance(cut, dict):
        return sum(_count_cut(v, cut[k], recut) for k, v in original.items() if k in cut)
    return 0
