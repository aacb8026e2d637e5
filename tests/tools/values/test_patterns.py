"""Value shapes for profile_column (tools/values/patterns.py): character-class patterns and the kinds a
text column holds."""

from __future__ import annotations


def test_value_patterns_and_kinds() -> None:
    from flexsql.tools.values.patterns import looks_like, shape, value_patterns

    assert [(shape(v)) for v in ("AB-1234", "x9", "Alice Martin", "2024-01-05")] == [
        "AA-9999",
        "a9",
        "Aa+ Aa+",
        "9999-99-99",
    ]
    pats = value_patterns([("AB-1234", 5), ("CD-0001", 2), ("free form text here", 1)])
    assert (pats[0].pattern, pats[0].count, pats[0].example) == ("AA-9999", 7, "AB-1234")
    kinds = looks_like([("2024-01-05", 3), ("12.5", 3), ('{"a": 1}', 3), ("plain", 1)])
    assert kinds == {"date": 0.3, "number stored as text": 0.3, "json": 0.3}
