"""A bounded edit distance: how the value index tells a typo ('Frnace') from another word."""

from __future__ import annotations


def max_edits(length: int) -> int:
    return 1 if length <= 7 else 2


def edit_distance(a: str, b: str, bound: int) -> int:
    """Damerau-Levenshtein (adjacent transpositions) distance, cut off just above `bound`."""
    if abs(len(a) - len(b)) > bound:
        return bound + 1
    prev2: list[int] | None = None
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if prev2 is not None and i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > bound:
            return bound + 1
        prev2, prev = prev, cur
    return prev[-1]
