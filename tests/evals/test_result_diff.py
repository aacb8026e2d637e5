"""The gold and predicted results side by side (evals/result_diff.py), as results.jsonl keeps them
for report.html: lined up the way REX paired them, the first difference found, a bounded window."""

from __future__ import annotations

from flexsql.evals.result_diff import CELL_CHARS, LINES, side_by_side
from flexsql.evals.rex import rex_match


def view(gc, gr, pc, pr, ordered=False):
    return side_by_side(gc, gr, pc, pr, rex_match(gc, gr, pc, pr, ordered=ordered))


def test_equal_results_have_no_first_difference() -> None:
    v = view(["a"], [(1,), (2,)], ["a"], [(2,), (1,)])
    assert v["first"] is None and all(line["diff"] == [] for line in v["lines"])
    # loose order: each gold row is beside the predicted row paired with it
    assert [(line["gv"], line["pv"]) for line in v["lines"]] == [(["1"], ["1"]), (["2"], ["2"])]


def test_renamed_and_moved_columns_line_up_with_their_gold_column() -> None:
    v = view(["id", "name"], [(1, "ann")], ["who", "n", "extra"], [("ann", 1, "x")])
    assert v["columns"] == [
        {"gold": "id", "pred": "n"},
        {"gold": "name", "pred": "who"},
        {"gold": None, "pred": "extra"},
    ]
    assert v["lines"][0]["pv"] == ["1", "ann", "x"]
    assert v["first"]["text"] == "extra predicted column 'extra'" and v["first"]["column"] == 2


def test_a_missing_gold_row_and_a_changed_cell() -> None:
    v = view(["id", "s"], [(1, "a"), (2, "b"), (3, "c")], ["id", "s"], [(1, "a"), (2, "z")])
    assert v["first"]["text"] == "line 2, gold column 's' (predicted 's'): b vs z"
    assert v["lines"][1]["diff"] == [1]
    assert v["lines"][2]["pv"] is None and v["lines"][2]["diff"] == [0, 1]


def test_an_extra_predicted_row_comes_last() -> None:
    v = view(["n"], [(1,)], ["n"], [(1,), (9,)])
    assert v["lines"][-1] == {"n": 1, "g": None, "p": 1, "gv": None, "pv": ["9"], "diff": [0]}
    assert v["first"]["text"] == "predicted row 1 has no gold row to pair with (line 2)"


def test_the_window_starts_just_before_the_first_difference() -> None:
    gold = [(i,) for i in range(100)]
    pred = [(i if i != 60 else -1,) for i in range(100)]
    v = view(["n"], gold, ["n"], pred, ordered=True)
    assert v["lines_total"] == 100 and len(v["lines"]) == LINES
    assert v["lines"][0]["n"] == 58 and v["first"]["line"] == 60


def test_without_a_prediction_the_gold_is_shown_with_the_error() -> None:
    v = side_by_side(["n"], [(1,), (2,)], None, None, None, error="execution error: boom", ordered=True)
    assert v["pred_rows"] is None and v["ordered"] and v["first"]["text"] == "execution error: boom"
    assert [line["gv"] for line in v["lines"]] == [["1"], ["2"]]


def test_cells_are_text_and_long_ones_are_cut() -> None:
    v = view(["t", "f", "n"], [("x" * 500, 0.1 + 0.2, None)], ["t", "f", "n"], [("x" * 500, 0.3, None)])
    assert v["first"] is None
    cells = v["lines"][0]["gv"]
    assert len(cells[0]) == CELL_CHARS and cells[0].endswith("…") and cells[1:] == ["0.3", "NULL"]
