"""Nested values as one compact line: no pretty-printing (Snowflake hands VARIANTs over indented, which
reads as literal `\\n  ` escapes once a cell is one line), and the keys that matter first, so a cut at
the cell's width drops NULLs and sub-objects rather than whatever key sorts last."""

from __future__ import annotations

import json
from typing import Any


def _ordered(value: Any) -> Any:
    """Objects with their scalar keys first, then nested ones, NULL-valued keys last (each group in its
    own order); arrays element by element."""
    if isinstance(value, dict):
        scalars = {
            k: _ordered(v) for k, v in value.items() if v is not None and not isinstance(v, dict | list)
        }
        nested = {k: _ordered(v) for k, v in value.items() if isinstance(v, dict | list)}
        nulls = {k: None for k, v in value.items() if v is None}
        return {**scalars, **nested, **nulls}
    if isinstance(value, list):
        return [_ordered(v) for v in value]
    return value


def compact_json(value: Any) -> str:
    """A dict or list as compact JSON, the keys that matter first."""
    return json.dumps(_ordered(value), default=str, ensure_ascii=False, separators=(",", ":"))


def json_text(text: str) -> str | None:
    """JSON object or array text as compact JSON, the keys that matter first; None when it is none."""
    stripped = text.strip()
    if stripped[:1] not in ("{", "[") or stripped[-1:] not in ("}", "]"):
        return None
    try:
        return compact_json(json.loads(stripped))
    except ValueError:
        return None


__all__ = ["compact_json", "json_text"]
