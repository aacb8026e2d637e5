"""Role-state of a SQL query (Rose-SQL's "structural blueprint"): which tables and columns fill which
role — selected (with their aggregates), filtered (with operator and literal), joined on, grouped by,
HAVING, ordered by, LIMIT, DISTINCT — derived with sqlglot from the SQL text, never by a model.

A follow-up turn is told to edit the previous query; the role-state says compactly what that query
does, and `diff_roles` says what the new turn changed ("only the online ones" adds a filter; "and in
2023?" changes a literal), for the prompt and the trace.

Conventions (they make two turns' states comparable):
- Unquoted identifiers are lower-cased (Spider-style SQL mixes `MODEL_LIST` and `model_list`);
  quoted identifiers keep their case. Table aliases are resolved to the table they name; a column
  without a qualifier is given the table's name when its scope reads exactly one table. A select
  alias used in ORDER BY or HAVING is replaced by the expression it names.
- Nested queries are kept apart, never merged into the outer roles: the top-level state describes
  the outermost SELECT (for a set operation, its first branch, with `set_op` naming the operator and
  the set's ORDER BY / LIMIT), and `nested` lists every other query with its `kind`: `union`,
  `intersect`, `except` (later branches), `cte <name>`, `from <alias>` (a derived table),
  `subquery N` (in WHERE, HAVING or SELECT; the outer role shows the placeholder `(subquery N)`).
- AND and OR are both split into their predicates: the filter role lists which column is compared
  with what, not the boolean shape.
"""

from __future__ import annotations

from typing import Any, Literal

import sqlglot
from pydantic import BaseModel, Field
from sqlglot import exp

__all__ = ["FilterRole", "LiteralChange", "OrderRole", "RoleDiff", "RoleState", "diff_roles", "role_state"]

SetOp = Literal["union", "union all", "intersect", "except"]
_LIST_ROLES = ("tables", "select", "filter", "join", "group", "having", "order")
_SHOWN = 8  # entries per role in a summary
_ENTRY = 120  # characters per entry in a summary


def _short(text: str) -> str:
    return text if len(text) <= _ENTRY else text[: _ENTRY - 1] + "…"


class FilterRole(BaseModel):
    """One predicate of WHERE: `column op value`, e.g. `singer.country = 'France'`."""

    column: str
    op: str  # =, <>, >, >=, <, <=, like, not like, in, not in, between, not between, is, is not, exists, …
    value: str | None = (
        None  # the literal as SQL text: 'France', 2020, ('a', 'b'), 2020 AND 2023, (subquery 1)
    )

    def text(self) -> str:
        return " ".join(p for p in (self.column, self.op, self.value) if p)


class OrderRole(BaseModel):
    column: str
    direction: Literal["asc", "desc"] = "asc"

    def text(self) -> str:
        return f"{self.column} {self.direction}"


class NestedQuery(BaseModel):
    kind: str  # union / intersect / except / cte NAME / from ALIAS / subquery N
    state: RoleState


