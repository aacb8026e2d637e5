"""The `rex` scorer (evals/rex.py): each rule of docs/scoring.md on a small case, and agreement with
a reference written here from the rules alone — brute force over column assignments and an exact
best row pairing by dynamic programming over subsets — on 240 generated cases (permutations, renames,
duplicates, extra and missing rows and columns, changed cells, float noise, > 4 columns unordered)."""

from __future__ import annotations

import functools
import itertools
import math
import random
from collections import Counter
from typing import Any

import pytest

from flexsql.evals.rex import EXHAUSTIVE_MAPS, rex_match, score_rex
from flexsql.evals.scoring import GoldTable, frame_from_result


def sim(gc, gr, pc, pr, ordered=False) -> float:
    return rex_match(gc, gr, pc, pr, ordered=ordered).similarity


# -- each rule --------------------------------------------------------------------------------------


def test_identical_results_are_equivalent_and_anything_less_is_not() -> None:
    rows = [(1, "a"), (2, "b"), (3, None)]
    assert sim(["id", "name"], rows, ["id", "name"], rows) == 1.0
    match = rex_match(["id", "name"], rows, ["id", "name"], [(1, "a"), (2, "b"), (3, "c")], ordered=False)
    assert match.similarity == pytest.approx(5 / 6) and not match.equivalent


def test_loose_order_ignores_row_order_and_strict_order_compares_row_by_row() -> None:
    gold = [(1, "a"), (2, "b"), (3, "c")]
    shuffled = [(3, "c"), (1, "a"), (2, "b")]
    assert sim(["n", "s"], gold, ["n", "s"], shuffled, ordered=False) == 1.0
    assert sim(["n", "s"], gold, ["n", "s"], shuffled, ordered=True) == 0.0
    # one swap in an ordered result: the two swapped rows miss, the third matches
    assert sim(["n"], [(1,), (2,), (3,)], ["n"], [(2,), (1,), (3,)], ordered=True) == pytest.approx(1 / 3)


def test_shared_names_pair_columns_element_wise_even_when_content_would_pair_them_otherwise() -> None:
    # `ex` passes this (names never matter to it); REX pairs a with a and b with b, which differ
    gold = [(1, 10), (2, 20)]
    assert sim(["a", "b"], gold, ["b", "a"], gold) == 0.0
    # names compare without case and surrounding spaces
    assert sim(["Name "], [("x",)], [" name"], [("x",)]) == 1.0


def test_renamed_and_permuted_columns_are_paired_by_content() -> None:
    gold = [(1, "x", 2.5), (2, "y", 3.5)]
    pred = [("y", 3.5, 2), ("x", 2.5, 1)]
    match = rex_match(["id", "name", "score"], gold, ["n", "v", "k"], pred, ordered=False)
    assert match.similarity == 1.0 and match.column_mapping == {0: 2, 1: 0, 2: 1}


def test_a_name_found_twice_on_one_side_is_paired_by_content() -> None:
    gold = [("ann", "bob")]
    pred = [("bob", "ann")]
    # gold has `name` twice: neither is paired by name, so content decides
    assert sim(["name", "name"], gold, ["name", "other"], pred) == 1.0


def test_extra_predicted_columns_cost_the_column_ratio() -> None:
    gold = [(1,), (2,)]
    assert sim(["n"], gold, ["n", "x", "y"], [(1, 0, 0), (2, 0, 0)]) == pytest.approx(1 / 3)


def test_missing_columns_score_zero_for_those_columns() -> None:
    assert sim(["a", "b"], [(1, 2)], ["a"], [(1,)]) == pytest.approx(1 / 2)


def test_extra_and_missing_rows_cost_the_row_ratio() -> None:
    gold = [(1,), (2,)]
    assert sim(["n"], gold, ["n"], [(1,), (2,), (3,), (4,)]) == pytest.approx(2 / 4)
    assert sim(["n"], [(1,), (2,), (3,), (4,)], ["n"], gold) == pytest.approx(2 / 4)


