"""Join inference on Spider: does find_join_path offer the join conditions the gold SQL uses?

From the gold SQL of Spider train + dev_open, every join condition `A.x = B.y` between two different
tables (aliases resolved with sqlglot, per SELECT scope; JOIN … ON and WHERE alike) is collected once
per database. For each, find_join_path is called with tables [A, B]: is the condition among those it
offers for that pair (its choice or an alternative; a part of a composite condition counts), is it the
first choice, and how many conditions does it offer for the pair. As a check on paths, each pair of
tables a gold SELECT joins only through a third table C ("2-step") is asked too: does the path go
through C with both gold conditions offered. Two settings:

- shown: each database's own SQLite file, with its declared primary and foreign keys;
- hidden: the same data copied once (into the workdir) without any PRIMARY KEY or FOREIGN KEY.

Generalization is measured by database: a hash of the database name (crc32 % 2) puts it in fold 0 or
1. Figures are given per fold. `--tune` searches a small grid (the rules in doubt switched off or on)
on each fold and checks the choice on the other, both ways; `--ablate` switches each rule in doubt
off in turn. The baseline is the code of an earlier revision (`--baseline-rev`, default HEAD:
tools/joins.py read with `git show`), run in the same process on the same data.

    .venv/bin/python benchmarks/join_inference.py [--data ../shared/data/spider] [--workdir DIR]
        [--tune] [--ablate] [--no-values] [--params same_weak=0.3,role=0.85] [--baseline-rev REV|none]

Prints a table and writes benchmarks/results/join_inference.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib.util
import itertools
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
import zlib
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
DEFAULT_DATA = HERE.parent.parent / "shared" / "data" / "spider"

from spider_catalog import quote_name  # noqa: E402
from spider_gold import sqlite_schema  # noqa: E402

Condition = tuple[tuple[str, str], tuple[str, str]]  # ((table, column), (table, column)), lower-case, sorted


# -- gold conditions --------------------------------------------------------------------------------


def conditions_of(sql: str, schema: dict[str, dict[str, str]]) -> list[set[Condition]]:
    """`A.x = B.y` conditions of one gold query between two different tables of the schema, per SELECT."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.optimizer.qualify import qualify
    from sqlglot.optimizer.scope import traverse_scope

    lowered = {t.lower(): {c.lower(): ty for c, ty in cols.items()} for t, cols in schema.items()}
    tree = sqlglot.parse_one(sql, read="sqlite")
    tree = qualify(
        tree,
        schema=lowered,
        dialect="sqlite",
        quote_identifiers=False,
        identify=False,
        validate_qualify_columns=False,
    )
    out: list[set[Condition]] = []
    for scope in traverse_scope(tree):
        found: set[Condition] = set()
        out.append(found)
        for eq in scope.expression.find_all(exp.EQ):
            if eq.find_ancestor(exp.Select) is not scope.expression:
                continue  # a nested SELECT's condition belongs to its own scope
            if not (isinstance(eq.left, exp.Column) and isinstance(eq.right, exp.Column)):
                continue
            ends = []
            for col in (eq.left, eq.right):
                source = scope.sources.get(col.table)
                if isinstance(source, exp.Table) and source.name.lower() in lowered:
                    ends.append((source.name.lower(), col.name.lower()))
            if len(ends) == 2 and ends[0][0] != ends[1][0]:
                a, b = sorted(ends)
                found.add((a, b))
    return out


Chain = tuple[str, tuple[str, str], Condition, Condition]
"""A gold two-step join: (A, B) joined through C — ("C", (A, B), the A–C condition, the C–B condition)."""


def chains_of(scope: set[Condition]) -> set[Chain]:
    """Pairs of tables one SELECT joins through a third table and never directly."""
    direct = {(a[0], b[0]) for a, b in scope} | {(b[0], a[0]) for a, b in scope}
    by_table: dict[str, list[Condition]] = defaultdict(list)
    for cond in scope:
        by_table[cond[0][0]].append(cond)
        by_table[cond[1][0]].append(cond)
    out: set[Chain] = set()
    for c, conds in by_table.items():
        for x, y in itertools.combinations(conds, 2):
            a = x[0][0] if x[1][0] == c else x[1][0]
            b = y[0][0] if y[1][0] == c else y[1][0]
            if a == b or (a, b) in direct:
                continue
            if a > b:
                a, b, x, y = b, a, y, x
            out.add((c, (a, b), x, y))
    return out


