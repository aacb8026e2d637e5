"""Scores as a library: score a predicted SQL query (or its result) against gold on a database, with
any of flexsql's scorers — the same verdicts `flexsql eval` records — for use as a reward.

    from flexsql.evals.reward import score_prediction

    s = score_prediction(
        "SELECT name FROM singer WHERE age > 40",          # predicted: SQL, a Table or a DataFrame
        "SELECT name FROM singer WHERE age > 40 ORDER BY name",  # gold: SQL, a Table, a DataFrame or a list
        db="concert_singer.sqlite",                         # a URL or a SQLite/DuckDB file (for SQL)
        scorer="rex",
    )
    s.value   # 1.0 -> the reward: REX's similarity, or 1.0 / 0.0 for ex, spider2, spider2-strict
    s.passed, s.reason, s.category

The signature is stable: `predicted` and `gold` positional, everything else by keyword; new
keywords only get defaults that keep today's behaviour. SQL runs read-only through flexsql's engines
(the statement guard applies), one connection per database kept for the process, safe to call from
several threads. A prediction that fails (error, timeout, refused, too large) scores 0 and says why;
a gold that cannot be produced raises, since no score would be true.

`verdicts()` is the one place every scorer is run on one prediction: the evaluation harness calls it
too, so a score here is the score `flexsql eval` gives."""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict

from flexsql.errors import ConfigError, FlexSQLError
from flexsql.evals.execution import DEFAULT_MAX_ROWS, ExecutionFailure, InProcessExecutor
from flexsql.evals.rex import RexMatch, rex_verdict
from flexsql.evals.scoring import (
    SCORERS,
    Flavor,
    GoldTable,
    ScorerName,
    Verdict,
    failure,
    frame_columns,
    frame_from_result,
    frame_rows,
    score_ex,
    score_spider2,
    score_spider2_strict,
)
from flexsql.evals.sqltext import orders_result
from flexsql.evals.tasks import extract_sql
from flexsql.tools.engines import engine_for_url
from flexsql.tools.engines.engine import engine_for_path

RawTable = tuple[str, list[str], list[tuple[Any, ...]], bool]  # name, columns, rows, ordered


class Table(BaseModel):
    """A result: column names and rows of Python values."""

    model_config = ConfigDict(frozen=True)
    columns: list[str]
    rows: list[tuple[Any, ...]]


class Score(BaseModel):
    """One prediction's score under one scorer."""

    scorer: ScorerName
    value: float  # the reward in [0, 1]: REX's similarity, else 1.0 (passed) or 0.0
    passed: bool
    reason: str
    category: str  # pass, execution_error, timeout, refused, too_large, row_count, rows, order, …
    variant: str | None = None  # the gold table the verdict is about (Spider 2.0 variants)
    predicted_rows: int | None = None  # None when the prediction gave no result
    elapsed_s: float  # the whole call, queries included


@dataclass
class Gold:
    """A task's gold: tables as the CSV reader sees them (spider2 scorers) and, for gold SQL, the
    engine's own rows (ex, rex)."""

    tables: list[GoldTable]
    raw: list[RawTable] = field(default_factory=list)
    condition_cols: Any = None
    ignore_order: bool = True


