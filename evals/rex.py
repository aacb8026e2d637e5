"""REX, the robust execution match of DualSQL (appendix E): a similarity in [0, 1] between a gold
result G and a predicted result S; the two are equivalent iff it is 1.0. docs/scoring.md states the
rules and where REX agrees and disagrees with `ex`, `spider2` and `spider2-strict`.

    similarity = matched cells / (max(|G cols|, |S cols|) * max(|G rows|, |S rows|))

which is the per-gold-column match rate averaged over G's columns, times the two size ratios
|G cols| / max(|G cols|, |S cols|) and |G rows| / max(|G rows|, |S rows|) that penalise extra
columns and rows. A cell matches when its gold row is aligned with a predicted row and its gold
column with a predicted column, and the two values are equal (NULL only equals NULL; exact numbers
exactly; a float within 1e-9, absolute or relative — the `ex` rules, flexsql.tools.sql.equivalence).

Columns. A gold and a predicted column with the same name (case and surrounding spaces aside, the
name unique on each side) are paired and compared element-wise. The other columns are paired by
content: a linear assignment (scipy's `linear_sum_assignment`) maximises the values they share —
element-wise under the row order when it is strict, as multisets when it is loose; among equally good
assignments the lexicographically smallest is taken (the first gold column gets the leftmost
predicted column that still allows the best total). When no name is shared and the order is loose,
every column assignment is tried instead (up to EXHAUSTIVE_MAPS of them), keeping the best score.

Rows. With a strict order (the gold SQL sorts its result at the top level) row i pairs with row i.
With a loose order rows are paired by an assignment that maximises the matched cells, so each
predicted row serves one gold row and duplicates count. With more than 4 gold columns, rows may only
pair when they agree on the key: the 1-2 highest-cardinality gold columns (one when it is unique;
among the gold columns paired with a predicted column sharing a value; columns of fractional floats
only when nothing else is paired).

Work is bounded for large results: identical rows pair first (hashing), and a group of leftover rows
larger than MAX_PAIRS pairs in sorted order instead of by assignment; the lexicographic tie-break
runs on at most TIE_BREAK_CELLS column pairs."""

from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from flexsql.evals.scoring import PASS, GoldTable, Verdict, frame_columns
from flexsql.tools.sql.equivalence import CellComparer, cell_sort_key, normalize_value

KEY_COLUMNS_ABOVE = 4  # rows are aligned on key columns when the gold has more columns than this
EXHAUSTIVE_MAPS = 120  # column assignments tried one by one when no name is shared (5! = 120)
MAX_PAIRS = 40_000  # leftover row pairs scored for an assignment in one group (200 x 200)
TIE_BREAK_CELLS = 900  # the lexicographic tie-break of the column assignment, up to 30 x 30 columns
REX_TOLERANCE = 1e-9  # absolute and relative, as the `ex` scorer


@dataclass
class RexMatch:
    """How REX paired the two results, and the similarity that follows."""

    similarity: float
    matched_cells: int
    gold_rows: int
    gold_columns: int
    pred_rows: int
    pred_columns: int
    ordered: bool
    column_mapping: dict[int, int] = field(default_factory=dict)  # gold column -> predicted column
    by_name: list[int] = field(default_factory=list)  # gold columns paired by their name
    row_pairs: list[tuple[int, int]] = field(default_factory=list)  # (gold row, predicted row)
    key_columns: list[int] = field(default_factory=list)  # gold columns rows were aligned on
    column_matches: list[int] = field(default_factory=list)  # per gold column: rows whose cell matched
    exhaustive: bool = False  # column assignments were searched one by one

    @property
    def equivalent(self) -> bool:
        return self.similarity == 1.0

    def column_rates(self) -> list[float]:
        """Per gold column, the share of gold rows whose cell matched (0 when the gold has no rows)."""
        return [c / self.gold_rows if self.gold_rows else 0.0 for c in self.column_matches]


