"""Scores as a library (evals/reward.py): `score_prediction` on a real SQLite file gives the scores
`flexsql eval` records, for SQL and for results, with every scorer, and says clearly what is wrong
with its input."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pandas as pd
import pytest

from flexsql.errors import ConfigError, FlexSQLError
from flexsql.evals.reward import Score, Table, score_prediction
from flexsql.evals.scoring import SCORERS
from tests.support.evals import QUESTIONS, make_db, results, run_cli, write_predictions


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return make_db(tmp_path / "concert_singer.sqlite")


def test_a_right_and_a_wrong_query_under_every_scorer(db: Path) -> None:
    gold = "SELECT name FROM singer WHERE country = 'France' ORDER BY age DESC"
    for scorer in SCORERS:
        right = score_prediction(
            "SELECT name FROM singer WHERE country = 'France' ORDER BY age DESC", gold, db=db, scorer=scorer
        )
        assert isinstance(right, Score) and right.passed and right.value == 1.0 and right.category == "pass"
        assert right.predicted_rows == 4 and right.elapsed_s > 0
        wrong = score_prediction(
            "SELECT name FROM singer WHERE country = 'France'", gold, db=db, scorer=scorer
        )
        assert not wrong.passed and wrong.value < 1.0 and wrong.reason


def test_rex_gives_partial_credit_where_ex_gives_none(db: Path) -> None:
    gold = "SELECT name, age FROM singer"
    pred = "SELECT name, age FROM singer WHERE age > 30"  # 4 of the 6 rows
    ex = score_prediction(pred, gold, db=db, scorer="ex")
    rex = score_prediction(pred, gold, db=db, scorer="rex")
    assert ex.value == 0.0 and ex.category == "row_count"
    assert rex.value == pytest.approx(4 / 6) and rex.category == "row_count"
    assert "4 predicted rows vs 6 gold" in rex.reason


def test_order_counts_when_the_gold_sorts_or_when_asked(db: Path) -> None:
    pred = "SELECT name FROM singer ORDER BY age"
    assert not score_prediction(pred, "SELECT name FROM singer ORDER BY age DESC", db=db).passed
    assert score_prediction(pred, "SELECT name FROM singer", db=db).passed
    assert not score_prediction(pred, "SELECT name FROM singer", db=db, ordered=True).passed


def test_results_instead_of_sql_need_no_database() -> None:
    gold = Table(columns=["n", "s"], rows=[(1, "a"), (2, "b")])
    assert score_prediction(Table(columns=["s", "n"], rows=[("b", 2), ("a", 1)]), gold, scorer="ex").passed
    frame = pd.DataFrame({"n": [1, 2], "s": ["a", "b"]})
    assert score_prediction(frame, gold, scorer="rex").value == 1.0
    # a list of gold tables: variants, the best one counts
    score = score_prediction(frame, [Table(columns=["n"], rows=[(9,)]), gold], scorer="spider2-strict")
    assert score.passed and score.variant == "gold 2"


def test_spider2_condition_cols_and_null_as_zero() -> None:
    gold = pd.DataFrame({"note": ["x", "y"], "id": [1, 2]})
    pred = pd.DataFrame({"id": [2, 1], "other": ["q", "q"]})
    # only gold column 1 is checked; extra and different predicted columns do not matter
    assert score_prediction(pred, gold, scorer="spider2", condition_cols=[1]).passed
    assert not score_prediction(pred, gold, scorer="spider2").passed
    # the lite evaluator reads condition 0 as "no condition"; the snow one checks column 0
    first = pd.DataFrame({"id": [1, 2], "note": ["x", "y"]})
    assert not score_prediction(pred, first, scorer="spider2", condition_cols=[0]).passed
    assert score_prediction(pred, first, scorer="spider2", condition_cols=[0], flavor="snow").passed
    nulls = pd.DataFrame({"v": [None, 1.0]})
    zeros = pd.DataFrame({"v": [0.0, 1.0]})
    assert score_prediction(zeros, nulls, scorer="spider2").passed  # the official quirk: NULL = 0
    assert not score_prediction(zeros, nulls, scorer="spider2-strict").passed


def test_a_failing_prediction_scores_zero_and_says_why(db: Path) -> None:
    gold = "SELECT count(*) FROM singer"
    error = score_prediction("SELECT count(*) FROM singers", gold, db=db, scorer="rex")
    assert error.value == 0.0 and error.category == "execution_error" and "singers" in error.reason
    assert error.predicted_rows is None
    refused = score_prediction("DELETE FROM singer", gold, db=db)
    assert refused.value == 0.0 and refused.category == "refused"
    assert score_prediction("SELECT count(*) FROM singer", gold, db=db).passed  # nothing was deleted


def test_bad_input_is_refused_with_what_to_do(db: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="pass db="):
        score_prediction("SELECT 1", "SELECT 1")
    with pytest.raises(ConfigError, match="neither a flexsql URL"):
        score_prediction("SELECT 1", "SELECT 1", db=tmp_path / "missing.sqlite")
    with pytest.raises(ConfigError, match="is not one of"):
        score_prediction("SELECT 1", "SELECT 1", db=db, scorer="bleu")  # type: ignore[arg-type]
    with pytest.raises(FlexSQLError, match="the gold SQL did not run"):
        score_prediction("SELECT 1", "SELECT * FROM nowhere", db=db)
    with pytest.raises(ConfigError, match="empty list"):
        score_prediction(Table(columns=["a"], rows=[]), [])


def test_a_database_url_works_like_a_file(db: Path) -> None:
    score = score_prediction("SELECT 1 AS x", "SELECT 1 AS y", db=f"sqlite:///{db}", scorer="ex")
    assert score.passed


def test_the_library_scores_what_flexsql_eval_records(spider, tmp_path: Path) -> None:
    """The same predictions through `flexsql eval` and through the function: the same score and
    similarity under every scorer, task by task."""
    tasks, dbs = spider
    preds, out = tmp_path / "preds", tmp_path / "out"
    write_predictions(preds)
    (preds / "4.sql").write_text("SELECT name FROM singer")
    code, output = run_cli(
        tasks, "--runner", "predictions", "--predictions", preds, "--dbs", dbs, "--out", out
    )
    assert code == 0, output
    db = next(dbs.rglob("*.sqlite"))
    for task_id, record in results(out).items():
        gold_sql = QUESTIONS[int(task_id)][1]
        sql_file, csv_file = preds / f"{task_id}.sql", preds / f"{task_id}.csv"
        predicted: str | pd.DataFrame = sql_file.read_text() if sql_file.exists() else pd.read_csv(csv_file)
        for scorer in SCORERS:
            got = score_prediction(predicted, gold_sql, db=db, scorer=scorer)
            assert int(got.passed) == record["scores"][scorer], (task_id, scorer, got.reason)
            if scorer == "rex":
                assert got.value == pytest.approx(record["similarities"]["rex"])
    assert json.loads((out / "summary.json").read_text())["evaluated"] == 5


def test_calls_from_several_threads_at_once(db: Path) -> None:
    gold = "SELECT country, count(*) FROM singer GROUP BY country"
    values: list[float] = []
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            pred = gold if i % 2 else "SELECT country, 1 FROM singer GROUP BY country"
            values.append(score_prediction(pred, gold, db=db, scorer="rex").value)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and sorted(values) == pytest.approx([5 / 6] * 8 + [1.0] * 8)


def _t(columns: list[str], rows: list[tuple]) -> Table:
    return Table(columns=columns, rows=rows)


GOLD = _t(["id", "name"], [(1, "ann"), (2, "bob"), (3, "cy")])
DOC_CASES = {  # docs/scoring.md, "Where REX agrees and disagrees with the others": gold, predicted, ordered
    "the same rows in another order": (GOLD, _t(["id", "name"], [(3, "cy"), (1, "ann"), (2, "bob")]), False),
    "another order, gold sorted (ORDER BY)": (
        GOLD,
        _t(["id", "name"], [(3, "cy"), (1, "ann"), (2, "bob")]),
        True,
    ),
    "columns renamed and reordered": (GOLD, _t(["who", "n"], [("ann", 1), ("bob", 2), ("cy", 3)]), False),
    "column names swapped, values in place": (
        GOLD,
        _t(["name", "id"], [(1, "ann"), (2, "bob"), (3, "cy")]),
        False,
    ),
    "an extra predicted column": (
        GOLD,
        _t(["id", "name", "x"], [(1, "ann", 0), (2, "bob", 0), (3, "cy", 0)]),
        False,
    ),
    "a row missing": (GOLD, _t(["id", "name"], [(1, "ann"), (2, "bob")]), False),
    "a duplicated row": (GOLD, _t(["id", "name"], [(1, "ann"), (2, "bob"), (3, "cy"), (3, "cy")]), False),
    "rows scrambled across columns": (GOLD, _t(["id", "name"], [(1, "bob"), (2, "cy"), (3, "ann")]), False),
    "one wrong value": (GOLD, _t(["id", "name"], [(1, "ann"), (2, "bob"), (3, "dee")]), False),
    "NULL where gold has 0 (`v`: 0, 1)": (_t(["v"], [(0,), (1,)]), _t(["v"], [(None,), (1,)]), False),
    "a float 0.005 off (`v`: 1.5, 2.0)": (_t(["v"], [(1.5,), (2.0,)]), _t(["v"], [(1.505,), (2.0,)]), False),
    "both empty": (_t(["v"], []), _t(["v"], []), False),
}


def test_the_cases_table_of_docs_scoring_is_what_the_scorers_say() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "scoring.md").read_text()
    section = text.split("### Where REX agrees and disagrees with the others", 1)[1].split("\n\n- ", 1)[0]
    rows = [r for r in section.splitlines() if r.startswith("| ") and not r.startswith(("| case", "| ---"))]
    table = {cells[0]: cells[1:] for cells in ([c.strip() for c in r.strip("|").split("|")] for r in rows)}
    assert set(table) == set(DOC_CASES)
    for name, (gold, pred, ordered) in DOC_CASES.items():
        got = []
        for scorer in ("ex", "spider2", "spider2-strict", "rex"):
            s = score_prediction(pred, gold, scorer=scorer, ordered=ordered)
            got.append(f"{s.value:.3g}" if scorer == "rex" else ("pass" if s.passed else "fail"))
        assert table[name] == got, name
