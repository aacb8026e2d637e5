"""Scorers: `spider2` (the official Spider 2.0 verdicts, quirks included), `spider2-strict` (the
same inputs, with the official weaknesses fixed) and `ex` (Spider 1.0 / BIRD execution match).

The `spider2` scorer follows the official evaluation (described in words in docs/scoring.md):
- both tables are read through pandas `read_csv` with its default type inference (a SQL result is
  written to CSV and read back first, as the official evaluator does);
- each table becomes a list of column vectors via `DataFrame.transpose().values.tolist()` (so a
  frame mixing int and float columns hands the int columns over as floats, as it does officially);
- NaN/NULL becomes 0 on both sides; with `ignore_order` each vector is sorted on its own by the key
  (is None, str(value), is number);
- a gold column matches a predicted vector of the same length whose elements are pairwise equal,
  numbers (bools included) within `math.isclose(abs_tol=0.01)`; every selected gold column must match
  some predicted column (the same predicted column may serve several);
- `condition_cols` is expanded over the gold variants with the official quirks (`expand_official`),
  and any passing variant passes the task.

`spider2-strict` maps gold columns one-to-one to predicted columns and compares rows as a multiset
(`flexsql.tools.sql.equivalence.compare_tables`), keeps NULL distinct from 0, and uses `condition_cols`
as written (`expand_strict`).
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import pandas as pd
from pydantic import BaseModel

from flexsql.tools.sql.equivalence import Equivalence, compare_tables, show_value

ScorerName = Literal["spider2", "spider2-strict", "ex", "rex"]
SCORERS: tuple[ScorerName, ...] = get_args(ScorerName)
SCORER_NOTES: dict[ScorerName, str] = {  # what each decides, for reports (docs/scoring.md says more)
    "spider2": "the official Spider 2.0 rule: every gold column (condition_cols) equals some predicted column, "
    "each column sorted on its own, NULL = 0, numbers within 0.01",
    "spider2-strict": "one-to-one column mapping, rows compared as a multiset, NULL distinct from 0, "
    "condition_cols as written (fixes the official weaknesses)",
    "ex": "execution match: all columns, any column order, no extra columns, rows as a multiset (ordered when the "
    "gold SQL has a top-level ORDER BY)",
    "rex": "robust execution match (DualSQL): a similarity in [0, 1], matched cells over max columns x max rows; "
    "columns paired by name, then by content; passed iff 1.0",
}
Flavor = Literal["lite", "snow"]
OFFICIAL_TOLERANCE = 1e-2
EX_TOLERANCE = 1e-9

# Verdict categories (the report groups failures by these).
PASS = "pass"
CATEGORY_TEXT = {
    "pass": "passed",
    "execution_error": "execution error",
    "timeout": "timed out",
    "refused": "refused by the guard",
    "empty_result": "empty result",
    "too_large": "result too large",
    "row_count": "row count differs",
    "column_count": "column count differs",
    "column_values": "a gold column not matched",
    "rows": "rows paired differently",
    "order": "row order differs",
    "no_assignment": "no one-to-one column assignment",
    "bad_condition": "condition_cols not usable",
    "unreadable_prediction": "prediction unreadable",
    "no_prediction": "no prediction",
    "no_gold": "no gold",
    "runner_error": "runner failed",
    "no_database": "database not found",
    "not_scored": "not scored (no gold SQL for this turn)",
}


class Verdict(BaseModel):
    scorer: str
    score: int
    reason: str
    category: str
    variant: str | None = None  # the gold variant that passed (or the one the reason is about)
    similarity: float | None = None  # `rex`: in [0, 1], 1.0 iff score is 1


# -- tables ----------------------------------------------------------------------------------------


@dataclass
class GoldTable:
    """One gold answer: a CSV variant (`local002_a.csv`) or the result of the gold SQL."""

    name: str
    frame: pd.DataFrame
    ordered: bool = False  # the gold SQL sorts its result at the top level (ex scorer)
    # vectors and rows already computed from `frame` (a gold table is compared with many predictions)
    vectors_cache: dict[tuple[tuple[int, ...] | None, bool], list[list[Any]]] = field(
        default_factory=dict, repr=False, compare=False
    )
    rows_cache: dict[tuple[int, ...] | None, list[tuple[Any, ...]]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def vectors(self, columns: list[int] | None, ignore_order: bool) -> list[list[Any]]:
        key = (tuple(columns) if columns is not None else None, ignore_order)
        if key not in self.vectors_cache:
            self.vectors_cache[key] = official_vectors(self.frame, columns, ignore_order)
        return self.vectors_cache[key]

    def rows(self, columns: list[int] | None) -> list[tuple[Any, ...]]:
        key = tuple(columns) if columns is not None else None
        if key not in self.rows_cache:
            self.rows_cache[key] = frame_rows(self.frame, columns)
        return self.rows_cache[key]


def read_csv_frame(source: Path | str | io.StringIO) -> pd.DataFrame:
    """Read a CSV with pandas' default inference, as the official evaluator does."""
    return pd.read_csv(source)


