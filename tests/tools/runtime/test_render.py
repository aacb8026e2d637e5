"""Rendering values for the model (tools/runtime/render.py): cell text shows values as they are (NULL
against 'NULL', infinities, REAL 0.1), exact numbers stay exact in structured output and text, and
structured payloads are capped by bytes, cutting long cells and rows and saying so."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from flexsql.tools.query import RunQuery, run_query
from flexsql.tools.runtime.render import bounded_structured, cell_text, jsonable
from tests.support.numbers import BIG18, BIG38, FRAC38, D


def test_cell_text_shows_values_as_they_are() -> None:
    assert cell_text(1e-20) == "1e-20"
    assert cell_text(123456789.123) == "123456789.123"
    assert cell_text("NULL") != cell_text(None)
    assert cell_text("") != cell_text(None) and cell_text("") != ""
    assert cell_text(float("inf")) == "Infinity" and cell_text(float("nan")) == "NaN"
    assert cell_text(dt.datetime.max) == "infinity" and cell_text(dt.date.min) == "-infinity"
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
    data = out.model_dump()
    assert len(json.dumps(data)) > 1024 * 1024
    bounded, cut = bounded_structured(data, 1024 * 1024)
    assert cut and bounded["truncated"] is True
    assert len(json.dumps(bounded)) <= 1024 * 1024
    assert bounded["rows"] and bounded["rows"][0][0] == 0  # the first rows stay, in order
    assert bounded["result_id"] == out.result_id  # a handle to fetch the rest

    small = run_query(duck_ctx, RunQuery(sql="SELECT 1 AS a")).model_dump()
    same, cut = bounded_structured(small, 1024 * 1024)
    assert same == small and not cut


def test_bounded_structured_holds_for_a_two_megabyte_cell_under_a_small_cap(duck_ctx):
    data = run_query(duck_ctx, RunQuery(sql="SELECT repeat('x', 2000000) AS s")).model_dump()
    for cap in (1024 * 1024, 64 * 1024, 4096):
        bounded, cut = bounded_structured(data, cap)
        assert cut and len(json.dumps(bounded)) <= cap
