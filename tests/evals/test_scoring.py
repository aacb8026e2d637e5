"""Scorers against small, self-made gold tables shaped like Spider 2.0-lite golds
(tests/fixtures/spider2): perturbed predictions with the official verdict (lite and snow
evaluators) and the strict verdict written out by hand; and the table-equivalence core."""

from __future__ import annotations

import datetime as dt
import decimal
import io
from pathlib import Path

import pytest

from flexsql.evals.gold import GoldStore
from flexsql.evals.scoring import (
    expand_official,
    expand_strict,
    read_csv_frame,
    score_ex,
    score_spider2,
    score_spider2_strict,
)
from flexsql.tools.sql.equivalence import compare_tables
from tests.support.evals import results, run_cli
from tests.support.paths import TESTS

FIXTURES = TESTS / "fixtures" / "spider2"


@pytest.fixture(scope="module")
def gold() -> GoldStore:
    return GoldStore(FIXTURES)


def verdicts(gold: GoldStore, instance_id: str, prediction_csv: str) -> tuple[int, int, int]:
    pred = read_csv_frame(io.StringIO(prediction_csv))
    tables = gold.tables(instance_id)
    config = gold.config(instance_id)
    lite = score_spider2(pred, tables, config.condition_cols, config.ignore_order, "lite")
    snow = score_spider2(pred, tables, config.condition_cols, config.ignore_order, "snow")
    strict = score_spider2_strict(pred, tables, config.condition_cols, config.ignore_order)
    return lite.score, snow.score, strict.score


T001 = """customer_unique_id,NUM_ORDERS,AVG_PAYMENT_PER_ORDER,CUSTOMER_LIFESPAN_WEEKS
0a0a92,1,13664.08,1.0000
763c8b,2,7274.88,1.5000
dc4802,1,6929.31,1.0000
"""

