"""Execution-grounded selection (flexsql.tools.select) over real query results.

Every candidate's result comes from a real query (run_query on a SQLite or DuckDB file built here),
or from run_python, and lives in a real ResultStore."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import duckdb
import pytest

from flexsql.errors import InvalidArgument, NotFoundError
from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.python_tool import RunPython, run_python
from flexsql.tools.query import RunQuery, run_query
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.select import CandidateIn, SelectResult, expected_shape, select_candidates, select_result
from flexsql.tools.toolbox import TOOLS

ROWS = [
    ("north", "apple", 10, 0.0),
    ("north", "pear", 7, 0.0),
    ("south", "apple", 12, 0.0),
    ("south", "plum", 3, 0.0),
    ("east", "apple", 5, 0.0),
    ("east", "pear", 9, 0.0),
    ("west", "plum", 8, 0.0),
]
DDL = "CREATE TABLE sales (region TEXT, product TEXT, amount INTEGER, discount DOUBLE, note TEXT)"


@pytest.fixture(params=["sqlite", "duckdb"])
def ctx(request: pytest.FixtureRequest, tmp_path: Path):
    rows = [(*r, None) for r in ROWS]
    if request.param == "sqlite":
        path = tmp_path / "shop.sqlite"
        con = sqlite3.connect(path)
        con.execute(DDL)
        con.executemany("INSERT INTO sales VALUES (?, ?, ?, ?, ?)", rows)
        con.commit()
        con.close()
        url = f"sqlite:///{path}"
    else:
        path = tmp_path / "shop.duckdb"
        con = duckdb.connect(str(path))
        con.execute(DDL)
        con.executemany("INSERT INTO sales VALUES (?, ?, ?, ?, ?)", rows)
        con.close()
        url = f"duckdb:///{path}"
    source = open_source(url, name="shop")
    yield ToolContext(sources=SourceRegistry([source]))
    source.close()


def sql(ctx: ToolContext, cid: str, code: str, **extra) -> CandidateIn:
    """A candidate whose code really ran."""
    out = run_query(ctx, RunQuery(sql=code))
    return CandidateIn(candidate_id=cid, result_id=out.result_id, code=code, **extra)


def chosen(ctx: ToolContext, candidates: list[CandidateIn], question: str | None = None) -> str | None:
    return select_candidates(ctx, candidates, question).chosen


# -- which group wins -------------------------------------------------------------------------------


def test_agreeing_majority_beats_lone_outlier_and_simplest_member_is_chosen(ctx):
    cands = [
        sql(ctx, "outlier", "SELECT COUNT(*) FROM sales WHERE region = 'north'"),
        sql(ctx, "long", "SELECT count(*) AS n FROM sales WHERE 1 = 1 AND amount IS NOT NULL"),
        sql(ctx, "short", "SELECT COUNT(*) FROM sales"),
    ]
    sel = select_candidates(ctx, cands, "How many sales are there?")
    assert sel.chosen == "short"
    assert sel.groups[0].members == ["short", "long"]
    assert sel.groups[1].members == ["outlier"]
    assert sel.chosen_result_id == cands[2].result_id
    assert "2 candidates agree" in sel.reason


def test_majority_beats_outlier_even_when_outlier_has_an_ok_and_comes_first(ctx):
    cands = [
        sql(ctx, "outlier", "SELECT SUM(amount) FROM sales WHERE product = 'apple'", verdicts=["ok"]),
        sql(ctx, "a", "SELECT SUM(amount) FROM sales"),
        sql(ctx, "b", "SELECT SUM(amount) AS total FROM sales"),
        sql(ctx, "c", "SELECT SUM(amount + 0) FROM sales"),
    ]
    assert chosen(ctx, cands, "What is the total amount?") == "a"


def test_non_empty_result_beats_agreeing_empty_ones(ctx):
    cands = [
        sql(ctx, "e1", "SELECT product FROM sales WHERE region = 'North'"),
        sql(ctx, "e2", "SELECT product FROM sales WHERE region = 'nowhere'"),
        sql(ctx, "full", "SELECT product FROM sales WHERE region = 'north'"),
    ]
    sel = select_candidates(ctx, cands, "Which products were sold in the north?")
    assert sel.chosen == "full"
    empty = next(g for g in sel.groups if "e1" in g.members)
    assert empty.members == ["e1", "e2"] or sorted(empty.members) == ["e1", "e2"]
    assert empty.signals["empty"] is True
    assert "empty result" in empty.reasons


@pytest.mark.parametrize(
    ("first_verdicts", "second_verdicts", "expected"),
    [
        ([], ["ok"], "second"),
        (["plan"], [], "second"),
        (["implementation"], ["ok"], "second"),
        (["ok"], [], "first"),
        (["ok"], ["plan"], "first"),
    ],
)
def test_evaluator_verdict_breaks_a_tie_between_equal_size_groups(
    ctx, first_verdicts, second_verdicts, expected
):
    cands = [
        sql(ctx, "first", "SELECT region FROM sales WHERE amount > 8", verdicts=first_verdicts),
        sql(ctx, "second", "SELECT region FROM sales WHERE amount >= 8", verdicts=second_verdicts),
    ]
    assert chosen(ctx, cands) == expected


def test_all_null_column_loses_to_a_real_value(ctx):
    cands = [
        sql(ctx, "nulls", "SELECT MAX(amount) FROM sales WHERE region = 'nowhere'"),
        sql(ctx, "notes", "SELECT MAX(note) FROM sales"),
        sql(ctx, "real", "SELECT MAX(amount) FROM sales"),
    ]
    sel = select_candidates(ctx, cands, "What is the largest amount?")
    assert sel.chosen == "real"
    bad = [g for g in sel.groups if "real" not in g.members]
    assert all(g.signals["null_column"] is True for g in bad)
    assert all("a column is all NULL" in g.reasons for g in bad)


def test_all_zero_decimal_column_counts_as_zero(ctx):
    cands = [
        sql(ctx, "zeros", "SELECT region, CAST(SUM(discount) AS DECIMAL(10, 2)) FROM sales GROUP BY region"),
        sql(ctx, "amounts", "SELECT region, CAST(SUM(amount) AS DECIMAL(10, 2)) FROM sales GROUP BY region"),
    ]
    sel = select_candidates(ctx, cands)
    assert sel.chosen == "amounts"
    assert sel.groups[1].signals["zero_column"] is True


def test_all_zero_column_loses_a_tie(ctx):
    cands = [
        sql(ctx, "zeros", "SELECT region, SUM(discount) FROM sales GROUP BY region"),
        sql(ctx, "amounts", "SELECT region, SUM(amount) FROM sales GROUP BY region"),
    ]
    sel = select_candidates(ctx, cands, "What is the total per region?")
    assert sel.chosen == "amounts"
    assert sel.groups[1].signals["zero_column"] is True


def test_top_five_question_prefers_five_rows(ctx):
    cands = [
        sql(ctx, "three", "SELECT product, amount FROM sales ORDER BY amount DESC LIMIT 3"),
        sql(ctx, "all", "SELECT product, amount FROM sales ORDER BY amount DESC"),
        sql(ctx, "five", "SELECT product, amount FROM sales ORDER BY amount DESC LIMIT 5"),
    ]
    sel = select_candidates(ctx, cands, "Show the top 5 sales by amount.")
    assert sel.chosen == "five"
    assert sel.groups[0].signals["shape"] == 1
    assert all(g.signals["shape"] == -1 for g in sel.groups[1:])
    # no question, no shape: the first of three equal groups wins
    assert chosen(ctx, cands) == "three"


@pytest.mark.integration
def test_sql_and_python_agreeing_beat_two_sql_candidates(ctx):
    base = run_query(ctx, RunQuery(sql="SELECT region, amount FROM sales"))
    code = "df.groupby('region', as_index=False).agg(total=('amount', 'sum'))"
    py = run_python(ctx, RunPython(code=code, result_ids=[base.result_id]))
    assert py.ok, py.error
    cands = [
        sql(ctx, "sql_max1", "SELECT region, MAX(amount) FROM sales GROUP BY region"),
        sql(ctx, "sql_max2", "SELECT region, MAX(amount) AS m FROM sales GROUP BY 1"),
        CandidateIn(candidate_id="py", result_id=py.result_id, language="python", code=code),
        sql(ctx, "sql_sum", "SELECT region, SUM(amount) FROM sales GROUP BY region"),
    ]
    sel = select_candidates(ctx, cands, "What is the amount for each region?")
    assert sel.groups[0].members == ["sql_sum", "py"]  # the simpler (shorter) member first
    assert sel.groups[0].signals["mixed"] is True
    assert sel.chosen == "sql_sum"
    assert "SQL and Python agree" in sel.groups[0].reasons


def test_a_repair_that_reproduces_its_parent_is_not_a_second_vote(ctx):
    cands = [
        sql(ctx, "p0", "SELECT product FROM sales WHERE amount > 9", plan_index=0),
        sql(ctx, "p0r1", "SELECT product FROM sales WHERE amount >= 10", plan_index=0, repaired_from="p0"),
        sql(ctx, "p1", "SELECT product FROM sales WHERE amount > 8", plan_index=1),
        sql(ctx, "p2", "SELECT product FROM sales WHERE amount >= 9", plan_index=2),
    ]
    sel = select_candidates(ctx, cands)
    assert sel.chosen in ("p1", "p2")
    repaired = next(g for g in sel.groups if "p0" in g.members)
    assert repaired.signals["size"] == 2 and repaired.signals["support"] == 1


def test_grouping_is_transitive_under_numeric_tolerance(ctx):
    # floats 1.000 ~ 1.008 ~ 1.016 within 0.01 pairwise-adjacent, but 1.000 and 1.016 are not
    cands = [
        sql(ctx, "a", "SELECT CAST(1.000 AS DOUBLE) AS x"),
        sql(ctx, "b", "SELECT CAST(1.008 AS DOUBLE) AS x"),
        sql(ctx, "c", "SELECT CAST(1.016 AS DOUBLE) AS x"),
        sql(ctx, "d", "SELECT 7 AS x"),
        sql(ctx, "e", "SELECT 7.0 AS y"),
    ]
    sel = select_candidates(ctx, cands)
    assert sorted(sel.groups[0].members) == ["a", "b", "c"]
    assert sorted(sel.groups[1].members) == ["d", "e"]


# -- candidates that did not run --------------------------------------------------------------------


def test_failed_candidates_are_never_chosen(ctx):
    cands = [
        CandidateIn(
            candidate_id="boom",
            error="no such column: amt",
            code="SELECT amt FROM sales",
            verdicts=["ok", "ok", "ok"],
        ),
        CandidateIn(candidate_id="boom2", error="no such column: amt", code="SELECT amt FROM sales"),
        sql(ctx, "ran", "SELECT region FROM sales WHERE region = 'nowhere'", verdicts=["plan"]),
    ]
    sel = select_candidates(ctx, cands)
    assert sel.chosen == "ran"
    assert [g.members for g in sel.groups[1:]] == [["boom"], ["boom2"]]
    assert all(g.result_id is None and g.signals["ran"] is False for g in sel.groups[1:])
    assert "no such column" in sel.groups[1].reasons[0]


def test_all_failed_means_no_choice_and_says_why(ctx):
    cands = [
        CandidateIn(candidate_id="a", error="syntax error near FORM"),
        CandidateIn(candidate_id="b", error="timeout after 30 s"),
    ]
    sel = select_candidates(ctx, cands, "How many?")
    assert sel.chosen is None and sel.chosen_result_id is None
    assert "none of the 2 candidate(s) ran" in sel.reason
    assert "no candidate chosen" in sel.to_text()
    assert select_candidates(ctx, []).chosen is None


def test_duplicate_candidate_ids_are_refused(ctx):
    c = sql(ctx, "x", "SELECT 1")
    with pytest.raises(InvalidArgument, match="appears twice"):
        select_candidates(ctx, [c, c])


# -- the select_result tool ------------------------------------------------------------------------


def test_select_result_chooses_among_stored_results(ctx):
    r1 = run_query(ctx, RunQuery(sql="SELECT COUNT(*) FROM sales WHERE product = 'apple'")).result_id
    r2 = run_query(ctx, RunQuery(sql="SELECT COUNT(*) FROM sales")).result_id
    r3 = run_query(ctx, RunQuery(sql="SELECT COUNT(product) FROM sales")).result_id
    sel = select_result(ctx, SelectResult(result_ids=[r1, r2, r3, r2], question="How many sales are there?"))
    assert sel.chosen == r2 and sel.chosen_result_id == r2
    assert sorted(sel.groups[0].members) == sorted([r2, r3])
    text = sel.to_text()
    assert text.splitlines()[0].startswith(f"chosen: {r2}")
    assert len(text.splitlines()) == 3  # head + one line per group


@pytest.mark.parametrize(
    ("ids", "error", "match"),
    [
        ([], InvalidArgument, "result_ids needs at least 1 item "),
        ("r1", InvalidArgument, "result_ids: input should be a valid list"),
        ([""], NotFoundError, "result_id '' is unknown"),
        ([f"r{i}" for i in range(1, 22)], InvalidArgument, "result_ids takes at most 20 items"),
        (["r999"], NotFoundError, "r999"),
    ],
)
def test_select_result_errors(ctx, ids, error, match):
    run_query(ctx, RunQuery(sql="SELECT 1"))
    with pytest.raises(error, match=match):
        TOOLS.call(ctx, "select_result", {"result_ids": ids})


# -- the shape a question asks for -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "kind", "rows"),
    [
        ("How many singers do we have?", "one", None),
        ("What is the average age of all singers?", "one", None),
        ("How many singers are from each country?", "several", None),
        ("Show the number of employees per department.", "several", None),
        ("List the top 5 most expensive products.", "rows", 5),
        ("What are the three most common nationalities?", "rows", 3),
        ("Give the first 10 names in alphabetical order.", "rows", 10),
        ("Which five oldest cars are still running?", "rows", 5),
        ("List the names of all singers.", None, None),
    ],
)
def test_expected_shape(question, kind, rows):
    shape = expected_shape(question)
    if kind is None:
        assert shape is None
    else:
        assert shape is not None and shape.kind == kind and shape.rows == rows


def test_results_that_differ_only_by_extra_columns_group_together(ctx: ToolContext) -> None:
    """Spider 2.0 accepts extra predicted columns: 3 columns vs 2 with the same values on the asked
    two is agreement, so the two candidates form one group of support 2 that answers with the wider
    result, and a third that disagrees on a value stays apart."""
    narrow = sql(ctx, "c1", "SELECT region, SUM(amount) AS total FROM sales GROUP BY region")
    wide = sql(
        ctx,
        "c2",
        "SELECT region, SUM(amount) AS total, COUNT(*) AS n FROM sales GROUP BY region",
    )
    other = sql(ctx, "c3", "SELECT region, MAX(amount) AS total FROM sales GROUP BY region")
    picked = select_candidates(ctx, [narrow, other, wide], "total amount per region")
    first = picked.groups[0]
    assert sorted(first.members) == ["c1", "c2"] and first.signals["support"] == 2
    assert picked.chosen == "c2" and first.result_id == wide.result_id  # the wider answers for the group
    assert ["c3"] in [g.members for g in picked.groups]


def test_the_most_likely_reading_breaks_a_tie_and_alternative_verdicts_count_less(ctx: ToolContext) -> None:
    main = sql(ctx, "c1", "SELECT SUM(amount) AS total FROM sales", reading_rank=1)
    alt = sql(ctx, "c2", "SELECT SUM(amount) AS total FROM sales WHERE product = 'apple'", reading_rank=2)
    assert select_candidates(ctx, [alt, main]).chosen == "c1"
    judged = [
        alt.model_copy(update={"verdicts": ["ok"]}),
        main.model_copy(update={"reading_rank": None, "verdicts": ["alternative"]}),
    ]
    picked = select_candidates(ctx, judged)
    assert picked.chosen == "c2"
    assert any("less likely reading" in r for g in picked.groups for r in g.reasons)
