"""The words of questions and identifiers (tools/search/text.py): identifier splitting, abbreviations,
glued words and stems."""

from __future__ import annotations

import pytest

from flexsql.tools.search.text import identifier_terms, stem, text_terms
from flexsql.tools.values.normalize import split_identifier


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("StuID", ["stu", "id"]),
        ("orderDate2", ["order", "date", "2"]),
        ("HTTPServerURL", ["http", "server", "url"]),
        ("customer_first_name", ["customer", "first", "name"]),
        ("Song_release_year", ["song", "release", "year"]),
        ("Émission", ["emission"]),
    ],
)
def test_identifier_splitting(name: str, words: list[str]) -> None:
    assert split_identifier(name) == words


@pytest.mark.parametrize(
    ("name", "means"),
    [
        ("unitQty", "unit quantity"),
        ("custAddr", "customer address"),
        ("dept_no", "department number"),
        ("Fname", "first name"),
        ("hire_dt", "hire date"),
        ("FirstName", "first names"),
    ],
)
def test_abbreviations_and_stems_match_plain_words(name: str, means: str) -> None:
    assert [t.term for t in identifier_terms(name)] == [t.term for t in text_terms(means)]


def test_glued_words_split_against_the_catalog_vocabulary() -> None:
    vocabulary = frozenset({"first", "name", "course"})
    assert [t.term for t in identifier_terms("firstname", vocabulary)] == ["first", "name"]
    assert [t.term for t in identifier_terms("coursename", vocabulary)] == ["cours", "name"]
    assert [t.term for t in identifier_terms("firstname")] == ["firstnam"]  # nothing to split against


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("singers", "singer"),
        ("located", "location"),
        ("countries", "country"),
        ("departments", "department"),
        ("running", "run"),
    ],
)
def test_stemming_conflates_forms(a: str, b: str) -> None:
    assert stem(a) == stem(b)
