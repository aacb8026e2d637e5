"""tools/values/fuzzy.py: the bounded edit distance the value index checks typos with."""

from __future__ import annotations

import pytest

from flexsql.tools.values.fuzzy import edit_distance, max_edits

CASES = [
    ("france", "france", 1, 0),
    ("frnace", "france", 1, 1),  # two neighbours swapped: one edit
    ("germny", "germany", 1, 1),  # one letter missing
    ("colour", "color", 2, 1),
    ("abc", "xyz", 1, 2),  # past the bound: bound + 1, whatever the real distance
    ("aberdeen", "aberdeem", 2, 1),
    ("", "abc", 2, 3),
]


@pytest.mark.parametrize(("a", "b", "bound", "expected"), CASES)
def test_edit_distance_counts_a_transposition_once_and_stops_above_the_bound(
    a: str, b: str, bound: int, expected: int
) -> None:
    assert edit_distance(a, b, bound) == expected
    assert edit_distance(b, a, bound) == expected


def test_longer_words_allow_two_edits() -> None:
    assert [max_edits(n) for n in (4, 7, 8, 14)] == [1, 1, 2, 2]
