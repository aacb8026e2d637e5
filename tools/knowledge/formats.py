"""Reading what `flexsql learn` imports, each format into the same pieces: question/SQL pairs, documents,
SQL statements of a log, and schema notes and relationships (a Cortex Analyst semantic model).

- Spider / BIRD JSON: a list of objects with `question` and `query` (Spider) or `SQL` (BIRD), optional
  `evidence` and `db_id` (items of other databases are skipped when the file holds several);
- JSONL: one object per line with `question` and `sql` (or `query` / `SQL`);
- a Cortex Analyst semantic model (YAML): `verified_queries` (their SQL over logical tables `__name` and
  logical columns is rewritten onto the base tables and expressions), tables' and columns' `synonyms`
  and `description`, `relationships`;
- Markdown or text: one document;
- SQL: a query log, statements separated by semicolons.

A file that cannot be read as its format is an error naming the line or item; nothing is imported.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import sqlglot
import yaml
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from flexsql.errors import InvalidArgument
from flexsql.tools.knowledge.analyze import split_statements
from flexsql.tools.knowledge.store import ColumnNote, TableNote

Format = Literal["spider", "jsonl", "cortex", "document", "sql"]
FORMATS: tuple[Format, ...] = ("spider", "jsonl", "cortex", "document", "sql")
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_ITEMS = 200_000

_EXTENSIONS: dict[str, Format] = {
    ".json": "spider",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".yaml": "cortex",
    ".yml": "cortex",
    ".md": "document",
    ".markdown": "document",
    ".txt": "document",
    ".sql": "sql",
}


@dataclass
class Pair:
    """A question and its SQL, with what the file says about it."""

    origin: str  # file#item, for the report and the store
    question: str | None
    sql: str | None
    evidence: str | None = None
    verified_by: str | None = None
    verified_at: str | None = None
    db_id: str | None = None


@dataclass
class Relationship:
    left: str  # table.column on the source's tables (resolved when imported)
    right: str


@dataclass
class Imported:
    """What one file holds."""

    kind: Format
    pairs: list[Pair] = field(default_factory=list)
    statements: list[str] = field(default_factory=list)  # a query log's
    documents: dict[str, str] = field(default_factory=dict)
    notes: dict[str, TableNote] = field(default_factory=dict)  # by table name as the model gives it
    relationships: list[Relationship] = field(default_factory=list)


def detect(path: Path, given: str | None) -> Format:
    if given:
        if given not in FORMATS:
            raise InvalidArgument(f"--format {given!r} is not one of {', '.join(FORMATS)}")
        return next(f for f in FORMATS if f == given)
    found = _EXTENSIONS.get(path.suffix.lower())
    if found is None:
        raise InvalidArgument(
            f"cannot tell the format of {path.name} from its extension; name it .json (Spider/BIRD), "
            ".jsonl, .yaml (Cortex Analyst semantic model), .md/.txt (a document) or .sql (a query log), "
            f"or give --format ({', '.join(FORMATS)})"
        )
    return found


def read_file(path: Path, kind: Format, dialect: str) -> Imported:
    """Read `path` as `kind`; InvalidArgument when it is not readable as that."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise InvalidArgument(f"cannot read {path}: {exc.strerror or exc}") from None
    if size > MAX_FILE_BYTES:
        raise InvalidArgument(
            f"{path.name} is {size / 1e6:.0f} MB; flexsql learn reads files up to {MAX_FILE_BYTES // 2**20} MB. "
            "Split it (a query log: by day or by user) and import the parts; each import is idempotent"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgument(f"{path.name} is not UTF-8 text (byte {exc.start}); convert it first") from None
    if kind == "spider":
        return _spider(path, text)
    if kind == "jsonl":
        return _jsonl(path, text)
    if kind == "cortex":
        return _cortex(path, text, dialect)
    if kind == "document":
        if not text.strip():
            raise InvalidArgument(f"{path.name} is empty: nothing to learn")
        return Imported(kind, documents={_doc_name(path): text})
    statements = split_statements(text, dialect)
    if len(statements) > MAX_ITEMS:
        raise InvalidArgument(
            f"{path.name} holds {len(statements):,} statements; flexsql learn reads at most {MAX_ITEMS:,} "
            "per file. Split it and import the parts"
        )
    if not statements:
        raise InvalidArgument(f"{path.name} holds no SQL statement")
    return Imported(kind, statements=statements)


def _doc_name(path: Path) -> str:
    stem = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in path.stem).strip("._") or "document"
    return f"{stem}.md" if path.suffix.lower() in (".md", ".markdown") else f"{stem}.txt"


