"""Every Spider database as one schema of a single DuckDB catalog, built from the SQLite files (the
whole-catalog setting of benchmarks/schema_linking.py and benchmarks/value_linking.py)."""

from __future__ import annotations

import hashlib
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

# -- the catalog: every Spider database as one DuckDB schema --------------------------------------


def _duck_type(declared: str, kinds: Counter) -> str:
    """A DuckDB type that holds every value of a SQLite column (SQLite types are only hints)."""
    present = {k for k in kinds if k != "null"}
    if not present:
        decl = declared.lower()
        if "int" in decl:
            return "BIGINT"
        if any(w in decl for w in ("real", "floa", "doub", "num", "dec")):
            return "DOUBLE"
        return "VARCHAR"
    if present == {"integer"}:
        return "BIGINT"
    if present <= {"integer", "real"}:
        return "DOUBLE"
    return "VARCHAR"


def _convert(value: Any, duck_type: str) -> Any:
    if value is None:
        return None
    if duck_type == "VARCHAR":
        if isinstance(value, bytes):
            return value.decode("utf-8", errors="replace")
        return value if isinstance(value, str) else str(value)
    if duck_type == "DOUBLE":
        return float(value)
    return int(value)


def quote_name(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def build_spider_catalog(databases: Path, target: Path) -> Path:
    """Copy every Spider SQLite database into one DuckDB file, a schema per database, with primary
    and foreign keys where the data allows them. Rebuilt only when missing."""
    import duckdb
    import pyarrow as pa

    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    if partial.exists():
        partial.unlink()
    conn = duckdb.connect(str(partial))
    arrow_types = {"BIGINT": pa.int64(), "DOUBLE": pa.float64(), "VARCHAR": pa.string()}
    for db_dir in sorted(p for p in databases.iterdir() if p.is_dir()):
        db_file = db_dir / f"{db_dir.name}.sqlite"
        if not db_file.exists():
            continue
        schema = db_dir.name
        src = sqlite3.connect(str(db_file))
        src.text_factory = lambda b: b.decode("utf-8", errors="replace")
        conn.execute(f"CREATE SCHEMA {quote_name(schema)}")
        names = [
            r[0]
            for r in src.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        info: dict[str, dict[str, Any]] = {}
        for name in names:
            cols = list(src.execute(f"PRAGMA table_info({quote_name(name)})"))
            fks: dict[int, dict[str, Any]] = {}
            for fid, _seq, ref, frm, to, *_ in src.execute(f"PRAGMA foreign_key_list({quote_name(name)})"):
                fk = fks.setdefault(fid, {"ref": ref, "cols": [], "refcols": []})
                fk["cols"].append(frm)
                fk["refcols"].append(to)
            kinds = {
                c[1]: Counter(
                    dict(
                        src.execute(
                            f"SELECT typeof({quote_name(c[1])}), count(*) FROM {quote_name(name)} GROUP BY 1"
                        ).fetchall()
                    )
                )
                for c in cols
            }
            types = {c[1]: _duck_type(c[2] or "", kinds[c[1]]) for c in cols}
            rows = src.execute(f"SELECT * FROM {quote_name(name)}").fetchall()
            info[name] = {
                "cols": cols,
                "types": types,
                "rows": rows,
                "pk": [c[1] for c in sorted(cols, key=lambda c: c[5]) if c[5]],
                "fks": list(fks.values()),
            }
        by_lower = {n.lower(): n for n in names}
        created: dict[str, list[str]] = {}  # table -> its unique key columns (for FK targets)
        pending = list(names)
        # referenced tables first; cycles and bad references fall back to no foreign key
        for _round in range(len(names) + 1):
            progressed = False
            for name in list(pending):
                refs = {by_lower.get(fk["ref"].lower()) for fk in info[name]["fks"]} - {name, None}
                if any(r in pending for r in refs) and _round < len(names):
                    continue
                _create_table(conn, schema, name, info[name], created, by_lower, arrow_types, pa)
                pending.remove(name)
                progressed = True
            if not pending or not progressed:
                break
        for name in pending:
            _create_table(conn, schema, name, info[name], created, by_lower, arrow_types, pa)
        src.close()
    conn.execute("CHECKPOINT")
    conn.close()
    partial.rename(target)
    return target


def _create_table(
    conn: Any,
    schema: str,
    name: str,
    meta: dict[str, Any],
    created: dict[str, list[str]],
    by_lower: dict[str, str],
    arrow_types: dict[str, Any],
    pa: Any,
) -> None:
    cols = [c[1] for c in meta["cols"]]
    types = meta["types"]
    data = {c: [_convert(r[i], types[c]) for r in meta["rows"]] for i, c in enumerate(cols)}
    arrow = pa.table({c: pa.array(data[c], type=arrow_types[types[c]]) for c in cols}) if cols else None
    pk = meta["pk"]
    fk_clauses = []
    for fk in meta["fks"]:
        ref = by_lower.get(fk["ref"].lower())
        if ref is None or ref not in created or any(c not in cols for c in fk["cols"]):
            continue
        refcols = fk["refcols"] if all(fk["refcols"]) else created[ref]
        if [c.lower() for c in refcols] != [c.lower() for c in created[ref]]:
            continue  # DuckDB requires the referenced columns to be the target's key
        fk_clauses.append(
            f"FOREIGN KEY ({', '.join(map(quote_name, fk['cols']))}) REFERENCES {quote_name(schema)}.{quote_name(ref)} "
            f"({', '.join(map(quote_name, created[ref]))})"
        )
    table = f"{quote_name(schema)}.{quote_name(name)}"
    for use_pk, use_fk in ((True, True), (True, False), (False, False)):
        parts = [f"{quote_name(c)} {types[c]}" for c in cols]
        if use_pk and pk:
            parts.append(f"PRIMARY KEY ({', '.join(map(quote_name, pk))})")
        if use_fk:
            parts += fk_clauses
        try:
            conn.execute("BEGIN")
            conn.execute(f"CREATE TABLE {table} ({', '.join(parts)})")
            if arrow is not None and arrow.num_rows:
                conn.register("incoming", arrow)
                conn.execute(f"INSERT INTO {table} SELECT * FROM incoming")
                conn.unregister("incoming")
            conn.execute("COMMIT")
        except Exception:
            conn.execute("ROLLBACK")
            continue
        if use_pk and pk:
            created[name] = pk
        return
    raise RuntimeError(f"could not copy {schema}.{name}")


def catalog_stamp(databases: Path) -> str:
    """Names the built catalog after the input files, so changed data builds a new one."""
    files = sorted((p.name, p.stat().st_size) for p in databases.glob("*/*.sqlite"))
    return hashlib.sha256(repr(files).encode()).hexdigest()[:10]