def rex_match(
    gold_columns: Sequence[str],
    gold_rows: Sequence[Sequence[Any]],
    pred_columns: Sequence[str],
    pred_rows: Sequence[Sequence[Any]],
    *,
    ordered: bool,
    tolerance: float = REX_TOLERANCE,
) -> RexMatch:
    """Score a predicted result against a gold result (see the module docstring)."""
    m, n = len(gold_columns), len(pred_columns)
    gold = [tuple(normalize_value(v) for v in row) for row in gold_rows]
    pred = [tuple(normalize_value(v) for v in row) for row in pred_rows]
    for label, rows, width in (("gold", gold, m), ("predicted", pred, n)):
        bad = next((i for i, r in enumerate(rows) if len(r) != width), None)
        if bad is not None:
            raise ValueError(f"{label} row {bad} has {len(rows[bad])} values but {width} columns")
    rg, rs = len(gold), len(pred)
    if m == 0 or n == 0 or rg == 0 or rs == 0:
        # no cell to compare: two empty results agree as far as their widths do
        if rg == rs == 0 and m and n:
            sim = min(m, n) / max(m, n)
        elif m == n == 0 and rg == rs:
            sim = 1.0
        else:
            sim = 0.0
        return RexMatch(
            similarity=sim,
            matched_cells=0,
            column_matches=[0] * m,
            gold_rows=rg,
            gold_columns=m,
            pred_rows=rs,
            pred_columns=n,
            ordered=ordered,
        )
    rex = _Rex(gold_columns, gold, pred_columns, pred, ordered, CellComparer(tolerance, tolerance))
    return rex.run()