# (case, task, prediction CSV, official lite, official snow, strict)
CASES = [
    ("identical", "t001", T001, 1, 1, 1),
    (
        "rows shuffled",
        "t001",
        "a,b,c,d\ndc4802,1,6929.31,1.0\n0a0a92,1,13664.08,1.0\n763c8b,2,7274.88,1.5\n",
        1,
        1,
        1,
    ),
    (
        "columns reordered",
        "t001",
        "NUM_ORDERS,customer_unique_id,CUSTOMER_LIFESPAN_WEEKS,AVG_PAYMENT_PER_ORDER\n"
        "1,0a0a92,1.0,13664.08\n2,763c8b,1.5,7274.88\n1,dc4802,1.0,6929.31\n",
        1,
        1,
        1,
    ),
    (
        "extra columns",
        "t001",
        "rank,id,n,avg,weeks,note\n1,0a0a92,1,13664.08,1,x\n2,763c8b,2,7274.88,1.5,y\n"
        "3,dc4802,1,6929.31,1,z\n",
        1,
        1,
        1,
    ),
    (
        "renamed headers",
        "t001",
        "w,x,y,z\n0a0a92,1,13664.08,1\n763c8b,2,7274.88,1.5\ndc4802,1,6929.31,1\n",
        1,
        1,
        1,
    ),
    (
        "ints written as floats",
        "t001",
        "a,b,c,d\n0a0a92,1.0,13664.08,1\n763c8b,2.0,7274.88,1.5\ndc4802,1.0,6929.31,1\n",
        1,
        1,
        1,
    ),
    ("one value changed", "t001", T001.replace("7274.88", "7274.98"), 0, 0, 0),
    (
        "float noise below 0.01",
        "t001",
        T001.replace("13664.08", "13664.085").replace("1.5000", "1.5049"),
        1,
        1,
        1,
    ),
    ("float noise above 0.01", "t001", T001.replace("6929.31", "6929.33"), 0, 0, 0),
    (
        "rows scrambled across columns",
        "t001",
        "a,b,c,d\n0a0a92,2,13664.08,1.0\n763c8b,1,7274.88,1.5\ndc4802,1,6929.31,1.0\n",
        1,
        1,
        0,
    ),
    ("a duplicate row added", "t001", T001 + "dc4802,1,6929.31,1.0000\n", 0, 0, 0),
    (
        "a row duplicated in place of another",
        "t001",
        "a,b,c,d\n0a0a92,1,13664.08,1\n0a0a92,1,13664.08,1\ndc4802,1,6929.31,1\n",
        0,
        0,
        0,
    ),
    ("text case changed", "t001", T001.replace("0a0a92", "0A0A92"), 0, 0, 0),
    ("a gold column missing", "t001", "a,b,d\n0a0a92,1,1\n763c8b,2,1.5\ndc4802,1,1\n", 0, 0, 0),
    ("NULL where gold has a value", "t001", T001.replace("6929.31", ""), 0, 0, 0),
    # multi-variant gold, condition_cols [[1], [0], [0]]
    ("variant a, its column 1", "t002", "x\n4340.10\n", 1, 1, 1),
    ("variant c only", "t002", "x\n4341.2\n", 1, 1, 1),
    ("no variant", "t002", "x\n4339\n", 0, 0, 0),
    ("variant a, all its columns", "t002", "days,total\n4,4340.1019\n", 1, 1, 1),
    ("right value, two rows", "t002", "x\n4340.1019\n4340.1019\n", 0, 0, 0),
    # one variant (_a), flat condition_cols [0, 1]: lite checks all columns (0 is falsy), snow column 0,
    # strict columns 0 and 1
    (
        "[0, 1]: columns 0 and 1 only",
        "t003",
        "bowler,match\nP Parameswaran,501252\nP Awana,734052\nRS Bopara,419144\n",
        0,
        1,
        1,
    ),
    (
        "[0, 1]: columns 0 and 2 only",
        "t003",
        "bowler,runs\nP Parameswaran,37\nP Awana,33\nRS Bopara,33\n",
        0,
        1,
        0,
    ),
    (
        "[0, 1]: everything",
        "t003",
        "bowler_name,match_id,runs_in_over\nRS Bopara,419144,33\n"
        "P Parameswaran,501252,37\nP Awana,734052,33\n",
        1,
        1,
        1,
    ),
    (
        "[0, 1]: a name misspelled",
        "t003",
        "bowler_name,match_id,runs_in_over\nRS Bopara,419144,33\n"
        "P Parameswaran,501252,37\nP Awanna,734052,33\n",
        0,
        0,
        0,
    ),
    # one variant, flat [2, 3]: the official code checks only column 2; strict checks 2 and 3
    ("[2, 3]: column 2 only", "t004", "points\n1\n0\n0\n", 1, 1, 0),
    ("[2, 3]: columns 2 and 3, rows shuffled", "t004", "pts,pos\n0,9\n1,10\n0,10\n", 1, 1, 1),
    ("[2, 3]: column 2 wrong", "t004", "points,position\n1,10\n1,10\n0,9\n", 0, 0, 0),
    # two variants, flat [0, 2]: both variants use columns 0 and 2
    ("flat list, variant b", "t005", "id,chg\n28,2.55\n130,-0.95\n", 1, 1, 1),
    ("flat list, variant a", "t005", "id,chg\n130,-0.0095\n28,0.0255\n", 1, 1, 1),
    (
        "flat list, share column missing",
        "t005",
        "id,name\n28,English Willow Cricket Bat\n130,Pro Maple Youth Bat\n",
        0,
        0,
        0,
    ),
    # three variants, two condition lists [[0], [1]]: the official code fails variant c
    ("fewer lists than variants, variant a", "t006", "name\nA.L. Vijay\nSion Sono\n", 1, 1, 1),
    (
        "fewer lists than variants, variant c",
        "t006",
        "director,movie_count,avg_rating\nA. L. Vijay,5,5.42\nSion Sono,4,6.03\n",
        0,
        0,
        1,
    ),
    # NULLs
    (
        "NULLs kept",
        "t007",
        "region,year,total_sales,returns\nEast,2019,100.5,\nWest,2019,80.25,3\nEast,2020,,0\n",
        1,
        1,
        1,
    ),
    (
        "NULL written as 0",
        "t007",
        "region,year,total_sales,returns\nEast,2019,100.5,0\nWest,2019,80.25,3\nEast,2020,0,0\n",
        1,
        1,
        0,
    ),
    (
        "NULL and 0 swapped between rows",
        "t007",
        "region,year,total_sales,returns\nEast,2019,100.5,0\nWest,2019,80.25,3\nEast,2020,,\n",
        1,
        1,
        0,
    ),
    # empty-ish condition_cols: None, [[]], [None] all mean every column
    ("None: a column missing", "t008", "name\nWilliams\nToro Rosso\nMinardi\n", 0, 0, 0),
    ("None: columns swapped", "t008", "n,c\n6,Williams\n5,Toro Rosso\n3,Minardi\n", 1, 1, 1),
    ("[[]]: a column missing", "t009", "name\nWilliams\nToro Rosso\nMinardi\n", 0, 0, 0),
    ("[[]]: columns swapped", "t009", "n,c\n6,Williams\n5,Toro Rosso\n3,Minardi\n", 1, 1, 1),
    ("[None]: a column missing", "t010", "name\nWilliams\nToro Rosso\nMinardi\n", 0, 0, 0),
    ("[None]: columns swapped", "t010", "n,c\n6,Williams\n5,Toro Rosso\n3,Minardi\n", 1, 1, 1),
    # ignore_order false
    ("ordered: same order", "t011", "rank,city,orders\n1,Sao Paulo,120\n2,Rio,80\n3,Curitiba,31\n", 1, 1, 1),
    (
        "ordered: rows shuffled",
        "t011",
        "rank,city,orders\n2,Rio,80\n1,Sao Paulo,120\n3,Curitiba,31\n",
        0,
        0,
        0,
    ),
    (
        "ordered: columns moved",
        "t011",
        "orders,rank,city\n120,1,Sao Paulo\n80,2,Rio\n31,3,Curitiba\n",
        1,
        1,
        1,
    ),
    # two identical gold columns: the official rule lets one predicted column serve both
    ("one column for two gold columns", "t012", "month,revenue\n1,10\n2,20\n3,35.5\n", 1, 1, 0),
    ("both columns given", "t012", "m,r,r2\n3,35.5,35.5\n1,10,10\n2,20,20\n", 1, 1, 1),
    # long floats rounded within 0.01, booleans as 1/0
    (
        "rounded floats, bools as 1/0",
        "t013",
        "seg,avg,active\nChampions,301.07,1\nHibernating,289.21,0\nLoyal Customers,241.04,1\n",
        1,
        1,
        1,
    ),
    (
        "bools as words",
        "t013",
        "seg,avg,active\nChampions,301.07,yes\nHibernating,289.21,no\nLoyal Customers,241.04,yes\n",
        0,
        0,
        0,
    ),
]


