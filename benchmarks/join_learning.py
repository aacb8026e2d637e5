"""Join conditions learned from a query log against inference alone, on Spider databases without keys.

Each Spider database (train + dev_open) is copied without PRIMARY / FOREIGN KEY (join_inference.py's
hidden-keys copies). Its questions are split in two halves by a hash of the question. For each half, the
gold SQL of the *other* half is the query log: it is imported with `learn` (a .sql file) into a fresh store,
and every join condition `A.x = B.y` the half's own gold SQL uses is asked of find_join_path (tables
[A, B]): is it offered, is it the first choice. The same questions are asked with an empty store
(inference from names and values alone), in the same run. A condition only this half uses can only be
inferred: the log never saw it.

    .venv/bin/python benchmarks/join_learning.py [--data ../shared/data/spider] [--dbs N] [--no-values]

Prints a table and writes benchmarks/results/join_learning.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
DEFAULT_DATA = HERE.parent.parent / "shared" / "data" / "spider"

from join_inference import Condition, Score, conditions_of, hidden_copy, run_db  # noqa: E402
from spider_gold import sqlite_schema  # noqa: E402


def half_of(question: str) -> int:
    return hashlib.sha1(question.encode()).digest()[0] & 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "flexsql-bench")
    parser.add_argument("--dbs", type=int, default=0, help="only the first N databases (0: all)")
    parser.add_argument("--no-values", action="store_true", help="names only: no value sampling")
    args = parser.parse_args()

    from flexsql.tools import joins
    from flexsql.tools.engines import open_source
    from flexsql.tools.knowledge.learn import learn

    if args.no_values:
        joins.VALUE_BUDGET_S = 0.0
    databases = args.data / "databases"
    questions = [q for f in ("train.json", "dev_open.json") for q in json.loads((args.data / f).read_text())]
    by_db: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for q in questions:
        by_db[q["db_id"]].append(q)
    dbs = sorted(by_db)[: args.dbs] if args.dbs else sorted(by_db)
    run = Path(tempfile.mkdtemp(prefix="join-learning-"))
    totals = {"inferred": Score(), "learned": Score()}
    misses: list[Any] = []
    started = time.perf_counter()
    for n, db in enumerate(dbs):
        schema = sqlite_schema(databases, db)
        url = f"sqlite:///{hidden_copy(databases, db, args.workdir)}"
        halves: list[list[dict[str, Any]]] = [[], []]
        for q in by_db[db]:
            halves[half_of(q["question"])].append(q)
        for h in (0, 1):
            asked: set[Condition] = set()
            for q in halves[h]:
                try:
                    for scope in conditions_of(q["query"], schema):
                        asked |= scope
                except Exception:  # noqa: S112 - a gold query sqlglot cannot qualify asks nothing
                    continue
            if not asked:
                continue
            log = run / f"{db}-{h}" / "log.sql"
            log.parent.mkdir(parents=True)
            log.write_text("".join(q["query"].strip().rstrip(";") + ";\n" for q in halves[1 - h]))
            learned_dir = run / f"{db}-{h}" / "store"
            os.environ["FLEXSQL_DATA_DIR"] = str(learned_dir)
            source = open_source(url, name=db)
            if halves[1 - h]:
                learn(source, log)
            source.close()
            conds = sorted(asked)
            totals["learned"].add(
                run_db(joins.find_join_path, joins.FindJoinPath, url, db, conds, [], misses)
            )
            os.environ["FLEXSQL_DATA_DIR"] = str(run / "empty")
            totals["inferred"].add(run_db(joins.find_join_path, joins.FindJoinPath, url, db, conds, [], []))
        if (n + 1) % 20 == 0:
            print(f"{n + 1}/{len(dbs)} databases, {time.perf_counter() - started:.0f} s", file=sys.stderr)
    rows = {name: score.row() for name, score in totals.items()}
    print(
        f"\njoin conditions on Spider without declared keys ({len(dbs)} databases), each half's gold conditions"
    )
    print("asked with the other half's gold SQL as the query log (learned) or an empty store (inferred)")
    print(f"{'system':<10} {'asked':>6} {'offered':>8} {'first':>7} {'alternatives':>13} {'ms/call':>8}")
    for name, row in rows.items():
        print(
            f"{name:<10} {row['n']:>6} {row['offered']:>8.3f} {row['first']:>7.3f} {row['alternatives']:>13.2f} "
            f"{row['ms_per_call']:>8.1f}"
        )
    out = HERE / "results" / "join_learning.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "databases": len(dbs),
                "values": not args.no_values,
                "systems": rows,
                "learned_misses": misses[:200],
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
