"""Nested columns seen by path: the keys inside JSON, VARIANT, STRUCT and MAP columns as paths
(`trafficSource.source`, `hits[].page.pagePath` for arrays of objects), inferred from sample values,
and a path read as a column of its own.

Each engine renders a path in its own syntax (`Engine.path_value`, `Engine.path_elements`: DuckDB
json_extract_string, PostgreSQL #>>, SQLite json_extract, Snowflake `col:key::VARCHAR`); this module
parses paths, infers them from values, and builds the FROM item that shows a path as a column.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import BaseModel

from flexsql.errors import InvalidArgument, NotFoundError

if TYPE_CHECKING:
    from flexsql.tools.engines.catalog import Catalog, Column, TableInfo
    from flexsql.tools.engines.engine import Engine

# keys below this depth are not listed; Parquet-style lists (`{"list": [{"element": …}]}`, Spider 2.0's
# OPEN_TARGETS) spend three levels per array, so a leaf three arrays down sits at depth 12
MAX_DEPTH = 12
MAX_PATHS = 40  # paths listed per column (the most often present first)
MAX_EXAMPLES = 3
MAX_KNOWN_PER_TABLE = (
    4000  # paths recorded for search per table (every column's, nested_sample keeps 400 each)
)
_NESTED_TYPE = re.compile(r"JSON|VARIANT|OBJECT|STRUCT|MAP|ARRAY|\[\]|SUPER", re.IGNORECASE)
_TEXT_TYPE = re.compile(r"CHAR|TEXT|STRING|CLOB", re.IGNORECASE)


def nested_type(type_name: str) -> bool:
    """A declared type that holds keys (JSON, VARIANT, OBJECT, STRUCT, MAP) or arrays."""
    return bool(_NESTED_TYPE.search(type_name))


def text_type(type_name: str) -> bool:
    """A text type: JSON kept as text is parsed before a path reads it."""
    return bool(_TEXT_TYPE.search(type_name)) or not type_name.strip()


_BARE = re.compile(r"[^\W\d]\w*")  # an identifier-like key (unicode letters too) stays unquoted


def key_text(key: str) -> str:
    """One key (or the column) as a path spells it: bare when it is a plain word, else in double quotes
    with a quote doubled (`"dot.key"`, `""`, `"q""uote"`), so that any key reads back exactly and a
    condition that names it parses as SQL."""
    return key if _BARE.fullmatch(key) else '"' + key.replace('"', '""') + '"'


@dataclass(frozen=True)
class PathSpec:
    """`hits[].page.pagePath` -> column hits, keys before the array [] (none), keys after [page, pagePath]."""

    column: str
    before: tuple[str, ...]  # keys from the column to the array (all keys when there is no array)
    after: tuple[str, ...] | None = None  # keys inside each element of the array; None: no array

    @property
    def text(self) -> str:
        out = ".".join(key_text(k) for k in (self.column, *self.before))
        if self.after is not None:
            out += "[]" + "".join("." + key_text(k) for k in self.after)
        return out


def _segments(text: str) -> list[str | None]:
    """`a."b.c"[].d` -> ['a', 'b.c', None, 'd']: names (quoted ones unquoted) and None for each `[]`."""
    out: list[str | None] = []
    i, n = 0, len(text)
    expect_name = True
    while i < n:
        ch = text[i]
        if expect_name:
            if ch == '"':
                j, name = i + 1, []
                while True:
                    end = text.find('"', j)
                    if end < 0:
                        raise InvalidArgument(
                            f'path {text!r} has an unclosed quote: close it, doubling any " inside'
                        )
                    name.append(text[j:end])
                    if text.startswith('"', end + 1):  # "" inside quotes is one quote
                        name.append('"')
                        j = end + 2
                        continue
                    i = end + 1
                    break
                out.append("".join(name))
            else:
                j = i
                while j < n and text[j] not in '."[':
                    j += 1
                name_text = text[i:j].strip()
                if not name_text:
                    raise InvalidArgument(
                        f"path {text!r} is not column.key[.key…] (e.g. trafficSource.source, hits[].page, "
                        'j."dot.key" for a key that holds a dot or is empty)'
                    )
                out.append(name_text)
                i = j
            expect_name = False
        elif text.startswith("[]", i):
            out.append(None)
            i += 2
        elif ch == ".":
            expect_name = True
            i += 1
        else:
            raise InvalidArgument(
                f"path {text!r} is not column.key[.key…]: after a name comes '.', '[]' or the end "
                '(quote a key that holds a dot, quote or bracket: j."a.b")'
            )
    if expect_name and out:
        raise InvalidArgument(f"path {text!r} ends in '.': name the key after it")
    return out


def parse_path(text: str) -> PathSpec | None:
    """A path as tools take it; None when `text` names no key (a plain column name). Keys are bare words
    or double-quoted (`j."dot.key"`, `j.""`)."""
    text = text.strip()
    if "." not in text and "[]" not in text:
        return None
    parts = _segments(text)
    if len(parts) < 2 or parts[0] is None:
        if len(parts) == 1 and parts[0] is not None:
            return None  # a quoted column name holding a dot: no key
        raise InvalidArgument(
            f"path {text!r} is not column.key[.key…] (e.g. trafficSource.source, hits[].page)"
        )
    arrays = [i for i, p in enumerate(parts) if p is None]
    if len(arrays) > 1:
        raise InvalidArgument(
            f"path {text!r} goes through two arrays; distinct_values reads one ([] once): unnest the rest in SQL"
        )
    names = [p for p in parts if p is not None]
    if not arrays:
        return PathSpec(names[0], tuple(names[1:]))
    at = arrays[0]
    before = tuple(p for p in parts[1:at] if p is not None)
    after = tuple(p for p in parts[at + 1 :] if p is not None)
    return PathSpec(names[0], before, after)


# -- inference ----------------------------------------------------------------------------------------


class NestedPath(BaseModel):
    """One key inside a nested column, as describe_table lists it."""

    path: str
    type: str  # VARCHAR, BIGINT, DOUBLE, BOOLEAN, OBJECT, ARRAY (of what the sample held)
    seen: int = 0  # sample values holding it
    examples: list[str] = []


def as_document(value: Any) -> Any:
    """A nested value as Python (dict/list), parsing JSON text; None for anything else (a document
    nested too deep to parse is none either: it is shown and read as text)."""
    if isinstance(value, dict | list):
        return value
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("{", "["):
            try:
                return json.loads(text)
            except RecursionError:
                return None
            except ValueError:
                return _cut_document(text)
    return None


def _cut_document(text: str) -> Any:
    """A JSON document whose text was cut (a cell over the fetch's cap): its elements up to the last
    complete one, brackets closed; None when nothing complete is left."""
    stack: list[str] = []
    last: tuple[int, str] | None = None  # (position of a separating comma, the closers needed there)
    in_string = escaped = False
    for i, ch in enumerate(text[:200_000]):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack:
                return None
            stack.pop()
        elif ch == ",":
            last = (i, "".join(reversed(stack)))
    if last is None:
        return None
    try:
        return json.loads(text[: last[0]] + last[1])
    except (ValueError, RecursionError):
        return None


def _type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, int):
        return "BIGINT"
    if isinstance(value, float):
        return "DOUBLE"
    if isinstance(value, dict):
        return "OBJECT"
    if isinstance(value, list):
        return "ARRAY"
    return "VARCHAR"


def infer_paths(column: str, values: Iterable[Any], limit: int = MAX_PATHS) -> list[NestedPath]:
    """The paths of the keys found in a column's sample values, with their types and a few examples:
    objects' keys as `col.key`, elements of arrays as `col[]` (`col[].key` when they are objects; value
    tools read paths through one array, describe_table lists deeper ones too). A key whose every sampled
    value is NULL is listed too, typed NULL: it exists, the sample only holds no value of it. Keys are
    spelled as paths spell them (key_text). Leaves only, the most often present first, `limit` at most."""
    found: dict[str, NestedPath] = {}
    head = key_text(column)

    def visit(path: str, value: Any, depth: int, seen: set[str]) -> None:
        if isinstance(value, dict):
            if depth >= MAX_DEPTH:
                return
            for key, inner in value.items():
                visit(f"{path}.{key_text(str(key))}", inner, depth + 1, seen)
        elif isinstance(value, list):
            if depth >= MAX_DEPTH:
                return
            for inner in value[:20]:
                visit(f"{path}[]", inner, depth + 1, seen)
        elif path != head:
            kind = "NULL" if value is None else _type_of(value)
            entry = found.get(path)
            if entry is None:
                entry = found[path] = NestedPath(path=path, type=kind)
            elif entry.type == "NULL":
                entry.type = kind
            elif kind != "NULL" and entry.type != kind and {entry.type, kind} == {"BIGINT", "DOUBLE"}:
                entry.type = "DOUBLE"
            if path not in seen:
                entry.seen += 1
                seen.add(path)
            if value is not None:
                shown = _example(value)
                if len(entry.examples) < MAX_EXAMPLES and shown not in entry.examples:
                    entry.examples.append(shown)

    for raw in values:
        doc = as_document(raw)
        if doc is not None:
            visit(head, doc, 0, set())
    # keys that hold values first: a NULL-only key says less than one with examples
    ranked = sorted(found.values(), key=lambda p: (p.type == "NULL", -p.seen, p.path.count("."), p.path))
    return ranked[:limit]


def _example(value: Any) -> str:
    if isinstance(value, str):
        return "'" + (value if len(value) <= 40 else value[:39] + "…") + "'"
    return json.dumps(value)


# -- paths seen so far, per catalog -------------------------------------------------------------------


class KnownPath(NamedTuple):
    type: str
    described: bool  # typed by describe_table (else by the value index, which reads only text leaves)


class _Known:
    """Paths found in a catalog's nested columns (by describe_table and the value index), by table,
    with their types."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_table: dict[str, dict[str, KnownPath]] = {}
        self.version = 0