@pytest.mark.parametrize(
    ("case", "task", "prediction", "lite", "snow", "strict"), CASES, ids=[c[0] for c in CASES]
)
def test_verdicts(
    gold: GoldStore, case: str, task: str, prediction: str, lite: int, snow: int, strict: int
) -> None:
    assert verdicts(gold, task, prediction) == (lite, snow, strict)


def test_reasons_name_what_failed(gold: GoldStore) -> None:
    tables, config = gold.tables("t001"), gold.config("t001")

    def reason(csv: str, strict: bool = False) -> str:
        pred = read_csv_frame(io.StringIO(csv))
        if strict:
            return score_spider2_strict(pred, tables, config.condition_cols).reason
        return score_spider2(pred, tables, config.condition_cols).reason

    assert "row count 3 vs 4" in reason(T001 + "dc4802,1,6929.31,1\n")
    changed = reason(T001.replace("7274.88", "7274.98"))
    assert "column 2 of gold ('AVG_PAYMENT_PER_ORDER') not matched" in changed
    assert "7274.88 vs 7274.98" in changed
    scrambled = reason(
        "a,b,c,d\n0a0a92,2,13664.08,1.0\n763c8b,1,7274.88,1.5\ndc4802,1,6929.31,1.0\n", strict=True
    )
    assert "rows pair the values differently" in scrambled and "only in gold" in scrambled


def test_multi_variant_failure_lists_each_variant(gold: GoldStore) -> None:
    verdict = score_spider2(read_csv_frame(io.StringIO("x\n4339\n")), gold.tables("t002"), [[1], [0], [0]])
    assert verdict.reason.startswith("no gold variant matched (3)")
    assert all(name in verdict.reason for name in ("t002_a", "t002_b", "t002_c"))
    passed = score_spider2(read_csv_frame(io.StringIO("x\n4341.2\n")), gold.tables("t002"), [[1], [0], [0]])
    assert passed.variant == "t002_c"


def test_gold_files_plain_or_sorted_variants(gold: GoldStore) -> None:
    assert [p.name for p in gold.csv_paths("t001")] == ["t001.csv"]
    assert [p.name for p in gold.csv_paths("t002")] == ["t002_a.csv", "t002_b.csv", "t002_c.csv"]
    assert gold.csv_paths("t0") == []
    assert gold.config("t011").ignore_order is False


