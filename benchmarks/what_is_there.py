"""What the schema tools say is there, against what is there (issue 27), before and after.

Three measurements, each run in this checkout ("after") and, given `--baseline DIR` (a checkout of the
commit to compare with, e.g. `git worktree add --detach /tmp/base main`), in a child process importing
flexsql from DIR ("before"):

- row figures: every table of the Spider SQLite databases and of the Spider 2.0-Snow samples (DuckDB
  files built by warehouse_catalog.py) — the figure the catalog gives against count(*): the share within
  a factor of two, the median and worst ratio (max(a/b, b/a)), how many are exact; "after" also with
  counting off (the engines' estimates alone: sqlite_stat1 or the B-tree page sample, DuckDB's metadata);
- nested-path coverage per family (Spider 2.0-Snow samples; their VARIANT columns hold JSON text): the
  keys present in any shard's rows against the paths describe_table lists (in its text, at most 40 per
  column) and knows (what search ranks), for the family's pattern and for its first shard;
- latency on the widest families with nested columns: describe_table cold (first call after the catalog
  load) and warm, and search_schema's first call (the catalog's nested columns sampled) and warm
  median/p95 over the database's Spider 2.0-Snow questions.

    .venv/bin/python benchmarks/what_is_there.py [--spider ../shared/data/spider/databases]
        [--snow ../shared/data/spider2-snow] [--workdir DIR] [--baseline DIR] [--only DB,DB] [--json out]

Prints tables and writes benchmarks/results/what_is_there.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

DEFAULT_SPIDER = HERE.parents[1] / "shared" / "data" / "spider" / "databases"
WIDEST = 4  # families timed (the most shards x columns among those with nested columns)


def _ratio(figure: int | None, count: int) -> float | None:
    if figure is None:
        return None
    a, b = max(figure, 1), max(count, 1)
    return max(a / b, b / a)


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ratios = [r["ratio"] for r in rows if r["ratio"] is not None]
    if not rows:
        return {"tables": 0}
    ordered = sorted(ratios)
    return {
        "tables": len(rows),
        "with_figure": len(ratios),
        "within_2x": round(sum(1 for x in ratios if x <= 2) / len(rows), 4),
        "median_ratio": round(statistics.median(ratios), 3) if ratios else None,
        "p95_ratio": round(ordered[int(0.95 * (len(ordered) - 1))], 3) if ordered else None,
        "max_ratio": round(max(ratios), 1) if ratios else None,
        "exact": sum(1 for r in rows if r["exact"]),
        "worst": sorted((r for r in rows if r["ratio"] is not None), key=lambda r: -r["ratio"])[:3],
    }


def row_figures(urls: list[tuple[str, str]], counting: bool = True) -> dict[str, Any]:
    """Each table's catalog figure against count(*); `urls`: (engine, url) pairs."""
    from flexsql.tools.engines import open_source

    if not counting:
        from flexsql.tools.engines import row_counts

        row_counts.COUNT_UP_TO = -1
    rows: list[dict[str, Any]] = []
    load_s = 0.0
    for engine, url in urls:
        source = open_source(url, name="db")
        try:
            started = time.perf_counter()
            catalog = source.catalog()
            load_s += time.perf_counter() - started
            counts = _counts(engine, url, source, [t for t in catalog.tables if t.kind == "table"])
            for t in catalog.tables:
                if t.kind != "table" or t.qualified not in counts:
                    continue
                count = counts[t.qualified]
                rows.append(
                    {
                        "db": Path(url).stem,
                        "table": t.qualified,
                        "count": count,
                        "figure": t.row_estimate,
                        "exact": bool(getattr(t, "rows_exact", False)),
                        "ratio": _ratio(t.row_estimate, count),
                    }
                )
        finally:
            source.close()
    out = _summary(rows)
    out["catalog_load_s"] = round(load_s, 2)
    return out