class RoleState(BaseModel):
    """The roles of one query. `error` is set (and every role empty) when the SQL does not parse as a
    single query."""

    sql: str = ""
    dialect: str | None = None
    tables: list[str] = Field(default_factory=list)
    select: list[str] = Field(default_factory=list)
    filter: list[FilterRole] = Field(default_factory=list)
    join: list[str] = Field(default_factory=list)
    group: list[str] = Field(default_factory=list)
    having: list[str] = Field(default_factory=list)
    order: list[OrderRole] = Field(default_factory=list)
    limit: str | None = None
    distinct: bool = False
    set_op: SetOp | None = None
    nested: list[NestedQuery] = Field(default_factory=list)
    error: str | None = None

    @property
    def empty(self) -> bool:
        return not (self.tables or self.select or self.nested)

    def role_texts(self, role: str) -> list[str]:
        """A role's entries as strings (what diffs and prompts compare)."""
        values = getattr(self, role)
        return [v.text() if isinstance(v, FilterRole | OrderRole) else v for v in values]

    def summary(self, max_chars: int = 600) -> str:
        """One compact line per query, nested queries indented: what a prompt shows of the SQL."""
        if self.error:
            return f"(no role-state: {self.error})"
        lines = [self._line()]
        for nested in self.nested:
            lines.append(f"  [{nested.kind}] " + nested.state.summary(max_chars).replace("\n", "\n  "))
        text = "\n".join(lines)
        return text if len(text) <= max_chars else text[: max_chars - 1] + "…"

    def _line(self) -> str:
        parts = []
        for role in _LIST_ROLES:
            entries = self.role_texts(role)
            if len(entries) > _SHOWN:  # a 400-column SELECT must not push the filters out of the text
                entries = entries[:_SHOWN] + [f"… {len(entries) - _SHOWN} more"]
            if entries:
                parts.append(f"{role}: {', '.join(_short(e) for e in entries)}")
        if self.limit is not None:
            parts.append(f"limit: {self.limit}")
        if self.distinct:
            parts.append("distinct")
        if self.set_op:
            parts.append(f"set: {self.set_op}")
        return "; ".join(parts) or "(empty)"


class LiteralChange(BaseModel):
    column: str
    op: str
    old: str | None
    new: str | None

    def text(self) -> str:
        return f"{self.column} {self.op} {self.old} → {self.new}"


class RoleDiff(BaseModel):
    """What changed from one turn's query to the next: entries added and removed per role, and
    filters that kept their column and operator but changed their literal."""

    added: dict[str, list[str]] = Field(default_factory=dict)
    removed: dict[str, list[str]] = Field(default_factory=dict)
    literals: list[LiteralChange] = Field(default_factory=list)
    changed: dict[str, tuple[str | None, str | None]] = Field(
        default_factory=dict
    )  # limit / distinct / set_op
    nested: dict[str, RoleDiff] = Field(
        default_factory=dict
    )  # by nested kind; "+kind"/"-kind" when (dis)appeared

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.literals or self.changed or self.nested)

    def summary(self, max_chars: int = 600) -> str:
        if self.empty:
            return "no change in roles"
        parts = [f"{role} +{v}" for role, values in self.added.items() for v in values]
        parts += [f"{role} -{v}" for role, values in self.removed.items() for v in values]
        parts += [f"filter {c.text()}" for c in self.literals]
        parts += [f"{k}: {old} → {new}" for k, (old, new) in self.changed.items()]
        for kind, sub in self.nested.items():
            parts.append(f"[{kind}] {sub.summary(max_chars)}" if not sub.empty else f"[{kind}]")
        text = "; ".join(parts)
        return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


# -- extraction ------------------------------------------------------------------------------------


def role_state(sql: str, dialect: str | None = None) -> RoleState:
    """The role-state of one query. Never raises: SQL that does not parse, several statements or a
    statement that is not a query give an empty state whose `error` says which."""
    read = _dialect(dialect)
    try:
        statements = [s for s in sqlglot.parse(sql, read=read) if s is not None]
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return RoleState(
            sql=sql, dialect=dialect, error=f"the SQL does not parse as {dialect or 'generic'} SQL: {first}"
        )
    except ValueError as exc:  # an unknown dialect name
        return RoleState(sql=sql, dialect=dialect, error=str(exc))
    if not statements:
        return RoleState(sql=sql, dialect=dialect, error="no SQL statement")
    if len(statements) > 1:
        return RoleState(
            sql=sql, dialect=dialect, error=f"{len(statements)} statements; a role-state describes one query"
        )
    tree = statements[0]
    if isinstance(tree, exp.Subquery):
        tree = tree.unnest()
    if not isinstance(tree, exp.Query):
        return RoleState(
            sql=sql,
            dialect=dialect,
            error=f"not a query: it reads as {tree.key.upper()}, not SELECT / WITH / a set operation",
        )
    state = _Extractor(read).query(tree, parent=None)
    state.sql, state.dialect = sql, dialect
    return state