def _condition(raw: Any) -> Condition:
    return ((raw[0][0], raw[0][1]), (raw[1][0], raw[1][1]))


def gold_conditions(data: Path, workdir: Path) -> tuple[dict[str, list[Condition]], dict[str, list[Chain]]]:
    """Every database's distinct gold join conditions, and its two-step joins (cached in the workdir
    by input stamp)."""
    files = [data / "train.json", data / "dev_open.json"]
    stamp = hashlib.sha256(repr([(f.name, f.stat().st_size) for f in files]).encode()).hexdigest()[:10]
    cache = workdir / f"join-gold-v2-{stamp}.json"
    if not cache.exists():
        questions = [q for f in files for q in json.loads(f.read_text())]
        schemas: dict[str, dict[str, dict[str, str]]] = {}
        found: dict[str, set[Condition]] = defaultdict(set)
        chains: dict[str, set[Chain]] = defaultdict(set)
        failed = 0
        for q in questions:
            db = q["db_id"]
            if db not in schemas:
                schemas[db] = sqlite_schema(data / "databases", db)
            try:
                scopes = conditions_of(q["query"], schemas[db])
            except Exception:
                failed += 1
                continue
            for scope in scopes:
                found[db] |= scope
                chains[db] |= chains_of(scope)
        raw = {
            "conditions": {db: sorted(c) for db, c in sorted(found.items()) if c},
            "chains": {db: sorted(c) for db, c in sorted(chains.items()) if c},
        }
        workdir.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(raw))
        if failed:
            print(f"gold: {failed} queries not parsed", file=sys.stderr)
    raw = json.loads(cache.read_text())
    conditions = {db: [_condition(c) for c in conds] for db, conds in raw["conditions"].items()}
    two_step = {
        db: [(c, (p[0], p[1]), _condition(x), _condition(y)) for c, p, x, y in found]
        for db, found in raw["chains"].items()
    }
    return conditions, two_step


# -- the hidden-keys copies ------------------------------------------------------------------------


def hidden_copy(databases: Path, db: str, workdir: Path) -> Path:
    """The database copied without PRIMARY KEY / FOREIGN KEY (same columns, declared types and rows)."""
    target = workdir / "hidden-keys" / f"{db}.sqlite"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    conn = sqlite3.connect(str(partial))
    conn.execute("ATTACH DATABASE ? AS src", (str(databases / db / f"{db}.sqlite"),))
    names = conn.execute(
        "SELECT name FROM src.sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
    ).fetchall()
    for (name,) in names:
        cols = conn.execute(f"PRAGMA src.table_info({quote_name(name)})").fetchall()
        spec = ", ".join(quote_name(c[1]) + (f" {c[2]}" if c[2] else "") for c in cols)
        conn.execute(f"CREATE TABLE {quote_name(name)} ({spec})")
        conn.execute(f"INSERT INTO {quote_name(name)} SELECT * FROM src.{quote_name(name)}")
    conn.commit()
    conn.execute("DETACH DATABASE src")
    conn.close()
    partial.rename(target)
    return target


# -- running find_join_path -------------------------------------------------------------------------


def load_baseline(rev: str) -> Any:
    """tools/joins.py of an earlier revision as a module of its own (it imports today's engines/runtime)."""
    text = subprocess.run(
        ["git", "show", f"{rev}:tools/joins.py"], cwd=HERE.parent, capture_output=True, text=True, check=True
    ).stdout
    path = Path(tempfile.mkdtemp()) / "baseline_joins.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("baseline_joins", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["baseline_joins"] = module
    spec.loader.exec_module(module)
    return module


def offered(path: Any, a: str, b: str) -> list[set[Condition]]:
    """The conditions a JoinPath offers between tables a and b (bare lower-case names), in its order;
    each as its column pairs (a composite key's condition holds several)."""
    out: list[set[Condition]] = []
    for edge in path.joins:
        for e in [edge, *getattr(edge, "alternatives", [])]:
            left, right = e.left_table.split(".")[-1].lower(), e.right_table.split(".")[-1].lower()
            if {left, right} != {a, b}:
                continue
            pairs = set()
            for x, y in zip(e.left_columns, e.right_columns, strict=False):
                ends = sorted([(left, x.lower()), (right, y.lower())])
                pairs.add((ends[0], ends[1]))
            out.append(pairs)
    return out


