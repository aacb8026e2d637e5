"""What one stored query says, read with sqlglot against the current catalog: the tables and columns it
reads (a name the schema no longer has makes it stale), the join conditions between two tables, the
filters on a column and the literal spellings it compares columns with."""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.optimizer.scope import Scope, traverse_scope

from flexsql.errors import NotFoundError
from flexsql.tools.engines import Catalog, TableInfo

MAX_LITERAL_CHARS = 120  # longer strings are texts, not spellings of a value worth keeping


_FILTERS = (
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.Like,
    exp.ILike,
    exp.In,
    exp.Between,
    exp.Is,
)


class NotAQuery(ValueError):
    """The text does not parse as one read statement."""


@dataclass
class Analysis:
    tables: list[str] = field(default_factory=list)  # qualified, as the catalog spells them
    columns: list[str] = field(default_factory=list)  # table.column
    missing: list[str] = field(default_factory=list)  # names the schema does not have
    joins: list[tuple[str, str]] = field(default_factory=list)  # (table.column, table.column), sorted
    filters: list[tuple[str, list[str]]] = field(default_factory=list)  # (condition, its tables)
    literals: list[tuple[str, str]] = field(default_factory=list)  # (table.column, value)

    @property
    def stale_reason(self) -> str | None:
        if not self.missing:
            return None
        return (
            "not in the schema now: " + ", ".join(self.missing[:5]) + (" …" if len(self.missing) > 5 else "")
        )


