"""Result equivalence (tools/sql/equivalence.py): exact values (big integers, decimals) compare exactly,
floats within the tolerance."""

from __future__ import annotations

import pytest

from flexsql.tools.sql.equivalence import compare_tables
from tests.support.numbers import BIG38, D


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        (2**53 + 1, 2**53, False),
        (D("12345678901234567"), D("12345678901234568"), False),
        (D(BIG38), D(BIG38) - 1, False),
        (D("0.1234567890123456789"), D("0.1234567890123456788"), False),
        (D(BIG38), int(BIG38), True),
        (D("2.50"), D("2.5"), True),
        (D("5.00"), 5, True),
        (0.1 + 0.2, 0.3, True),  # floats are inexact: within the tolerance
        (100.001, 100, True),
        (D("0.3333"), 1 / 3, True),  # an exact value against an inexact one: tolerance
        (100.5, 100, False),
    ],
)
def test_compare_tables_is_exact_for_exact_values(a, b, equal):
    verdict = compare_tables(["x"], [(a,)], ["x"], [(b,)])
    assert verdict.equivalent is equal, verdict.reason