def _known(catalog: Catalog) -> _Known:
    return catalog.derived("engines.paths.known", _Known)


def remember_paths(
    catalog: Catalog, table: str, paths: Iterable[tuple[str, str]], typed: bool = False
) -> None:
    """Record the paths seen in a table's nested columns (qualified name) with their types, so search
    can index them. `typed`: the types are describe_table's, which replace any other (search must show
    the type describe_table shows; the value index only knows its text leaves)."""
    known = _known(catalog)
    with known.lock:
        have = known.by_table.setdefault(table, {})
        changed = False
        for path, type_ in paths:
            if path not in have:
                if len(have) >= MAX_KNOWN_PER_TABLE:
                    continue
            elif not typed or have[path] == (type_, True):
                continue
            have[path] = KnownPath(type_, typed)
            changed = True
        if changed:
            known.version += 1


def known_paths(catalog: Catalog) -> tuple[int, dict[str, dict[str, KnownPath]]]:
    """The version of what was recorded (it grows with each change) and the paths (-> type) by table."""
    known = _known(catalog)
    with known.lock:
        return known.version, {k: dict(v) for k, v in known.by_table.items()}


# -- a path as a column -------------------------------------------------------------------------------


def path_column(table: TableInfo, text: str) -> tuple[Column, PathSpec] | None:
    """The nested column a path starts from, and the parsed path; None when `text` is a real column or
    no path. A path whose first part names no column raises NotFoundError (as an unknown column)."""
    lowered = text.strip().lower()
    if any(c.name.lower() == lowered for c in table.columns):
        return None
    spec = parse_path(text)
    if spec is None:
        return None
    col = table.column(spec.column)  # NotFoundError names the columns
    if not (nested_type(col.type) or text_type(col.type)):
        raise NotFoundError(
            f"{spec.column} of {table.qualified} is {col.type}, which has no keys: {text!r} is no path "
            "(describe_table lists nested columns' paths)"
        )
    return col, PathSpec(col.name, spec.before, spec.after)