def frame_from_result(columns: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> pd.DataFrame:
    """A query result as the official evaluator sees it: written to CSV by pandas, read back."""
    return read_csv_frame(io.StringIO(csv_text(columns, rows)))


def csv_text(columns: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> str:
    frame = (
        pd.DataFrame.from_records(list(rows), columns=list(columns), coerce_float=True)
        if rows
        else pd.DataFrame(columns=list(columns))
    )
    return frame.to_csv(index=False)


def frame_rows(frame: pd.DataFrame, columns: Sequence[int] | None = None) -> list[tuple[Any, ...]]:
    """Rows of Python values, each column converted on its own (no cross-column upcasting)."""
    indices = range(frame.shape[1]) if columns is None else columns
    cols = [frame.iloc[:, i].tolist() for i in indices]
    if not cols:
        return [() for _ in range(frame.shape[0])]
    return list(zip(*cols, strict=True))


def frame_columns(frame: pd.DataFrame, columns: Sequence[int] | None = None) -> list[str]:
    names = [str(c) for c in frame.columns]
    return names if columns is None else [names[i] for i in columns]


# -- condition_cols --------------------------------------------------------------------------------


@dataclass
class ColumnChoice:
    """Which gold columns one variant is checked on: `columns=None` means all of them."""

    columns: list[int] | None = None
    error: str | None = None  # the variant cannot pass (the official code fails on it)
    note: str = ""


def _is_emptyish(cc: Any) -> bool:
    return cc is None or cc == [] or cc == [[]] or cc == [None]


def expand_official(cc: Any, n_variants: int, flavor: Flavor = "lite") -> list[ColumnChoice]:
    """The official expansion of `condition_cols` over `n_variants` gold tables, quirks included."""
    if _is_emptyish(cc):
        return [ColumnChoice() for _ in range(n_variants)]
    if not isinstance(cc, list):
        return [ColumnChoice(error=f"condition_cols {cc!r} is not a list") for _ in range(n_variants)]
    if n_variants > 1 and not all(isinstance(x, list) for x in cc):
        return [_choice(cc, flavor) for _ in range(n_variants)]
    choices = []
    for i in range(n_variants):
        if i >= len(cc):
            choices.append(
                ColumnChoice(
                    error=f"condition_cols has no entry for variant {i + 1} "
                    f"({len(cc)} entries, {n_variants} variants)"
                )
            )
        else:
            choice = _choice(cc[i], flavor)
            if n_variants == 1 and not isinstance(cc[0], list) and len(cc) > 1:
                choice.note = f"the official code uses only condition_cols[0] = {cc[0]!r} of {cc!r}"
            choices.append(choice)
    return choices


def _choice(entry: Any, flavor: Flavor) -> ColumnChoice:
    if entry is None:
        return ColumnChoice()
    if isinstance(entry, bool):
        return ColumnChoice(error=f"condition_cols entry {entry!r} is not a column index")
    if isinstance(entry, int):
        if entry == 0 and flavor == "lite":
            # the lite code tests the entry's truth value, so column 0 means "no condition"
            return ColumnChoice(note="condition 0 is falsy in the lite evaluator: all columns are checked")
        return ColumnChoice(columns=[entry])
    if isinstance(entry, list):
        if not entry:
            return ColumnChoice()
        if all(isinstance(x, int) and not isinstance(x, bool) for x in entry):
            return ColumnChoice(columns=list(entry))
    return ColumnChoice(error=f"condition_cols entry {entry!r} is not a list of column indices")


def expand_strict(cc: Any, n_variants: int) -> list[ColumnChoice]:
    """`condition_cols` as written: a flat list applies to every variant, a list of lists gives one
    list per variant, and a variant without an entry is checked on all its columns."""
    if _is_emptyish(cc):
        return [ColumnChoice() for _ in range(n_variants)]
    if isinstance(cc, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in cc):
        return [ColumnChoice(columns=list(cc)) for _ in range(n_variants)]
    if isinstance(cc, list) and all(isinstance(x, list) or x is None for x in cc):
        out = []
        for i in range(n_variants):
            entry = cc[i] if i < len(cc) else None
            if not entry:
                out.append(ColumnChoice(note="no condition for this variant: all columns checked"))
            elif all(isinstance(x, int) and not isinstance(x, bool) for x in entry):
                out.append(ColumnChoice(columns=list(entry)))
            else:
                out.append(
                    ColumnChoice(error=f"condition_cols entry {entry!r} is not a list of column indices")
                )
        return out
    return [
        ColumnChoice(error=f"condition_cols {cc!r} is neither a list of indices nor a list of lists")
        for _ in range(n_variants)
    ]


def _resolve_columns(choice: ColumnChoice, width: int) -> tuple[list[int] | None, str | None]:
    """Column indices as iloc reads them (negative counts from the end), or why they are invalid."""
    if choice.error:
        return None, choice.error
    if choice.columns is None:
        return None, None
    bad = [c for c in choice.columns if not -width <= c < width]
    if bad:
        return None, f"condition_cols index {bad[0]} is out of range for a gold table with {width} columns"
    return [c % width for c in choice.columns], None


# -- the official comparison -----------------------------------------------------------------------


def _missing(x: Any) -> bool:
    t = type(x)
    if t is str or t is int or t is bool:
        return False
    if t is float:
        return bool(x != x)  # NaN
    if x is None:
        return True
    try:
        return bool(pd.isna(x))
    except (TypeError, ValueError):
        return False


def _official_key(x: Any) -> tuple[bool, str, bool]:
    return (x is None, str(x), isinstance(x, int | float))


def official_vectors(frame: pd.DataFrame, columns: list[int] | None, ignore_order: bool) -> list[list[Any]]:
    """Column vectors the way the official code builds them: transpose, values, tolist; NaN -> 0;
    each sorted on its own when order is ignored."""
    sub = frame if columns is None else frame.iloc[:, columns]
    # `.values.T` holds what the official `.transpose().values` holds (the same interleaving of
    # the selected columns' dtypes) without building a transposed frame.
    vectors = sub.values.T.tolist() if sub.shape[1] else []
    if sub.shape[0] == 0:
        vectors = [[] for _ in range(sub.shape[1])]
    out = []
    for vec in vectors:
        vec = [0 if _missing(x) else x for x in vec]
        out.append(sorted(vec, key=_official_key) if ignore_order else vec)
    return out


def _numbers(a: Any, b: Any) -> bool:
    return isinstance(a, int | float) and isinstance(b, int | float)


def official_equal(a: Any, b: Any) -> bool:
    if type(a) is str and type(b) is str:
        return a == b
    if _numbers(a, b):
        try:
            return math.isclose(float(a), float(b), abs_tol=OFFICIAL_TOLERANCE)
        except OverflowError:
            return False
    return not (a != b)


def official_vectors_match(v1: list[Any], v2: list[Any]) -> bool:
    if len(v1) != len(v2):
        return False
    return all(official_equal(a, b) for a, b in zip(v1, v2, strict=True))


@dataclass
class _Prepared:
    """A prediction's vectors, computed once and shared by every gold variant."""

    frame: pd.DataFrame
    cache: dict[bool, list[list[Any]]] = field(default_factory=dict)

    def vectors(self, ignore_order: bool) -> list[list[Any]]:
        if ignore_order not in self.cache:
            self.cache[ignore_order] = official_vectors(self.frame, None, ignore_order)
        return self.cache[ignore_order]


def _variant_official(
    pred: _Prepared, gold: GoldTable, choice: ColumnChoice, ignore_order: bool
) -> tuple[bool, str, str]:
    """(passed, reason, category) for one gold variant under the official rules."""
    columns, error = _resolve_columns(choice, gold.frame.shape[1])
    if error:
        return False, error, "bad_condition"
    gold_vecs = gold.vectors(columns, ignore_order)
    pred_vecs = pred.vectors(ignore_order)
    gold_names = frame_columns(gold.frame, columns)
    pred_names = frame_columns(pred.frame)
    matched: list[int] = []
    for gi, gvec in enumerate(gold_vecs):
        hit = next((pi for pi, pvec in enumerate(pred_vecs) if official_vectors_match(gvec, pvec)), None)
        if hit is None:
            where = columns[gi] if columns is not None else gi
            if pred.frame.shape[0] != gold.frame.shape[0]:
                return (
                    False,
                    f"row count {gold.frame.shape[0]} vs {pred.frame.shape[0]} (gold vs predicted)",
                    "row_count",
                )
            return (
                False,
                (
                    f"column {where} of gold ({gold_names[gi]!r}) not matched by any predicted column"
                    + _closest_official(gvec, pred_vecs, pred_names)
                ),
                "column_values",
            )
        matched.append(hit)
    shown = ", ".join(f"{(columns[g] if columns is not None else g)}->{p}" for g, p in enumerate(matched))
    return True, f"gold columns matched (gold->predicted: {shown})", PASS


def _closest_official(gvec: list[Any], pred_vecs: list[list[Any]], names: list[str]) -> str:
    best, best_diff = None, None
    for pi, pvec in enumerate(pred_vecs):
        diff = 0
        for a, b in zip(gvec, pvec, strict=True):
            if not official_equal(a, b):
                diff += 1
                if best_diff is not None and diff >= best_diff:
                    break
        if best_diff is None or diff < best_diff:
            best, best_diff = pi, diff
    if best is None:
        return "; the prediction has no columns"
    k = next(
        i for i, (a, b) in enumerate(zip(gvec, pred_vecs[best], strict=True)) if not official_equal(a, b)
    )
    return (
        f" (closest: predicted column {best} {names[best]!r}: {best_diff} of {len(gvec)} values differ, "
        f"e.g. {show_value(gvec[k])} vs {show_value(pred_vecs[best][k])})"
    )


def score_spider2(
    pred: pd.DataFrame,
    golds: Sequence[GoldTable],
    condition_cols: Any = None,
    ignore_order: bool = True,
    flavor: Flavor = "lite",
) -> Verdict:
    """The official Spider 2.0 verdict for one prediction against a task's gold variants."""
    if not golds:
        return Verdict(scorer="spider2", score=0, reason="no gold table for this task", category="no_gold")
    prepared = _Prepared(pred)
    choices = expand_official(condition_cols, len(golds), flavor)
    failures: list[tuple[str, str, str]] = []
    for gold, choice in zip(golds, choices, strict=True):
        ok, reason, category = _variant_official(prepared, gold, choice, ignore_order)
        if choice.note:
            reason += f" [{choice.note}]"
        if ok:
            return Verdict(
                scorer="spider2",
                score=1,
                reason=_with_variant(gold, golds, reason),
                category=PASS,
                variant=gold.name,
            )
        failures.append((gold.name, reason, category))
        if category == "bad_condition":
            break  # the official code raises here, so later variants are never tried
    return _failure("spider2", failures)


def _with_variant(gold: GoldTable, golds: Sequence[GoldTable], reason: str) -> str:
    return f"{gold.name}: {reason}" if len(golds) > 1 else reason


def _failure(scorer: str, failures: list[tuple[str, str, str]]) -> Verdict:
    if len(failures) == 1:
        name, reason, category = failures[0]
        return Verdict(scorer=scorer, score=0, reason=reason, category=category, variant=name)
    # the variant that came closest leads: unmatched columns beat a row-count difference
    rank = {"rows": 0, "order": 0, "no_assignment": 1, "column_values": 1, "column_count": 2, "row_count": 3}
    name, _, category = min(failures, key=lambda f: rank.get(f[2], 4))
    parts = "; ".join(f"{n}: {r}" for n, r, _ in failures[:4])
    more = f"; {len(failures) - 4} more" if len(failures) > 4 else ""
    return Verdict(
        scorer=scorer,
        score=0,
        reason=f"no gold variant matched ({len(failures)}): {parts}{more}",
        category=category,
        variant=name,
    )


# -- strict ----------------------------------------------------------------------------------------


def score_spider2_strict(
    pred: pd.DataFrame, golds: Sequence[GoldTable], condition_cols: Any = None, ignore_order: bool = True
) -> Verdict:
    """Rows compared as a multiset under a one-to-one column mapping, NULL distinct from 0,
    condition_cols as written; extra predicted columns are still allowed."""
    if not golds:
        return Verdict(
            scorer="spider2-strict", score=0, reason="no gold table for this task", category="no_gold"
        )
    pred_cols, pred_rows = frame_columns(pred), frame_rows(pred)
    failures: list[tuple[str, str, str]] = []
    for gold, choice in zip(golds, expand_strict(condition_cols, len(golds)), strict=True):
        columns, error = _resolve_columns(choice, gold.frame.shape[1])
        if error:
            failures.append((gold.name, error, "bad_condition"))
            continue
        eq = compare_tables(
            frame_columns(gold.frame, columns),
            gold.rows(columns),
            pred_cols,
            pred_rows,
            ordered=not ignore_order,
            tolerance=OFFICIAL_TOLERANCE,
            rel_tolerance=1e-9,
            null_equals_zero=False,
            allow_extra_columns=True,
            a_label="gold",
            b_label="predicted",
        )
        reason = _eq_reason(eq, columns)
        if choice.note:
            reason += f" [{choice.note}]"
        if eq.equivalent:
            return Verdict(
                scorer="spider2-strict",
                score=1,
                reason=_with_variant(gold, golds, reason),
                category=PASS,
                variant=gold.name,
            )
        failures.append((gold.name, reason, eq.kind))
    return _failure("spider2-strict", failures)


def _eq_reason(eq: Equivalence, columns: list[int] | None) -> str:
    reason = eq.reason
    if columns is not None and eq.unmatched_columns:
        # compare_tables numbers the selected columns; name them by their gold position
        first = eq.unmatched_columns[0]
        reason = re.sub(r"^column \d+ of gold", f"column {columns[first]} of gold", reason)
    if eq.sample_differences:
        reason += " — " + "; ".join(eq.sample_differences[:4])
    return reason


# -- ex --------------------------------------------------------------------------------------------


def score_ex(
    pred_columns: Sequence[str],
    pred_rows: Sequence[Sequence[Any]],
    golds: Sequence[GoldTable] | None = None,
    *,
    gold_tables: Sequence[tuple[str, Sequence[str], Sequence[Sequence[Any]], bool]] | None = None,
) -> Verdict:
    """Execution match: all columns, any column order, no extra columns, rows as a multiset (as a list
    when the gold SQL orders its result), numbers equal up to float noise.

    Gold comes either as frames (`golds`, from CSVs) or as raw engine results
    (`gold_tables`: name, columns, rows, ordered)."""
    tables: list[tuple[str, Sequence[str], Sequence[Sequence[Any]], bool]] = list(gold_tables or [])
    for gold in golds or []:
        tables.append((gold.name, frame_columns(gold.frame), gold.rows(None), gold.ordered))
    if not tables:
        return Verdict(scorer="ex", score=0, reason="no gold table for this task", category="no_gold")
    failures: list[tuple[str, str, str]] = []
    for name, columns, rows, ordered in tables:
        eq = compare_tables(
            columns,
            rows,
            pred_columns,
            pred_rows,
            ordered=ordered,
            tolerance=EX_TOLERANCE,
            rel_tolerance=EX_TOLERANCE,
            allow_extra_columns=False,
            a_label="gold",
            b_label="predicted",
        )
        reason = _eq_reason(eq, None)
        if eq.equivalent:
            return Verdict(
                scorer="ex",
                score=1,
                reason=f"{name}: {reason}" if len(tables) > 1 else reason,
                category=PASS,
                variant=name,
            )
        failures.append((name, reason, eq.kind))
    return _failure("ex", failures)


def failure(scorer: str, category: str, reason: str) -> Verdict:
    """A verdict for a prediction that never reached a comparison (execution error, timeout, …)."""
    similarity = 0.0 if scorer == "rex" else None
    return Verdict(scorer=scorer, score=0, reason=reason, category=category, similarity=similarity)