def _dialect(dialect: str | None) -> str | None:
    """A sqlglot dialect name (what `Source.dialect` gives); an unknown name reads as generic SQL
    rather than failing the role-state."""
    if dialect is None:
        return None
    try:
        sqlglot.Dialect.get_or_raise(dialect.lower())
    except ValueError:
        return None
    return dialect.lower()


def _arg(node: exp.Expr, name: str) -> Any:
    # sqlglot renamed some keys (`from` → `from_`, `with` → `with_`); accept both.
    value = node.args.get(name)
    return value if value is not None else node.args.get(name + "_")


def _ident(node: exp.Expr | None) -> str:
    if node is None:
        return ""
    if isinstance(node, exp.Identifier):
        return node.name if node.quoted else node.name.lower()
    return node.name.lower() if isinstance(node, exp.Expression) else str(node)


class _Scope:
    def __init__(self, parent: _Scope | None) -> None:
        self.parent = parent
        self.aliases: dict[str, str] = {}  # alias or name (lower) -> the name roles show
        self.sources: list[str] = []  # what this scope reads, in FROM order
        self.select_aliases: dict[str, exp.Expr] = {}
        self.select_items: list[exp.Expr] = []

    def resolve(self, qualifier: str) -> str:
        scope: _Scope | None = self
        while scope is not None:
            if qualifier.lower() in scope.aliases:
                return scope.aliases[qualifier.lower()]
            scope = scope.parent
        return qualifier