def path_sql(engine: Engine, table_sql: str, col: Column, spec: PathSpec, alias: str) -> str:
    """A SELECT reading the path as one text column named `alias`: one row per row of the table, or per
    element of the array the path goes through."""
    column_sql = engine.quote(col.name)
    if spec.after is None:
        return f"SELECT {engine.path_value(column_sql, col.type, spec.before)} AS {alias} FROM {table_sql}"
    return engine.path_elements(table_sql, column_sql, col.type, spec.before, spec.after, alias)


def path_table(engine: Engine, table: TableInfo, text: str) -> TableInfo | None:
    """The table seen through one path: a FROM item with the path as its one text column (named as the
    path), so value tools read it like any column; None when `text` is a plain column."""
    found = path_column(table, text)
    if found is None:
        return None
    col, spec = found
    alias = engine.quote(spec.text)
    inner = path_sql(engine, engine.quote_table(table), col, spec, alias)
    from flexsql.tools.engines.catalog import Column as ColumnModel

    return table.model_copy(
        update={
            "columns": [ColumnModel(name=spec.text, type="VARCHAR", nullable=True)],
            "foreign_keys": [],
            "from_sql": f"({inner}) AS flexsql_path",
        }
    )


def _value_sql(engine: Engine, table: TableInfo, text: str) -> tuple[str, bool]:
    """A column's SQL, or a path's value (and True): for select lists and conditions."""
    found = path_column(table, text)
    if found is None:
        return engine.quote(table.column(text).name), False
    col, spec = found
    if spec.after is not None:
        raise InvalidArgument(
            f"{text!r} goes through an array, one value per element: distinct_values(column={text!r}) reads "
            "it; here name a path without [], or unnest the array in SQL"
        )
    return engine.path_value(engine.quote(col.name), col.type, spec.before), True