@pytest.mark.parametrize(
    ("cc", "n", "flavor", "expected"),
    [
        (None, 2, "lite", [None, None]),
        ([], 1, "lite", [None]),
        ([[]], 2, "snow", [None, None]),
        ([None], 1, "snow", [None]),
        ([0, 1], 1, "lite", [None]),  # only the first integer, and 0 is falsy in lite
        ([0, 1], 1, "snow", [[0]]),
        ([3, 1], 1, "lite", [[3]]),
        ([0, 2], 2, "lite", [[0, 2], [0, 2]]),  # several variants: the flat list for each
        ([[1], [0, 2]], 2, "lite", [[1], [0, 2]]),
        ([[1], []], 2, "lite", [[1], None]),
    ],
)
def test_official_condition_expansion(cc, n, flavor, expected) -> None:
    choices = expand_official(cc, n, flavor)
    assert [c.columns for c in choices] == expected
    assert all(c.error is None for c in choices)


def test_official_condition_expansion_fails_missing_variants() -> None:
    choices = expand_official([[0], [1]], 3, "lite")
    assert [c.error is None for c in choices] == [True, True, False]
    assert "no entry for variant 3" in choices[2].error


def test_strict_condition_expansion_uses_lists_as_written() -> None:
    assert [c.columns for c in expand_strict([0, 1], 1)] == [[0, 1]]
    assert [c.columns for c in expand_strict([[0], [1]], 3)] == [[0], [1], None]
    assert [c.columns for c in expand_strict([[]], 2)] == [None, None]


def test_condition_index_out_of_range_fails_with_reason(gold: GoldStore) -> None:
    pred = read_csv_frame(io.StringIO(T001))
    verdict = score_spider2(pred, gold.tables("t001"), [[7]])
    assert verdict.score == 0 and "out of range" in verdict.reason


def test_large_numbers_use_the_relative_tolerance_of_isclose() -> None:
    from flexsql.evals.scoring import GoldTable

    golds = [GoldTable("g", read_csv_frame(io.StringIO("v\n123456789012.0\n")))]
    near = read_csv_frame(io.StringIO("v\n123456789062.0\n"))  # 50 off: within rel_tol 1e-9
    far = read_csv_frame(io.StringIO("v\n123456789312.0\n"))  # 300 off
    assert score_spider2(near, golds).score == 1 and score_spider2(far, golds).score == 0
    assert score_spider2_strict(near, golds).score == 1 and score_spider2_strict(far, golds).score == 0


def test_ex_needs_every_column_and_no_extra() -> None:
    gold = [("gold SQL", ["a", "b"], [(1, "x"), (2, "y")], False)]
    assert score_ex(["b", "a"], [("y", 2), ("x", 1)], gold_tables=gold).score == 1
    extra = score_ex(["a", "b", "c"], [(1, "x", 0), (2, "y", 0)], gold_tables=gold)
    assert extra.score == 0 and "column count 2 vs 3" in extra.reason
    ordered = [("gold SQL", ["a"], [(1,), (2,)], True)]
    assert score_ex(["a"], [(2,), (1,)], gold_tables=ordered).category == "order"
    assert score_ex(["a"], [(1.0,), (2,)], gold_tables=ordered).score == 1


# -- the table-equivalence core ------------------------------------------------------------------


def test_columns_permuted_and_extra_columns() -> None:
    a = (["id", "name"], [(1, "x"), (2, "y")])
    b = (["name", "id", "extra"], [("y", 2, 0), ("x", 1, 0)])
    loose = compare_tables(*a, *b, allow_extra_columns=True)
    assert loose.equivalent and loose.column_mapping == {0: 1, 1: 0} and loose.extra_columns == [2]
    exact = compare_tables(*a, *b)
    assert not exact.equivalent and exact.kind == "column_count"


def test_scrambled_rows_are_found() -> None:
    eq = compare_tables(["k", "v"], [("a", 1), ("b", 2)], ["k", "v"], [("a", 2), ("b", 1)])
    assert not eq.equivalent and eq.kind == "rows"
    assert "only in A: ('a', 1)" in eq.sample_differences