def test_duplicates_count() -> None:
    # a predicted row serves one gold row: the second copy of (1, 'a') finds no partner
    assert sim(["n", "s"], [(1, "a"), (1, "a")], ["n", "s"], [(1, "a"), (2, "b")]) == pytest.approx(2 / 4)
    assert sim(["n"], [(1,)], ["n"], [(1,), (1,)]) == pytest.approx(1 / 2)


def test_rows_pair_to_match_the_most_cells() -> None:
    # (2, 'b') pairs with (2, 'z'): one cell of two; scrambled rows are not a pass
    assert sim(["n", "s"], [(1, "a"), (2, "b")], ["n", "s"], [(1, "a"), (2, "z")]) == pytest.approx(3 / 4)
    assert sim(["n", "s"], [(1, "a"), (2, "b")], ["n", "s"], [(1, "b"), (2, "a")]) == pytest.approx(2 / 4)


def test_more_than_four_columns_align_rows_on_the_highest_cardinality_gold_column() -> None:
    cols = ["id", "a", "b", "c", "d"]
    gold = [(1, 0, 0, 0, 0), (2, 5, 5, 5, 5)]
    # the second predicted row has the wrong key: it may not pair with gold row 2, though its other
    # four cells are right; with four columns or fewer the assignment would pair them
    pred = [(1, 0, 0, 0, 0), (3, 5, 5, 5, 5)]
    match = rex_match(cols, gold, cols, pred, ordered=False)
    assert match.key_columns == [0] and match.similarity == pytest.approx(5 / 10)
    narrow = rex_match(cols[:4], [r[:4] for r in gold], cols[:4], [r[:4] for r in pred], ordered=False)
    assert narrow.key_columns == [] and narrow.similarity == pytest.approx(7 / 8)


def test_two_key_columns_when_the_first_is_not_unique_and_fractional_floats_are_no_key() -> None:
    cols = ["ratio", "region", "year", "x", "y"]
    gold = [(0.25, "n", 2020, 1, 1), (0.5, "n", 2021, 1, 1), (0.75, "s", 2020, 1, 1), (1.25, "s", 2021, 1, 1)]
    match = rex_match(cols, gold, cols, list(reversed(gold)), ordered=False)
    # `ratio` has the most distinct values but holds fractions; `region` and `year` are not unique
    assert match.similarity == 1.0 and match.key_columns == [1, 2]


def test_without_shared_names_column_assignments_are_searched_exhaustively() -> None:
    # Both predicted columns hold the gold values as multisets; only one pairing lines the rows up.
    gold = [(1, 1), (2, 2), (3, 1)]
    pred = [(1, 1), (2, 2), (1, 3)]
    match = rex_match(["a", "b"], gold, ["x", "y"], pred, ordered=False)
    assert match.exhaustive and match.similarity == 1.0 and match.column_mapping == {0: 1, 1: 0}


def test_values_null_only_equals_null_and_floats_within_a_billionth() -> None:
    assert sim(["n"], [(None,)], ["n"], [(0,)]) == 0.0
    assert sim(["n"], [(None,)], ["n"], [(float("nan"),)]) == 1.0
    assert sim(["n"], [(0.1 + 0.2,)], ["n"], [(0.3,)]) == 1.0
    assert sim(["n"], [(1.0,)], ["n"], [(1.001,)]) == 0.0
    assert sim(["n"], [(2,)], ["n"], [(2.0,)]) == 1.0  # an int and an integral float


def test_empty_results() -> None:
    assert sim(["n"], [], ["n"], []) == 1.0
    assert sim(["n"], [], ["n", "m"], []) == pytest.approx(1 / 2)
    assert sim(["n"], [], ["n"], [(1,)]) == 0.0
    assert sim(["n"], [(1,)], ["n"], []) == 0.0


def test_verdict_takes_the_best_gold_variant_and_explains_the_shortfall() -> None:
    a = GoldTable(name="t_a", frame=frame_from_result(["n"], [(1,), (2,)]))
    b = GoldTable(name="t_b", frame=frame_from_result(["n"], [(1,), (3,)]))
    verdict = score_rex(["n"], [(1,), (3,), (4,)], [a, b])
    assert verdict.scorer == "rex" and verdict.score == 0 and verdict.variant == "t_b"
    assert verdict.similarity == pytest.approx(2 / 3) and verdict.category == "row_count"
    assert "3 predicted rows vs 2 gold" in verdict.reason
    ok = score_rex(["n"], [(2,), (1,)], [a, b])
    assert ok.score == 1 and ok.similarity == 1.0 and ok.category == "pass" and ok.variant == "t_a"


