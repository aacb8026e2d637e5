"""search_schema latency on the largest open warehouse (Spider 2.0-Snow COVID19_USA: 285 tables,
70,858 columns), cold and warm, with and without the embedding model.

Cold: the first call in a fresh process state (catalog load, search index; the table vectors start in
the background and this call does not wait for them). Then the time until the vectors are ready (from
the on-disk store when an earlier run encoded them, else encoded now), and the warm latency of every
open Spider 2.0-Snow question (328, whatever their database: the catalog is what costs) with the
vectors in use, and again with the model off. CPU time is reported beside wall time: on a shared
machine the wall time is mostly other processes.

    .venv/bin/python benchmarks/search_latency.py [--db COVID19_USA] [--workdir DIR]

Prints a table and writes benchmarks/results/search_latency.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
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


def measure(path: Path, questions: list[str], embeddings: bool) -> dict[str, Any]:
    from flexsql.tools.engines import SourceRegistry, open_source
    from flexsql.tools.runtime.context import ToolContext
    from flexsql.tools.search import semantic
    from flexsql.tools.search.ranking import SearchSchema, search_schema

    os.environ["FLEXSQL_EMBEDDINGS"] = "" if embeddings else "off"
    source = open_source(f"duckdb:///{path}", name="wh")
    ctx = ToolContext(sources=SourceRegistry([source]))
    started = time.perf_counter()
    cpu = time.process_time()
    search_schema(ctx, SearchSchema(query=questions[0], limit=10))
    cold = {"wall_s": round(time.perf_counter() - started, 3), "cpu_s": round(time.process_time() - cpu, 3)}
    engine = ctx.caches["search:wh"]
    started = time.perf_counter()
    vectors = semantic.attach(engine, wait=True) if embeddings else None
    ready = round(time.perf_counter() - started, 2) if vectors is not None else None
    wall: list[float] = []
    cpus: list[float] = []
    for q in questions:
        t0, c0 = time.perf_counter(), time.process_time()
        search_schema(ctx, SearchSchema(query=q, limit=10))
        wall.append((time.perf_counter() - t0) * 1000)
        cpus.append((time.process_time() - c0) * 1000)
    catalog = source.catalog()
    source.close()
    return {
        "tables": len(catalog.tables),
        "columns": sum(len(t.columns) for t in catalog.tables),
        "cold_first_call": cold,
        "vectors_ready_s": ready,
        "warm_ms": {"median": round(statistics.median(wall), 2), "p95": _pct(wall, 0.95)},
        "warm_cpu_ms": {"median": round(statistics.median(cpus), 2), "p95": _pct(cpus, 0.95)},
        "loadavg": os.getloadavg(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    parser.add_argument("--db", default="COVID19_USA")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "search_latency.json")
    args = parser.parse_args(argv)
    os.environ.setdefault("FLEXSQL_CACHE_DIR", str(args.workdir / f"cache-{os.getpid()}"))
    keep_embeddings(args.workdir)
    build_all(args.data, args.workdir, {args.db})
    questions = [t["instruction"][:2000] for t in load_tasks(args.data)]
    path = args.workdir / f"wh_{args.db}.duckdb"
    report = {"db": args.db, "questions": len(questions)}
    for label, on in (("embeddings on", True), ("embeddings off", False)):
        report[label] = r = measure(path, questions, on)
        print(
            f"{label:<15} {r['tables']} tables {r['columns']} columns | cold first call {r['cold_first_call']['wall_s']} s "
            f"(cpu {r['cold_first_call']['cpu_s']} s) | vectors ready {r['vectors_ready_s']} s | warm median "
            f"{r['warm_ms']['median']} ms p95 {r['warm_ms']['p95']} ms (cpu median {r['warm_cpu_ms']['median']} "
            f"p95 {r['warm_cpu_ms']['p95']} ms) | load average {r['loadavg'][0]:.1f}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