@dataclasses.dataclass
class Score:
    n: int = 0  # gold conditions asked
    offered: int = 0  # offered for their pair (chosen or an alternative)
    first: int = 0  # offered as the first choice
    alternatives: int = 0  # conditions offered for the pair, summed
    chains: int = 0  # gold two-step joins asked (A and B through C, never directly)
    chains_found: int = 0  # the path went through C with both gold conditions offered
    chains_first: int = 0  # … as the first choices
    calls: int = 0
    seconds: float = 0.0

    def add(self, other: Score) -> None:
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def row(self) -> dict[str, float]:
        n, c = max(self.n, 1), max(self.chains, 1)
        return {
            "n": self.n,
            "offered": round(self.offered / n, 3),
            "first": round(self.first / n, 3),
            "alternatives": round(self.alternatives / n, 2),
            "chains": self.chains,
            "chain_found": round(self.chains_found / c, 3),
            "chain_first": round(self.chains_first / c, 3),
            "ms_per_call": round(1000 * self.seconds / max(self.calls, 1), 1),
        }


def _bare(name: str) -> str:
    return name.split(".")[-1].lower()


def run_db(
    fn: Callable[..., Any],
    args_model: Any,
    url: str,
    db: str,
    conds: list[Condition],
    chains: list[Chain],
    misses: list[Any],
) -> Score:
    from flexsql.tools.engines import SourceRegistry, open_source
    from flexsql.tools.runtime.context import ToolContext

    source = open_source(url, name=db)
    ctx = ToolContext(sources=SourceRegistry([source]))
    score = Score()

    def call(a: str, b: str, what: str) -> Any:
        started = time.perf_counter()
        try:
            return fn(ctx, args_model(tables=[a, b]))
        except Exception as exc:
            misses.append({"db": db, "asked": what, "error": str(exc)[:200]})
            return None
        finally:
            score.calls += 1
            score.seconds += time.perf_counter() - started

    try:
        for cond in conds:
            (a, x), (b, y) = cond
            score.n += 1
            path = call(a, b, f"{a}.{x} = {b}.{y}")
            if path is None:
                continue
            got = offered(path, a, b)
            score.alternatives += len(got)
            if any(cond in pairs for pairs in got):
                score.offered += 1
                score.first += cond in got[0]
            else:
                misses.append({"db": db, "asked": f"{a}.{x} = {b}.{y}", "offered": path.to_text()[:400]})
        by_pair: dict[tuple[str, str], list[Chain]] = defaultdict(list)
        for chain in chains:
            by_pair[chain[1]].append(chain)
        for (a, b), ways in sorted(by_pair.items()):
            score.chains += 1
            path = call(a, b, f"{a} .. {b}")
            if path is None:
                continue
            via = [_bare(v) for v in path.via]
            found = first = False
            for c, _, x, y in ways:
                if via != [c]:
                    continue
                left, right = (
                    offered(path, *sorted((x[0][0], x[1][0]))),
                    offered(path, *sorted((y[0][0], y[1][0]))),
                )
                if any(x in p for p in left) and any(y in p for p in right):
                    found = True
                    first = first or (x in left[0] and y in right[0])
            score.chains_found += found
            score.chains_first += first
            if not found:
                misses.append(
                    {
                        "db": db,
                        "asked": f"{a} .. {b} through {', '.join(sorted({w[0] for w in ways}))}",
                        "offered": path.to_text()[:400],
                    }
                )
    finally:
        source.close()
    return score


def fold_of(db: str) -> int:
    return zlib.crc32(db.encode()) % 2


