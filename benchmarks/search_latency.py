"""search_schema latency on the largest open warehouse (Spider 2.0-Snow COVID19_USA: 285 tables,
70,858 columns), cold and warm, with and without the embedding model.

Three scenarios, each in a fresh process: the model on with an empty vector store (a first start:
the searches run while the vectors build in the background are timed too), the model on with the
vectors stored by an earlier run, and the model off. Each: the first call (catalog load, search
index; it never waits for the vectors), the time until the vectors are ready, the warm latency of
every open Spider 2.0-Snow question (328, whatever their database: the catalog is what costs), the
same question searched again at once (the question vectors are remembered), and the process's peak
RSS. With the model on, each question is also searched with its vector from 256 tokens (as before
Params.semantic_question_tokens), alternating question by question so both see the same machine load. CPU time is reported beside wall time: on a shared machine the wall time is
mostly other processes.

    .venv/bin/python benchmarks/search_latency.py [--db COVID19_USA] [--workdir DIR]

Prints a table and writes benchmarks/results/search_latency.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from warehouse_catalog import DEFAULT_DATA, DEFAULT_WORKDIR, build_all  # noqa: E402
from warehouse_linking import keep_embeddings, load_tasks  # noqa: E402


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[int(q * (len(ordered) - 1))], 2)


SCENARIOS = {
    "model on, empty store": "the first start: nothing encoded yet, the vectors build while searches run",
    "model on, stored vectors": "a later start: the vectors come from the on-disk store",
    "model off": "FLEXSQL_EMBEDDINGS=off",
}


def measure(path: Path, questions: list[str], scenario: str, workdir: Path) -> dict[str, Any]:
    """One scenario in this (fresh) process: the cold first call, the searches run while the vectors
    build (empty store only), the time until they are ready, then the warm latency; peak RSS."""
    import resource
    import tempfile

    if scenario == "model off":
        os.environ["FLEXSQL_EMBEDDINGS"] = "off"
    if scenario == "model on, empty store":
        os.environ["FLEXSQL_CACHE_DIR"] = tempfile.mkdtemp(prefix="latency-", dir=workdir)
    else:
        os.environ["FLEXSQL_CACHE_DIR"] = str(workdir / f"cache-{os.getpid()}")
        keep_embeddings(workdir)

    from flexsql.tools.engines import SourceRegistry, open_source
    from flexsql.tools.runtime.context import ToolContext
    from flexsql.tools.search import semantic, synonyms
    from flexsql.tools.search.ranking import SearchSchema, search_schema

    source = open_source(f"duckdb:///{path}", name="wh")
    ctx = ToolContext(sources=SourceRegistry([source]))
    started = time.perf_counter()
    cpu = time.process_time()
    search_schema(ctx, SearchSchema(query=questions[0], limit=10))
    cold = {"wall_s": round(time.perf_counter() - started, 3), "cpu_s": round(time.process_time() - cpu, 3)}
    engine = ctx.caches["search:wh"]
    during: list[float] = []
    if scenario == "model on, empty store":  # searches while the background build runs
        for q in questions:
            if engine.semantic is not None:
                break
            t0 = time.perf_counter()
            search_schema(ctx, SearchSchema(query=q, limit=10))
            during.append((time.perf_counter() - t0) * 1000)
    vectors = semantic.attach(engine, wait=True) if scenario != "model off" else None
    ready = round(time.perf_counter() - started, 2) if vectors is not None else None
    # warm means nothing else is being built: the WordNet index (a fresh cache folder builds it in the
    # background, seconds of CPU that would be timed as search latency) is waited for too
    synonyms.wordnet(wait=True)
    background = sorted(
        t.name for t in threading.enumerate() if t.name.startswith("flexsql-") and t.is_alive()
    )
    wall: list[float] = []
    cpus: list[float] = []
    repeated: list[float] = []
    before_wall: list[float] = []
    before_cpu: list[float] = []
    now, before = engine.params, dataclasses.replace(engine.params, semantic_question_tokens=256)
    for q in questions:
        if vectors is not None:  # the same question as before this change, alternating (same load)
            engine.params = before
            t0, c0 = time.perf_counter(), time.process_time()
            search_schema(ctx, SearchSchema(query=q, limit=10))
            before_wall.append((time.perf_counter() - t0) * 1000)
            before_cpu.append((time.process_time() - c0) * 1000)
            engine.params = now
        t0, c0 = time.perf_counter(), time.process_time()
        search_schema(ctx, SearchSchema(query=q, limit=10))
        wall.append((time.perf_counter() - t0) * 1000)
        cpus.append((time.process_time() - c0) * 1000)
        t0 = time.perf_counter()
        search_schema(ctx, SearchSchema(query=q, limit=10))  # an agent repeating its search
        repeated.append((time.perf_counter() - t0) * 1000)
    catalog = source.catalog()
    source.close()
    return {
        "scenario": scenario,
        "tables": len(catalog.tables),
        "columns": sum(len(t.columns) for t in catalog.tables),
        "cold_first_call": cold,
        "searches_while_building": {
            "n": len(during),
            "median_ms": round(statistics.median(during), 2) if during else None,
            "p95_ms": _pct(during, 0.95) if during else None,
        },
        "vectors_ready_s": ready,
        "warm_ms": {"median": round(statistics.median(wall), 2), "p95": _pct(wall, 0.95)},
        "warm_cpu_ms": {"median": round(statistics.median(cpus), 2), "p95": _pct(cpus, 0.95)},
        "warm_repeated_ms": {"median": round(statistics.median(repeated), 2), "p95": _pct(repeated, 0.95)},
        "before_256_tokens": {
            "warm_ms": {"median": round(statistics.median(before_wall), 2), "p95": _pct(before_wall, 0.95)},
            "warm_cpu_ms": {"median": round(statistics.median(before_cpu), 2), "p95": _pct(before_cpu, 0.95)},
        }
        if before_wall
        else None,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "background_threads_when_warm": background,
        "loadavg": os.getloadavg(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    parser.add_argument("--db", default="COVID19_USA")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "search_latency.json")
    parser.add_argument("--scenario", choices=list(SCENARIOS), help=argparse.SUPPRESS)  # the child's part
    args = parser.parse_args(argv)
    build_all(args.data, args.workdir, {args.db})
    questions = [t["instruction"][:2000] for t in load_tasks(args.data)]
    path = args.workdir / f"wh_{args.db}.duckdb"
    if args.scenario:
        print(json.dumps(measure(path, questions, args.scenario, args.workdir)))
        return 0
    report: dict[str, Any] = {"db": args.db, "questions": len(questions), "scenarios": {}}
    for scenario, what in SCENARIOS.items():  # each in a fresh process: cold is cold, RSS is its own
        child = [sys.executable, __file__, "--data", str(args.data), "--workdir", str(args.workdir)]
        done = subprocess.run(
            [*child, "--db", args.db, "--scenario", scenario], capture_output=True, text=True, check=True
        )
        report["scenarios"][scenario] = r = json.loads(done.stdout.strip().splitlines()[-1])
        during = r["searches_while_building"]
        print(
            f"{scenario:<25} {r['tables']} tables {r['columns']} columns | cold first call "
            f"{r['cold_first_call']['wall_s']} s (cpu {r['cold_first_call']['cpu_s']} s) | while building: "
            f"{during['n']} searches, p95 {during['p95_ms']} ms | vectors ready {r['vectors_ready_s']} s | "
            f"warm median {r['warm_ms']['median']} ms p95 {r['warm_ms']['p95']} ms (cpu p95 "
            f"{r['warm_cpu_ms']['p95']} ms) | peak RSS {r['peak_rss_mb']} MB | load {r['loadavg'][0]:.1f}"
        )
        print(f"  ({what}); the same question repeated: warm p95 {r['warm_repeated_ms']['p95']} ms")
        if r["before_256_tokens"]:
            b = r["before_256_tokens"]
            print(
                f"  before (the question's vector from 256 tokens, alternating with the above): warm median "
                f"{b['warm_ms']['median']} ms p95 {b['warm_ms']['p95']} ms (cpu p95 {b['warm_cpu_ms']['p95']} ms)"
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