def _pair(obj: Any, origin: str) -> Pair:
    if not isinstance(obj, dict):
        raise InvalidArgument(f"{origin} is not an object with question and SQL (got {type(obj).__name__})")
    sql = next((obj[k] for k in ("sql", "query", "SQL") if isinstance(obj.get(k), str)), None)
    question = obj.get("question") if isinstance(obj.get("question"), str) else None
    evidence = (
        obj.get("evidence") if isinstance(obj.get("evidence"), str) and obj["evidence"].strip() else None
    )
    db_id = obj.get("db_id") if isinstance(obj.get("db_id"), str) else None
    by = obj.get("verified_by") if isinstance(obj.get("verified_by"), str) else None
    return Pair(origin, question, sql, evidence=evidence, db_id=db_id, verified_by=by)


def _spider(path: Path, text: str) -> Imported:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgument(
            f"{path.name} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "nothing was imported"
        ) from None
    if isinstance(data, dict):  # {"questions": [...]} and similar wrappers
        lists = [v for v in data.values() if isinstance(v, list)]
        if len(lists) != 1:
            raise InvalidArgument(
                f"{path.name} is a JSON object; flexsql learn expects a list of "
                '{"question": …, "query": …} items (Spider) or {"question": …, "SQL": …} (BIRD)'
            )
        data = lists[0]
    if not isinstance(data, list):
        raise InvalidArgument(
            f"{path.name} holds JSON {type(data).__name__}, not a list of question/SQL items"
        )
    if len(data) > MAX_ITEMS:
        raise InvalidArgument(
            f"{path.name} holds {len(data):,} items; at most {MAX_ITEMS:,} per file: split it"
        )
    return Imported("spider", pairs=[_pair(obj, f"{path.name}#{i}") for i, obj in enumerate(data)])


def _jsonl(path: Path, text: str) -> Imported:
    pairs: list[Pair] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidArgument(
                f"{path.name} line {n} is not JSON ({exc.msg}, column {exc.colno}); nothing was imported"
            ) from None
        pairs.append(_pair(obj, f"{path.name}:{n}"))
        if len(pairs) > MAX_ITEMS:
            raise InvalidArgument(f"{path.name} holds more than {MAX_ITEMS:,} items: split it")
    if not pairs:
        raise InvalidArgument(f"{path.name} holds no item")
    return Imported("jsonl", pairs=pairs)


# -- Cortex Analyst semantic model ------------------------------------------------------------------

_COLUMN_KINDS = ("dimensions", "time_dimensions", "measures", "facts", "metrics")


def _strings(value: Any) -> list[str]:
    return [str(v).strip() for v in value if str(v).strip()] if isinstance(value, list) else []


def _text_of(value: Any) -> str | None:
    return " ".join(str(value).split()) if isinstance(value, str) and value.strip() else None


@dataclass
class _Logical:
    name: str
    physical: str  # schema.table or table, as the base_table names it
    columns: dict[str, str] = field(default_factory=dict)  # logical column (lower-case) -> expression


