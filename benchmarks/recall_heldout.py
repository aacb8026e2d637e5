"""Recall held out: store half of each Spider database's question/SQL pairs, ask the other half.

For every database of Spider (train + dev_open, ../shared/data/spider), its questions are split in two
halves (`--split`: `hash` of the question, `parity` of its position, or `order`: first and second half);
one half is imported with `learn` into a fresh store, and each question of the other half is recalled
(limit 3); then the other way round. A hit: among the first 3 recalled queries, one reads exactly the
tables the gold query reads (both read with sqlglot against the database, tools/knowledge/analyze.py).

Configurations, all in the same run on the same stores:
- `words`: word overlap between questions alone (Jaccard of content words), the baseline;
- `meaning`: the embedding cosine alone;
- `recall`: the recall tool's ranking (meaning, words, the tables search_schema links the question to,
  diverse table sets);
- more with `--grid` (weights varied), reported per half of the databases (benchmarks/folds.py) so a
  weight is chosen on one half of the databases and checked on the other.

`--cli N` also runs N questions through the real command line (`flexsql learn FILE --db URL`, then
`flexsql call --db URL --json recall question=… limit=3` per question) and checks it agrees with the
in-process figure on those questions.

    .venv/bin/python benchmarks/recall_heldout.py [--data ../shared/data/spider] [--dbs N] [--split hash]
        [--grid] [--cli 60]

Prints a table and writes benchmarks/results/recall_heldout.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
DEFAULT_DATA = HERE.parent.parent / "shared" / "data" / "spider"

from folds import fold_report, print_folds  # noqa: E402


def split_of(i: int, question: str, how: str, n: int) -> int:
    if how == "parity":
        return i & 1
    if how == "order":
        return 0 if i < n // 2 else 1
    return hashlib.sha1(question.encode()).digest()[0] & 1


def configs(grid: bool) -> dict[str, Any]:
    from flexsql.tools.knowledge.recall import WEIGHTS, Weights

    out: dict[str, Any] = {
        "words": Weights(meaning=0.0, words=1.0, linked=0.0, unlinked=0.0, diverse=0.0),
        "meaning": Weights(meaning=1.0, words=0.0, linked=0.0, unlinked=0.0, diverse=0.0),
        "recall": WEIGHTS,
    }
    if grid:
        for words in (0.3, 0.6):
            for linked in (0.0, 0.1, 0.25):
                for unlinked in (0.0, 0.05, 0.1):
                    for diverse in (0.0, 0.06, 0.15, 1.0):
                        out[f"w{words}_l{linked}_u{unlinked}_d{diverse}"] = dataclasses.replace(
                            WEIGHTS, words=words, linked=linked, unlinked=unlinked, diverse=diverse
                        )
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    from flexsql.tools.engines import SourceRegistry, open_source
    from flexsql.tools.knowledge.analyze import NotAQuery, analyze
    from flexsql.tools.knowledge.learn import learn
    from flexsql.tools.knowledge.recall import rank, recall_index
    from flexsql.tools.runtime.context import ToolContext
    from flexsql.tools.search import embeddings

    embeddings.model(wait=True)
    data: Path = args.data
    questions = [q for f in ("train.json", "dev_open.json") for q in json.loads((data / f).read_text())]
    by_db: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for q in questions:
        by_db[q["db_id"]].append(q)
    dbs = sorted(by_db)[: args.dbs] if args.dbs else sorted(by_db)
    weights = configs(args.grid)
    depth = max(w.link_depth for w in weights.values())
    rows: list[dict[str, Any]] = []
    work = Path(tempfile.mkdtemp(prefix="recall-heldout-"))
    os.environ["FLEXSQL_DATA_DIR"] = str(work / "data")
    started = time.perf_counter()
    for n_db, db in enumerate(dbs):
        path = data / "databases" / db / f"{db}.sqlite"
        items = by_db[db]
        halves: list[list[dict[str, Any]]] = [[], []]
        for i, q in enumerate(items):
            halves[split_of(i, q["question"], args.split, len(items))].append(q)
        for stored in (0, 1):
            asked = halves[1 - stored]
            if not halves[stored] or not asked:
                continue
            src = open_source(f"sqlite:///{path}", name=f"{db}_{stored}")
            registry = SourceRegistry([src])
            ctx = ToolContext(registry)
            file = work / f"{db}_{stored}.json"
            file.write_text(
                json.dumps([{"question": q["question"], "query": q["query"]} for q in halves[stored]])
            )
            learn(src, file)
            index, _ = recall_index(src)
            catalog = src.catalog()
            from flexsql.tools.knowledge.recall import linked_tables

            for q in asked:
                try:
                    gold = frozenset(t.lower() for t in analyze(q["query"], catalog, "sqlite").tables)
                except NotAQuery:
                    continue
                linked = linked_tables(ctx, src, q["question"], depth)
                row: dict[str, Any] = {
                    "db": db,
                    "question": q["question"],
                    "stored_half": stored,
                    "configs": {},
                }
                for name, w in weights.items():
                    top = rank(index, q["question"], linked[: w.link_depth], 3, w)
                    row["configs"][name] = int(any(index.table_sets[i] == gold for i, _, _ in top))
                row["possible"] = int(any(ts == gold for ts in index.table_sets))
                rows.append(row)
            src.close()
        if (n_db + 1) % 20 == 0:
            print(
                f"{n_db + 1}/{len(dbs)} databases, {len(rows)} questions, {time.perf_counter() - started:.0f} s",
                file=sys.stderr,
            )
    summary = {name: round(sum(r["configs"][name] for r in rows) / len(rows), 4) for name in weights}
    possible = round(sum(r["possible"] for r in rows) / len(rows), 4)
    out: dict[str, Any] = {
        "split": args.split,
        "databases": len(dbs),
        "questions": len(rows),
        "hit_at_3": summary,
        "possible": possible,
        "per_way": {
            f"store half {h}": {
                name: round(
                    sum(r["configs"][name] for r in rows if r["stored_half"] == h)
                    / max(1, sum(1 for r in rows if r["stored_half"] == h)),
                    4,
                )
                for name in ("words", "meaning", "recall")
            }
            for h in (0, 1)
        },
        "seconds": round(time.perf_counter() - started, 1),
    }
    if args.grid:
        groups = {"weights": [n for n in weights if n not in ("words", "meaning")]}
        out["folds"] = fold_report(rows, list(weights), groups, lambda r, c: bool(r["configs"][c]))
    out["_rows"], out["_by_db"], out["_dbs"], out["_work"] = rows, by_db, dbs, work
    return out


def cli_check(
    args: argparse.Namespace,
    by_db: dict[str, list[dict[str, Any]]],
    dbs: list[str],
    rows: list[dict[str, Any]],
    work: Path,
) -> dict[str, Any]:
    """The same through the command line, for the first `args.cli` asked questions of the first databases."""
    from flexsql.tools.engines import open_source
    from flexsql.tools.knowledge.analyze import analyze

    env = {**os.environ, "FLEXSQL_DATA_DIR": str(work / "cli-data")}
    exe = str(Path(sys.executable).parent / "flexsql")
    checked = agree = hits = 0
    for db in dbs:
        if checked >= args.cli:
            break
        path = args.data / "databases" / db / f"{db}.sqlite"
        url = f"sqlite:///{path}"
        stored_file = work / f"{db}_0.json"
        subprocess.run(
            [exe, "learn", str(stored_file), "--db", url], env=env, check=True, capture_output=True
        )
        catalog = open_source(url).catalog()
        for row in [r for r in rows if r["db"] == db and r["stored_half"] == 0]:
            if checked >= args.cli:
                break
            done = subprocess.run(
                [exe, "call", "--db", url, "--json", "recall", f"question={row['question']}", "limit=3"],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            )
            got = json.loads(done.stdout)["queries"]
            gold_sql = next(q["query"] for q in by_db[db] if q["question"] == row["question"])
            gold = frozenset(t.lower() for t in analyze(gold_sql, catalog, "sqlite").tables)
            hit = int(any(frozenset(t.lower() for t in q["tables"]) == gold for q in got))
            hits += hit
            agree += int(hit == row["configs"]["recall"])
            checked += 1
    return {
        "questions": checked,
        "hit_at_3": round(hits / max(checked, 1), 4),
        "agrees_in_process": round(agree / max(checked, 1), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--dbs", type=int, default=0, help="only the first N databases (0: all)")
    parser.add_argument("--split", choices=("hash", "parity", "order"), default="hash")
    parser.add_argument("--grid", action="store_true")
    parser.add_argument("--cli", type=int, default=0, help="also check N questions through the command line")
    args = parser.parse_args()
    out = run(args)
    print(
        f"\nrecall held out on Spider ({out['databases']} databases, {out['questions']} questions, split {out['split']})"
    )
    print(f"{'config':<12} hit@3 (a query over exactly the gold tables among the first 3)")
    for name in ("words", "meaning", "recall"):
        print(f"{name:<12} {out['hit_at_3'][name]:.3f}")
    print(f"{'possible':<12} {out['possible']:.3f}  (the stored half holds a query over those tables)")
    for way, figures in out["per_way"].items():
        print(f"{way}: " + ", ".join(f"{k} {v:.3f}" for k, v in figures.items()))
    if "folds" in out:
        groups = {"weights": [n for n in out["hit_at_3"] if n not in ("words", "meaning")]}
        print_folds(out["folds"], "hit@3", ["words", "meaning"], groups)
    rows, by_db, dbs, work = out.pop("_rows"), out.pop("_by_db"), out.pop("_dbs"), out.pop("_work")
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / "recall_heldout.json").write_text(json.dumps(out, indent=2) + "\n")
    if args.cli:
        out["cli"] = cli_check(args, by_db, dbs, rows, work)
        print(f"command line: {out['cli']}")
        (results / "recall_heldout.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
