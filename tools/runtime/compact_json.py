"""Nested values as one compact line that keeps their structure when it has to be shortened.

No pretty-printing (Snowflake hands VARIANTs over indented, which reads as literal `\\n  ` escapes once a
cell is one line); scalar keys first, then nested ones, NULL-valued keys last. A value longer than its
room is shortened so that what a model needs to query it survives: every key and every array's length
stay, long strings are cut (`"Google Navy Spe…"`), arrays show their first items and how many more
(`[{…},…11 more]`), and only past that are deep objects folded (`{…7 keys}`) — rather than cutting the
line at its width, which on sorted keys hid every key past the first few. A document nested deeper than
Python parses (thousands of levels) is not JSON here: it is shown as text.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 32  # levels rendered; deeper ones fold to `{…}` / `[…]` (and no renderer recursion goes past it)
CUT = "…"

# tried in turn until the value fits: (longest string kept, items kept per array (None: all), depth
# below which objects and arrays fold to their size)
_STEPS: tuple[tuple[int | None, int | None, int], ...] = (
    (None, None, MAX_DEPTH),
    (48, None, MAX_DEPTH),
    (24, None, MAX_DEPTH),
    (12, None, MAX_DEPTH),
    (48, 3, MAX_DEPTH),
    (24, 3, MAX_DEPTH),
    (24, 1, MAX_DEPTH),  # one element whole (the others share its keys) before three cut short
    (12, 1, MAX_DEPTH),
    (8, 1, MAX_DEPTH),
    (8, 1, 3),
    (4, 1, 3),
    (4, 1, 2),
    (4, 1, 1),
)


class _TooLong(Exception):
    """The rendering passed its room: the next, shorter step is tried."""


def _ordered_items(value: dict[Any, Any]) -> list[tuple[Any, Any]]:
    """An object's items: scalar keys first, then nested ones, NULL-valued keys last."""
    items = list(value.items())
    scalars = [(k, v) for k, v in items if v is not None and not isinstance(v, dict | list | tuple)]
    nested = [(k, v) for k, v in items if isinstance(v, dict | list | tuple)]
    nulls = [(k, v) for k, v in items if v is None]
    return scalars + nested + nulls


def _scalar(value: Any, cap: int | None) -> tuple[str, bool]:
    if isinstance(value, str):
        if cap is not None and len(value) > cap:
            return json.dumps(value[: max(cap - 1, 1)] + CUT, ensure_ascii=False), True
        return json.dumps(value, ensure_ascii=False), False
    if value is None or isinstance(value, bool | int | float):
        return json.dumps(value), False
    return json.dumps(str(value), ensure_ascii=False), False


class _Renderer:
    def __init__(self, room: int | None, strings: int | None, items: int | None, fold: int) -> None:
        self.room, self.strings, self.items, self.fold = room, strings, items, fold
        self.parts: list[str] = []
        self.size = 0
        self.cut = False

    def put(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)
        if self.room is not None and self.size > self.room:
            raise _TooLong

    def value(self, value: Any, depth: int) -> None:
        if isinstance(value, dict):
            if depth >= self.fold or depth >= MAX_DEPTH:
                self.cut = True
                self.put(f"{{{CUT}{len(value)} keys}}" if value else "{}")
                return
            self.put("{")
            for i, (key, inner) in enumerate(_ordered_items(value)):
                if i:
                    self.put(",")
                self.put(json.dumps(str(key), ensure_ascii=False) + ":")
                self.value(inner, depth + 1)
            self.put("}")
        elif isinstance(value, list | tuple):
            if depth >= self.fold or depth >= MAX_DEPTH:
                self.cut = True
                self.put(f"[{CUT}{len(value)} items]" if value else "[]")
                return
            shown = value if self.items is None else value[: self.items]
            self.put("[")
            for i, inner in enumerate(shown):
                if i:
                    self.put(",")
                self.value(inner, depth + 1)
            if len(shown) < len(value):
                self.cut = True
                self.put(("," if shown else "") + f"{CUT}{len(value) - len(shown)} more")
            self.put("]")
        else:
            text, cut = _scalar(value, self.strings)
            self.cut |= cut
            self.put(text)


def shorten_json(value: Any, max_chars: int | None = None) -> tuple[str, bool]:
    """A dict or list as compact JSON in at most `max_chars` characters where its structure allows:
    the first of the ever shorter forms (_STEPS) that fits, else the shortest one cut at the width.
    Returns (text, whether anything was shortened)."""
    for strings, items, fold in _STEPS:
        renderer = _Renderer(max_chars, strings, items, fold)
        try:
            renderer.value(value, 0)
        except _TooLong:
            continue
        return "".join(renderer.parts), renderer.cut
    renderer = _Renderer(None if max_chars is None else max_chars * 4, *_STEPS[-1])
    try:
        renderer.value(value, 0)
    except _TooLong:
        pass
    text = "".join(renderer.parts)
    if max_chars is not None and len(text) > max_chars:
        text = text[: max(max_chars - 1, 0)] + CUT
    return text, True


def compact_json(value: Any, max_chars: int | None = None) -> str:
    """A dict or list as compact JSON, the keys that matter first, shortened to `max_chars` keeping its
    structure (shorten_json)."""
    return shorten_json(value, max_chars)[0]


def parse_json(text: str) -> Any | None:
    """JSON object or array text as Python; None when it is none (or nested too deep to parse)."""
    stripped = text.strip()
    if stripped[:1] not in ("{", "[") or stripped[-1:] not in ("}", "]"):
        return None
    try:
        parsed = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    return parsed if isinstance(parsed, dict | list) else None


def json_text(text: str, max_chars: int | None = None) -> str | None:
    """JSON object or array text as compact JSON, the keys that matter first, shortened keeping its
    structure; None when it is none."""
    parsed = parse_json(text)
    return None if parsed is None else compact_json(parsed, max_chars)


__all__ = ["compact_json", "json_text", "parse_json", "shorten_json"]
