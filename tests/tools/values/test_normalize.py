"""Text normalisation (tools/values/normalize.py): accents, punctuation, CJK, and emoji as words of their
own, so '🎉' finds '🎉🎉' (it used to normalise to nothing and match no value)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.values.find import FindValues, find_values
from flexsql.tools.values.normalize import compact, normalize, number_forms, spaced


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("🎉🎉", "🎉 🎉"),
        ("party 🎉 time", "party 🎉 time"),
        ("Côte d'Ivoire", "cote d ivoire"),
        ("$100", "100"),
        ("foo_bar-baz", "foo bar baz"),
        ("北京 市", "北京 市"),
        ("ÉCOLE", "ecole"),
    ],
)
def test_normalize(text: str, expected: str) -> None:
    assert normalize(text) == expected


def test_an_emoji_finds_the_values_that_hold_it(tmp_path: Path) -> None:
    import duckdb

    path = tmp_path / "e.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE posts (id INTEGER, mood VARCHAR)")
    con.execute("INSERT INTO posts VALUES (1, '🎉🎉'), (2, 'party 🎉 time'), (3, 'plain'), (4, '😢')")
    con.close()
    source = open_source(f"duckdb:///{path}", name="e")
    try:
        result = find_values(ToolContext(sources=SourceRegistry([source])), FindValues(text="🎉"))
    finally:
        source.close()
    assert result.matches and result.matches[0].column == "mood"
    spellings = {result.matches[0].value, *result.matches[0].others}
    assert {"🎉🎉", "party 🎉 time"} <= spellings and "😢" not in spellings


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("NorthCarolina", "north carolina"),
        ("AustralianOpen", "australian open"),
        ("Route66", "route 66"),
        ("HTMLParser", "html parser"),
        ("e-mail", "e mail"),
    ],
)
def test_spaced_splits_camel_case_and_digits(text: str, expected: str) -> None:
    assert spaced(text) == expected


def test_compact_forms_meet() -> None:
    forms = {compact(normalize(t)) for t in ("North Carolina", "NorthCarolina", "north-carolina")}
    assert forms == {"northcarolina"}
    assert compact(normalize("e-mail")) == compact(normalize("email")) == "email"


@pytest.mark.parametrize(
    ("word", "forms"),
    [
        ("dogs", ["dog"]),
        ("companies", ["company"]),
        ("boxes", ["box", "boxe"]),
        ("city", ["cities"]),
        ("class", ["classes"]),
        ("bus", []),
        ("ab", []),
        ("2020", []),
    ],
)
def test_number_forms(word: str, forms: list[str]) -> None:
    assert number_forms(word) == forms