@dataclass
class Predicted:
    """A prediction's result: the engine's rows, and the table the CSV reader sees (computed when a
    spider2 scorer asks, unless a CSV gave it)."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    frame: pd.DataFrame | None = None
    empty_cloud: bool = False  # an empty result from a cloud engine (0 under the spider2 scorers)

    def csv_frame(self) -> pd.DataFrame | None:
        if self.frame is None and self.columns:
            self.frame = frame_from_result(self.columns, self.rows)
        return self.frame


@dataclass
class Scored:
    verdicts: dict[str, Verdict]
    rex: tuple[RexMatch, Sequence[str], Sequence[Sequence[Any]]] | None = None  # match, gold columns, rows


def verdicts(
    pred: Predicted, gold: Gold, flavor: Flavor = "lite", scorers: Sequence[str] = SCORERS
) -> Scored:
    """Every requested scorer's verdict on one prediction."""
    out: dict[str, Verdict] = {}
    wanted = set(scorers)
    if wanted & {"spider2", "spider2-strict"}:
        frame = pred.csv_frame()
        for name in ("spider2", "spider2-strict"):
            if name not in wanted:
                continue
            if frame is None:
                out[name] = failure(name, "unreadable_prediction", "the prediction has no columns")
            elif pred.empty_cloud:
                out[name] = failure(
                    name,
                    "empty_result",
                    "empty result (the official evaluator scores an empty result 0 on cloud engines)",
                )
            elif name == "spider2":
                out[name] = score_spider2(frame, gold.tables, gold.condition_cols, gold.ignore_order, flavor)
            else:
                out[name] = score_spider2_strict(frame, gold.tables, gold.condition_cols, gold.ignore_order)
    if "ex" in wanted:
        if gold.raw:
            out["ex"] = score_ex(pred.columns, pred.rows, gold_tables=gold.raw)
        else:
            out["ex"] = score_ex(pred.columns, pred.rows, gold.tables)
    rex = None
    if "rex" in wanted:
        out["rex"], rex = rex_verdict(pred.columns, pred.rows, gold.tables, gold.raw)
    return Scored(verdicts={s: out[s] for s in scorers if s in out}, rex=rex)


# -- the library function --------------------------------------------------------------------------

TableLike = Table | pd.DataFrame


def score_prediction(
    predicted: str | TableLike,
    gold: str | TableLike | Sequence[TableLike],
    *,
    db: str | Path | None = None,
    scorer: ScorerName = "ex",
    ordered: bool | None = None,
    condition_cols: Any = None,
    flavor: Flavor = "lite",
    timeout_s: float = 60.0,
    max_rows: int = DEFAULT_MAX_ROWS,
) -> Score:
    """Score `predicted` against `gold` with `scorer` (ex, rex, spider2, spider2-strict).

    - `predicted`: SQL text (a fenced ```sql block inside is used when there is one), a `Table`, or a
      pandas DataFrame read like a CSV.
    - `gold`: SQL text, a `Table`, a DataFrame, or a list of tables/frames (Spider 2.0 variants: the
      best one counts).
    - `db`: where SQL runs: a flexsql URL (`sqlite:///…`, `duckdb:///…`, `postgresql://…`,
      `snowflake://…`) or a SQLite/DuckDB file. Needed only when a side is SQL.
    - `ordered`: whether row order counts; default: when the gold SQL sorts its result at the top
      level (a gold table: no).
    - `condition_cols`, `flavor`: the Spider 2.0 evaluation config of the task (spider2 scorers).
    - `timeout_s`, `max_rows`: bounds for each query; a prediction past them scores 0.
    """
    if scorer not in SCORERS:
        raise ConfigError(f"scorer {scorer!r} is not one of {', '.join(SCORERS)}")
    started = time.perf_counter()
    url = _url(db) if (isinstance(predicted, str) or isinstance(gold, str)) else None
    executor = _executor(max_rows)
    gold_set = _gold(gold, url, executor, ordered, condition_cols, timeout_s)
    try:
        pred = _predicted(predicted, url, executor, timeout_s)
    except ExecutionFailure as exc:
        reason = f"execution error: {exc}" if exc.category == "execution_error" else f"{exc.category}: {exc}"
        verdict = failure(scorer, exc.category, reason)
        return _score(scorer, verdict, None, started)
    verdict = verdicts(pred, gold_set, flavor, (scorer,)).verdicts[scorer]
    return _score(scorer, verdict, len(pred.rows), started)


def _score(scorer: ScorerName, verdict: Verdict, rows: int | None, started: float) -> Score:
    value = verdict.similarity if verdict.similarity is not None else float(verdict.score)
    return Score(
        scorer=scorer,
        value=value,
        passed=verdict.score == 1,
        reason=verdict.reason,
        category=verdict.category,
        variant=verdict.variant,
        predicted_rows=rows,
        elapsed_s=time.perf_counter() - started,
    )