class _Rex:
    def __init__(
        self,
        gold_columns: Sequence[str],
        gold: list[tuple[Any, ...]],
        pred_columns: Sequence[str],
        pred: list[tuple[Any, ...]],
        ordered: bool,
        cmp: CellComparer,
    ) -> None:
        self.gold, self.pred, self.ordered, self.cmp = gold, pred, ordered, cmp
        self.m, self.n = len(gold_columns), len(pred_columns)
        self.rg, self.rs = len(gold), len(pred)
        self.gcols = [[r[c] for r in gold] for c in range(self.m)]
        self.scols = [[r[c] for r in pred] for c in range(self.n)]
        self.names = name_pairs(gold_columns, pred_columns)
        self._overlap: dict[tuple[int, int], int] = {}

    # -- columns -----------------------------------------------------------------------------------
    def overlap(self, g: int, s: int) -> int:
        """Values gold column g and predicted column s share: element-wise under a strict order, as
        multisets under a loose one."""
        key = (g, s)
        if key not in self._overlap:
            a, b = self.gcols[g], self.scols[s]
            if self.ordered:
                self._overlap[key] = sum(1 for x, y in zip(a, b, strict=False) if self.cmp.cells(x, y))
            else:
                self._overlap[key] = multiset_overlap(a, b, self.cmp)
        return self._overlap[key]

    def run(self) -> RexMatch:
        rest_g = [g for g in range(self.m) if g not in self.names]
        used = set(self.names.values())
        rest_s = [s for s in range(self.n) if s not in used]
        k = min(len(rest_g), len(rest_s))
        maps = math.perm(max(len(rest_g), len(rest_s)), k) if k else 0
        if not self.ordered and not self.names and k and maps <= EXHAUSTIVE_MAPS:
            mapping, cells, pairs, keys, per_col = self.exhaustive(rest_g, rest_s)
            exhaustive = True
        else:
            mapping = dict(self.names)
            if k:
                weights = [[self.overlap(g, s) for s in rest_s] for g in rest_g]
                tie_break = not self.ordered and len(rest_g) * len(rest_s) <= TIE_BREAK_CELLS
                for gi, si in assign(weights, tie_break).items():
                    mapping[rest_g[gi]] = rest_s[si]
            cells, pairs, keys, per_col = self.align(mapping)
            exhaustive = False
        sim = cells / (max(self.m, self.n) * max(self.rg, self.rs))
        return RexMatch(
            similarity=sim,
            matched_cells=cells,
            column_mapping=dict(sorted(mapping.items())),
            by_name=sorted(self.names),
            row_pairs=pairs,
            key_columns=keys,
            column_matches=per_col,
            exhaustive=exhaustive,
            gold_rows=self.rg,
            gold_columns=self.m,
            pred_rows=self.rs,
            pred_columns=self.n,
            ordered=self.ordered,
        )

    def exhaustive(
        self, rest_g: list[int], rest_s: list[int]
    ) -> tuple[dict[int, int], int, list[tuple[int, int]], list[int], list[int]]:
        """Every assignment of the gold columns to predicted ones, best bound first; stops when no
        assignment left can beat the best score (a column's matches never exceed its overlap)."""
        candidates = []
        for mapping in _injective_maps(rest_g, rest_s):
            bound = sum(self.overlap(g, s) for g, s in mapping.items())
            candidates.append((bound, mapping))
        candidates.sort(key=lambda c: -c[0])  # stable: ties keep the enumeration order
        best: tuple[dict[int, int], int, list[tuple[int, int]], list[int], list[int]] | None = None
        for bound, mapping in candidates:
            if best is not None and bound <= best[1]:
                break
            cells, pairs, keys, per_col = self.align(mapping)
            if best is None or cells > best[1]:
                best = (mapping, cells, pairs, keys, per_col)
        assert best is not None
        return best

    # -- rows --------------------------------------------------------------------------------------
    def align(self, mapping: dict[int, int]) -> tuple[int, list[tuple[int, int]], list[int], list[int]]:
        """(matched cells, row pairs, key columns, matches per gold column) under a column mapping."""
        cols = sorted(mapping)
        if self.ordered:
            pairs = [(i, i) for i in range(min(self.rg, self.rs))]
            keys: list[int] = []
        else:
            keys = self.key_columns(mapping) if self.m > KEY_COLUMNS_ABOVE else []
            pairs = self.loose_pairs(mapping, cols, keys)
        per_col = [0] * self.m
        cells = 0
        for g in cols:
            s = mapping[g]
            hits = sum(1 for i, j in pairs if self.cmp.cells(self.gold[i][g], self.pred[j][s]))
            per_col[g] = hits
            cells += hits
        return cells, pairs, keys, per_col

    def key_columns(self, mapping: dict[int, int]) -> list[int]:
        usable = [g for g in sorted(mapping) if self.overlap(g, mapping[g]) > 0]
        if not usable:
            return []
        ranked = sorted(
            usable, key=lambda g: (_fractional(self.gcols[g]), -len({group_key(v) for v in self.gcols[g]}), g)
        )
        first = ranked[0]
        unique = len({group_key(v) for v in self.gcols[first]}) == self.rg
        return ranked[:1] if unique or len(ranked) == 1 else ranked[:2]

    def loose_pairs(self, mapping: dict[int, int], cols: list[int], keys: list[int]) -> list[tuple[int, int]]:
        """Gold rows paired with predicted rows to match the most cells (rows agreeing on `keys`)."""
        if not cols:
            return []
        gold_groups: dict[tuple[Any, ...], list[int]] = defaultdict(list)
        pred_groups: dict[tuple[Any, ...], list[int]] = defaultdict(list)
        for i, row in enumerate(self.gold):
            gold_groups[tuple(group_key(row[g]) for g in keys)].append(i)
        for j, row in enumerate(self.pred):
            pred_groups[tuple(group_key(row[mapping[g]]) for g in keys)].append(j)
        pairs: list[tuple[int, int]] = []
        for key, gi in gold_groups.items():
            sj = pred_groups.get(key)
            if sj:
                pairs += self.pair_group(mapping, cols, gi, sj)
        pairs.sort()
        return pairs

    def pair_group(
        self, mapping: dict[int, int], cols: list[int], gi: list[int], sj: list[int]
    ) -> list[tuple[int, int]]:
        # Identical rows first: pairing them is part of some best assignment (a row equal to its
        # partner in every cell gives up nothing by taking it), and it is linear time.
        waiting: dict[tuple[Any, ...], list[int]] = defaultdict(list)
        for j in sj:
            waiting[tuple(self.pred[j][mapping[g]] for g in cols)].append(j)
        pairs: list[tuple[int, int]] = []
        left_g: list[int] = []
        for i in gi:
            bucket = waiting.get(tuple(self.gold[i][g] for g in cols))
            if bucket:
                pairs.append((i, bucket.pop(0)))
            else:
                left_g.append(i)
        left_s = sorted(j for bucket in waiting.values() for j in bucket)
        if not left_g or not left_s:
            return pairs
        if len(left_g) * len(left_s) > MAX_PAIRS:
            # too many to score pair by pair: sorted order pairs the closest rows well enough
            def order(rows: list[tuple[Any, ...]], idx: list[int], cs: list[int]) -> list[int]:
                return sorted(idx, key=lambda r: tuple(cell_sort_key(rows[r][c]) for c in cs))

            a = order(self.gold, left_g, cols)
            b = order(self.pred, left_s, [mapping[g] for g in cols])
            return pairs + list(zip(a, b, strict=False))
        weights = [
            [
                sum(1 for g in cols if self.cmp.cells(self.gold[i][g], self.pred[j][mapping[g]]))
                for j in left_s
            ]
            for i in left_g
        ]
        for a_idx, b_idx in assign(weights, tie_break=False).items():
            if weights[a_idx][b_idx] > 0:
                pairs.append((left_g[a_idx], left_s[b_idx]))
        return pairs


# -- pieces ----------------------------------------------------------------------------------------


def _norm_name(name: str) -> str:
    return str(name).strip().casefold()