def test_an_ordered_result_in_the_wrong_order_is_categorised_as_order() -> None:
    verdict = score_rex(["n"], [(2,), (1,)], gold_tables=[("gold SQL", ["n"], [(1,), (2,)], True)])
    assert verdict.score == 0 and verdict.category == "order"


# -- the reference ----------------------------------------------------------------------------------
#
# Written from docs/scoring.md's statement of REX, sharing no code with evals/rex.py: values and
# equality restated for the kinds the cases use (ints, floats, text, NULL), column assignments
# enumerated, multisets matched by augmenting paths, rows paired by an exact dynamic programme.


def _norm(v: Any) -> Any:
    if isinstance(v, float) and v != v:
        return None
    return v


def _eq(x: Any, y: Any) -> bool:
    if x is None or y is None:
        return x is None and y is None
    nx, ny = isinstance(x, int | float), isinstance(y, int | float)
    if nx and ny:
        if isinstance(x, int) and isinstance(y, int):
            return x == y
        return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9)
    if nx or ny:
        return False
    return x == y


def _bag_overlap(a: list[Any], b: list[Any]) -> int:
    match_of_b: dict[int, int] = {}

    def grow(i: int, seen: set[int]) -> bool:
        for j in range(len(b)):
            if j not in seen and _eq(a[i], b[j]):
                seen.add(j)
                if j not in match_of_b or grow(match_of_b[j], seen):
                    match_of_b[j] = i
                    return True
        return False

    return sum(grow(i, set()) for i in range(len(a)))


def _gkey(v: Any) -> tuple[Any, ...]:
    if v is None:
        return ("null",)
    if isinstance(v, int | float):
        if float(v).is_integer():
            return ("num", int(v))
        return ("num", float(f"{v:.9g}"))
    return ("text", v)


def reference(gc: list[str], gr: list[tuple], pc: list[str], pr: list[tuple], ordered: bool) -> float:
    gr = [tuple(_norm(v) for v in r) for r in gr]
    pr = [tuple(_norm(v) for v in r) for r in pr]
    m, n, rg, rs = len(gc), len(pc), len(gr), len(pr)
    if rg == 0 or rs == 0:
        return min(m, n) / max(m, n) if rg == rs == 0 else 0.0
    gnames = Counter(c.strip().casefold() for c in gc)
    pnames = Counter(c.strip().casefold() for c in pc)
    named = {
        i: [c.strip().casefold() for c in pc].index(c.strip().casefold())
        for i, c in enumerate(gc)
        if gnames[c.strip().casefold()] == 1 and pnames[c.strip().casefold()] == 1
    }
    rest_g = [g for g in range(m) if g not in named]
    rest_s = [s for s in range(n) if s not in named.values()]
    gcol = [[r[c] for r in gr] for c in range(m)]
    scol = [[r[c] for r in pr] for c in range(n)]

    def overlap(g: int, s: int) -> int:
        if ordered:
            return sum(_eq(x, y) for x, y in zip(gcol[g], scol[s], strict=False))
        return _bag_overlap(gcol[g], scol[s])

    def cells(mapping: dict[int, int]) -> int:
        cols = sorted(mapping)
        if not cols:
            return 0
        if ordered:
            return sum(_eq(gr[i][g], pr[i][mapping[g]]) for g in cols for i in range(min(rg, rs)))
        keys: list[int] = []
        if m > 4:
            usable = [g for g in cols if overlap(g, mapping[g]) > 0]

            def fractional(g: int) -> bool:
                return any(isinstance(v, float) and not v.is_integer() for v in gcol[g])

            ranked = sorted(usable, key=lambda g: (fractional(g), -len({_gkey(v) for v in gcol[g]}), g))
            if ranked:
                unique = len({_gkey(v) for v in gcol[ranked[0]]}) == rg
                keys = ranked[:1] if unique else ranked[:2]

        def weight(i: int, j: int) -> int:
            if any(_gkey(gr[i][g]) != _gkey(pr[j][mapping[g]]) for g in keys):
                return 0
            return sum(_eq(gr[i][g], pr[j][mapping[g]]) for g in cols)

        @functools.cache
        def best(i: int, used: int) -> int:
            if i == rg:
                return 0
            out = best(i + 1, used)  # gold row i left unpaired
            for j in range(rs):
                if not used & (1 << j):
                    out = max(out, weight(i, j) + best(i + 1, used | (1 << j)))
            return out

        return best(0, 0)

    k = min(len(rest_g), len(rest_s))

    @functools.cache
    def all_maps() -> list[dict[int, int]]:
        """Every injective map of k gold columns to k predicted columns."""
        out = []
        for gs in itertools.combinations(rest_g, k):
            for ss in itertools.permutations(rest_s, k):
                out.append(dict(zip(gs, ss, strict=True)))
        return out

    def maps() -> list[dict[int, int]]:
        return all_maps()

    if not ordered and not named and k and math.perm(max(len(rest_g), len(rest_s)), k) <= EXHAUSTIVE_MAPS:
        total = max(cells(mp) for mp in maps())
    else:
        chosen: dict[int, int] = {}
        if k:

            def lex(mp: dict[int, int]) -> tuple[int, ...]:
                return tuple(rest_s.index(mp[g]) if g in mp else len(rest_s) for g in rest_g)

            best_sum = max(sum(overlap(g, s) for g, s in mp.items()) for mp in maps())
            chosen = min(
                (mp for mp in maps() if sum(overlap(g, s) for g, s in mp.items()) == best_sum), key=lex
            )
        total = cells({**named, **chosen})
    return total / (max(m, n) * max(rg, rs))