def _url(db: str | Path | None) -> str:
    if db is None:
        raise ConfigError("SQL needs a database to run on: pass db= a URL or a SQLite/DuckDB file")
    text = str(db)
    if engine_for_url(text) is not None:
        return text
    path = Path(text).expanduser()
    engine = engine_for_path(path.name)
    if engine is None or not path.is_file():
        raise ConfigError(
            f"db={text!r} is neither a flexsql URL (sqlite:///…, duckdb:///…, postgresql://…, snowflake://…) "
            "nor an existing SQLite/DuckDB file; pass one of those"
        )
    return f"{engine.url_schemes[0]}:///{path.resolve()}"


def _gold(
    gold: str | TableLike | Sequence[TableLike],
    url: str | None,
    executor: InProcessExecutor,
    ordered: bool | None,
    condition_cols: Any,
    timeout_s: float,
) -> Gold:
    if isinstance(gold, str):
        assert url is not None
        sql = extract_sql(gold)
        try:
            result = executor.execute(url, sql, timeout_s)
        except ExecutionFailure as exc:
            raise FlexSQLError(f"the gold SQL did not run ({exc.category}): {exc}") from None
        is_ordered = orders_result(gold, _dialect(url)) if ordered is None else ordered
        return Gold(
            tables=[
                GoldTable(
                    name="gold SQL", frame=frame_from_result(result.columns, result.rows), ordered=is_ordered
                )
            ],
            raw=[("gold SQL", result.columns, result.rows, is_ordered)],
            condition_cols=condition_cols,
            ignore_order=not is_ordered,
        )
    items: Sequence[TableLike] = [gold] if isinstance(gold, Table | pd.DataFrame) else list(gold)
    if not items:
        raise ConfigError("gold is an empty list: give at least one gold table")
    is_ordered = bool(ordered)
    tables: list[GoldTable] = []
    raw: list[RawTable] = []
    for i, item in enumerate(items):
        name = "gold" if len(items) == 1 else f"gold {i + 1}"
        if isinstance(item, Table):
            frame = frame_from_result(item.columns, item.rows)
            raw.append((name, list(item.columns), list(item.rows), is_ordered))
        elif isinstance(item, pd.DataFrame):
            frame = item
            raw.append((name, frame_columns(frame), frame_rows(frame), is_ordered))
        else:
            raise ConfigError(f"gold entry {i} is a {type(item).__name__}: give SQL, a Table or a DataFrame")
        tables.append(GoldTable(name=name, frame=frame, ordered=is_ordered))
    return Gold(tables=tables, raw=raw, condition_cols=condition_cols, ignore_order=not is_ordered)


def _predicted(
    predicted: str | TableLike, url: str | None, executor: InProcessExecutor, timeout_s: float
) -> Predicted:
    if isinstance(predicted, str):
        assert url is not None
        result = executor.execute(url, extract_sql(predicted), timeout_s)
        engine = engine_for_url(url)
        return Predicted(
            columns=result.columns,
            rows=result.rows,
            empty_cloud=not result.rows and engine is not None and engine.cloud,
        )
    if isinstance(predicted, Table):
        return Predicted(columns=list(predicted.columns), rows=list(predicted.rows))
    if isinstance(predicted, pd.DataFrame):
        return Predicted(columns=frame_columns(predicted), rows=frame_rows(predicted), frame=predicted)
    raise ConfigError(f"predicted is a {type(predicted).__name__}: give SQL text, a Table or a DataFrame")


def _dialect(url: str) -> str:
    engine = engine_for_url(url)
    return engine.dialect if engine else url.split("://", 1)[0].lower()


_executors: dict[int, InProcessExecutor] = {}
_lock = threading.Lock()


def _executor(max_rows: int) -> InProcessExecutor:
    """One executor per row bound, its connections kept for the process (a reward is called often)."""
    with _lock:
        found = _executors.get(max_rows)
        if found is None:
            found = _executors[max_rows] = InProcessExecutor(max_rows=max_rows)
        return found


@atexit.register
def _close() -> None:
    for executor in _executors.values():
        executor.close()