def _counts(engine: str, url: str, source: Any, tables: list[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    if engine == "sqlite":
        conn = sqlite3.connect(f"file:{url.split(':///', 1)[1]}?mode=ro", uri=True)
        for t in tables:
            try:
                out[t.qualified] = conn.execute(f'SELECT count(*) FROM "{t.name}"').fetchone()[0]
            except sqlite3.Error:
                pass
        conn.close()
        return out
    for t in tables:  # DuckDB allows one configuration per file in a process: the source's connection
        out[t.qualified] = source.execute(f'SELECT count(*) FROM "{t.schema_name}"."{t.name}"').rows[0][0]
    return out


# -- nested paths -------------------------------------------------------------------------------------


def _leaves(doc: Any, path: str, out: set[str], depth: int = 0) -> None:
    """Every key's path inside a document, unquoted and lower-cased (the spelling both checkouts share
    once quotes are dropped), leaves only; a key holding NULL counts: it is there."""
    if depth > 12:
        return
    if isinstance(doc, dict):
        for key, value in doc.items():
            _leaves(value, f"{path}.{str(key).lower()}", out, depth + 1)
    elif isinstance(doc, list):
        for value in doc:
            _leaves(value, f"{path}[]", out, depth + 1)
    elif "." in path or "[]" in path:
        out.add(path)


def _truth(source: Any, shards: list[str], nested: list[str]) -> set[str]:
    """The paths of every key present in any row of any shard."""
    present: set[str] = set()
    for shard in shards:
        schema, name = shard.split(".", 1)
        table = source.catalog().resolve(shard)
        have = {c.name.lower(): c.name for c in table.columns}
        cols = [have[c.lower()] for c in nested if c.lower() in have]
        if not cols:
            continue
        quoted = ", ".join(f'"{c}"' for c in cols)
        for row in source.execute(f'SELECT {quoted} FROM "{schema}"."{name}"').rows:
            for c, v in zip(cols, row, strict=True):
                if isinstance(v, str) and v.strip()[:1] in ("{", "["):
                    try:
                        _leaves(json.loads(v), c.lower(), present)
                    except ValueError:
                        pass
    return present


def _spelling(path: str) -> str:
    return path.replace('"', "").lower()


def families_with_nested(path: str) -> list[dict[str, Any]]:
    """The sharded families (whole shape groups) of a warehouse file whose columns hold JSON documents."""
    from flexsql.tools.engines import open_source
    from flexsql.tools.engines.families import named_families
    from flexsql.tools.engines.paths import as_document

    source = open_source(f"duckdb:///{path}", name="db")
    try:
        catalog = source.catalog()
        out = []
        seen: set[str] = set()
        for fam in named_families(catalog.tables):
            first = catalog.tables[fam.group_members[0]]
            key = f"{first.schema_name}.{fam.group}"
            if key in seen:
                continue
            seen.add(key)
            shards = [catalog.tables[i] for i in fam.group_members]
            columns = {
                c.name
                for t in shards
                for c in t.columns
                if "CHAR" in c.type.upper() or "JSON" in c.type.upper()
            }
            if not columns:
                continue
            union = " UNION ALL ".join(
                f'SELECT {", ".join(chr(34) + c + chr(34) if c in {x.name for x in t.columns} else "NULL" for c in sorted(columns))} FROM "{t.schema_name}"."{t.name}"'
                for t in shards
            )
            rows = source.execute(union, timeout_s=60).rows
            nested = sorted(
                c
                for i, c in enumerate(sorted(columns))
                if any(isinstance(r[i], str) and as_document(r[i]) for r in rows)
            )
            if nested:
                out.append(
                    {
                        "family": key,
                        "shards": [t.qualified for t in shards],
                        "nested": nested,
                        "columns": len({c.name.lower() for t in shards for c in t.columns}),
                    }
                )
        return out
    finally:
        source.close()


def coverage(path: str, family: dict[str, Any]) -> dict[str, Any]:
    """Paths describe_table lists (text) and knows against the keys present, for the family and its first shard."""
    from flexsql.tools.catalog import DescribeTable, describe_table
    from flexsql.tools.engines import SourceRegistry, open_source
    from flexsql.tools.runtime.context import ToolContext

    source = open_source(f"duckdb:///{path}", name="db")
    try:
        present = _truth(source, family["shards"], family["nested"])
    finally:
        source.close()
    out: dict[str, Any] = {
        "family": family["family"],
        "shards": len(family["shards"]),
        "keys_present": len(present),
    }
    for label, table in (("family", family["family"]), ("first_shard", family["shards"][0])):
        source = open_source(f"duckdb:///{path}", name="db")
        ctx = ToolContext(sources=SourceRegistry([source]))
        try:
            described = describe_table(ctx, DescribeTable(table=table))
            listed = {_spelling(p.path) for c in described.columns for p in c.paths}
            known = set(listed)
            try:  # after: every path kept (search ranks them all), beyond the 40 a column lists
                from flexsql.tools.engines.nested_sample import _Samples

                cache = source.catalog().derived("engines.nested_sample", _Samples)
                known |= {
                    _spelling(p.path) for s in cache.by_shards.values() for ps in s.paths.values() for p in ps
                }
            except ImportError:
                pass
        finally:
            source.close()
        out[f"{label}_listed"] = round(len(listed & present) / len(present), 4) if present else None
        out[f"{label}_known"] = round(len(known & present) / len(present), 4) if present else None
    return out


# -- latency ------------------------------------------------------------------------------------------


def latency(path: str, family: dict[str, Any], questions: list[str], repeat: int = 5) -> dict[str, Any]:
    from flexsql.tools.catalog import DescribeTable, describe_table
    from flexsql.tools.engines import SourceRegistry, open_source
    from flexsql.tools.runtime.context import ToolContext
    from flexsql.tools.search.ranking import SearchSchema, search_schema

    def timed(call: Any) -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        call()
        return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000

    out: dict[str, Any] = {
        "family": family["family"],
        "shards": len(family["shards"]),
        "columns": family["columns"],
    }
    source = open_source(f"duckdb:///{path}", name="db")
    ctx = ToolContext(sources=SourceRegistry([source]))
    try:
        source.catalog()
        table = family["family"]
        out["describe_cold_ms"], out["describe_cold_cpu_ms"] = (
            round(x, 1) for x in timed(lambda: describe_table(ctx, DescribeTable(table=table)))
        )
        warm = [timed(lambda: describe_table(ctx, DescribeTable(table=table)))[0] for _ in range(repeat)]
        out["describe_warm_ms"] = round(statistics.median(warm), 2)
    finally:
        source.close()
    source = open_source(f"duckdb:///{path}", name="db")
    ctx = ToolContext(sources=SourceRegistry([source]))
    try:
        source.catalog()
        first = questions[0] if questions else "events by date"
        out["search_first_ms"], out["search_first_cpu_ms"] = (
            round(x, 1) for x in timed(lambda: search_schema(ctx, SearchSchema(query=first)))
        )
        times = [
            timed(lambda q=q: search_schema(ctx, SearchSchema(query=q)))[0]
            for q in (questions or [first]) * 2
        ]
        ordered = sorted(times)
        out["search_warm_median_ms"] = round(statistics.median(times), 2)
        out["search_warm_p95_ms"] = round(ordered[int(0.95 * (len(ordered) - 1))], 2)
        out["questions"] = len(questions)
    finally:
        source.close()
    return out


# -- driver ---------------------------------------------------------------------------------------------


def measure(
    spider: Path, snow_files: dict[str, str], questions: dict[str, list[str]], side: str
) -> dict[str, Any]:
    os.environ.setdefault("FLEXSQL_EMBEDDINGS", "off")  # ranking by words: the same in both checkouts
    sqlite_urls = [("sqlite", f"sqlite:///{p}") for p in sorted(spider.glob("*/*.sqlite"))]
    duck_urls = [("duckdb", f"duckdb:///{p}") for p in snow_files.values()]
    report: dict[str, Any] = {"side": side}
    report["rows_spider"] = row_figures(sqlite_urls)
    report["rows_snow"] = row_figures(duck_urls)
    families: list[tuple[str, dict[str, Any]]] = []
    for db, path in snow_files.items():
        families += [(db, f) for f in families_with_nested(path)]
    report["coverage"] = [dict(coverage(snow_files[db], f), db=db) for db, f in families]
    widest = sorted(families, key=lambda x: -len(x[1]["shards"]) * x[1]["columns"])[:WIDEST]
    report["latency"] = [dict(latency(snow_files[db], f, questions.get(db, [])), db=db) for db, f in widest]
    if side == "after":  # the engines' estimates alone (a child process: counting is off for good)
        child = subprocess.run(
            [sys.executable, __file__, "--estimates-only", json.dumps([sqlite_urls, duck_urls])],
            capture_output=True,
            text=True,
            check=True,
        )
        report["estimates_only"] = json.loads(child.stdout.strip().splitlines()[-1])
    return report


def _print(report: dict[str, Any]) -> None:
    side = report["side"]
    for key, label in (("rows_spider", "Spider SQLite"), ("rows_snow", "Spider 2.0-Snow samples (DuckDB)")):
        r = report[key]
        print(
            f"[{side}] rows, {label}: {r['tables']} tables, within 2x {r['within_2x']:.1%}, median ratio "
            f"{r['median_ratio']}, p95 {r['p95_ratio']}, worst {r['max_ratio']}, exact {r['exact']}, "
            f"catalog loads {r['catalog_load_s']} s"
        )
    if "estimates_only" in report:
        for key, r in report["estimates_only"].items():
            print(
                f"[{side}, counting off] rows, {key}: within 2x {r['within_2x']:.1%}, median {r['median_ratio']}, "
                f"p95 {r['p95_ratio']}, worst {r['max_ratio']}"
            )
    cov = report["coverage"]
    if cov:
        for c in cov:
            print(
                f"[{side}] paths {c['db']}.{c['family']} ({c['shards']} shards, {c['keys_present']} keys present): "
                f"family listed {c['family_listed']:.0%} known {c['family_known']:.0%}; first shard listed "
                f"{c['first_shard_listed']:.0%} known {c['first_shard_known']:.0%}"
            )
    for t in report["latency"]:
        print(
            f"[{side}] {t['db']}.{t['family']} ({t['shards']} shards, {t['columns']} cols): describe cold "
            f"{t['describe_cold_ms']} ms (cpu {t['describe_cold_cpu_ms']}), warm {t['describe_warm_ms']} ms; "
            f"search first {t['search_first_ms']} ms (cpu {t['search_first_cpu_ms']}), warm median "
            f"{t['search_warm_median_ms']} p95 {t['search_warm_p95_ms']} ms ({t['questions']} questions x2)"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spider", type=Path, default=DEFAULT_SPIDER)
    parser.add_argument("--snow", type=Path)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--only", help="comma-separated Spider 2.0-Snow database names")
    parser.add_argument("--baseline", type=Path, help="a checkout to measure as 'before'")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "what_is_there.json")
    parser.add_argument("--side", help=argparse.SUPPRESS)
    parser.add_argument("--plan", help=argparse.SUPPRESS)
    parser.add_argument("--estimates-only", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.estimates_only:  # a child: the engines' estimates, counting off
        sqlite_urls, duck_urls = json.loads(args.estimates_only)
        out = {
            "spider": row_figures([tuple(u) for u in sqlite_urls], counting=False),
            "snow": row_figures([tuple(u) for u in duck_urls], counting=False),
        }
        print(json.dumps(out))
        return 0
    if args.side:  # a child measuring one side
        if args.side == "before":
            from baseline import use_checkout

            use_checkout(args.baseline)
        plan = json.loads(args.plan)
        report = measure(Path(plan["spider"]), plan["snow_files"], plan["questions"], args.side)
        print(json.dumps(report, default=str))
        return 0
    from warehouse_catalog import DEFAULT_DATA, DEFAULT_WORKDIR, build_all
    from warehouse_linking import load_tasks

    snow = args.snow or DEFAULT_DATA
    built = build_all(snow, args.workdir or DEFAULT_WORKDIR, set(args.only.split(",")) if args.only else None)
    snow_files = {b["db"]: b["file"] for b in built}
    questions: dict[str, list[str]] = {}
    for task in load_tasks(snow):
        questions.setdefault(task["db_id"], []).append(task["instruction"][:2000])
    plan = json.dumps({"spider": str(args.spider), "snow_files": snow_files, "questions": questions})
    reports = {}
    for side in (["before"] if args.baseline else []) + ["after"]:
        cmd = [sys.executable, __file__, "--side", side, "--plan", plan]
        if args.baseline:
            cmd += ["--baseline", str(args.baseline)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            print(done.stderr[-3000:], file=sys.stderr)
            return 1
        reports[side] = json.loads(done.stdout.strip().splitlines()[-1])
        _print(reports[side])
    reports["loadavg"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(reports, indent=2, default=str))
    print(f"wrote {args.out} (load average {reports['loadavg'][0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