# -- generated cases --------------------------------------------------------------------------------

WORDS = ["ann", "bob", "cy", "dee", "eve", "fay"]


def _column(rng: random.Random, kind: str, rows: int) -> list[Any]:
    if kind == "id":
        return rng.sample(range(1, 100), rows)
    if kind == "small":
        return [rng.randint(0, 2) for _ in range(rows)]
    if kind == "text":
        return [rng.choice(WORDS) for _ in range(rows)]
    if kind == "float":  # quarters: far apart next to the noise added below
        return [rng.randint(0, 12) / 4 + 0.25 * rng.randint(0, 1) for _ in range(rows)]
    return [rng.choice([None, 1, "x"]) for _ in range(rows)]


def _perturb(rng: random.Random, cols: list[str], rows: list[list[Any]], op: str) -> tuple[list[str], list]:
    cols, rows = list(cols), [list(r) for r in rows]
    width = len(cols)
    if op == "shuffle_rows":
        rng.shuffle(rows)
    elif op == "permute_columns":
        order = list(range(width))
        rng.shuffle(order)
        cols = [cols[i] for i in order]
        rows = [[r[i] for i in order] for r in rows]
    elif op == "rename_some":
        for i in rng.sample(range(width), max(1, width // 2)):
            cols[i] = f"renamed_{i}"
    elif op == "rename_all":
        cols = [f"x{i}" for i in range(width)]
    elif op == "duplicate_row" and rows:
        rows.insert(rng.randrange(len(rows) + 1), list(rng.choice(rows)))
    elif op == "drop_row" and rows:
        rows.pop(rng.randrange(len(rows)))
    elif op == "extra_row":
        rows.append([rng.choice([7, "zz", None, 9.5]) for _ in range(width)])
    elif op == "extra_column":
        at = rng.randrange(width + 1)
        cols.insert(at, "extra")
        for r in rows:
            r.insert(at, rng.choice([0, 1, "q"]))
    elif op == "drop_column" and width > 1:
        at = rng.randrange(width)
        cols.pop(at)
        rows = [r[:at] + r[at + 1 :] for r in rows]
    elif op == "change_cell" and rows:
        r = rng.choice(rows)
        r[rng.randrange(width)] = rng.choice([42, "changed", None, 8.75])
    elif op == "float_noise":
        rows = [[v + 1e-12 if isinstance(v, float) else v for v in r] for r in rows]
    elif op == "swap_names" and width > 1:  # two columns trade names, their values stay
        i, j = rng.sample(range(width), 2)
        cols[i], cols[j] = cols[j], cols[i]
    elif op == "scramble_column" and len(rows) > 1:
        at = rng.randrange(width)
        values = [r[at] for r in rows]
        rng.shuffle(values)
        for r, v in zip(rows, values, strict=True):
            r[at] = v
    return cols, [tuple(r) for r in rows]


OPS = [
    "shuffle_rows",
    "permute_columns",
    "rename_some",
    "rename_all",
    "duplicate_row",
    "drop_row",
    "extra_row",
    "extra_column",
    "drop_column",
    "change_cell",
    "float_noise",
    "scramble_column",
    "swap_names",
]


def generated_cases(count: int = 240, seed: int = 32) -> list[tuple[Any, ...]]:
    rng = random.Random(seed)
    cases = []
    for index in range(count):
        wide = index % 4 == 0  # every fourth case: more than 4 columns
        width = rng.randint(5, 7) if wide else rng.randint(1, 4)
        nrows = rng.randint(1, 6)
        kinds = ["id"] + [rng.choice(["small", "text", "float", "mixed", "id"]) for _ in range(width - 1)]
        rng.shuffle(kinds)
        columns = [_column(rng, k, nrows) for k in kinds]
        if width > 1 and rng.random() < 0.4:  # a twin: another column's values, rows in another order
            twin = list(columns[0])
            rng.shuffle(twin)
            columns[rng.randrange(1, width)] = twin
        gold_cols = [f"c{i}" for i in range(width)]
        gold_rows = [tuple(c[i] for c in columns) for i in range(nrows)]
        ops = rng.sample(OPS, rng.randint(1, 3))
        if width > 1 and rng.random() < 0.15:  # renamed and reordered: content alone pairs columns
            ops = ["rename_all", "permute_columns", *rng.sample(OPS, 1)]
        pred_cols, pred_rows = gold_cols, gold_rows
        for op in ops:
            pred_cols, pred_rows = _perturb(rng, pred_cols, pred_rows, op)
        ordered = not wide and rng.random() < 0.3
        cases.append((gold_cols, gold_rows, pred_cols, pred_rows, ordered, ops))
    return cases


CASES = generated_cases()


def test_the_generated_cases_cover_every_perturbation_and_wide_unordered_tables() -> None:
    ops = Counter(op for case in CASES for op in case[5])
    assert set(ops) == set(OPS) and min(ops.values()) >= 20
    wide_loose = [c for c in CASES if len(c[0]) > 4 and not c[4]]
    assert len(wide_loose) >= 60
    scores = [reference(*c[:5]) for c in CASES[:80]]
    # positive control: the cases are not all trivially equal or all unrelated
    assert sum(s == 1.0 for s in scores) >= 10 and sum(0 < s < 1 for s in scores) >= 30


@pytest.mark.parametrize("index", range(0, len(CASES), 20))
def test_rex_agrees_with_the_reference_on_generated_cases(index: int) -> None:
    for gold_cols, gold_rows, pred_cols, pred_rows, ordered, ops in CASES[index : index + 20]:
        expected = reference(gold_cols, gold_rows, pred_cols, pred_rows, ordered)
        got = rex_match(gold_cols, gold_rows, pred_cols, pred_rows, ordered=ordered)
        assert got.similarity == pytest.approx(expected, abs=1e-12), (
            ops,
            gold_cols,
            gold_rows,
            pred_cols,
            pred_rows,
        )
        assert got.equivalent == (expected == 1.0)


def test_the_reference_catches_a_wrong_rule() -> None:
    """Positive control: a REX that ignored duplicates (rows as sets) would score this 1.0."""
    gold, pred = [(1, "a"), (1, "a")], [(1, "a")]
    assert set(gold) == set(pred)
    assert reference(["n", "s"], gold, ["n", "s"], pred, False) == pytest.approx(2 / 4)
    assert sim(["n", "s"], gold, ["n", "s"], pred) == pytest.approx(2 / 4)
