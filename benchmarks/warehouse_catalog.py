"""Spider 2.0-Snow schemas as DuckDB files: one file per database, for schema-linking benchmarks.

Reads `../shared/data/spider2-snow/databases/<DB>/<SCHEMA>/DDL.csv` (+ `<TABLE>.json`) and writes
`<workdir>/wh_<DB>.duckdb` (the `wh_` prefix keeps the file name distinct from every schema name): every
table with its columns (Snowflake types mapped to DuckDB), the table description and column descriptions
as comments, and the few sample rows. Shards stay separate tables, as in Snowflake. A table whose columns
are known nowhere (empty DDL and no JSON) is skipped and counted. Files are rebuilt only when missing.

    .venv/bin/python benchmarks/warehouse_catalog.py [--data ../shared/data/spider2-snow] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "data" / "spider2-snow"
DEFAULT_WORKDIR = Path(tempfile.gettempdir()) / "flexsql-bench" / "warehouse"
csv.field_size_limit(1 << 30)

_TYPES = {
    "NUMBER": "DOUBLE",
    "FLOAT": "DOUBLE",
    "TEXT": "VARCHAR",
    "VARCHAR": "VARCHAR",
    "BOOLEAN": "BOOLEAN",
    "DATE": "DATE",
    "TIME": "TIME",
    "TIMESTAMP_NTZ": "TIMESTAMP",
    "TIMESTAMP_TZ": "TIMESTAMPTZ",
    "TIMESTAMP": "TIMESTAMP",
    "BINARY": "BLOB",
    "ARRAY": "VARCHAR",
    "VARIANT": "VARCHAR",
    "OBJECT": "VARCHAR",
    "GEOGRAPHY": "VARCHAR",
    "GEOMETRY": "VARCHAR",
}
_COLUMN = re.compile(r'^\s*"?(?P<name>[^"\n]+?)"?\s+(?P<type>[A-Z_]+)(?P<args>\([\d, ]+\))?(?P<rest>.*)$')
_COMMENT = re.compile(r"COMMENT\s+'((?:[^']|'')*)'", re.IGNORECASE)


def duck_type(snow: str, args: str | None = None) -> str:
    """DuckDB type for a Snowflake one; NUMBER(p,0) is an integer, anything unknown a string."""
    base = snow.upper()
    if base == "NUMBER" and args and re.fullmatch(r"\(\s*\d+\s*,\s*0\s*\)", args):
        return "BIGINT"
    return _TYPES.get(base, "VARCHAR")


@dataclass
class WTable:
    schema: str
    name: str
    comment: str | None = None
    columns: list[tuple[str, str, str | None]] = field(default_factory=list)  # name, duck type, comment
    rows: list[dict[str, Any]] = field(default_factory=list)


def _ddl_columns(ddl: str) -> list[tuple[str, str, str | None]]:
    out = []
    body = ddl.split("(", 1)[1] if "(" in ddl else ""
    for line in body.splitlines():
        m = _COLUMN.match(line)
        if not m or m.group("type") == "TABLE":
            continue
        comment = _COMMENT.search(m.group("rest") or "")
        out.append(
            (
                m.group("name"),
                duck_type(m.group("type"), m.group("args")),
                comment.group(1).replace("''", "'") if comment else None,
            )
        )
    return out


def read_database(folder: Path) -> tuple[list[WTable], int]:
    """The tables of one Spider 2.0-Snow database, and how many had no known columns."""
    tables: list[WTable] = []
    skipped = 0
    for schema_dir in sorted(p for p in folder.iterdir() if p.is_dir()):
        schema = schema_dir.name
        ddl_rows: dict[str, dict[str, str]] = {}
        if (schema_dir / "DDL.csv").exists():
            with open(schema_dir / "DDL.csv", newline="", encoding="utf-8") as fh:
                for row in csv.DictReader(fh):
                    ddl_rows[row["table_name"].split(".")[-1]] = row
        jsons: dict[str, dict[str, Any]] = {}
        for path in schema_dir.glob("*.json"):
            try:
                info = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            jsons[str(info.get("table_fullname", path.stem)).split(".")[-1]] = info
        for name in sorted(set(ddl_rows) | set(jsons)):
            row, info = ddl_rows.get(name, {}), jsons.get(name)
            table = WTable(schema, name, (row.get("description") or "").strip() or None)
            columns = _ddl_columns(row.get("DDL") or "")
            if info:
                descriptions = dict(
                    zip(info.get("column_names", []), info.get("description", []), strict=False)
                )
                if not columns:
                    columns = [
                        (c, duck_type(re.sub(r"\(.*", "", t)), None)
                        for c, t in zip(
                            info.get("column_names", []), info.get("column_types", []), strict=False
                        )
                    ]
                columns = [
                    (c, t, comment or (descriptions.get(c) or "").strip() or None)
                    for c, t, comment in columns
                ]
                table.rows = list(info.get("sample_rows") or [])[:5]
            seen: set[str] = set()
            for c in columns:  # DuckDB names are case-insensitive: keep the first of a clash
                if c[0].lower() not in seen:
                    seen.add(c[0].lower())
                    table.columns.append(c)
            if table.columns:
                tables.append(table)
            else:
                skipped += 1
    return tables, skipped


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _sample_value(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        return json.dumps(value)[:2000]
    return str(value)[:2000]


def build_database(folder: Path, target: Path) -> dict[str, Any]:
    """Write one DuckDB file for a Spider 2.0-Snow database (kept when it already exists)."""
    import duckdb

    tables, skipped = read_database(folder)
    stats = {
        "db": folder.name,
        "file": str(target),
        "tables": len(tables),
        "skipped_no_columns": skipped,
        "columns": sum(len(t.columns) for t in tables),
        "schemas": len({t.schema for t in tables}),
    }
    if target.exists():
        return stats
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    conn = duckdb.connect(str(partial))
    try:
        conn.execute("BEGIN")
        for schema in sorted({t.schema for t in tables}):
            conn.execute(f"CREATE SCHEMA {_q(schema)}")
        for t in tables:
            full = f"{_q(t.schema)}.{_q(t.name)}"
            conn.execute(f"CREATE TABLE {full} ({', '.join(f'{_q(c)} {ty}' for c, ty, _ in t.columns)})")
            if t.comment:
                conn.execute(f"COMMENT ON TABLE {full} IS {_lit(t.comment[:4000])}")
            for c, _, comment in t.columns:
                if comment:
                    conn.execute(f"COMMENT ON COLUMN {full}.{_q(c)} IS {_lit(comment[:2000])}")
            if t.rows:
                casts = ", ".join(f"TRY_CAST(? AS {ty})" for _, ty, _ in t.columns)
                lowered = [{str(k).lower(): v for k, v in r.items()} for r in t.rows if isinstance(r, dict)]
                values = [[_sample_value(r.get(c.lower())) for c, _, _ in t.columns] for r in lowered]
                if values:
                    conn.executemany(f"INSERT INTO {full} SELECT {casts}", values)
        conn.execute("COMMIT")
        conn.execute("CHECKPOINT")
    finally:
        conn.close()
    partial.rename(target)
    return stats


def build_all(data: Path, workdir: Path, only: set[str] | None = None) -> list[dict[str, Any]]:
    out = []
    for folder in sorted(p for p in (data / "databases").iterdir() if p.is_dir()):
        if only and folder.name not in only:
            continue
        started = time.perf_counter()
        stats = build_database(folder, workdir / f"wh_{folder.name}.duckdb")
        stats["build_seconds"] = round(time.perf_counter() - started, 2)
        out.append(stats)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    parser.add_argument("--only", help="comma-separated database names")
    args = parser.parse_args(argv)
    stats = build_all(args.data, args.workdir, set(args.only.split(",")) if args.only else None)
    for s in stats:
        print(
            f"{s['db']:<48} {s['schemas']:>3} schemas {s['tables']:>4} tables {s['columns']:>6} columns "
            f"({s['skipped_no_columns']} without columns) {s['build_seconds']:>6.1f} s"
        )
    print(
        f"{len(stats)} databases, {sum(s['tables'] for s in stats)} tables, "
        f"{sum(s['columns'] for s in stats)} columns in {args.workdir}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
