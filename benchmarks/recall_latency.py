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
from collections.abc import Callable
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

    from flexsql.tools.search.ranking import SearchSchema, search_schema
    from flexsql.tools.search.semantic import question_vector

    index, _ = recalling.recall_index(src)
    parts: dict[str, list[float]] = {"recall": [], "encode": [], "search_schema": [], "rank": []}

    def timed(name: str, fn: Callable[[], object]) -> object:
        t0 = time.perf_counter()
        value = fn()
        parts[name].append((time.perf_counter() - t0) * 1000)
        return value

    for q in asked:
        found = timed("recall", lambda q=q: recalling.recall(ctx, q, limit=3))
        assert isinstance(found, recalling.RecallResult) and len(found.queries) == 3
        # its parts, each alone: the question's vector (a question not seen yet), search_schema's linking
        # (the vector now cached), the ranking of the 10,000 stored queries
        timed("encode", lambda q=q: question_vector(q + " ?", recalling.QUESTION_TOKENS))
        timed("search_schema", lambda q=q: search_schema(ctx, SearchSchema(query=q, limit=4)))
        linked = recalling.linked_tables(ctx, src, q, recalling.WEIGHTS.link_depth)
        timed("rank", lambda q=q, linked=linked: recalling.rank(index, q, linked, 3))
    src.close()
    out = {
        "stored": report.added,
        "verified_in_index": found.verified,
        "asked": len(asked),
        "import_s": round(import_s, 1),
        "cold_start_s": round(cold_s, 2),
        "ms": {
            name: {
                "p50": round(statistics.median(v), 1),
                "p95": round(pct(v, 0.95), 1),
                "max": round(max(v), 1),
            }
            for name, v in parts.items()
        },
        "load": os.getloadavg(),
    }
    print(
        f"\nrecall on a store of {out['verified_in_index']:,} verified queries ({len(asked)} questions asked)"
    )
    print(f"{'ms':<44} {'p50':>7} {'p95':>7} {'max':>7}")
    labels = {
        "recall": "recall (all of it)",
        "encode": "  the question's vector alone (the floor)",
        "search_schema": "  search_schema's linking, vector cached",
        "rank": "  ranking the stored queries",
    }
    for name, label in labels.items():
        m = out["ms"][name]
        print(f"{label:<44} {m['p50']:>7} {m['p95']:>7} {m['max']:>7}")
    ratio = out["ms"]["recall"]["p95"] / max(out["ms"]["encode"]["p95"], 0.001)
    out["recall_over_encode_p95"] = round(ratio, 2)
    print(
        f"recall p95 / encoding p95 = {ratio:.2f}; import {out['import_s']} s, cold start {out['cold_start_s']} s"
    )
    print(f"load average during the run: {', '.join(f'{x:.1f}' for x in out['load'])} (2 cores)")
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / "recall_latency.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