def parse_one(sql: str, dialect: str) -> exp.Expr:
    """One read statement, or NotAQuery saying why not."""
    text = sql.strip().rstrip(";").strip()
    if not text:
        raise NotAQuery("the SQL is empty")
    try:
        trees = [t for t in sqlglot.parse(text, read=dialect) if t is not None]
    except (ParseError, TokenError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise NotAQuery(f"does not parse as {dialect} SQL: {first[:160]}") from None
    if len(trees) != 1:
        raise NotAQuery(f"holds {len(trees)} statements; store one query per item")
    tree = trees[0]
    if not isinstance(tree, exp.Query):
        raise NotAQuery(f"is a {tree.key.upper()} statement, not a query (SELECT, WITH, UNION)")
    return tree


def split_statements(text: str, dialect: str) -> list[str]:
    """The statements of a query log, as written (a statement that does not parse stays one item)."""
    out: list[str] = []
    try:
        for tree in sqlglot.parse(text, read=dialect):
            if tree is not None:
                out.append(tree.sql(dialect=dialect))
        return out
    except (ParseError, TokenError):
        pass
    # one bad statement must not hide the good ones: split on semicolons that end a line
    return [part.strip() for part in text.split(";\n") if part.strip().rstrip(";").strip()]


def _resolve(catalog: Catalog, table: exp.Table, dialect: str) -> TableInfo | None:
    parts = [table.args.get(k) for k in ("catalog", "db", "this")]
    name = ".".join(
        '"' + p.name.replace('"', '""') + '"' if p.quoted else p.name
        for p in parts
        if isinstance(p, exp.Identifier) and p.name
    )
    try:
        return catalog.resolve(name, dialect=dialect)
    except NotFoundError:
        return None


class _Reader:
    def __init__(self, catalog: Catalog, dialect: str) -> None:
        self.catalog, self.dialect = catalog, dialect
        self.out = Analysis()
        self._tables: dict[str, None] = {}
        self._columns: dict[str, None] = {}
        self._missing: dict[str, None] = {}
        self._owner: dict[str, tuple[TableInfo, str]] = {}

    def scope_tables(self, scope: Scope) -> dict[str, TableInfo | None]:
        """alias (lower-case) -> the catalog table it names, for the scope's tables (None: not in the schema)."""
        found: dict[str, TableInfo | None] = {}
        for alias, source in scope.sources.items():
            if isinstance(source, exp.Table):
                info = _resolve(self.catalog, source, self.dialect)
                if info is None:
                    self._missing.setdefault(source.sql(dialect=self.dialect), None)
                else:
                    self._tables.setdefault(info.qualified, None)
                found[alias.lower()] = info
        return found

    def column_of(self, col: exp.Column, tables: dict[str, TableInfo | None]) -> str | None:
        """`table.column` for a column of the scope's own tables (None: a derived table's, or unknown)."""
        name = col.name
        if not name or name == "*":
            return None
        if col.table:
            info = tables.get(col.table.lower())
            if info is None:
                return None
            owners = [info]
        else:
            owners = [t for t in tables.values() if t is not None and _has(t, name)]
            if len(owners) != 1:
                return None  # ambiguous, an output alias, or a derived table's column
        info = owners[0]
        if not _has(info, name):
            self._missing.setdefault(f"{info.qualified}.{name}", None)
            return None
        spelled = info.column(name).name
        key = f"{info.qualified}.{spelled}"
        self._columns.setdefault(key, None)
        self._owner[key] = (info, spelled)
        return key

    def read(self, tree: exp.Expr) -> Analysis:
        joins: set[tuple[str, str]] = set()
        filters: dict[str, list[str]] = {}
        literals: set[tuple[str, str]] = set()
        for scope in traverse_scope(tree):
            tables = self.scope_tables(scope)
            for col in scope.columns:
                self.column_of(col, tables)
            for eq in scope.expression.find_all(exp.EQ):
                if eq.find_ancestor(exp.Select) is not scope.expression:
                    continue
                left, right = eq.left, eq.right
                if isinstance(left, exp.Column) and isinstance(right, exp.Column):
                    a, b = self.column_of(left, tables), self.column_of(right, tables)
                    if a and b and a.rsplit(".", 1)[0] != b.rsplit(".", 1)[0]:
                        x, y = sorted((a, b))
                        joins.add((x, y))
            where = scope.expression.args.get("where")
            if where is not None:
                for pred in _conjuncts(where.this):
                    self._filter(pred, tables, filters, literals)
        out = self.out
        out.tables = list(self._tables)
        out.columns = list(self._columns)
        out.missing = list(self._missing)
        out.joins = sorted(joins)
        out.filters = sorted(filters.items())
        out.literals = sorted(literals)
        return out

    def _filter(
        self,
        pred: exp.Expr,
        tables: dict[str, TableInfo | None],
        filters: dict[str, list[str]],
        literals: set[tuple[str, str]],
    ) -> None:
        """A predicate on one column compared with constants: kept with its column qualified."""
        inner = pred.this if isinstance(pred, exp.Not) else pred
        if not isinstance(inner, _FILTERS):
            return
        cols = list(inner.find_all(exp.Column))
        if len(cols) != 1 or inner.find(exp.Select) is not None:
            return
        key = self.column_of(cols[0], tables)
        if key is None:
            return
        info, column = self._owner[key]
        shown = pred.copy()
        for c in shown.find_all(exp.Column):
            c.replace(exp.column(column, table=info.name, db=info.schema_name or None, catalog=info.database))
        filters.setdefault(shown.sql(dialect=self.dialect), [info.qualified])
        if isinstance(inner, exp.EQ | exp.NEQ | exp.In | exp.Like | exp.ILike):
            for lit in inner.find_all(exp.Literal):
                if lit.is_string and 0 < len(lit.this) <= MAX_LITERAL_CHARS:
                    literals.add((key, lit.this))


def _has(table: TableInfo, name: str) -> bool:
    lowered = name.lower()
    return any(c.name.lower() == lowered for c in table.columns)


def _conjuncts(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.And):
        return _conjuncts(node.left) + _conjuncts(node.right)
    if isinstance(node, exp.Paren):
        return _conjuncts(node.this)
    return [node]


def analyze(sql: str, catalog: Catalog, dialect: str) -> Analysis:
    """Read one query (NotAQuery when it is not one) against `catalog`."""
    tree = parse_one(sql, dialect)
    try:
        return _Reader(catalog, dialect).read(tree)
    except (ParseError, TokenError, ValueError, KeyError) as exc:  # a scope sqlglot cannot follow
        raise NotAQuery(f"cannot be read: {str(exc)[:160]}") from None


__all__ = ["Analysis", "NotAQuery", "analyze", "parse_one", "split_statements"]