def select_sql(engine: Engine, table: TableInfo, columns: Sequence[str] | None, condition: str | None) -> str:
    """SELECT of the named columns or paths (all columns when None) FROM the table, WHERE `condition`
    (already parsed, tools/sql/conditions.py), whose `col.key` references read paths."""
    if columns:
        items = []
        for text in columns:
            value, is_path = _value_sql(engine, table, text)
            items.append(f"{value} AS {engine.quote(text.strip())}" if is_path else value)
        selected = ", ".join(items)
    else:
        selected = "*"
    sql = f"SELECT {selected} FROM {engine.quote_table(table)}"
    if condition:
        sql += f" WHERE {_condition_paths(engine, table, condition)}"
    return sql


def _condition_paths(engine: Engine, table: TableInfo, condition: str) -> str:
    """The condition with each `col.key…` that names a path of a nested column read as that path."""
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(f"SELECT 1 WHERE {condition}", read=engine.dialect)
    values: dict[str, str] = {}
    for node in list(tree.find_all(exp.Column)):
        parts = [p.name for p in node.parts]
        if len(parts) < 2 or not any(c.name.lower() == parts[0].lower() for c in table.columns):
            continue
        try:  # each part spelled as a path spells it: j."dot.key" is the key dot.key, not two keys
            value, is_path = _value_sql(engine, table, ".".join(key_text(p) for p in parts))
        except (InvalidArgument, NotFoundError):
            continue
        if is_path:
            marker = f"flexsql_path_{len(values)}_"
            values[marker] = value
            node.replace(exp.column(marker))
    where: str = tree.args["where"].this.sql(dialect=engine.dialect)
    for marker, value in values.items():  # the marker as the dialect printed it, quoted or not
        where = where.replace(f'"{marker}"', value).replace(marker, value)
    return where


def json_path(keys: Sequence[str], array: bool = False, after: Sequence[str] = ()) -> str:
    """`$."a"."b"` (`$."a"[*]."c"` through an array): keys quoted, so any key spelling reads."""

    def quoted(k: str) -> str:
        return '."' + k.replace("\\", "\\\\").replace('"', '\\"') + '"'

    out = "$" + "".join(quoted(k) for k in keys)
    if array:
        out += "[*]" + "".join(quoted(k) for k in after)
    return out


__all__ = [
    "NestedPath",
    "PathSpec",
    "as_document",
    "infer_paths",
    "json_path",
    "key_text",
    "KnownPath",
    "known_paths",
    "remember_paths",
    "nested_type",
    "parse_path",
    "path_column",
    "path_sql",
    "path_table",
    "select_sql",
]
