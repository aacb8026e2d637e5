"""Counts in messages and reports: "1 task", "2 tasks", "1 row" (never "1 rows")."""

from __future__ import annotations


def plural(n: int, word: str, many: str | None = None) -> str:
    """`n` and `word`, in the plural unless n is 1 (`many` for an irregular plural)."""
    return f"{n:,} {word if n == 1 else many or word + 's'}"
