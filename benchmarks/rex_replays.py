"""`flexsql eval --scorer rex` on gold replays, which must score 100% (gold against gold):

- Spider 1.0 dev_open (267 questions) and a fixed 1,000-question train sample (benchmarks/
  spider_gold.py's), `--runner gold`: the gold SQL replayed on the SQLite databases;
- Spider 2.0-lite local (135 tasks), `--runner predictions` with each task's first gold CSV as the
  prediction, and again with every gold variant as the prediction (328 CSVs);
- the same CSVs with their rows shuffled and their columns renamed and reordered (tasks whose order
  is loose): REX pairs renamed columns by content, so these stay at 1.0 too.

Usage: python benchmarks/rex_replays.py [--data ../shared/data]
Prints a table; writes benchmarks/results/rex_replays.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spider_gold import load_questions  # noqa: E402

from flexsql.evals.gold import GoldStore  # noqa: E402
from flexsql.evals.harness import EvalOptions, Evaluation  # noqa: E402
from flexsql.evals.rex import score_rex  # noqa: E402
from flexsql.evals.scoring import frame_columns, frame_rows  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"


def evaluate(tasks: Path, out: Path, **options: Any) -> dict[str, Any]:
    started = time.perf_counter()
    outcome = Evaluation(
        EvalOptions(tasks=tasks, out=out, scorer="rex", jobs=2, resume=False, **options)
    ).run()
    rex = outcome.summary["scorers"]["rex"]
    return {
        "tasks": outcome.summary["scored_tasks"],
        "evaluated": rex["evaluated"],
        "passed": rex["passed"],
        "accuracy_all": rex["accuracy_all"],
        "mean_similarity_all": rex["mean_similarity_all"],
        "ex_accuracy_all": outcome.summary["scorers"]["ex"]["accuracy_all"],
        "wall_s": round(time.perf_counter() - started, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    spider, lite = args.data / "spider", args.data / "spider2-lite"
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="flexsql-rex-replays-") as tmp_name:
        tmp = Path(tmp_name)
        dbs = spider / "databases"
        rows["Spider dev_open, gold SQL"] = evaluate(
            spider / "dev_open.json", tmp / "dev", runner="gold", dbs=dbs
        )
        sample = tmp / "train-1000.json"
        sample.write_text(json.dumps(load_questions(spider)["train-1000"]))
        rows["Spider train-1000, gold SQL"] = evaluate(sample, tmp / "train", runner="gold", dbs=dbs)

        gold = GoldStore(lite / "gold")
        tasks_file = lite / "spider2-lite-local.jsonl"
        ids = [
            json.loads(line)["instance_id"] for line in tasks_file.read_text().splitlines() if line.strip()
        ]
        preds = tmp / "preds"
        preds.mkdir()
        for task_id in ids:
            paths = gold.csv_paths(task_id)
            if paths:
                (preds / f"{task_id}.csv").write_bytes(paths[0].read_bytes())
        rows["Spider 2.0-lite, first gold CSV"] = evaluate(
            tasks_file, tmp / "lite", runner="predictions", predictions=preds, gold=lite / "gold"
        )

        # every variant, and every loose-order variant shuffled and renamed, scored directly
        rng = random.Random(32)
        variants = shuffled = variant_pass = shuffled_pass = 0
        for task_id in ids:
            tables = gold.tables(task_id)
            config = gold.config(task_id)
            for t in tables:
                t.ordered = not config.ignore_order
            for table in tables:
                frame = table.frame
                variants += 1
                variant_pass += score_rex(frame_columns(frame), frame_rows(frame), tables).score
                if config.ignore_order and frame.shape[1]:
                    order = list(range(frame.shape[1]))
                    rng.shuffle(order)
                    moved = frame.iloc[:, order].sample(frac=1.0, random_state=rng.randrange(2**31))
                    moved.columns = [f"col_{i}" for i in range(moved.shape[1])]
                    moved = pd.DataFrame(moved.values.tolist(), columns=list(moved.columns))
                    shuffled += 1
                    shuffled_pass += score_rex(frame_columns(moved), frame_rows(moved), tables).score
        rows["Spider 2.0-lite, every gold variant"] = {
            "tasks": variants,
            "evaluated": variants,
            "passed": variant_pass,
            "accuracy_all": round(100 * variant_pass / variants, 2),
        }
        rows["  … rows shuffled, columns renamed+reordered"] = {
            "tasks": shuffled,
            "evaluated": shuffled,
            "passed": shuffled_pass,
            "accuracy_all": round(100 * shuffled_pass / shuffled, 2),
        }
    print(f"load {os.getloadavg()[0]:.1f}")
    print(f"{'replay':<46}{'tasks':>7}{'passed':>8}{'rex %':>8}{'mean sim':>10}{'ex %':>8}{'wall s':>8}")
    for name, r in rows.items():
        print(
            f"{name:<46}{r['tasks']:>7}{r['passed']:>8}{r['accuracy_all']:>8}"
            f"{r.get('mean_similarity_all', ''):>10}{r.get('ex_accuracy_all', ''):>8}{r.get('wall_s', ''):>8}"
        )
    out = ROOT / "benchmarks" / "results" / "rex_replays.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"load": os.getloadavg(), "rows": rows}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
