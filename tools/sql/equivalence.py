"""Are two result tables the same answer? The one table-equivalence check of flexsql.

Used by the `spider2-strict` and `ex` scorers and by the `compare_results` tool. Table A is the
reference (the gold answer, or the first result); table B is compared with it.

How it decides:
1. Row counts must be equal, and B needs as many columns as A (exactly as many unless
   `allow_extra_columns`).
2. Every A column is assigned to a *distinct* B column holding the same values (as a multiset;
   order is checked on whole rows); names never matter. Candidate B columns come from per-column
   comparison, the assignment from a small backtracking search over them (B columns with identical
   contents are interchangeable and tried once).
3. Under an assignment, the rows must match as a multiset of tuples (a list when `ordered`). This is
   what per-column checks cannot see: values that match column by column but are paired
   differently across columns ("rows scrambled").

Values are normalised first: NaN and NA are NULL, booleans are the integers 0/1, Decimals are exact
numbers (an int, or a Fraction when not integral), numpy scalars are Python numbers, dates and times
are ISO text. Two exact numbers (ints, decimals) are equal only when they are equal (2^53 + 1 is not
2^53); when either is a float, they are equal when `math.isclose(a, b, rel_tol=rel_tolerance,
abs_tol=tolerance)`. Anything else must be exactly equal (case and whitespace count). NULL only equals NULL unless `null_equals_zero`.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, TypedDict

from pydantic import BaseModel

# How many complete column assignments to check row by row before giving up (each is O(rows)).
MAX_ASSIGNMENTS = 64
# Rows left after exact matching that we still pair up one by one under the numeric tolerance.
MAX_FUZZY_GROUP = 400
SAMPLES = 3


class Equivalence(BaseModel):
    """The verdict of `compare_tables`, with what a reader needs to see why."""

    equivalent: bool
    reason: str
    # equal | row_count | column_count | column_values | no_assignment | rows | order
    kind: str = "equal"
    column_mapping: dict[int, int] | None = None  # A column index -> B column index
    a_rows: int
    b_rows: int
    a_columns: int
    b_columns: int
    unmatched_columns: list[int] = []  # A columns that no B column could stand for
    extra_columns: list[int] = []  # B columns not used by the mapping
    sample_differences: list[str] = []

    def to_text(self) -> str:
        head = "equivalent" if self.equivalent else "not equivalent"
        lines = [
            f"{head}: {self.reason}",
            f"rows: {self.a_rows} vs {self.b_rows}; columns: {self.a_columns} vs {self.b_columns}",
        ]
        if self.column_mapping:
            pairs = ", ".join(f"{a}->{b}" for a, b in sorted(self.column_mapping.items()))
            lines.append(f"column mapping (A->B): {pairs}")
        lines += self.sample_differences
        return "\n".join(lines)


# -- values ----------------------------------------------------------------------------------------


def normalize_value(value: Any, null_equals_zero: bool = False) -> Any:
    """The comparable form of one cell (see the module docstring)."""
    null = 0 if null_equals_zero else None
    if value is None:
        return null
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return null if value != value else float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):  # Snowflake's connector gives bytearray
        return bytes(value)
    if isinstance(value, decimal.Decimal):
        if value.is_nan():
            return null
        if value.is_infinite():
            return float(value)
        # exact: a float would make 12345678901234567 and 12345678901234568 the same number
        return int(value) if value == value.to_integral_value() else Fraction(value)
    if _is_missing(value):  # pandas NA / NaT, numpy NaN
        return null
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, default=str, sort_keys=True, ensure_ascii=False)
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item):
        try:
            return normalize_value(item(), null_equals_zero)
        except (TypeError, ValueError):
            pass
    return str(value)


def _is_missing(value: Any) -> bool:
    try:
        import pandas as pd

        result = pd.isna(value)
        return bool(result) if isinstance(result, bool) or getattr(result, "ndim", 1) == 0 else False
    except (ImportError, TypeError, ValueError):
        return False


def _is_number(v: Any) -> bool:
    # normalised cells are exactly int, Fraction, float, str, bytes or None (never bool or a subclass)
    t = type(v)
    return t is int or t is float or t is Fraction


def cell_sort_key(v: Any) -> tuple[Any, ...]:
    """A total order over normalised cells: NULL < numbers < text < bytes."""
    if v is None:
        return (0, 0)
    if _is_number(v):
        # the exact value breaks ties: 2**53 and 2**53 + 1 are one float but must sort apart
        return (1, float(v) if abs(v) < 1e300 else v, v)
    if isinstance(v, str):
        return (2, v)
    return (3, v)


def _row_key(row: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(cell_sort_key(v) for v in row)


def show_value(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, float):
        return repr(round(v, 6))
    if isinstance(v, Fraction):
        text = str(decimal.Decimal(v.numerator) / decimal.Decimal(v.denominator))
        return text if len(text) <= 40 else text[:39] + "…"
    text = repr(v)
    return text if len(text) <= 40 else text[:39] + "…"


def show_row(row: Sequence[Any]) -> str:
    return "(" + ", ".join(show_value(v) for v in row) + ")"


_NUMBER_TYPES = (int, float, Fraction)


class _Sizes(TypedDict):
    """The sizes every verdict reports, passed to Equivalence as keywords."""

    a_rows: int
    b_rows: int
    a_columns: int
    b_columns: int


class CellComparer:
    """Cell equality under the numeric tolerance (of normalised cells; also used by the `rex` scorer)."""

    def __init__(self, tolerance: float, rel_tolerance: float) -> None:
        self.abs = tolerance
        self.rel = rel_tolerance

    def cells(self, x: Any, y: Any) -> bool:
        tx, ty = type(x), type(y)
        if tx is ty and x == y:
            return True
        if tx in _NUMBER_TYPES and ty in _NUMBER_TYPES:
            if x == y:
                return True
            if tx is not float and ty is not float:
                return False  # two exact values: no tolerance
            return math.isclose(float(x), float(y), rel_tol=self.rel, abs_tol=self.abs)
        return False

    def rows(self, r1: Sequence[Any], r2: Sequence[Any]) -> bool:
        return all(self.cells(x, y) for x, y in zip(r1, r2, strict=True))

    def first_difference(self, v1: Sequence[Any], v2: Sequence[Any]) -> int | None:
        for i, (x, y) in enumerate(zip(v1, v2, strict=True)):
            if not self.cells(x, y):
                return i
        return None

    def count_differences(self, v1: Sequence[Any], v2: Sequence[Any]) -> int:
        return sum(1 for x, y in zip(v1, v2, strict=True) if not self.cells(x, y))


# -- the comparison --------------------------------------------------------------------------------


def compare_tables(
    a_columns: Sequence[str],
    a_rows: Sequence[Sequence[Any]],
    b_columns: Sequence[str],
    b_rows: Sequence[Sequence[Any]],
    *,
    ordered: bool = False,
    tolerance: float = 1e-2,
    rel_tolerance: float = 1e-6,
    null_equals_zero: bool = False,
    allow_extra_columns: bool = False,
    a_label: str = "A",
    b_label: str = "B",
) -> Equivalence:
    """Decide whether table B gives the same answer as table A (see the module docstring).

    `a_label`/`b_label` name the tables in the reason ("gold", "predicted"; "r1", "r2")."""
    na, nb = len(a_columns), len(b_columns)
    a = [[normalize_value(v, null_equals_zero) for v in row] for row in a_rows]
    b = [[normalize_value(v, null_equals_zero) for v in row] for row in b_rows]
    for label, rows, width in ((a_label, a, na), (b_label, b, nb)):
        bad = next((i for i, r in enumerate(rows) if len(r) != width), None)
        if bad is not None:
            raise ValueError(f"{label} row {bad} has {len(rows[bad])} values but {width} columns")
    base: _Sizes = {"a_rows": len(a), "b_rows": len(b), "a_columns": na, "b_columns": nb}
    cmp = CellComparer(tolerance, rel_tolerance)

    if len(a) != len(b):
        return Equivalence(
            equivalent=False,
            kind="row_count",
            reason=f"row count {len(a)} vs {len(b)} ({a_label} vs {b_label})",
            **base,
        )
    if nb < na or (nb != na and not allow_extra_columns):
        what = "column count" if not allow_extra_columns else f"{b_label} has fewer columns:"
        return Equivalence(
            equivalent=False,
            kind="column_count",
            reason=f"{what} {na} vs {nb} ({a_label} vs {b_label})",
            **base,
        )

    a_cols = [[r[i] for r in a] for i in range(na)]
    b_cols = [[r[j] for r in b] for j in range(nb)]
    # Columns are candidates when they hold the same values in any order: the row check below
    # then tells a wrong order ("same rows in a different order") from wrong values.
    a_vecs = [sorted(c, key=cell_sort_key) for c in a_cols]
    b_vecs = [sorted(c, key=cell_sort_key) for c in b_cols]
    a_profiles = [_profile(v) for v in a_vecs]
    b_profiles = [_profile(v) for v in b_vecs]

    candidates: list[list[int]] = []
    for i in range(na):
        found = [
            j
            for j in range(nb)
            if a_profiles[i] == b_profiles[j] and cmp.first_difference(a_vecs[i], b_vecs[j]) is None
        ]
        candidates.append(found)
    unmatched = [i for i, c in enumerate(candidates) if not c]
    if unmatched:
        i = unmatched[0]
        reason = f"column {i} of {a_label} ({a_columns[i]!r}) matches no {b_label} column" + _closest(
            i, a_vecs, b_vecs, b_columns, cmp
        )
        if len(unmatched) > 1:
            reason += f"; {len(unmatched) - 1} more {a_label} column(s) unmatched: {unmatched[1:8]}"
        return Equivalence(
            equivalent=False, kind="column_values", reason=reason, unmatched_columns=unmatched, **base
        )

    # B columns with identical contents lead to identical row checks: try one of each kind.
    kind_of: dict[int, int] = {}
    seen: dict[tuple[Any, ...], int] = {}
    for j in range(nb):
        kind_of[j] = seen.setdefault(_hashable(b_cols[j]), j)

    order = sorted(range(na), key=lambda i: len(candidates[i]))
    tried = 0
    first_failure: tuple[dict[int, int], str, list[str]] | None = None
    assignment: dict[int, int] = {}
    used: set[int] = set()

    def search(k: int) -> dict[int, int] | None:
        nonlocal tried, first_failure
        if tried >= MAX_ASSIGNMENTS:
            return None
        if k == na:
            tried += 1
            ok, why, samples = _rows_match(a, b, assignment, cmp, ordered, a_label, b_label)
            if ok:
                return dict(assignment)
            if first_failure is None:
                first_failure = (dict(assignment), why, samples)
            return None
        i = order[k]
        kinds_here: set[int] = set()
        for j in candidates[i]:
            if j in used or kind_of[j] in kinds_here:
                continue
            kinds_here.add(kind_of[j])
            assignment[i] = j
            used.add(j)
            found = search(k + 1)
            used.discard(j)
            del assignment[i]
            if found is not None:
                return found
        return None

    mapping = search(0)
    if mapping is not None:
        extra = sorted(set(range(nb)) - set(mapping.values()))
        notes = []
        if any(a_idx != b_idx for a_idx, b_idx in mapping.items()):
            notes.append("columns in a different order")
        if extra:
            notes.append(f"{len(extra)} extra {b_label} column(s) ignored")
        reason = (
            "same rows"
            + (" in the same order" if ordered else "")
            + (f" ({'; '.join(notes)})" if notes else "")
        )
        return Equivalence(
            equivalent=True, reason=reason, column_mapping=mapping, extra_columns=extra, **base
        )
    if first_failure is None:
        # Each A column has candidates, but some B column would have to stand for two A columns.
        def names(columns: Sequence[str], picks: Sequence[int]) -> str:
            return ", ".join(f"{columns[k]!r}" for k in picks[:4]) + (" …" if len(picks) > 4 else "")

        shown = "; ".join(f"{a_columns[i]!r} only like {names(b_columns, candidates[i])}" for i in order[:6])
        reason = (
            f"no one-to-one column assignment: several {a_label} columns match only the same "
            f"{b_label} column(s) ({shown})"
        )
        return Equivalence(equivalent=False, kind="no_assignment", reason=reason, **base)
    mapping_tried, why, samples = first_failure
    if tried >= MAX_ASSIGNMENTS:
        why += f" (checked {tried} column assignments)"
    kind = "order" if why.startswith("same rows in a different order") else "rows"
    return Equivalence(
        equivalent=False,
        kind=kind,
        reason=why,
        column_mapping=mapping_tried,
        sample_differences=samples,
        **base,
    )


def _profile(vec: Sequence[Any]) -> tuple[int, int, int]:
    """A cheap necessary condition for two columns to match: how many NULLs, numbers, others."""
    nulls = numbers = 0
    for v in vec:
        if v is None:
            nulls += 1
        elif _is_number(v):
            numbers += 1
    return nulls, numbers, len(vec) - nulls - numbers


def _hashable(col: Sequence[Any]) -> tuple[Any, ...]:
    return tuple((type(v).__name__ if not _is_number(v) else "n", v) for v in col)


def _closest(
    i: int, a_vecs: list[list[Any]], b_vecs: list[list[Any]], b_columns: Sequence[str], cmp: CellComparer
) -> str:
    if not b_vecs or not a_vecs[i]:
        return ""
    # a column of the same kind (numbers vs text) is the closer one, whatever the value differences
    shape = _profile(a_vecs[i])
    best = min(
        range(len(b_vecs)),
        key=lambda j: (
            sum(abs(x - y) for x, y in zip(shape, _profile(b_vecs[j]), strict=True)),
            cmp.count_differences(a_vecs[i], b_vecs[j]),
        ),
    )
    diffs = cmp.count_differences(a_vecs[i], b_vecs[best])
    k = cmp.first_difference(a_vecs[i], b_vecs[best])
    example = "" if k is None else f", e.g. {show_value(a_vecs[i][k])} vs {show_value(b_vecs[best][k])}"
    return (
        f" (closest: column {best} {b_columns[best]!r}, {diffs} of {len(a_vecs[i])} values differ{example})"
    )


def _rows_match(
    a: list[list[Any]],
    b: list[list[Any]],
    mapping: dict[int, int],
    cmp: CellComparer,
    ordered: bool,
    a_label: str,
    b_label: str,
) -> tuple[bool, str, list[str]]:
    cols = [mapping[i] for i in range(len(mapping))]
    projected = [tuple(r[j] for j in cols) for r in b]
    ta = [tuple(r) for r in a]
    if ordered:
        for k, (ra, rb) in enumerate(zip(ta, projected, strict=True)):
            if not cmp.rows(ra, rb):
                same_multiset, _ = _multiset_match(ta, projected, cmp)
                why = (
                    f"same rows in a different order: row {k} differs"
                    if same_multiset
                    else f"rows differ from row {k} on"
                )
                return False, why, [f"row {k}: {a_label} {show_row(ra)} vs {b_label} {show_row(rb)}"]
        return True, "", []
    ok, leftovers = _multiset_match(ta, projected, cmp)
    if ok:
        return True, "", []
    only_a, only_b = leftovers
    why = (
        f"every column matches on its own, but rows pair the values differently: {len(only_a)} {a_label} "
        f"row(s) have no equal {b_label} row"
    )
    samples = [f"only in {a_label}: {show_row(r)}" for r in only_a[:SAMPLES]]
    samples += [f"only in {b_label}: {show_row(r)}" for r in only_b[:SAMPLES]]
    return False, why, samples


def _multiset_match(
    ta: list[tuple[Any, ...]], tb: list[tuple[Any, ...]], cmp: CellComparer
) -> tuple[bool, tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]]:
    """Rows as multisets: exact matches first, then the rest paired under the numeric tolerance."""
    ca, cb = Counter(ta), Counter(tb)
    common = ca & cb
    rest_a = list((ca - common).elements())
    rest_b = list((cb - common).elements())
    if not rest_a and not rest_b:
        return True, ([], [])
    # Only numbers can be "close"; everything else must agree exactly, so group by it.
    groups_a: dict[tuple[Any, ...], list[tuple[Any, ...]]] = defaultdict(list)
    groups_b: dict[tuple[Any, ...], list[tuple[Any, ...]]] = defaultdict(list)
    for rows, groups in ((rest_a, groups_a), (rest_b, groups_b)):
        for r in rows:
            groups[tuple("#" if _is_number(v) else (type(v).__name__, v) for v in r)].append(r)
    left_a: list[tuple[Any, ...]] = []
    left_b: list[tuple[Any, ...]] = []
    for key in groups_a.keys() | groups_b.keys():
        ga, gb = groups_a.get(key, []), groups_b.get(key, [])
        la, lb = _pair_close(ga, gb, cmp)
        left_a += la
        left_b += lb
    return (not left_a and not left_b), (left_a, left_b)


def _pair_close(
    ga: list[tuple[Any, ...]], gb: list[tuple[Any, ...]], cmp: CellComparer
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    if not ga or not gb:
        return ga, gb
    sa, sb = sorted(ga, key=_row_key), sorted(gb, key=_row_key)
    if len(sa) == len(sb) and all(cmp.rows(x, y) for x, y in zip(sa, sb, strict=True)):
        return [], []
    if len(ga) > MAX_FUZZY_GROUP or len(gb) > MAX_FUZZY_GROUP:
        # too many to pair exhaustively: report what the sorted pairing could not match
        return (
            [x for x, y in zip(sa, sb, strict=False) if not cmp.rows(x, y)] + sa[len(sb) :],
            [y for x, y in zip(sa, sb, strict=False) if not cmp.rows(x, y)] + sb[len(sa) :],
        )
    # maximum bipartite matching (augmenting paths) on "close" pairs
    adj = [[j for j, y in enumerate(gb) if cmp.rows(x, y)] for x in ga]
    match_b: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for j in adj[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in match_b or augment(match_b[j], seen):
                match_b[j] = i
                return True
        return False

    for i in range(len(ga)):
        augment(i, set())
    matched_a = set(match_b.values())
    return (
        [x for i, x in enumerate(ga) if i not in matched_a],
        [y for j, y in enumerate(gb) if j not in match_b],
    )
