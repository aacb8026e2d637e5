"""Time per call of the scoring library (`flexsql.evals.reward.score_prediction`) on Spider 1.0
dev_open (267 questions, 5 SQLite databases), per scorer:

- `sql`: a predicted SQL query against the gold SQL, both run on the database (what an RL reward does);
- `result`: a predicted result against a gold result, no query run (a reward over cached results).

Predictions: the gold query itself (a pass) and a wrong one (the gold query's rows cut to the first
half with LIMIT: a failure that still has to be compared). Baseline, in the same run: the two
statements executed through the same in-process executor and nothing else, so the scoring cost shows
as a ratio.

Usage: python benchmarks/reward_timing.py [--data ../shared/data/spider] [--limit N] [--repeat 3]
Prints a table; writes benchmarks/results/reward_timing.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from flexsql.evals.execution import InProcessExecutor
from flexsql.evals.reward import Table, score_prediction
from flexsql.evals.scoring import SCORERS

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "spider"


def _ms(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median_ms": round(1000 * statistics.median(ordered), 3),
        "p95_ms": round(1000 * ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 3),
        "mean_ms": round(1000 * statistics.mean(ordered), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    questions = json.loads((args.data / "dev_open.json").read_text())[: args.limit]
    cases = []
    executor = InProcessExecutor()
    for q in questions:
        path = args.data / "databases" / q["db_id"] / f"{q['db_id']}.sqlite"
        url = f"sqlite:///{path.resolve()}"
        gold = q["query"].strip().rstrip(";")
        result = executor.execute(url, gold, 60)
        half = len(result.rows) // 2
        wrong = f"SELECT * FROM ({gold}) LIMIT {half}"
        cases.append((path, url, gold, wrong, Table(columns=result.columns, rows=result.rows)))
    wrong_tables = {}
    for path, url, _, wrong, _ in cases:
        r = executor.execute(url, wrong, 60)
        wrong_tables[wrong, str(path)] = Table(columns=r.columns, rows=r.rows)

    # warm: sources opened, scipy imported, caches filled, for every timed path
    for scorer in SCORERS:
        score_prediction(cases[0][2], cases[0][2], db=cases[0][0], scorer=scorer)

    baseline: list[float] = []
    for _ in range(args.repeat):
        for _path, url, gold, wrong, _ in cases:
            for pred in (gold, wrong):
                t0 = time.perf_counter()
                executor.execute(url, pred, 60)
                executor.execute(url, gold, 60)
                baseline.append(time.perf_counter() - t0)
    rows: list[dict[str, Any]] = [
        {"scorer": "(baseline)", "mode": "sql", **_ms(baseline), "calls": len(baseline)}
    ]
    base_median = statistics.median(baseline)
    for scorer in SCORERS:
        for mode in ("sql", "result"):
            times: list[float] = []
            passed = 0
            for _ in range(args.repeat):
                for path, _url, gold, wrong, gold_table in cases:
                    for pred in (gold, wrong):
                        if mode == "sql":
                            t0 = time.perf_counter()
                            s = score_prediction(pred, gold, db=path, scorer=scorer)
                        else:
                            table = gold_table if pred == gold else wrong_tables[wrong, str(path)]
                            ordered = "order by" in gold.lower()
                            t0 = time.perf_counter()
                            s = score_prediction(table, gold_table, scorer=scorer, ordered=ordered)
                        times.append(time.perf_counter() - t0)
                        passed += s.passed
            row = {"scorer": scorer, "mode": mode, **_ms(times), "calls": len(times), "passed": passed}
            if mode == "sql":
                row["x_baseline"] = round(statistics.median(times) / base_median, 2)
            rows.append(row)
    executor.close()

    print(f"{len(cases)} questions x 2 predictions x {args.repeat} repeats; load {os.getloadavg()[0]:.1f}")
    print(
        f"{'scorer':<16}{'mode':<8}{'median ms':>10}{'p95 ms':>10}{'mean ms':>10}{'x baseline':>12}{'passed':>8}"
    )
    for r in rows:
        print(
            f"{r['scorer']:<16}{r['mode']:<8}{r['median_ms']:>10.3f}{r['p95_ms']:>10.3f}{r['mean_ms']:>10.3f}"
            f"{r.get('x_baseline', ''):>12}{r.get('passed', ''):>8}"
        )
    out = ROOT / "benchmarks" / "results" / "reward_timing.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {"questions": len(cases), "repeat": args.repeat, "load": os.getloadavg(), "rows": rows}, indent=2
        )
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
