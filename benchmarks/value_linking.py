"""Value linking on Spider: does find_values(literal) name the column the gold SQL compares it with?

For every gold comparison `column = 'literal'` whose literal appears in the question (as whole
words, case-insensitively), find_values(literal) runs and we check that the gold table.column is in
its top 3. Three scopes on the same one-schema-per-database DuckDB catalog as schema_linking.py:
- database: `schema='<db>'`, the question's own database (what an agent working on one database sees);
- catalog+context: all 142 databases at once, `context=` the question (columns ranked by relevance to it);
- catalog: the bare literal over all 142 databases (many share values such as 'France').
Questions: all of train.json and dev_open.json. Every figure is also given per half of the databases
(A, B: by a crc32 of the database name, the split of value_variants.py), so a weight tuned on one half
can be checked on the other.

    /work/venv/bin/python benchmarks/value_linking.py [--data ../shared/data/spider] [--workdir DIR]

Prints a table and writes benchmarks/results/value_linking.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from schema_linking import DEFAULT_DATA  # noqa: E402
from spider_catalog import build_spider_catalog, catalog_stamp  # noqa: E402
from spider_gold import sqlite_schema  # noqa: E402

from flexsql.tools.values.find import FindValues  # noqa: E402

TOP = 3


def db_half(db: str) -> str:
    """The database's half, as value_variants.fold_of splits them."""
    return "A" if zlib.crc32(db.encode()) % 2 == 0 else "B"


def literal_comparisons(sql: str, schema: dict[str, dict[str, str]]) -> list[tuple[str, str, str]]:
    """(table, column, literal) for each `column = 'literal'` of a gold query (lower-case names).

    Spider writes many strings in double quotes, which SQLite reads as strings when no column has
    that name; sqlglot reads them as identifiers, so such an "identifier" counts as a literal."""
    import sqlglot
    from sqlglot import exp

    columns = {t.lower(): {c.lower() for c in cols} for t, cols in schema.items()}
    tree = sqlglot.parse_one(sql, read="sqlite")
    aliases: dict[str, str] = {}
    for table in tree.find_all(exp.Table):
        if table.name.lower() in columns:
            aliases[table.alias_or_name.lower()] = table.name.lower()
            aliases[table.name.lower()] = table.name.lower()
    in_query = sorted(set(aliases.values()))

    def resolve(col: exp.Column) -> tuple[str, str] | None:
        name = col.name.lower()
        if col.table:
            table = aliases.get(col.table.lower())
            return (table, name) if table and name in columns[table] else None
        owners = [t for t in in_query if name in columns[t]]
        return (owners[0], name) if owners else None

    out = []
    for eq in tree.find_all(exp.EQ):
        left, right = eq.this, eq.expression
        for a, b in ((left, right), (right, left)):
            if not isinstance(a, exp.Column):
                continue
            target = resolve(a)
            if target is None:
                continue
            if isinstance(b, exp.Literal) and b.is_string:
                out.append((*target, b.this))
            elif isinstance(b, exp.Column) and not b.table and resolve(b) is None:
                out.append((*target, b.name))
            break
    return out