def evaluate(
    fn: Callable[..., Any],
    args_model: Any,
    gold: tuple[dict[str, list[Condition]], dict[str, list[Chain]]],
    databases: Path,
    workdir: Path,
    mode: str,
    misses: list[Any] | None = None,
) -> dict[int, Score]:
    """Scores per fold (0, 1) of one system in one setting (shown / hidden keys)."""
    conditions, chains = gold
    per_fold = {0: Score(), 1: Score()}
    for db in sorted(set(conditions) | set(chains)):
        if mode == "shown":
            url = f"sqlite:///{databases / db / f'{db}.sqlite'}"
        else:
            url = f"sqlite:///{hidden_copy(databases, db, workdir)}"
        found = run_db(
            fn,
            args_model,
            url,
            db,
            conditions.get(db, []),
            chains.get(db, []),
            misses if misses is not None else [],
        )
        per_fold[fold_of(db)].add(found)
    return per_fold


def objective(scores: dict[str, Score]) -> float:
    """What tuning maximises, over keys hidden and shown: conditions offered, and first; two-step joins
    found; fewer alternatives."""
    total = 0.0
    for s in scores.values():
        n, c = max(s.n, 1), max(s.chains, 1)
        total += s.offered / n + 0.5 * s.first / n + 0.5 * s.chains_found / c - 0.02 * s.alternatives / n
    return total


GRID: dict[str, list[Any]] = {  # the rules in doubt: 0 switches one off
    "same_weak": [0.0, 0.35],
    "first_column": [0.0, 0.6],
    "abbreviation": [0.0, 0.75],
    "tail": [0.0, 0.85],
    "value_only": [0.0, 0.5],
}


def parse_params(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    out: dict[str, Any] = {}
    for kv in text.split(","):
        k, v = kv.split("=")
        out[k.strip()] = float(v) if "." in v else int(v)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "flexsql-bench")
    parser.add_argument(
        "--baseline-rev", default="HEAD", help="revision whose tools/joins.py is the baseline"
    )
    parser.add_argument("--params", help="LinkRules overrides, e.g. same_weak=0.3,role=0.85")
    parser.add_argument("--no-values", action="store_true", help="names only: no value sampling")
    parser.add_argument(
        "--tune", action="store_true", help="grid-search LinkRules on each fold, check on the other"
    )
    parser.add_argument("--ablate", action="store_true", help="each rule in doubt switched off, per fold")
    parser.add_argument("--misses", type=Path, help="write the misses of the current code here")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "join_inference.json")
    args = parser.parse_args()

    from flexsql.tools import joins
    from flexsql.tools.search import keys

    databases = args.data / "databases"
    gold = gold_conditions(args.data, args.workdir)
    conditions, chains = gold
    total = sum(len(c) for c in conditions.values())
    folds = {f: sum(len(c) for db, c in conditions.items() if fold_of(db) == f) for f in (0, 1)}
    pairs = sum(len({c[1] for c in found}) for found in chains.values())
    print(
        f"{total} gold join conditions in {len(conditions)} databases (fold 0: {folds[0]}, fold 1: {folds[1]}); "
        f"{pairs} pairs joined through a third table"
    )
    if args.no_values:
        joins.VALUE_BUDGET_S = 0.0
    defaults = keys.RULES
    rules = dataclasses.replace(defaults, **parse_params(args.params))

    systems: dict[str, tuple[Callable[..., Any], Any, Any]] = {}
    if args.baseline_rev != "none":
        base = load_baseline(args.baseline_rev)
        systems[f"baseline ({args.baseline_rev})"] = (base.find_join_path, base.FindJoinPath, None)
    systems["find_join_path"] = (joins.find_join_path, joins.FindJoinPath, rules)

    report: dict[str, Any] = {
        "conditions": total,
        "two_step_pairs": pairs,
        "databases": len(conditions),
        "folds": folds,
        "systems": {},
    }
    misses: list[Any] = []
    for name, (fn, model, system_rules) in systems.items():
        for mode in ("hidden", "shown"):
            if system_rules is not None:
                keys.RULES = system_rules
            started = time.perf_counter()
            scores = evaluate(
                fn, model, gold, databases, args.workdir, mode, misses if system_rules else None
            )
            keys.RULES = defaults
            both = Score()
            for s in scores.values():
                both.add(s)
            report["systems"].setdefault(name, {})[mode] = {
                "fold0": scores[0].row(),
                "fold1": scores[1].row(),
                "all": both.row(),
                "seconds": round(time.perf_counter() - started, 1),
            }

    if args.tune:
        report["tuning"] = tune(joins, keys, rules, gold, databases, args.workdir)
    if args.ablate:
        report["ablation"] = ablate(joins, keys, rules, gold, databases, args.workdir)

    print()
    print(
        f"{'system':<24} {'keys':<7} {'fold':<5} {'n':>4} {'offered':>8} {'first':>7} {'alts':>6} "
        f"{'2-step':>6} {'found':>6} {'first':>6} {'ms':>6}"
    )
    for name, modes in report["systems"].items():
        for mode, rows in modes.items():
            for fold in ("fold0", "fold1", "all"):
                r = rows[fold]
                print(
                    f"{name:<24} {mode:<7} {fold[-1] if fold != 'all' else 'all':<5} {r['n']:>4} "
                    f"{r['offered']:>8.3f} {r['first']:>7.3f} {r['alternatives']:>6.2f} "
                    f"{r['chains']:>6} {r['chain_found']:>6.3f} {r['chain_first']:>6.3f} {r['ms_per_call']:>6.1f}"
                )
    if "tuning" in report:
        print()
        print(
            "tuned on one fold, checked on the other (offered / first / alts / 2-step found; hidden | shown):"
        )
        for row in report["tuning"]:
            print(
                f"  tune fold {row['tune_fold']}: {row['params']}\n"
                f"    tune  hidden {fmt(row['tune']['hidden'])} | shown {fmt(row['tune']['shown'])}\n"
                f"    check hidden {fmt(row['check']['hidden'])} | shown {fmt(row['check']['shown'])}"
            )
    if "ablation" in report:
        print()
        print("each rule switched off (offered / first / alts / 2-step found; hidden | shown), per fold:")
        for name, rows in report["ablation"].items():
            for fold in ("fold0", "fold1"):
                print(
                    f"  {name:<14} fold {fold[-1]}: hidden {fmt(rows['hidden'][fold])} | shown {fmt(rows['shown'][fold])}"
                )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    if args.misses:
        args.misses.write_text(json.dumps(misses, indent=1))
    print(f"\nwrote {args.out}")