def name_pairs(gold_columns: Sequence[str], pred_columns: Sequence[str]) -> dict[int, int]:
    """Gold column -> predicted column for names found once on each side."""
    gold_names = Counter(_norm_name(c) for c in gold_columns)
    pred_names = Counter(_norm_name(c) for c in pred_columns)
    where = {_norm_name(c): j for j, c in enumerate(pred_columns)}
    return {
        i: where[_norm_name(c)]
        for i, c in enumerate(gold_columns)
        if gold_names[_norm_name(c)] == 1 and pred_names.get(_norm_name(c)) == 1
    }


def _injective_maps(rest_g: list[int], rest_s: list[int]) -> list[dict[int, int]]:
    """Every assignment of min(|rest_g|, |rest_s|) gold columns to distinct predicted columns."""
    if len(rest_g) <= len(rest_s):
        return [dict(zip(rest_g, perm, strict=True)) for perm in itertools.permutations(rest_s, len(rest_g))]
    return [dict(zip(perm, rest_s, strict=True)) for perm in itertools.permutations(rest_g, len(rest_s))]


def multiset_overlap(a: Sequence[Any], b: Sequence[Any], cmp: CellComparer) -> int:
    """How many values two columns share as multisets: equal values first, then the numbers left
    paired in sorted order under the tolerance."""
    ca, cb = Counter(a), Counter(b)
    common = ca & cb
    shared = sum(common.values())
    rest_a = sorted((v for v in (ca - common).elements() if _number(v)), key=float)
    rest_b = sorted((v for v in (cb - common).elements() if _number(v)), key=float)
    i = j = 0
    while i < len(rest_a) and j < len(rest_b):
        if cmp.cells(rest_a[i], rest_b[j]):
            shared += 1
            i += 1
            j += 1
        elif float(rest_a[i]) < float(rest_b[j]):
            i += 1
        else:
            j += 1
    return shared


def _number(v: Any) -> bool:
    t = type(v)
    return t is int or t is float or t is Fraction


def _fractional(values: Sequence[Any]) -> bool:
    """A column of measurements (some float with a fraction) rather than of identifiers."""
    return any(type(v) is float and not v.is_integer() for v in values)


def group_key(v: Any) -> tuple[Any, ...]:
    """The value rows are grouped by on a key column: numbers by their value (1 and 1.0 alike;
    fractions to 9 significant digits), anything else as it is."""
    if v is None:
        return (0,)
    if _number(v):
        f = float(v)
        if math.isfinite(f) and f == int(f) and (type(v) is not float or abs(f) < 2**53):
            return (1, int(v) if type(v) is int else int(f))
        return (1, float(f"{f:.9g}"))
    return (2, type(v).__name__, v)


def assign(weights: list[list[int]], tie_break: bool) -> dict[int, int]:
    """Row index -> column index maximising the total weight (min(rows, columns) pairs). With
    `tie_break`, the lexicographically smallest best assignment: each row in turn takes the leftmost
    column (or none, when rows outnumber columns) that still allows the best total."""
    import numpy as np
    from scipy.optimize import linear_sum_assignment

    rows = len(weights)
    cols = len(weights[0]) if rows else 0
    if not rows or not cols:
        return {}
    w = np.asarray(weights, dtype=float)
    r, c = linear_sum_assignment(w, maximize=True)
    if not tie_break:
        return {int(i): int(j) for i, j in zip(r, c, strict=True)}
    best = float(w[r, c].sum())
    k = min(rows, cols)

    def rest_value(free_rows: list[int], free_cols: list[int]) -> float:
        if not free_rows or not free_cols:
            return 0.0
        sub = w[np.ix_(free_rows, free_cols)]
        rr, cc = linear_sum_assignment(sub, maximize=True)
        return float(sub[rr, cc].sum())

    chosen: dict[int, int] = {}
    so_far = 0.0
    free_cols = list(range(cols))
    for g in range(rows):
        later = list(range(g + 1, rows))
        options: list[int | None] = [*free_cols, None]
        for s in options:
            assigned = len(chosen) + (s is not None)
            remaining = [x for x in free_cols if x != s]
            needed = k - assigned
            if needed < 0 or needed > min(len(later), len(remaining)):
                continue
            gain = float(w[g, s]) if s is not None else 0.0
            if so_far + gain + rest_value(later, remaining) == best:
                if s is not None:
                    chosen[g] = s
                    free_cols = remaining
                    so_far += gain
                break
    return chosen


# -- the scorer ------------------------------------------------------------------------------------


def score_rex(
    pred_columns: Sequence[str],
    pred_rows: Sequence[Sequence[Any]],
    golds: Sequence[GoldTable] | None = None,
    *,
    gold_tables: Sequence[tuple[str, Sequence[str], Sequence[Sequence[Any]], bool]] | None = None,
) -> Verdict:
    """The `rex` verdict: the best similarity over the gold tables (CSV variants as `golds`, or raw
    engine results as `gold_tables`: name, columns, rows, ordered); `score` is 1 iff it is 1.0."""
    return rex_verdict(pred_columns, pred_rows, golds or [], gold_tables or [])[0]