def appears_in(literal: str, question: str) -> bool:
    text = literal.strip().lower()
    if not text:
        return False
    return re.search(r"(?<!\w)" + re.escape(text) + r"(?!\w)", question.lower()) is not None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "flexsql-bench")
    parser.add_argument("--misses", type=Path, help="write the misses here (JSON)")
    parser.add_argument("--scopes", default="database,catalog+context,catalog")
    parser.add_argument(
        "--part",
        choices=("all", "tune", "held-out"),
        default="all",
        help="tune: the cases at even positions (ranking weights were set on these); held-out: odd",
    )
    args = parser.parse_args(argv)

    from flexsql.tools.engines import SourceRegistry, open_source
    from flexsql.tools.runtime.context import ToolContext
    from flexsql.tools.values.find import build_value_index, find_values

    databases = args.data / "databases"
    path = build_spider_catalog(databases, args.workdir / f"spider-{catalog_stamp(databases)}.duckdb")
    os.environ.setdefault("FLEXSQL_CACHE_DIR", str(args.workdir / "cache"))
    source = open_source(f"duckdb:///{path}", name="spider")
    ctx = ToolContext(sources=SourceRegistry([source]))
    started = time.perf_counter()
    stats = build_value_index(ctx)
    print(f"{stats.to_text()} ({time.perf_counter() - started:.1f} s)")
    catalog = source.catalog()
    schema_names = {t.schema_name.lower(): t.schema_name for t in catalog.tables}

    cases: list[dict[str, Any]] = []
    for set_name, file in (("train", "train.json"), ("dev_open", "dev_open.json")):
        schemas: dict[str, Any] = {}
        for q in json.loads((args.data / file).read_text()):
            db = q["db_id"]
            if db not in schemas:
                schemas[db] = sqlite_schema(databases, db)
            try:
                comparisons = literal_comparisons(q["query"], schemas[db])
            except Exception:
                continue
            for table, column, literal in comparisons:
                if appears_in(literal, q["question"]):
                    cases.append(
                        {
                            "set": set_name,
                            "db": db,
                            "table": table,
                            "column": column,
                            "literal": literal,
                            "question": q["question"],
                        }
                    )

    for i, case in enumerate(cases):
        case["part"] = "tune" if i % 2 == 0 else "held-out"
    if args.part != "all":
        cases = [c for c in cases if c["part"] == args.part]
    report: dict[str, Any] = {"cases": len(cases), "part": args.part, "scopes": {}}
    misses: dict[str, list[dict[str, Any]]] = {}
    # the question's database (schema=), the whole catalog with the question as context, the bare literal
    for scope in args.scopes.split(","):
        hits = {"train": [0, 0], "dev_open": [0, 0]}
        part_hits = {"tune": [0, 0], "held-out": [0, 0]}
        half_hits = {"A": [0, 0], "B": [0, 0]}
        top1 = 0
        times = []
        misses[scope] = []
        for case in cases:
            schema = schema_names.get(case["db"].lower(), case["db"])
            t0 = time.perf_counter()
            result = find_values(
                ctx,
                FindValues(
                    text=case["literal"],
                    limit=TOP,
                    schema=schema if scope == "database" else None,
                    context=case["question"] if scope == "catalog+context" else None,
                ),
            )
            times.append((time.perf_counter() - t0) * 1000)
            got = [(m.table.lower(), m.column.lower()) for m in result.matches]
            want = (f"{schema}.{case['table']}".lower(), case["column"])
            ok = want in got[:TOP]
            top1 += bool(got) and got[0] == want
            hits[case["set"]][0] += ok
            hits[case["set"]][1] += 1
            part_hits[case["part"]][0] += ok
            part_hits[case["part"]][1] += 1
            half_hits[db_half(case["db"])][0] += ok
            half_hits[db_half(case["db"])][1] += 1
            if not ok:
                misses[scope].append(
                    {**case, "got": [f"{m.table}.{m.column}={m.value!r} ({m.match})" for m in result.matches]}
                )
        total_hit = sum(h[0] for h in hits.values())
        report["scopes"][scope] = {
            f"top{TOP}": round(total_hit / max(len(cases), 1), 4),
            "top1": round(top1 / max(len(cases), 1), 4),
            "by_set": {
                k: {"cases": v[1], f"top{TOP}": round(v[0] / max(v[1], 1), 4)} for k, v in hits.items()
            },
            "by_part": {
                k: {"cases": v[1], f"top{TOP}": round(v[0] / max(v[1], 1), 4)} for k, v in part_hits.items()
            },
            "by_db_half": {
                k: {"cases": v[1], f"top{TOP}": round(v[0] / max(v[1], 1), 4)} for k, v in half_hits.items()
            },
            "median_ms": round(statistics.median(times), 2) if times else None,
            "p95_ms": round(sorted(times)[int(0.95 * (len(times) - 1))], 2) if times else None,
        }

    print(
        f"{len(cases)} gold comparisons column = 'literal' with the literal in the question "
        f"(train {sum(1 for c in cases if c['set'] == 'train')}, dev_open "
        f"{sum(1 for c in cases if c['set'] == 'dev_open')})"
    )
    header = (
        f"{'scope':<16} | top{TOP}   top1  | train top{TOP} | dev_open top{TOP} | tune / held-out top{TOP} "
        f"| db half A / B top{TOP} | median ms | p95 ms"
    )
    print(header)
    print("-" * len(header))
    for scope, r in report["scopes"].items():
        print(
            f"{scope:<16} | {r[f'top{TOP}']:.3f}  {r['top1']:.3f} | {r['by_set']['train'][f'top{TOP}']:.3f}      "
            f"| {r['by_set']['dev_open'][f'top{TOP}']:.3f}         "
            f"| {r['by_part']['tune'][f'top{TOP}']:.3f} / {r['by_part']['held-out'][f'top{TOP}']:.3f}        "
            f"| {r['by_db_half']['A'][f'top{TOP}']:.3f} / {r['by_db_half']['B'][f'top{TOP}']:.3f}        "
            f"| {r['median_ms']:<9} | {r['p95_ms']}"
        )
    out = (
        HERE / "results" / ("value_linking.json" if args.part == "all" else f"value_linking-{args.part}.json")
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    if args.misses:
        args.misses.write_text(json.dumps(misses, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
