"""Two folds by database: tune on one half of the databases, check on the other, both ways.

A database's half is fixed by a hash of its name (no choosing), so the questions of one database are
never on both sides: a weight tuned on one half meets the other half's vocabulary for the first time,
as it would on a user's warehouse. Used by warehouse_linking.py and schema_linking.py (`--folds`).

Given per-question results under several configurations (`rows[i]["configs"][name]` holds a question's
gold ranks, or a 0/1 hit), it reports every configuration on each half, and for each group of
alternatives (a rule's settings, off included) the one chosen on the tune half and its figure on the
check half.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

Hit = Callable[[dict[str, Any], str], bool]


def half(db: str) -> int:
    """0 or 1: the database's half, from a hash of its (lower-case) name."""
    return hashlib.sha1(db.lower().encode()).digest()[0] & 1


def rate(rows: Sequence[dict[str, Any]], config: str, hit: Hit) -> float | None:
    return round(sum(hit(r, config) for r in rows) / len(rows), 4) if rows else None


def fold_report(
    rows: Sequence[dict[str, Any]],
    configs: Sequence[str],
    groups: dict[str, Sequence[str]],
    hit: Hit,
    db_key: str = "db",
) -> dict[str, Any]:
    """Per fold (tune half, check half): every configuration's figure on both halves, and per group the
    configuration the tune half picks (ties: the first listed) with its check figure."""
    halves = [[r for r in rows if half(r[db_key]) == h] for h in (0, 1)]
    out: dict[str, Any] = {
        "halves": [{"databases": len({r[db_key] for r in part}), "questions": len(part)} for part in halves],
        "folds": [],
    }
    for tune in (0, 1):
        check = 1 - tune
        fold: dict[str, Any] = {"tune_half": tune, "check_half": check, "configs": {}, "chosen": {}}
        for name in configs:
            fold["configs"][name] = {
                "tune": rate(halves[tune], name, hit),
                "check": rate(halves[check], name, hit),
            }
        for group, options in groups.items():
            best = max(options, key=lambda o: (fold["configs"][o]["tune"] or 0.0, -list(options).index(o)))
            fold["chosen"][group] = {"config": best, **fold["configs"][best]}
        out["folds"].append(fold)
    return out


def print_folds(
    rep: dict[str, Any], metric: str, baselines: Sequence[str], groups: dict[str, Sequence[str]]
) -> None:
    h0, h1 = rep["halves"]
    print(
        f"folds by database ({metric}): half 0 = {h0['databases']} databases, {h0['questions']} questions; "
        f"half 1 = {h1['databases']} databases, {h1['questions']} questions"
    )
    f1, f2 = rep["folds"]
    print(f"{'configuration':<44} {'half0':>7} {'half1':>7}")
    for name in f1["configs"]:
        a, b = f1["configs"][name]["tune"], f1["configs"][name]["check"]
        mark = " (baseline)" if name in baselines else ""
        print(f"{name + mark:<44} {_f(a):>7} {_f(b):>7}")
    if groups:
        print(
            f"{'chosen on the tune half':<44} {'fold 1: tune 0 -> check 1':>28} {'fold 2: tune 1 -> check 0':>28}"
        )
        for group in groups:
            c1, c2 = f1["chosen"][group], f2["chosen"][group]
            print(
                f"{group:<44} {c1['config'][-16:]:>16} {_f(c1['tune'])}->{_f(c1['check'])} "
                f"{c2['config'][-16:]:>16} {_f(c2['tune'])}->{_f(c2['check'])}"
            )


def _f(x: float | None) -> str:
    return "  -  " if x is None else f"{x:.3f}"


__all__ = ["fold_report", "half", "print_folds", "rate"]
