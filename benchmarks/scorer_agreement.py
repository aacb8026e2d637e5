"""Agreement of flexsql's `spider2` scorer with the official Spider 2.0 rules, and where
`spider2-strict` disagrees, over perturbations of every local Spider 2.0-lite gold CSV.

For each gold CSV in ../shared/data/spider2-lite/gold/exec_result, predictions are derived from it
(rows shuffled, columns reordered, extra columns, renamed headers, one value changed, float noise
below and above 0.01, NULL vs 0, rows scrambled across columns, duplicate rows, …), written to CSV
and read back the way the evaluator reads them, and scored against the task's whole gold set with
its real condition_cols and with every other condition_cols shape, under the lite and snow flavors.

The reference verdict comes from `official_reference` below: a literal re-statement of the official
evaluate.py logic (the rules docs/scoring.md describes), on pandas DataFrames, written separately
from flexsql.evals.scoring on purpose. Agreement must be 100%.

Usage: python benchmarks/scorer_agreement.py [--gold DIR] [--limit N]
Prints tables; writes benchmarks/results/scorer_agreement.json.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import random
import re
import sys
import time
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import pandas as pd

from flexsql.evals.gold import GoldStore
from flexsql.evals.scoring import GoldTable, score_spider2, score_spider2_strict

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_GOLD = ROOT.parent / "shared" / "data" / "spider2-lite" / "gold"


# -- the official rules, restated literally ---------------------------------------------------------


def _ref_prepare(vector: list, ignore_order: bool) -> list:
    vector = [0 if pd.isna(x) else x for x in vector]
    if ignore_order:
        vector = sorted(vector, key=lambda x: (x is None, str(x), isinstance(x, (int, float))))
    return vector


def _ref_vectors_match(v1: list, v2: list) -> bool:
    if len(v1) != len(v2):
        return False
    for a, b in zip(v1, v2, strict=True):
        if pd.isna(a) and pd.isna(b):
            continue
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            if not math.isclose(float(a), float(b), abs_tol=1e-2):
                return False
        elif a != b:
            return False
    return True


def _ref_compare_table(
    pred: pd.DataFrame, gold: pd.DataFrame, condition: Any, ignore_order: bool, flavor: str
) -> int:
    if flavor == "lite":
        use_condition = bool(condition)
    else:
        use_condition = condition != []
    if use_condition:
        cols = condition if isinstance(condition, list) else [condition]
        gold_cols = gold.iloc[:, cols]
    else:
        gold_cols = gold
    gold_vectors = gold_cols.transpose().values.tolist()
    pred_vectors = pred.transpose().values.tolist()
    # normalising and sorting a vector gives the same list every time, so it is done once per vector
    prepared: dict[int, list] = {}

    def pred_vector(j: int) -> list:
        if j not in prepared:
            prepared[j] = _ref_prepare(pred_vectors[j], ignore_order)
        return prepared[j]

    for gv in gold_vectors:
        gv = _ref_prepare(gv, ignore_order)
        if not any(_ref_vectors_match(gv, pred_vector(j)) for j in range(len(pred_vectors))):
            return 0
    return 1


def official_reference(
    pred: pd.DataFrame, golds: list[pd.DataFrame], condition_cols: Any, ignore_order: bool, flavor: str
) -> int:
    """1 or 0 as the official evaluator decides (an exception inside it scores 0)."""
    try:
        cc = condition_cols
        if cc == [] or cc == [[]] or cc == [None] or cc is None:
            cc = [[] for _ in golds]
        elif len(golds) > 1 and not all(isinstance(x, list) for x in cc):
            cc = [cc for _ in golds]
        for i, gold in enumerate(golds):
            if _ref_compare_table(pred, gold, cc[i], ignore_order, flavor):
                return 1
        return 0
    except Exception:
        return 0


# -- perturbations ------------------------------------------------------------------------------


def _roundtrip(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(frame.to_csv(index=False)))


def _float_cols(frame: pd.DataFrame) -> list[int]:
    return [i for i in range(frame.shape[1]) if pd.api.types.is_float_dtype(frame.dtypes.iloc[i])]


def _numeric_cols(frame: pd.DataFrame) -> list[int]:
    return [
        i
        for i in range(frame.shape[1])
        if pd.api.types.is_numeric_dtype(frame.dtypes.iloc[i])
        and not pd.api.types.is_bool_dtype(frame.dtypes.iloc[i])
    ]


def perturbations(gold: pd.DataFrame, seed: int) -> dict[str, pd.DataFrame]:
    rng = random.Random(seed)
    g = gold.copy()
    n, m = g.shape
    out: dict[str, pd.DataFrame] = {"identical": g.copy()}
    if n > 1:
        order = list(range(n))
        rng.shuffle(order)
        out["rows shuffled"] = g.iloc[order].reset_index(drop=True)
    out["columns reordered"] = g.iloc[:, list(reversed(range(m)))]
    extra = g.copy()
    extra.insert(0, "extra_const", 7)
    extra["extra_text"] = [f"x{i}" for i in range(n)]
    out["extra columns"] = extra
    renamed = g.copy()
    renamed.columns = [f"col_{i}" for i in range(m)]
    out["renamed headers"] = renamed
    if n:
        changed = g.copy().astype(object)
        r, c = rng.randrange(n), rng.randrange(m)
        v = changed.iat[r, c]
        changed.iat[r, c] = (
            (v + 1)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and not pd.isna(v)
            else f"{v}_changed"
        )
        out["one value changed"] = changed
    floats = _float_cols(g)
    if floats and n:
        for label, delta in (("float noise below 0.01", 0.004), ("float noise above 0.01", 0.02)):
            noisy = g.copy()
            for c in floats:
                noisy.isetitem(c, noisy.iloc[:, c] + delta)
            out[label] = noisy
    if g.isna().any().any():
        out["NULL written as 0"] = g.astype(object).fillna(0)
    numerics = _numeric_cols(g)
    zeros = [(r, c) for c in numerics for r in range(n) if g.iat[r, c] == 0]
    if zeros:
        r, c = zeros[0]
        nulled = g.copy()
        column = nulled.iloc[:, c].astype(float)
        column.iloc[r] = float("nan")
        nulled.isetitem(c, column)
        out["0 written as NULL"] = nulled
    if n > 1 and m > 1:
        scrambled = g.copy()
        c = rng.randrange(m)
        values = list(scrambled.iloc[:, c])
        rotated = values[1:] + values[:1]
        if rotated != values:
            scrambled.isetitem(c, pd.Series(rotated, dtype=scrambled.dtypes.iloc[c]).values)
            out["rows scrambled across columns"] = scrambled
    if n:
        out["duplicate row added"] = pd.concat([g, g.iloc[[0]]], ignore_index=True)
    if n > 1:
        out["row dropped"] = g.iloc[1:].reset_index(drop=True)
    if m > 1:
        out["first column dropped"] = g.iloc[:, 1:]
        out["only first column"] = g.iloc[:, :1]
        out["last column twice, first dropped"] = pd.concat([g.iloc[:, 1:], g.iloc[:, [-1]]], axis=1)
    ints = [i for i in numerics if pd.api.types.is_integer_dtype(g.dtypes.iloc[i])]
    if ints:
        as_float = g.copy()
        for c in ints:
            as_float.isetitem(c, as_float.iloc[:, c].astype(float))
        out["ints as floats"] = as_float
    return {k: _roundtrip(v) for k, v in out.items()}


SYNTHETIC_SHAPES: list[tuple[str, Any]] = [
    ("None", None),
    ("[]", []),
    ("[[]]", [[]]),
    ("[None]", [None]),
    ("[0]", [0]),
    ("[1]", [1]),
    ("[0, 1]", [0, 1]),
    ("[1, 0]", [1, 0]),
    ("[-1]", [-1]),
    ("[[0]] (fewer lists)", [[0]]),
    ("[[0], [1], …] per variant", "per-variant"),
    ("[9] out of range", [9]),
]


BIG_TABLE_ROWS = 300
BIG_TABLE_SHAPES = {"[]", "[0]", "[0, 1]", "[[0]] (fewer lists)", "[9] out of range"}


def shapes_for(config_cc: Any, n_variants: int, rows: int) -> list[tuple[str, Any]]:
    """The task's own condition_cols and synthetic ones of every shape (fewer for big tables)."""
    shapes = [("real", config_cc)]
    for name, cc in SYNTHETIC_SHAPES:
        if rows > BIG_TABLE_ROWS and name not in BIG_TABLE_SHAPES:
            continue
        if cc == "per-variant":
            cc = [[i % 2] for i in range(n_variants)]
        shapes.append((name, cc))
    return shapes


