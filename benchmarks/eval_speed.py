"""Speed of `flexsql eval --runner gold` on Spider 1.0 dev_open (267 questions, 5 SQLite databases):
in-process, and through `flexsql serve` subprocesses over MCP stdio.

Baseline, measured in the same run: the bare work — each gold query executed twice with the
sqlite3 module on one thread, nothing else — so the harness overhead shows as a ratio.

Usage: python benchmarks/eval_speed.py [--tasks FILE] [--dbs DIR] [--jobs 2] [--repeat 3] [--no-mcp]
Prints a table; writes benchmarks/results/eval_speed.json.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from flexsql.evals.harness import EvalOptions, Evaluation

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "spider"


def baseline(tasks_path: Path, dbs: Path) -> float:
    tasks = json.loads(tasks_path.read_text())
    conns: dict[str, sqlite3.Connection] = {}
    started = time.perf_counter()
    for task in tasks:
        db = task["db_id"]
        conn = conns.get(db)
        if conn is None:
            conn = conns[db] = sqlite3.connect(f"file:{dbs / db / (db + '.sqlite')}?mode=ro", uri=True)
        for _ in range(2):
            conn.execute(task["query"]).fetchall()
    elapsed = time.perf_counter() - started
    for conn in conns.values():
        conn.close()
    return len(tasks) / elapsed


def harness(tasks_path: Path, dbs: Path, jobs: int, via_mcp: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="flexsql-eval-speed-") as tmp:
        options = EvalOptions(
            tasks=tasks_path,
            runner="gold",
            dbs=dbs,
            jobs=jobs,
            out=Path(tmp) / "out",
            via_mcp=via_mcp,
            resume=False,
        )
        started = time.perf_counter()
        outcome = Evaluation(options).run()
        wall = time.perf_counter() - started
    s = outcome.summary
    return {
        "tasks": outcome.ran,
        "wall_s": wall,
        "tasks_per_s": outcome.ran / wall,
        "accuracy_ex": s["accuracy_evaluated"],
        "passed": s["passed"],
        "evaluated": s["evaluated"],
        "failures": s["failures"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=Path, default=DATA / "dev_open.json")
    parser.add_argument("--dbs", type=Path, default=DATA / "databases")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-mcp", action="store_true", help="skip the MCP stdio measurement")
    args = parser.parse_args()
    if not args.tasks.exists() or not args.dbs.is_dir():
        print(f"data not found: {args.tasks} / {args.dbs}")
        return 2
    rows = []
    base = statistics.median(baseline(args.tasks, args.dbs) for _ in range(args.repeat))
    rows.append({"mode": "baseline: sqlite3, each gold query twice, 1 thread", "tasks_per_s": base})
    modes = [("in-process", False)] + ([] if args.no_mcp else [("flexsql serve over MCP stdio", True)])
    for label, via_mcp in modes:
        runs = [harness(args.tasks, args.dbs, args.jobs, via_mcp) for _ in range(args.repeat)]
        best = sorted(runs, key=lambda r: r["tasks_per_s"])[len(runs) // 2]
        best["mode"] = f"{label}, --jobs {args.jobs}"
        best["runs_tasks_per_s"] = [round(r["tasks_per_s"], 1) for r in runs]
        rows.append(best)
    print(
        f"{'mode':52} {'tasks/s':>9} {'ms/task over baseline':>22} {'ex accuracy':>12} {'runs (tasks/s)':>24}"
    )
    for row in rows:
        row["overhead_ms_per_task"] = 1000 * (1 / row["tasks_per_s"] - 1 / base)
        acc = f"{row['accuracy_ex']:.2f}%" if row.get("accuracy_ex") is not None else "–"
        print(
            f"{row['mode']:52} {row['tasks_per_s']:9.1f} {row['overhead_ms_per_task']:22.2f} {acc:>12} "
            f"{str(row.get('runs_tasks_per_s', '')):>24}"
        )
    for row in rows[1:]:
        for f in row["failures"]:
            print(f"  failure ({row['mode']}): {f['instance_id']} {f['db']}: {f['reason']}")
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "eval_speed.json").write_text(
        json.dumps({"tasks_file": str(args.tasks), "jobs": args.jobs, "rows": rows}, indent=2, default=str)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