class _Extractor:
    def __init__(self, dialect: str | None) -> None:
        self.dialect = dialect
        self.subqueries = 0

    # queries
    def query(self, node: exp.Expr, parent: _Scope | None) -> RoleState:
        nested: list[NestedQuery] = []
        with_ = _arg(node, "with")
        if with_ is not None:
            for cte in with_.expressions:
                nested.append(
                    NestedQuery(
                        kind=f"cte {_ident(cte.args.get('alias') and cte.args['alias'].this)}",
                        state=self.query(cte.this, parent),
                    )
                )
        if isinstance(node, exp.Subquery):
            node = node.unnest()
        if isinstance(node, exp.SetOperation):
            branches, ops = self._branches(node)
            state = self.select(branches[0], parent)
            for op, branch in zip(ops, branches[1:], strict=True):
                nested.append(NestedQuery(kind=op, state=self.select(branch, parent)))
            state.set_op = ops[0]
            # ORDER BY / LIMIT of a set operation apply to the whole set; they are shown on the top state.
            scope = _Scope(parent)
            self._order_limit(node, state, scope)
        elif isinstance(node, exp.Select):
            state = self.select(node, parent)
        else:  # VALUES and the like: nothing to take apart
            state = RoleState()
        state.nested = nested + state.nested
        return state

    def _branches(self, node: exp.Expr, root: bool = True) -> tuple[list[exp.Expr], list[SetOp]]:
        """A chain of set operations flattened into its branches and operators; a parenthesised
        set with its own ORDER BY / LIMIT stays one branch."""
        if isinstance(node, exp.Subquery):
            node = node.unnest()
        if not isinstance(node, exp.SetOperation) or (
            not root and (node.args.get("order") or node.args.get("limit"))
        ):
            return [node], []
        left, left_ops = self._branches(node.this, root=False)
        right, right_ops = self._branches(node.expression, root=False)
        op: SetOp
        if isinstance(node, exp.Intersect):
            op = "intersect"
        elif isinstance(node, exp.Except):
            op = "except"
        else:  # Union, the third of sqlglot's set operations
            op = "union" if node.args.get("distinct") else "union all"
        return left + right, left_ops + [op] + right_ops

    def select(self, node: exp.Expr, parent: _Scope | None) -> RoleState:
        if not isinstance(node, exp.Select):
            return self.query(node, parent)
        scope = _Scope(parent)
        state = RoleState()
        with_ = _arg(node, "with")
        if with_ is not None:  # a CTE inside a branch or subquery
            for cte in with_.expressions:
                state.nested.append(
                    NestedQuery(
                        kind=f"cte {_ident(cte.args['alias'].this)}", state=self.query(cte.this, scope)
                    )
                )
        from_ = _arg(node, "from")
        if from_ is not None:
            self._source(from_.this, scope, state)
        for join in node.args.get("joins") or []:
            self._source(join.this, scope, state)
        for join in node.args.get("joins") or []:
            on = join.args.get("on")
            side = " ".join(p for p in (join.args.get("side"), join.args.get("kind")) if p).lower()
            prefix = f"{side} join: " if side and side not in ("inner", "cross") else ""
            if on is not None:
                for atom in _conjuncts(on):
                    state.join.append(prefix + self.render(atom, scope, state))
            for col in join.args.get("using") or []:
                left = scope.sources[0] if scope.sources else ""
                right = scope.resolve(
                    _ident(join.this.args.get("alias") and join.this.args["alias"].this)
                    or _ident(join.this.this)
                )
                state.join.append(f"{prefix}{left}.{_ident(col)} = {right}.{_ident(col)}")
        state.tables = [s for s in scope.sources if not s.startswith("(")]
        for item in node.expressions:
            target = item.this if isinstance(item, exp.Alias) else item
            if isinstance(item, exp.Alias):
                scope.select_aliases[item.alias.lower()] = target
            scope.select_items.append(target)
            state.select.append(self.render(target, scope, state))
        distinct = node.args.get("distinct")
        state.distinct = distinct is not None
        where = node.args.get("where")
        if where is not None:
            for atom in _conjuncts(where.this):
                self._predicate(atom, scope, state)
        group = node.args.get("group")
        if group is not None:
            state.group = [self.render(self._unalias(g, scope), scope, state) for g in group.expressions]
        having = node.args.get("having")
        if having is not None:
            state.having = [
                self.render(self._unalias_tree(a, scope), scope, state) for a in _conjuncts(having.this)
            ]
        self._order_limit(node, state, scope)
        return state

    def _order_limit(self, node: exp.Expr, state: RoleState, scope: _Scope) -> None:
        order = node.args.get("order")
        if order is not None:
            for o in order.expressions:
                key = o.this
                if (
                    isinstance(key, exp.Literal)
                    and not key.is_string
                    and key.this.isdigit()
                    and 1 <= int(key.this) <= len(state.select)
                ):
                    column = state.select[int(key.this) - 1]  # ORDER BY 2: the second selected expression
                else:
                    column = self.render(self._unalias(key, scope), scope, state)
                state.order.append(
                    OrderRole(column=column, direction="desc" if o.args.get("desc") else "asc")
                )
        limit = node.args.get("limit") or node.args.get("fetch")
        if limit is not None:
            value = limit.args.get("expression") or limit.args.get("count") or limit.this
            if value is not None:
                state.limit = value.sql(dialect=self.dialect)

    def _source(self, node: exp.Expr, scope: _Scope, state: RoleState) -> None:
        alias_node = node.args.get("alias")
        alias = _ident(alias_node.this) if isinstance(alias_node, exp.TableAlias) and alias_node.this else ""
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier):
            name = ".".join(
                _ident(p) for p in (node.args.get("catalog"), node.args.get("db"), node.this) if p
            )
            scope.aliases[_ident(node.this).lower()] = name
            if alias:
                scope.aliases[alias.lower()] = name
            scope.sources.append(name)
        elif isinstance(node, exp.Subquery | exp.Select | exp.SetOperation):
            label = alias or f"derived {len(state.nested) + 1}"
            state.nested.append(NestedQuery(kind=f"from {label}", state=self.query(node, scope.parent)))
            if alias:
                scope.aliases[alias.lower()] = alias
            scope.sources.append(f"({label})")
        else:  # a table function, UNNEST, …: shown as written
            text = node.sql(dialect=self.dialect)
            if alias:
                scope.aliases[alias.lower()] = alias
            scope.sources.append(text)

    # predicates
    def _predicate(self, atom: exp.Expr, scope: _Scope, state: RoleState) -> None:
        negated = False
        node = atom
        if isinstance(node, exp.Not):
            negated, node = True, node.this
        if isinstance(node, exp.Paren):
            node = node.this
        if node.args.get("negate"):  # newer sqlglot keeps NOT LIKE / NOT ILIKE as a flag
            negated = not negated
        ops: dict[type[exp.Expr], str] = {
            exp.EQ: "=",
            exp.NEQ: "<>",
            exp.GT: ">",
            exp.GTE: ">=",
            exp.LT: "<",
            exp.LTE: "<=",
            exp.Like: "like",
            exp.ILike: "ilike",
            exp.Is: "is",
            exp.SimilarTo: "similar to",
            exp.NullSafeEQ: "is not distinct from",
            exp.RegexpLike: "regexp",
        }
        left: exp.Expr | None = None
        op: str | None = None
        value: str | None = None
        if type(node) in ops:
            lhs, rhs = node.this, node.expression
            if isinstance(lhs, exp.Column) and isinstance(rhs, exp.Column):
                # a column compared with a column: a join condition written in WHERE
                state.join.append(self.render(atom, scope, state))
                return
            if not _has_column(lhs) and _has_column(rhs):  # 2020 < year -> year > 2020
                lhs, rhs = rhs, lhs
                flip = {">": "<", ">=": "<=", "<": ">", "<=": ">="}
                op = flip.get(ops[type(node)], ops[type(node)])
            else:
                op = ops[type(node)]
            left, value = lhs, self.render(rhs, scope, state)
        elif isinstance(node, exp.In):
            left, op = node.this, "in"
            query = node.args.get("query")
            if query is not None:
                value = self._subquery(query, scope, state)
            else:
                value = "(" + ", ".join(self.render(e, scope, state) for e in node.expressions) + ")"
        elif isinstance(node, exp.Between):
            left, op = node.this, "between"
            value = f"{self.render(node.args['low'], scope, state)} AND {self.render(node.args['high'], scope, state)}"
        elif isinstance(node, exp.Exists):
            state.filter.append(
                FilterRole(
                    column="",
                    op="not exists" if negated else "exists",
                    value=self._subquery(node.this, scope, state),
                )
            )
            return
        if left is None or op is None:
            state.filter.append(FilterRole(column=self.render(atom, scope, state), op="holds"))
            return
        if negated:
            op = {"=": "<>", "is": "is not"}.get(op, f"not {op}")
        state.filter.append(FilterRole(column=self.render(left, scope, state), op=op, value=value))

    def _subquery(self, node: exp.Expr, scope: _Scope, state: RoleState) -> str:
        self.subqueries += 1
        label = f"subquery {self.subqueries}"
        inner = node.unnest() if isinstance(node, exp.Subquery) else node
        state.nested.append(NestedQuery(kind=label, state=self.query(inner, scope)))
        return f"({label})"

    # expressions
    def _unalias(self, node: exp.Expr, scope: _Scope) -> exp.Expr:
        if isinstance(node, exp.Column) and not node.table and node.name.lower() in scope.select_aliases:
            return scope.select_aliases[node.name.lower()]
        if (
            isinstance(node, exp.Literal)
            and not node.is_string
            and node.this.isdigit()
            and scope.select_items
        ):
            # ORDER BY 2 / GROUP BY 2 -> the second selected expression
            n = int(node.this)
            if 1 <= n <= len(scope.select_items):
                return scope.select_items[n - 1]
        return node

    def _unalias_tree(self, node: exp.Expr, scope: _Scope) -> exp.Expr:
        if not scope.select_aliases:
            return node
        return node.copy().transform(lambda n: self._unalias(n, scope) if isinstance(n, exp.Column) else n)

    def render(self, node: exp.Expr, scope: _Scope, state: RoleState) -> str:
        """The expression as SQL text with aliases resolved and nested queries as placeholders."""
        if isinstance(node, exp.Column):  # the common case, without copying and generating SQL
            return self._column(node, scope).name
        subqueries: dict[int, str] = {}

        def rewrite(n: exp.Expr) -> exp.Expr:
            if isinstance(n, exp.Subquery) or (isinstance(n, exp.Select) and n is not node):
                label = self._subquery(n, scope, state)
                key = len(subqueries)
                subqueries[key] = label
                return exp.column(f"__flexsql_sub_{key}")
            if isinstance(n, exp.Column):
                return self._column(n, scope)
            return n

        tree = node.copy().transform(rewrite)
        text = tree.sql(dialect=self.dialect, normalize_functions="lower")
        for key, label in subqueries.items():  # labels come parenthesised: "(subquery 2)"
            text = text.replace(f"(__flexsql_sub_{key})", label).replace(f"__flexsql_sub_{key}", label)
        return text

    def _column(self, col: exp.Column, scope: _Scope) -> exp.Expr:
        if isinstance(col.this, exp.Star):
            table = scope.resolve(_ident(col.args.get("table"))) if col.table else None
            return exp.Var(this=f"{table}.*" if table else "*")
        name = _ident(col.this)
        if col.table:
            table = scope.resolve(_ident(col.args.get("table")))
        else:
            real = [s for s in scope.sources]
            table = real[0].strip("()") if len(real) == 1 else ""
        return exp.Var(this=f"{table}.{name}" if table else name)


