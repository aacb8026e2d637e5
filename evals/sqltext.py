"""Small facts about SQL text that scoring needs."""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from flexsql.evals.tasks import extract_sql


def orders_result(sql: str, dialect: str = "sqlite") -> bool:
    """Whether the statement sorts its final result (a top-level ORDER BY), which makes row order
    part of the answer for the `ex` scorer."""
    text = extract_sql(sql).strip().rstrip(";")
    try:
        tree = sqlglot.parse_one(text, read=dialect or None)
    except (SqlglotError, ValueError):
        return _order_by_at_depth_zero(text)
    while isinstance(tree, exp.Subquery | exp.Paren):
        if tree.args.get("order"):
            return True
        tree = tree.this
    return bool(tree is not None and tree.args.get("order"))


def _order_by_at_depth_zero(text: str) -> bool:
    depth = 0
    for token in re.finditer(r"\(|\)|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\border\s+by\b", text, re.IGNORECASE):
        value = token.group(0)
        if value == "(":
            depth += 1
        elif value == ")":
            depth -= 1
        elif value[0] not in "'\"" and depth == 0:
            return True
    return False