def rex_verdict(
    pred_columns: Sequence[str],
    pred_rows: Sequence[Sequence[Any]],
    golds: Sequence[GoldTable],
    gold_tables: Sequence[tuple[str, Sequence[str], Sequence[Sequence[Any]], bool]],
) -> tuple[Verdict, tuple[RexMatch, Sequence[str], Sequence[Sequence[Any]]] | None]:
    """`score_rex`, with the best match and its gold table (columns, rows) for a side-by-side view.
    Raw engine results, when given, are the gold; else the CSV tables."""
    tables: list[tuple[str, Sequence[str], Sequence[Sequence[Any]], bool]] = list(gold_tables)
    if not tables:
        tables = [(g.name, frame_columns(g.frame), g.rows(None), g.ordered) for g in golds]
    if not tables:
        verdict = Verdict(
            scorer="rex", score=0, similarity=0.0, reason="no gold table for this task", category="no_gold"
        )
        return verdict, None
    best: tuple[str, RexMatch, Sequence[str], Sequence[Sequence[Any]]] | None = None
    for name, columns, rows, ordered in tables:
        match = rex_match(columns, rows, pred_columns, pred_rows, ordered=ordered)
        if best is None or match.similarity > best[1].similarity:
            best = (name, match, columns, rows)
        if match.equivalent:
            break
    assert best is not None
    name, match, columns, rows = best
    reason = explain(match, columns, pred_columns)
    category = PASS if match.equivalent else _category(match, columns, rows, pred_columns, pred_rows)
    verdict = Verdict(
        scorer="rex",
        score=int(match.equivalent),
        similarity=match.similarity,
        reason=f"{name}: {reason}" if len(tables) > 1 else reason,
        category=category,
        variant=name,
    )
    return verdict, (match, columns, rows)


def explain(match: RexMatch, gold_columns: Sequence[str], pred_columns: Sequence[str]) -> str:
    """The similarity and what took it below 1, in words."""
    m, n, rg, rs = match.gold_columns, match.pred_columns, match.gold_rows, match.pred_rows
    content = len(match.column_mapping) - len(match.by_name)
    how = f"columns paired: {len(match.by_name)} by name, {content} by content"
    rows = "rows in order" if match.ordered else "rows as a multiset"
    if match.key_columns:
        rows += " aligned on " + ", ".join(repr(str(gold_columns[g])) for g in match.key_columns)
    if match.equivalent:
        return f"similarity 1: every cell matched ({how}; {rows})"
    notes = []
    if n > m:
        notes.append(f"{n - m} extra predicted column(s) (x{m / n:.3g})")
    if rs != rg:
        notes.append(
            f"{rs} predicted rows vs {rg} gold (x{min(rg, rs) / max(rg, rs):.3g})"
            if rg and rs
            else f"{rs} predicted rows vs {rg} gold"
        )
    missing = [g for g in range(m) if g not in match.column_mapping]
    if missing:
        notes.append(
            "gold column(s) with no predicted column: "
            + ", ".join(repr(str(gold_columns[g])) for g in missing[:4])
        )
    rates = match.column_rates()
    weak = sorted((r, g) for g, r in enumerate(rates) if g in match.column_mapping and r < 1.0)
    for _rate, g in weak[:3]:
        notes.append(
            f"gold column {str(gold_columns[g])!r} ~ predicted {str(pred_columns[match.column_mapping[g]])!r} "
            f"matched in {match.column_matches[g]} of {rg} rows"
        )
    total = max(m, n) * max(rg, rs)
    head = f"similarity {match.similarity:.4g}: {match.matched_cells} of {total} cells matched"
    return head + (f" ({how}; {rows})" if m and n else "") + (": " + "; ".join(notes) if notes else "")


def _category(
    match: RexMatch,
    gold_columns: Sequence[str],
    gold_rows: Sequence[Sequence[Any]],
    pred_columns: Sequence[str],
    pred_rows: Sequence[Sequence[Any]],
) -> str:
    if match.gold_columns != match.pred_columns:
        return "column_count"
    if match.gold_rows != match.pred_rows:
        return "row_count"
    if (
        match.ordered
        and rex_match(gold_columns, gold_rows, pred_columns, pred_rows, ordered=False).equivalent
    ):
        return "order"
    if any(c == 0 for c in match.column_matches):
        return "column_values"
    return "rows"