def _conjuncts(node: exp.Expr) -> list[exp.Expr]:
    """AND and OR split into their predicates (parentheses dropped)."""
    if isinstance(node, exp.Paren):
        return _conjuncts(node.this)
    if isinstance(node, exp.And | exp.Or):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    return [node]


def _has_column(node: exp.Expr) -> bool:
    return isinstance(node, exp.Column) or node.find(exp.Column) is not None


# -- diff ------------------------------------------------------------------------------------------


def diff_roles(prev: RoleState, cur: RoleState) -> RoleDiff:
    """What `cur` changes relative to `prev` (the previous turn's query)."""
    diff = RoleDiff()
    prev_filters = {(f.column, f.op): f for f in prev.filter}
    cur_filters = {(f.column, f.op): f for f in cur.filter}
    changed_keys = set()
    for key, f in cur_filters.items():
        old = prev_filters.get(key)
        if old is not None and old.value != f.value and f.text() not in prev.role_texts("filter"):
            diff.literals.append(LiteralChange(column=f.column, op=f.op, old=old.value, new=f.value))
            changed_keys.add(key)
    for role in _LIST_ROLES:
        before, after = prev.role_texts(role), cur.role_texts(role)
        if role == "filter":
            before = [f.text() for f in prev.filter if (f.column, f.op) not in changed_keys]
            after = [f.text() for f in cur.filter if (f.column, f.op) not in changed_keys]
        added = [v for v in after if v not in before]
        removed = [v for v in before if v not in after]
        if added:
            diff.added[role] = added
        if removed:
            diff.removed[role] = removed
    for name in ("limit", "distinct", "set_op"):
        old, new = getattr(prev, name), getattr(cur, name)
        if old != new:
            diff.changed[name] = (None if old is None else str(old), None if new is None else str(new))
    prev_nested = {n.kind: n.state for n in prev.nested}
    cur_nested = {n.kind: n.state for n in cur.nested}
    for kind, state in cur_nested.items():
        if kind in prev_nested:
            sub = diff_roles(prev_nested[kind], state)
            if not sub.empty:
                diff.nested[kind] = sub
        else:
            diff.nested[f"+{kind}"] = RoleDiff()
    for kind in prev_nested:
        if kind not in cur_nested:
            diff.nested[f"-{kind}"] = RoleDiff()
    return diff


NestedQuery.model_rebuild()
RoleState.model_rebuild()
RoleDiff.model_rebuild()
