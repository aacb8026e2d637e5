"""Nested columns and sharded families on the open Spider 2.0-Snow schemas (DuckDB catalogs built by
warehouse_catalog.py, with each table's few sample rows; VARIANT/OBJECT/ARRAY columns hold JSON text).

Measures:
- coverage: of the tables with a nested column (VARIANT, OBJECT or ARRAY in the Snowflake DDL) whose
  sample rows hold a JSON document with at least one value there (among the columns describe_table
  shows), the share whose paths describe_table lists (every such column gets at least one path), and how
  many paths it lists;
- latency on the widest nested tables: describe_table (cold, then warm), and sample_rows, distinct_values,
  profile_column reading the first listed path (median of --repeat calls);
- families: how many list_tables shows, how many shard groups split into several column sets, and a
  `SELECT count(*) FROM <stem>*` over the biggest family (expansion + run, median).

    .venv/bin/python benchmarks/nested_paths.py [--data ../shared/data/spider2-snow] [--workdir DIR]
        [--only DB,DB] [--widest 5] [--repeat 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.warehouse_catalog import DEFAULT_DATA, DEFAULT_WORKDIR, build_all  # noqa: E402
from flexsql.tools.catalog import (  # noqa: E402
    MAX_DESCRIBE_COLUMNS,
    DescribeTable,
    ListTables,
    describe_table,
    list_tables,
)
from flexsql.tools.engines import SourceRegistry, open_source  # noqa: E402
from flexsql.tools.engines.families import named_families, shape_groups  # noqa: E402
from flexsql.tools.engines.paths import as_document  # noqa: E402
from flexsql.tools.query import RunQuery, SampleRows, run_query, sample_rows  # noqa: E402
from flexsql.tools.runtime.context import ToolContext  # noqa: E402
from flexsql.tools.values.distinct import DistinctValues, distinct_values  # noqa: E402
from flexsql.tools.values.profile import ProfileColumn, profile_column  # noqa: E402

NESTED = {"VARIANT", "OBJECT", "ARRAY"}


def nested_columns(folder: Path) -> dict[tuple[str, str], tuple[list[str], list[str], int]]:
    """(schema, table) -> (nested columns, those whose samples hold a JSON document, column count)."""
    out = {}
    for meta in folder.glob("*/*.json"):
        try:
            info = json.loads(meta.read_text())
        except (OSError, ValueError):
            continue
        names, types = info.get("column_names") or [], info.get("column_types") or []
        nested = [n for n, t in zip(names, types, strict=False) if str(t).split("(")[0].upper() in NESTED]
        if not nested:
            continue
        rows = [r for r in info.get("sample_rows") or [] if isinstance(r, dict)]
        lowered = [{str(k).lower(): v for k, v in r.items()} for r in rows]
        documented = [n for n in nested if any(_has_leaf(as_document(r.get(n.lower()))) for r in lowered)]
        table = str(info.get("table_fullname", meta.stem)).split(".")[-1]
        out[(meta.parent.name, table)] = (nested, documented, len(names))
    return out


def _has_leaf(doc: Any) -> bool:
    """A document holding at least one value (not only empty objects and arrays)."""
    if isinstance(doc, dict):
        return any(_has_leaf(v) for v in doc.values())
    if isinstance(doc, list):
        return any(_has_leaf(v) for v in doc)
    return doc is not None


def median_ms(call: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 2)


def _latency(stats: dict[str, Any], width: int, table: str, path: str, repeat: int) -> dict[str, Any]:
    """The tools' latency on one table: describe_table cold and warm, the value tools on one path."""
    source = open_source(f"duckdb:///{stats['file']}", name=stats["db"].lower())
    ctx = ToolContext(sources=SourceRegistry([source]))
    try:
        started = time.perf_counter()
        described = describe_table(ctx, DescribeTable(table=table))
        cold = round((time.perf_counter() - started) * 1000, 2)
        return {
            "db": stats["db"],
            "table": table,
            "columns": width,
            "path": path,
            "paths_listed": sum(len(c.paths) for c in described.columns),
            "describe_cold_ms": cold,
            "describe_warm_ms": median_ms(lambda: describe_table(ctx, DescribeTable(table=table)), repeat),
            "sample_rows_ms": median_ms(
                lambda: sample_rows(ctx, SampleRows(table=table, columns=[path], limit=5)), repeat
            ),
            "distinct_values_ms": median_ms(
                lambda: distinct_values(ctx, DistinctValues(table=table, column=path)), repeat
            ),
            "profile_column_ms": median_ms(
                lambda: profile_column(ctx, ProfileColumn(table=table, column=path)), repeat
            ),
            "describe_chars": len(described.to_text()),
        }
    finally:
        source.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    parser.add_argument("--only", help="comma-separated database names")
    parser.add_argument("--widest", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    built = build_all(args.data, args.workdir, set(args.only.split(",")) if args.only else None)
    tables_with_nested = tables_with_docs = listed = 0
    paths_listed: list[int] = []
    misses: list[str] = []
    beyond_describe = {"tables": 0, "columns": 0}  # nested columns past describe_table's first columns
    widest: list[tuple[int, str, str, str]] = []  # (columns, db, qualified, first path)
    families = {"entries": 0, "split_groups": 0, "biggest": ("", "", 0)}
    for stats in built:
        db = stats["db"]
        truth = nested_columns(args.data / "databases" / db)
        source = open_source(f"duckdb:///{stats['file']}", name=db.lower())
        ctx = ToolContext(sources=SourceRegistry([source]))
        catalog = source.catalog()
        by_name = {(t.schema_name, t.name): t for t in catalog.tables}
        fams = named_families(catalog.tables)
        families["entries"] += len(fams)
        families["split_groups"] += sum(
            1
            for g in shape_groups(catalog.tables)
            if len({frozenset(c.name.lower() for c in catalog.tables[i].columns) for i in g}) > 1
            and sum(len(f.members) for f in fams if f.members[0] in g) > 0
        )
        for fam in fams:
            size = sum(len(f.members) for f in fams if f.group == fam.group)
            if size > families["biggest"][2]:
                first = catalog.tables[fam.members[0]]
                families["biggest"] = (db, f"{first.schema_name}.{fam.group}", size)
        for (schema, name), (_nested, documented, width) in truth.items():
            info = by_name.get((schema, name))
            if info is None:
                continue
            tables_with_nested += 1
            # describe_table shows the table's first columns, in the catalog's order (not the JSON's)
            shown = {c.name.lower() for c in info.columns[:MAX_DESCRIBE_COLUMNS]}
            unshown = [n for n in documented if n.lower() not in shown]
            if unshown:
                beyond_describe["tables"] += 1
                beyond_describe["columns"] += len(unshown)
            documented = [n for n in documented if n.lower() in shown]
            if not documented:
                continue
            tables_with_docs += 1
            described = describe_table(ctx, DescribeTable(table=info.qualified))
            with_paths = {c.name.lower(): c.paths for c in described.columns}
            ok = all(with_paths.get(n.lower()) for n in documented)
            listed += ok
            paths_listed.append(sum(len(with_paths.get(n.lower()) or []) for n in documented))
            if not ok and len(misses) < 10:
                misses.append(
                    f"{db}.{info.qualified}: {[n for n in documented if not with_paths.get(n.lower())]}"
                )
            # the value tools are timed on a path sample_rows reads too (none through an array)
            first = next(
                (p.path for n in documented for p in with_paths.get(n.lower()) or [] if "[]" not in p.path),
                None,
            )
            if first:
                widest.append((width, db, info.qualified, first))
        source.close()
    widest.sort(reverse=True)
    latency = [
        _latency(next(s for s in built if s["db"] == db), width, table, path, args.repeat)
        for width, db, table, path in widest[: args.widest]
    ]
    family_run = None
    db, pattern, size = families["biggest"]
    if size:
        stats = next(s for s in built if s["db"] == db)
        source = open_source(f"duckdb:///{stats['file']}", name=db.lower())
        ctx = ToolContext(sources=SourceRegistry([source]))
        sql = f"SELECT count(*) FROM {pattern}"
        out = run_query(ctx, RunQuery(sql=sql))
        family_run = {
            "db": db,
            "sql": sql,
            "shards": size,
            "rows": out.rows[0][0],
            "run_query_ms": median_ms(lambda: run_query(ctx, RunQuery(sql=sql)), args.repeat),
            "listed_as": [
                t.name for t in list_tables(ctx, ListTables(pattern=pattern.split(".")[-1])).tables
            ],
        }
        source.close()
    report = {
        "databases": len(built),
        "tables_with_nested_columns": tables_with_nested,
        "tables_with_nested_samples": tables_with_docs,
        "tables_whose_paths_are_listed": listed,
        "share_listed": round(listed / tables_with_docs, 4) if tables_with_docs else None,
        "paths_per_table_median": statistics.median(paths_listed) if paths_listed else 0,
        "paths_per_table_max": max(paths_listed, default=0),
        "misses": misses,
        "nested_beyond_describe": beyond_describe,
        "latency_widest": latency,
        "families": {"entries": families["entries"], "split_groups": families["split_groups"]},
        "biggest_family": family_run,
    }
    print(
        f"{report['databases']} databases: {tables_with_nested} tables with a VARIANT/OBJECT/ARRAY column, "
        f"{tables_with_docs} with JSON in their sample rows; describe_table lists paths for {listed} "
        f"({100 * (report['share_listed'] or 0):.1f}%), median {report['paths_per_table_median']} paths "
        f"(max {report['paths_per_table_max']})"
    )
    if beyond_describe["tables"]:
        print(
            f"not counted: {beyond_describe['columns']} nested column(s) of {beyond_describe['tables']} table(s) "
            f"past describe_table's first {MAX_DESCRIBE_COLUMNS} columns"
        )
    print(
        f"{'table':<60} {'cols':>5} {'paths':>5} {'desc cold':>9} {'warm':>6} {'sample':>7} {'distinct':>8} {'profile':>7}"
    )
    for r in latency:
        print(
            f"{(r['db'] + '.' + r['table'])[:60]:<60} {r['columns']:>5} {r['paths_listed']:>5} "
            f"{r['describe_cold_ms']:>9} {r['describe_warm_ms']:>6} {r['sample_rows_ms']:>7} "
            f"{r['distinct_values_ms']:>8} {r['profile_column_ms']:>7}"
        )
    print(
        f"families listed: {families['entries']}; shard groups with several column sets: {families['split_groups']}"
    )
    if family_run:
        print(
            f"biggest family: {family_run['db']} {family_run['sql']} -> {family_run['rows']} rows over "
            f"{family_run['shards']} shards in {family_run['run_query_ms']} ms; list_tables: {family_run['listed_as']}"
        )
    if misses:
        print("misses: " + "; ".join(misses))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