def _cortex(path: Path, text: str, dialect: str) -> Imported:
    try:
        model = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise InvalidArgument(
            f"{path.name} is not valid YAML{where}: {getattr(exc, 'problem', exc)}"
        ) from None
    if not isinstance(model, dict) or not any(k in model for k in ("tables", "verified_queries")):
        raise InvalidArgument(
            f"{path.name} is not a Cortex Analyst semantic model: it needs `tables` or `verified_queries`"
        )
    out = Imported("cortex")
    logical: dict[str, _Logical] = {}
    for i, table in enumerate(model.get("tables") or []):
        if not isinstance(table, dict) or not isinstance(table.get("name"), str):
            raise InvalidArgument(f"{path.name}: tables[{i}] has no name")
        base: dict[str, Any] = table["base_table"] if isinstance(table.get("base_table"), dict) else {}
        physical = ".".join(str(base[k]) for k in ("schema", "table") if base.get(k)) or table["name"]
        entry = _Logical(table["name"], physical)
        note = TableNote(
            synonyms=_strings(table.get("synonyms")), description=_text_of(table.get("description"))
        )
        for kind in _COLUMN_KINDS:
            for col in table.get(kind) or []:
                if not isinstance(col, dict) or not isinstance(col.get("name"), str):
                    continue
                expr: str = col["expr"] if isinstance(col.get("expr"), str) else col["name"]
                entry.columns[col["name"].lower()] = expr
                target = _plain_column(expr, dialect)
                if target is None:
                    continue  # a computed measure: its definition is a document's business, not a column's
                cnote = ColumnNote(
                    synonyms=_strings(col.get("synonyms")), description=_text_of(col.get("description"))
                )
                if col["name"].lower() != target.lower() and col["name"] not in cnote.synonyms:
                    cnote.synonyms.insert(0, col["name"])
                if cnote.synonyms or cnote.description:
                    note.columns[target] = cnote
        logical[table["name"].lower()] = entry
        if note.synonyms or note.description or note.columns:
            out.notes[physical] = note
    for i, rel in enumerate(model.get("relationships") or []):
        if not isinstance(rel, dict):
            continue
        left, right = (
            logical.get(str(rel.get("left_table", "")).lower()),
            logical.get(str(rel.get("right_table", "")).lower()),
        )
        if left is None or right is None:
            raise InvalidArgument(f"{path.name}: relationships[{i}] names a table the model does not define")
        for pair in rel.get("relationship_columns") or []:
            a = _plain_column(
                left.columns.get(str(pair.get("left_column", "")).lower(), str(pair.get("left_column", ""))),
                dialect,
            )
            b = _plain_column(
                right.columns.get(
                    str(pair.get("right_column", "")).lower(), str(pair.get("right_column", ""))
                ),
                dialect,
            )
            if a and b:
                out.relationships.append(Relationship(f"{left.physical}.{a}", f"{right.physical}.{b}"))
    for i, vq in enumerate(model.get("verified_queries") or []):
        origin = f"{path.name}#verified_queries[{i}]" + (
            f" {vq['name']}" if isinstance(vq, dict) and vq.get("name") else ""
        )
        pair = _pair(vq, origin)
        if pair.sql:
            pair.sql = _physical_sql(pair.sql, logical, dialect)
        at = vq.get("verified_at") if isinstance(vq, dict) else None
        if isinstance(at, int | float):
            pair.verified_at = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d")
        out.pairs.append(pair)
    return out


def _plain_column(expr: str, dialect: str) -> str | None:
    try:
        node = sqlglot.parse_one(expr, read=dialect)
    except (ParseError, TokenError):
        return None
    return node.name if isinstance(node, exp.Column) and not node.table else None


def _physical_sql(sql: str, logical: dict[str, _Logical], dialect: str) -> str:
    """A verified query over logical tables (`__orders`) and columns, rewritten onto the base tables and
    the columns' expressions; SQL that does not parse is returned as given (the import reports it)."""
    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except (ParseError, TokenError):
        return sql
    used: list[_Logical] = []
    qualifiers: dict[str, str] = {}  # `__artists.name` -> `singer.name` (an explicit alias stays)
    for table in list(tree.find_all(exp.Table)):
        name = table.name.lower()
        entry = logical.get(name[2:]) if name.startswith("__") else None
        if entry is None:
            continue
        used.append(entry)
        new = exp.to_table(entry.physical, dialect=dialect)
        if table.alias:
            new.set("alias", exp.TableAlias(this=exp.to_identifier(table.alias)))
        else:
            qualifiers[name] = new.name
        table.replace(new)
    if not used:
        return sql
    exprs: dict[str, str] = {}
    for entry in used:
        for name, expr in entry.columns.items():
            exprs.setdefault(name, expr)

    def swap(node: exp.Expr) -> exp.Expr:
        if (
            isinstance(node, exp.Column)
            and node.table.lower() in qualifiers
            and node.name.lower() not in exprs
        ):
            return exp.column(node.name, table=qualifiers[node.table.lower()])
        if isinstance(node, exp.Column) and node.name.lower() in exprs:
            expr = exprs[node.name.lower()]
            try:
                parsed = sqlglot.parse_one(expr, read=dialect)
            except (ParseError, TokenError):
                return node
            if isinstance(parsed, exp.Column) and node.table:
                parsed.set("table", exp.to_identifier(qualifiers.get(node.table.lower(), node.table)))
            return parsed if isinstance(parsed, exp.Column) else exp.Paren(this=parsed)
        return node

    return tree.transform(swap).sql(dialect=dialect)


__all__ = ["FORMATS", "Format", "Imported", "Pair", "Relationship", "detect", "read_file"]
