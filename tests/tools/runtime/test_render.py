"""Rendering values for the model (tools/runtime/render.py): cell text shows values as they are (NULL
against 'NULL', infinities, REAL 0.1), exact numbers stay exact in structured output and text, and
structured payloads are capped by bytes, cutting long cells and rows and saying so."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from flexsql.agent.answer import Answer
from flexsql.tools.query import QueryOutput, RunQuery, run_query
from flexsql.tools.runtime.render import bounded_structured, cell_text, jsonable, wire_size
from tests.support.numbers import BIG18, BIG38, FRAC38, D


def test_cell_text_shows_values_as_they_are() -> None:
    assert cell_text(1e-20) == "1e-20"
    assert cell_text(123456789.123) == "123456789.123"
    assert cell_text("NULL") != cell_text(None)
    assert cell_text("") != cell_text(None) and cell_text("") != ""
    assert cell_text(float("inf")) == "Infinity" and cell_text(float("nan")) == "NaN"
    # far dates are dates: 9999-12-31 is the usual "still valid" sentinel, not infinity (engines hand
    # real ±infinity over as the text 'infinity' / '-infinity')
    assert cell_text(dt.date(9999, 12, 31)) == "9999-12-31" and cell_text(dt.date.min) == "0001-01-01"
    assert cell_text(dt.datetime.max) == "9999-12-31 23:59:59.999999"
    assert cell_text("infinity") == "infinity"
    # a stored trailing or leading space is visible, so the model does not filter on 'France'
    assert cell_text("France ") == "'France '" and cell_text(" Paris") == "' Paris'"
    assert cell_text("France") == "France"
    import struct

    real = struct.unpack("f", struct.pack("f", 0.1))[0]  # what a REAL 0.1 reads back as
    assert cell_text(real) == "0.1"


@pytest.mark.parametrize(
    ("value", "structured", "text"),
    [
        (D(BIG18), int(BIG18), BIG18),
        (D(BIG38), int(BIG38), BIG38),
        (D(FRAC38), FRAC38, FRAC38),
        (D("9007199254740993"), 9007199254740993, "9007199254740993"),
        (D("-0.000000000000000001"), "-1E-18", "-1E-18"),
        (D("12.50"), "12.50", "12.50"),
        (D("52577.00"), "52577.00", "52577.00"),  # a DECIMAL(12,2) keeps its scale
        (D("100"), 100, "100"),
        (1e-20, 1e-20, "1e-20"),
        (0.1 + 0.2, 0.1 + 0.2, "0.3"),
    ],
)
def test_exact_values_stay_exact(value, structured, text):
    got = jsonable(value)
    assert got == structured and type(got) is type(structured)
    assert json.loads(json.dumps(got)) == structured
    assert cell_text(value) == text


def test_bounded_structured_cuts_long_cells_and_rows_and_says_so(duck_ctx):
    out = run_query(
        duck_ctx, RunQuery(sql="SELECT i, repeat('x', 200000) AS big FROM range(40) t(i)", max_rows=40)
    )
    data = out.model_dump(mode="json")
    assert wire_size(data) > 1024 * 1024
    bounded, cut = bounded_structured(data, 1024 * 1024)
    assert cut and bounded["truncated"] is True
    assert wire_size(bounded) <= 1024 * 1024
    QueryOutput.model_validate(bounded)  # still the tool's result: the client checks its schema
    assert bounded["rows"] and bounded["rows"][0][0] == 0  # the first rows stay, in order
    assert bounded["result_id"] == out.result_id  # a handle to fetch the rest

    small = run_query(duck_ctx, RunQuery(sql="SELECT 1 AS a")).model_dump(mode="json")
    same, cut = bounded_structured(small, 1024 * 1024)
    assert same == small and not cut


def test_bounded_structured_holds_for_a_two_megabyte_cell_under_a_small_cap(duck_ctx):
    data = run_query(duck_ctx, RunQuery(sql="SELECT repeat('x', 2000000) AS s")).model_dump(mode="json")
    for cap in (1024 * 1024, 64 * 1024, 4096):
        bounded, cut = bounded_structured(data, cap)
        assert cut and wire_size(bounded) <= cap
        assert bounded["rows"][0][0].startswith("xxx") and bounded["rows"][0][0].endswith("…")
        QueryOutput.model_validate(bounded)


def test_wire_size_is_what_the_sdk_sends() -> None:
    """Compact JSON, as both of the SDK's transports write it; the modern one escapes non-ASCII
    (é is 6 bytes there), the other writes UTF-8: the larger of the two counts."""
    value = {"rows": [["é" * 10, 1.5, None, True]], "n": 3}
    compact = json.dumps(value, separators=(",", ":"))
    assert wire_size(value) == len(compact.encode()) and "\\u00e9" in compact
    assert wire_size({"s": "😀"}) == len(json.dumps({"s": "😀"}, separators=(",", ":")))


def test_many_rows_are_cut_by_their_exact_size(duck_ctx):
    """3,000 rows of five 100-character cells: rows are kept while the exact JSON fits (two bytes a
    row separator in a spaced dump, one compact), never falling back to a result without rows."""
    out = run_query(
        duck_ctx,
        RunQuery(
            sql="SELECT " + ", ".join(f"repeat('{c}', 100) AS {c}" for c in "abcde") + " FROM range(3000)",
            max_rows=3000,
        ),
    )
    data = out.model_dump(mode="json")
    for cap in (1024 * 1024, 200_000):
        bounded, cut = bounded_structured(data, cap)
        assert cut is not None and cut.rows_kept == len(bounded["rows"]) == bounded["row_count"]
        assert wire_size(bounded) <= cap < wire_size({**bounded, "rows": data["rows"][: cut.rows_kept + 1]})
        assert bounded["rows"][0] == ["a" * 100, "b" * 100, "c" * 100, "d" * 100, "e" * 100]
        assert bounded["truncated"] is True and bounded["result_id"] == out.result_id
        QueryOutput.model_validate(bounded)


def test_non_ascii_rows_are_measured_as_escaped(duck_ctx):
    out = run_query(duck_ctx, RunQuery(sql="SELECT repeat('é', 500) AS s FROM range(3000)", max_rows=3000))
    bounded, cut = bounded_structured(out.model_dump(mode="json"), 1024 * 1024)
    assert cut is not None and wire_size(bounded) <= 1024 * 1024
    assert len(json.dumps(bounded, separators=(",", ":")).encode()) <= 1024 * 1024


def test_a_result_without_rows_keeps_its_required_fields() -> None:
    """An `ask` answer repeats a long SQL text in several fields: strings are cut, required fields
    stay, so the answer still validates as an Answer."""
    sql = "SELECT 1 -- " + "x" * 600_000
    answer = Answer(
        status="answered",
        question="how many?",
        sql=sql,
        code=sql,
        language="sql",
        columns=["n"],
        rows=[[1]],
        total_rows=1,
        reason="only one candidate: " + sql,
    )
    bounded, cut = bounded_structured(answer.model_dump(mode="json"), 512 * 1024)
    assert cut is not None and wire_size(bounded) <= 512 * 1024
    again = Answer.model_validate(bounded)
    assert again.status == "answered" and again.rows == [[1]] and again.sql.startswith("SELECT 1 -- xx")
