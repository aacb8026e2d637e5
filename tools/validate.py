"""validate_sql: parse, bind and plan a statement without running it; unknown names get
"did you mean" suggestions, common dialect mistakes get a hint."""

from __future__ import annotations

import difflib
import re

import sqlglot
from pydantic import BaseModel
from sqlglot import exp
from sqlglot.errors import ParseError

from flexsql.errors import FlexSQLError, NotFoundError, RefusedError
from flexsql.tools.engines import Catalog, FetchLimits
from flexsql.tools.runtime.context import SourceName, ToolContext
from flexsql.tools.runtime.registry import ToolArgs, ToolResult, tool
from flexsql.tools.runtime.render import TextBudget
from flexsql.tools.sql.guard import SqlSyntaxRefusal, check_sql


class SqlIssue(BaseModel):
    kind: str  # refused, syntax, unknown_table, unknown_column, engine
    message: str
    line: int | None = None
    column: int | None = None
    suggestions: list[str] = []


class Validation(ToolResult):
    source: str
    dialect: str
    valid: bool
    issues: list[SqlIssue] = []
    hints: list[str] = []
    checked_by: list[str] = []

    def to_text(self, budget: TextBudget = TextBudget()) -> str:
        head = "valid" if self.valid else "invalid"
        lines = [f"{head} ({self.dialect}; checked by {', '.join(self.checked_by)})"]
        for issue in self.issues:
            where = f" at line {issue.line}, col {issue.column}" if issue.line else ""
            line = f"- {issue.kind}{where}: {issue.message}"
            if issue.suggestions:
                line += f" — did you mean: {', '.join(issue.suggestions)}?"
            lines.append(line)
        lines += [f"hint: {h}" for h in self.hints]
        return "\n".join(lines)


_UNKNOWN_COLUMN = [
    re.compile(r'Referenced column "([^"]+)" not found', re.I),
    re.compile(r'column "?([^"\s]+)"? does not exist', re.I),
    re.compile(r"no such column: ([\w.]+)", re.I),
    re.compile(r"invalid identifier '([^']+)'", re.I),
    re.compile(r'Values list "[^"]*" does not have a column named "([^"]+)"', re.I),
]
_UNKNOWN_TABLE = [
    re.compile(r"Table with name ([\w.\"]+) does not exist", re.I),
    re.compile(r'relation "([^"]+)" does not exist', re.I),
    re.compile(r"no such table: ([\w.]+)", re.I),
    re.compile(r"Object '([^']+)' does not exist", re.I),
]


def _referenced_tables(tree: exp.Expr, catalog: Catalog, dialect: str) -> tuple[list[str], list[SqlIssue]]:
    cte_names = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    found: list[str] = []
    issues: list[SqlIssue] = []
    for table in tree.find_all(exp.Table):
        if not table.name or table.name.lower() in cte_names or not isinstance(table.this, exp.Identifier):
            continue
        # quoted parts keep their case and dots; unquoted ones fold the engine's way
        idents = [table.args.get(k) for k in ("catalog", "db", "this")]
        name = ".".join(
            '"' + i.name.replace('"', '""') + '"' if i.quoted else i.name
            for i in idents
            if isinstance(i, exp.Identifier) and i.name
        )
        try:
            found.append(catalog.resolve(name, dialect=dialect).qualified)
        except NotFoundError as exc:
            close = difflib.get_close_matches(
                table.name.lower(), [t.name.lower() for t in catalog.tables], n=5, cutoff=0.6
            )
            issues.append(SqlIssue(kind="unknown_table", message=str(exc).split(";")[0], suggestions=close))
    return list(dict.fromkeys(found)), issues


def _column_suggestions(name: str, tables: list[str], catalog: Catalog) -> list[str]:
    bare = name.split(".")[-1].lower()
    names: list[str] = []
    for qualified in tables:
        info = next(t for t in catalog.tables if t.qualified == qualified)
        names += [f"{info.name}.{c.name}" for c in info.columns]
    lowered = {n.split(".")[-1].lower(): n for n in names}
    close = difflib.get_close_matches(bare, list(lowered), n=5, cutoff=0.55)
    return [lowered[c] for c in close]


class ValidateSql(ToolArgs):
    sql: str
    source: SourceName = None


@tool("Check SQL without running it: syntax, the read-only guard, names (did-you-mean), EXPLAIN.")
def validate_sql(ctx: ToolContext, args: ValidateSql) -> Validation:
    src = ctx.source(args.source)
    sql = src.expand(args.sql)[0]  # family references (EVENTS_*) are checked as the union that runs
    result = Validation(
        source=src.name, dialect=src.dialect, valid=True, checked_by=["sqlglot parse", "guard"]
    )
    try:
        tree = sqlglot.parse_one(sql, read=src.dialect)
    except ParseError as exc:
        for err in exc.errors[:3] or [{}]:
            result.issues.append(
                SqlIssue(
                    kind="syntax",
                    message=err.get("description") or str(exc).splitlines()[0],
                    line=err.get("line"),
                    column=err.get("col"),
                )
            )
        result.valid = False
        return result
    except Exception as exc:  # tokenizer errors and the like
        result.issues.append(
            SqlIssue(kind="syntax", message=str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        )
        result.valid = False
        return result
    try:
        check_sql(sql, src.engine)
    except RefusedError as exc:  # the kind says "refused" (or "syntax"): the message does not repeat it
        kind = "syntax" if isinstance(exc, SqlSyntaxRefusal) else "refused"
        result.issues.append(SqlIssue(kind=kind, message=str(exc).removeprefix("refused: ")))
        result.valid = False
        return result
    catalog = src.catalog()
    tables, issues = _referenced_tables(tree, catalog, src.dialect)
    result.checked_by.append("catalog")
    if issues:
        result.issues += issues
        result.valid = False
        return result
    if not isinstance(tree, exp.Query):
        return result
    try:
        src.execute(
            src.engine.explain(sql.strip().rstrip(";")),
            timeout_s=min(ctx.limits.query_timeout_s, 15.0),
            limits=FetchLimits(max_rows=1, count_limit=1),
        )
        result.checked_by.append("engine EXPLAIN")
    except FlexSQLError as exc:
        result.checked_by.append("engine EXPLAIN")
        result.valid = False
        message = str(exc).strip().splitlines()[0]
        issue = SqlIssue(kind="engine", message=message)
        for pattern in _UNKNOWN_COLUMN:
            m = pattern.search(str(exc))
            if m:
                issue.kind = "unknown_column"
                issue.suggestions = _column_suggestions(m.group(1), tables, catalog)
                if f'"{m.group(1)}"' in sql and not src.engine.double_quoted_strings:
                    result.hints.append(
                        f'"{m.group(1)}" is read as a column name in {src.dialect}: '
                        f"write string literals in single quotes ('{m.group(1)}')"
                    )
                break
        else:
            for pattern in _UNKNOWN_TABLE:
                m = pattern.search(str(exc))
                if m:
                    issue.kind = "unknown_table"
                    issue.suggestions = [
                        s
                        for s in catalog.suggest(m.group(1).strip('"'))
                        .removeprefix("did you mean: ")
                        .rstrip("?")
                        .split(", ")
                        if s and " " not in s
                    ]
                    break
        result.issues.append(issue)
    return result