def shape_kind(cc: Any, n: int) -> str:
    if cc is None or cc == [] or cc == [[]] or cc == [None]:
        return "empty"
    if all(isinstance(x, list) for x in cc):
        return "lists" + (" (fewer than variants)" if len(cc) < n else "")
    return "flat, one variant" if n == 1 else "flat, several variants"


# -- the run ------------------------------------------------------------------------------------

_STORE: GoldStore | None = None


def _init_worker(gold: Path) -> None:
    global _STORE
    _STORE = GoldStore(gold)


def check_task(task_n: int, instance_id: str) -> dict[str, Any]:
    """Every perturbation x condition shape x flavor for one task (runs in a worker process)."""
    assert _STORE is not None
    started = time.perf_counter()
    tables = _STORE.tables(instance_id)
    config = _STORE.config(instance_id)
    gold_frames = [t.frame for t in tables]
    # one GoldTable per task, so its vectors are computed once (as the harness does per task)
    golds = [GoldTable(name=t.name, frame=t.frame) for t in tables]
    result: dict[str, Any] = {
        "csvs": len(tables),
        "checks": 0,
        "disagreements": [],
        "by_perturbation": defaultdict(Counter),
        "by_shape": defaultdict(Counter),
        "strict_why": Counter(),
        "strict_examples": {},
    }
    for v_index, table in enumerate(tables):
        for label, pred in perturbations(table.frame, seed=task_n * 31 + v_index).items():
            for shape_name, cc in shapes_for(config.condition_cols, len(tables), table.frame.shape[0]):
                strict = score_spider2_strict(pred, golds, cc, config.ignore_order)
                for flavor in ("lite", "snow"):
                    ref = official_reference(pred, gold_frames, cc, config.ignore_order, flavor)
                    ours = score_spider2(pred, golds, cc, config.ignore_order, flavor)
                    result["checks"] += 1
                    agree = ref == ours.score
                    per = result["by_perturbation"][label]
                    per["checks"] += 1
                    per["agree"] += agree
                    shape = result["by_shape"][shape_kind(cc, len(tables))]
                    shape["checks"] += 1
                    shape["agree"] += agree
                    if not agree:
                        result["disagreements"].append(
                            {
                                "task": instance_id,
                                "variant": table.name,
                                "perturbation": label,
                                "condition_cols": cc,
                                "flavor": flavor,
                                "official": ref,
                                "spider2": ours.score,
                                "reason": ours.reason,
                            }
                        )
                    if flavor == "lite" and shape_name == "real":
                        per["official_pass"] += ref
                        per["strict_pass"] += strict.score
                        per["real_checks"] += 1
                        if strict.score != ref:
                            per["strict_differs"] += 1
                            why = _why(label, ref, strict.category, shape_kind(cc, len(tables)))
                            result["strict_why"][why] += 1
                            result["strict_examples"].setdefault(
                                why, f"{instance_id}/{table.name} ({label}): {strict.reason[:160]}"
                            )
    result["seconds"] = time.perf_counter() - started
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gold", type=Path, default=DEFAULT_GOLD)
    parser.add_argument("--limit", type=int, help="only the first N tasks")
    parser.add_argument("--ids", help="only these tasks (comma-separated)")
    parser.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    args = parser.parse_args()
    if not (args.gold / "exec_result").is_dir():
        print(f"gold folder not found: {args.gold} (expects exec_result/ and spider2lite_eval-local.jsonl)")
        return 2
    store = GoldStore(args.gold)
    ids = [i for i in sorted(store.configs) if store.csv_paths(i)]
    if args.ids:
        ids = [i for i in ids if i in set(args.ids.split(","))]
    if args.limit:
        ids = ids[: args.limit]
    started = time.perf_counter()
    csv_count = checks = 0
    disagreements: list[dict[str, Any]] = []
    by_perturbation: dict[str, Counter] = defaultdict(Counter)
    by_shape: dict[str, Counter] = defaultdict(Counter)
    strict_why: Counter = Counter()
    strict_examples: dict[str, str] = {}
    with ProcessPoolExecutor(
        max_workers=args.workers, initializer=_init_worker, initargs=(args.gold,)
    ) as pool:
        futures = {pool.submit(check_task, n, i): i for n, i in enumerate(ids)}
        for future in as_completed(futures):
            r = future.result()
            print(
                f"  {futures[future]}: {r['csvs']} gold CSV(s), {r['checks']} checks, {r['seconds']:.1f} s",
                file=sys.stderr,
                flush=True,
            )
            csv_count += r["csvs"]
            checks += r["checks"]
            disagreements += r["disagreements"]
            for k, c in r["by_perturbation"].items():
                by_perturbation[k].update(c)
            for k, c in r["by_shape"].items():
                by_shape[k].update(c)
            strict_why.update(r["strict_why"])
            for k, v in r["strict_examples"].items():
                strict_examples.setdefault(k, v)
    elapsed = time.perf_counter() - started
    agree_n = checks - len(disagreements)
    print(f"gold CSVs: {csv_count} from {len(ids)} tasks; verdict pairs checked: {checks} in {elapsed:.1f} s")
    print(f"spider2 vs official rules: {agree_n}/{checks} agree ({100.0 * agree_n / max(checks, 1):.3f}%)\n")
    print(
        f"{'perturbation (real condition_cols, lite)':42} {'checks':>7} {'agree':>7} {'official pass':>14} "
        f"{'strict pass':>12} {'strict differs':>15}"
    )
    for label, c in sorted(by_perturbation.items()):
        rc = max(c["real_checks"], 1)
        print(
            f"{label:42} {c['checks']:7} {c['agree']:7} {100 * c['official_pass'] / rc:13.1f}% "
            f"{100 * c['strict_pass'] / rc:11.1f}% {c['strict_differs']:15}"
        )
    print(f"\n{'condition_cols shape':42} {'checks':>7} {'agree':>7}")
    for shape, c in sorted(by_shape.items()):
        print(f"{shape:42} {c['checks']:7} {c['agree']:7}")
    print("\nwhy spider2-strict differs from the official verdict (real condition_cols, lite):")
    for why, count in strict_why.most_common():
        print(f"  {count:5}  {why}")
        print(f"         e.g. {strict_examples[why]}")
    for d in disagreements[:20]:
        print("DISAGREEMENT", d)
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "scorer_agreement.json").write_text(
        json.dumps(
            {
                "gold_csvs": csv_count,
                "tasks": len(ids),
                "checks": checks,
                "agree": agree_n,
                "agreement_pct": 100.0 * agree_n / max(checks, 1),
                "seconds": round(elapsed, 2),
                "by_perturbation": {k: dict(v) for k, v in by_perturbation.items()},
                "by_condition_shape": {k: dict(v) for k, v in by_shape.items()},
                "strict_differs_why": dict(strict_why),
                "strict_examples": strict_examples,
                "disagreements": disagreements[:200],
            },
            indent=2,
            default=str,
        ),
        encoding="utf-8",
    )
    return 0 if not disagreements else 1


def _why(label: str, official: int, category: str, shape: str) -> str:
    direction = "official passes, strict fails" if official else "official fails, strict passes"
    detail = {
        "rows": "rows pair values differently",
        "no_assignment": "one predicted column would serve two gold columns",
        "column_values": "a gold column has no equal predicted column",
        "column_count": "fewer predicted columns than gold columns",
        "row_count": "row count differs",
        "pass": "strict matches",
    }.get(category, category)
    if re.search(r"NULL", label):
        detail += " (NULL vs 0)"
    if shape == "flat, one variant":
        detail += " (condition_cols used as written: the official code keeps only its first index)"
    elif shape == "lists (fewer than variants)":
        detail += " (a variant without condition_cols: the official code fails it)"
    return f"{direction}: {label} → {detail}"


if __name__ == "__main__":
    sys.exit(main())
