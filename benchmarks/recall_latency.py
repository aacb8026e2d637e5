"""Recall latency on a store of 10,000 verified queries.

The store: the bundled demo database (scale 0.1) as the source, and 10,000 question/SQL pairs imported
with `learn` from a JSONL file: the questions are Spider's (train), with variants up to the count; each
SQL reads one or two of the demo database's tables (the content of the SQL does not change the cost: every
stored query is scored for every question). Asked: 300 Spider dev questions, none stored, one at a time,
in-process (`recall(ctx, question, limit=3)`, what the agent and the MCP tool call), after one warm-up call
that builds the store's index (its vectors come from the on-disk vector store after the first run).

Reported: p50 / p95 / max of recall, and in the same run search_schema alone on the same questions (the
table linking recall does, here with the question's vector already encoded), and the store's cold start (reading the YAML, checking the 10,000 queries against the schema,
the vectors).

    .venv/bin/python benchmarks/recall_latency.py [--data ../shared/data/spider] [--queries 10000]

Prints a table and writes benchmarks/results/recall_latency.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "data" / "spider"
PREFIXES = ("", "Please tell me: ", "I would like to know: ", "Quick question: ", "Can you find out: ")


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--asked", type=int, default=300)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="recall-latency-"))
    os.environ["FLEXSQL_DATA_DIR"] = str(work / "data")

    from flexsql.demo_db.cache import demo_url
    from flexsql.tools.engines import SourceRegistry, open_source
    from flexsql.tools.knowledge import recall as recalling
    from flexsql.tools.knowledge.learn import learn
    from flexsql.tools.runtime.context import ToolContext
    from flexsql.tools.search import embeddings

    embeddings.model(wait=True)
    src = open_source(demo_url(0.1), name="demo")
    ctx = ToolContext(sources=SourceRegistry([src]))
    tables = [t for t in src.catalog().tables if t.kind == "table"]
    train = [q["question"] for q in json.loads((args.data / "train.json").read_text())]
    asked = [q["question"] for q in json.loads((args.data / "dev_open.json").read_text())][: args.asked]
    lines = []
    for i in range(args.queries):
        question = PREFIXES[(i // len(train)) % len(PREFIXES)] + train[i % len(train)]
        a, b = tables[i % len(tables)], tables[(i * 7 + 3) % len(tables)]
        sql = (
            f"SELECT count(*) FROM {a.qualified}"
            if i % 2
            else (f"SELECT count(*) FROM {a.qualified} CROSS JOIN {b.qualified} WHERE {i} > 0")
        )
        lines.append(json.dumps({"question": question, "sql": sql}))
    file = work / "verified.jsonl"
    file.write_text("\n".join(lines) + "\n")
    started = time.perf_counter()
    report = learn(src, file)
    import_s = time.perf_counter() - started
    started = time.perf_counter()
    recalling.recall(ctx, "warm up: how many orders are there?")
    cold_s = time.perf_counter() - started

    totals: list[float] = []
    linking: list[float] = []
    from flexsql.tools.search.ranking import SearchSchema, search_schema

    for q in asked:
        t0 = time.perf_counter()
        found = recalling.recall(ctx, q, limit=3)
        totals.append((time.perf_counter() - t0) * 1000)
        assert len(found.queries) == 3
        t0 = time.perf_counter()  # the same search again (its question vector now cached): its share
        search_schema(ctx, SearchSchema(query=q, limit=recalling.WEIGHTS.link_depth))
        linking.append((time.perf_counter() - t0) * 1000)
    src.close()
    out = {
        "stored": report.added,
        "verified_in_index": found.verified,
        "asked": len(asked),
        "import_s": round(import_s, 1),
        "cold_start_s": round(cold_s, 2),
        "recall_ms": {
            "p50": round(statistics.median(totals), 1),
            "p95": round(pct(totals, 0.95), 1),
            "max": round(max(totals), 1),
        },
        "search_schema_linking_ms": {
            "p50": round(statistics.median(linking), 1),
            "p95": round(pct(linking, 0.95), 1),
        },
        "load": os.getloadavg(),
    }
    print(
        f"\nrecall on a store of {out['verified_in_index']:,} verified queries ({len(asked)} questions asked)"
    )
    print(f"{'':<28} {'p50':>7} {'p95':>7} {'max':>7}")
    r, s = out["recall_ms"], out["search_schema_linking_ms"]
    print(f"{'recall (ms)':<28} {r['p50']:>7} {r['p95']:>7} {r['max']:>7}")
    print(f"{'search_schema alone (ms)':<28} {s['p50']:>7} {s['p95']:>7}")
    print(f"import {out['import_s']} s, cold start {out['cold_start_s']} s, load average {out['load']}")
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / "recall_latency.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