def test_tolerance_pairs_rows_that_sorting_would_misalign() -> None:
    # sorted by the first column the pairs cross over; a matching under the tolerance still exists
    a = [(1.0, "x"), (1.004, "y")]
    b = [(1.004, "x"), (1.0, "y")]
    assert compare_tables(["n", "s"], a, ["n", "s"], b, tolerance=0.01).equivalent
    assert not compare_tables(["n", "s"], a, ["n", "s"], b, tolerance=0.001).equivalent


def test_null_is_not_zero_unless_asked() -> None:
    a, b = [(None,), (1,)], [(0,), (1,)]
    assert not compare_tables(["v"], a, ["v"], b).equivalent
    assert compare_tables(["v"], a, ["v"], b, null_equals_zero=True).equivalent
    assert compare_tables(["v"], [(float("nan"),)], ["v"], [(None,)]).equivalent


def test_values_are_normalised_across_engines() -> None:
    a = [(decimal.Decimal("2.50"), dt.date(2020, 1, 2), True)]
    b = [(2.5, "2020-01-02", 1)]
    assert compare_tables(["a", "b", "c"], a, ["a", "b", "c"], b).equivalent
    assert not compare_tables(["a"], [("1",)], ["a"], [(1,)]).equivalent
    assert not compare_tables(["a"], [("Rio",)], ["a"], [("rio",)]).equivalent


def test_ordered_comparison_reports_order() -> None:
    eq = compare_tables(["v"], [(1,), (2,)], ["v"], [(2,), (1,)], ordered=True)
    assert not eq.equivalent and eq.kind == "order" and "different order" in eq.reason
    assert compare_tables(["v"], [(1,), (2,)], ["v"], [(2,), (1,)]).equivalent


def test_one_predicted_column_cannot_serve_two() -> None:
    eq = compare_tables(["a", "b"], [(1, 1), (2, 2)], ["x", "y"], [(1, 0), (2, 0)], allow_extra_columns=True)
    assert not eq.equivalent and eq.kind == "no_assignment"
    # said by name (was by position: "candidates 0->[0]; 1->[0]")
    assert "'a' only like 'x'" in eq.reason and "'b' only like 'x'" in eq.reason


def test_many_identical_columns_stay_fast() -> None:
    rows_a = [tuple([i] * 12) for i in range(300)]
    rows_b = [tuple([i] * 12 + [i % 2]) for i in range(300)]
    eq = compare_tables(
        [f"c{i}" for i in range(12)], rows_a, [f"d{i}" for i in range(13)], rows_b, allow_extra_columns=True
    )
    assert eq.equivalent


def test_unmatched_column_names_the_closest() -> None:
    eq = compare_tables(
        ["id", "total"],
        [(1, 10.5), (2, 20.0)],
        ["id", "sum"],
        [(1, 10.5), (2, 20.7)],
        a_label="gold",
        b_label="predicted",
    )
    assert eq.unmatched_columns == [1]
    assert "column 1 of gold ('total') matches no predicted column" in eq.reason
    assert "closest: column 1 'sum'" in eq.reason and "20.0 vs 20.7" in eq.reason


def test_empty_tables() -> None:
    assert compare_tables(["a"], [], ["b"], []).equivalent
    eq = compare_tables(["a"], [(1,)], ["a"], [])
    assert not eq.equivalent and eq.reason.startswith("row count 1 vs 0")


def test_spider2_predictions_with_gold_csvs(tmp_path: Path) -> None:
    preds, out = tmp_path / "preds", tmp_path / "out"
    preds.mkdir()
    (preds / "t001.csv").write_text(
        "id,n,avg,weeks\n0a0a92,1,13664.08,1\n763c8b,2,7274.88,1.5\ndc4802,1,6929.31,1\n"
    )
    (preds / "t002.csv").write_text("x\n4339\n")
    code, output = run_cli(
        FIXTURES / "spider2-lite.jsonl",
        "--runner",
        "predictions",
        "--predictions",
        preds,
        "--gold",
        FIXTURES,
        "--out",
        out,
    )
    assert code == 0, output
    got = results(out)
    assert got["t001"]["scorer"] == "spider2" and got["t001"]["score"] == 1
    assert got["t002"]["score"] == 0 and got["t002"]["reason"].startswith("no gold variant matched (3)")
    assert got["t003"]["status"] == "no_prediction"
    assert (out / "submission" / "t001.csv").exists()
    assert "50.00% of evaluated (1/2), 33.33% of all (1/3)" in output