def fmt(r: dict[str, float]) -> str:
    return f"{r['offered']:.3f} / {r['first']:.3f} / {r['alternatives']:.2f} / 2-step {r['chain_found']:.3f}"


Gold = tuple[dict[str, list[Condition]], dict[str, list[Chain]]]


def tune(
    joins: Any, keys: Any, start: Any, gold: Gold, databases: Path, workdir: Path
) -> list[dict[str, Any]]:
    """For each fold: the grid point best on it (objective()), and its figures on the other fold."""
    per_point: list[tuple[dict[str, Any], dict[str, dict[int, Score]]]] = []
    names = list(GRID)
    for values in itertools.product(*(GRID[n] for n in names)):
        params = dict(zip(names, values, strict=True))
        keys.RULES = dataclasses.replace(start, **params)
        scores = {
            mode: evaluate(joins.find_join_path, joins.FindJoinPath, gold, databases, workdir, mode)
            for mode in ("hidden", "shown")
        }
        per_point.append((params, scores))
    keys.RULES = start
    out = []
    for tune_fold in (0, 1):
        check_fold = 1 - tune_fold
        params, scores = max(per_point, key=lambda p: objective({m: s[tune_fold] for m, s in p[1].items()}))
        out.append(
            {
                "tune_fold": tune_fold,
                "params": params,
                "tune": {m: s[tune_fold].row() for m, s in scores.items()},
                "check": {m: s[check_fold].row() for m, s in scores.items()},
            }
        )
    return out


def ablate(
    joins: Any, keys: Any, start: Any, gold: Gold, databases: Path, workdir: Path
) -> dict[str, dict[str, dict[str, dict[str, float]]]]:
    """The figures with each rule in doubt switched off (set to 0), per setting and fold."""
    out: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    for name in GRID:
        if not getattr(start, name):
            continue
        keys.RULES = dataclasses.replace(start, **{name: 0.0})
        out[f"no {name}"] = {}
        for mode in ("hidden", "shown"):
            scores = evaluate(joins.find_join_path, joins.FindJoinPath, gold, databases, workdir, mode)
            out[f"no {name}"][mode] = {"fold0": scores[0].row(), "fold1": scores[1].row()}
    keys.RULES = start
    return out


if __name__ == "__main__":
    main()
