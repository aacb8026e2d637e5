"""find_join_path: the join conditions that connect a set of tables, declared foreign keys first,
then edges inferred from column names (marked as inferred)."""

from __future__ import annotations

import heapq
import re
from collections import defaultdict

from pydantic import BaseModel, Field

from flexsql.tools.engines import Catalog, TableInfo
from flexsql.tools.runtime.context import SourceName, ToolContext
from flexsql.tools.runtime.registry import ToolArgs, ToolResult, tool
from flexsql.tools.runtime.render import TextBudget

DECLARED_COST = 1.0
INFERRED_COST = 1.6


class JoinEdge(BaseModel):
    left_table: str
    left_columns: list[str]
    right_table: str
    right_columns: list[str]
    kind: str  # "declared" or "inferred"

    def condition(self) -> str:
        return " AND ".join(
            f"{self.left_table}.{a} = {self.right_table}.{b}"
            for a, b in zip(self.left_columns, self.right_columns, strict=False)
        )


class JoinPath(ToolResult):
    source: str
    tables: list[str]
    via: list[str]  # intermediate tables the path needs
    joins: list[JoinEdge]
    connected: bool
    sql: str | None = None
    note: str | None = None

    def to_text(self, budget: TextBudget = TextBudget()) -> str:
        lines = []
        if not self.joins and len(self.tables) > 1:
            return self.note or "no join path found"
        for j in self.joins:
            lines.append(f"{j.condition()}  [{j.kind}]")
        if self.via:
            lines.append("via: " + ", ".join(self.via))
        if self.sql:
            lines.append(self.sql)
        if self.note:
            lines.append(self.note)
        return "\n".join(lines)


def _singular(word: str) -> str:
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith("ses") or word.endswith("xes"):
        return word[:-2]
    if word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


_Graph = dict[str, list[tuple[float, str, JoinEdge]]]
"""table -> (cost, neighbour table, the edge to it), both directions of every join."""


def _pair(a: str, b: str) -> tuple[str, str]:
    """Two tables in a fixed order: a join between them is one pair whichever side declared it."""
    return (a, b) if a <= b else (b, a)


def _edges(catalog: Catalog) -> _Graph:
    graph: _Graph = defaultdict(list)
    by_name: dict[str, list[TableInfo]] = defaultdict(list)
    for t in catalog.tables:
        by_name[t.name.lower()].append(t)

    def add(edge: JoinEdge, cost: float) -> None:
        graph[edge.left_table].append((cost, edge.right_table, edge))
        reverse = JoinEdge(
            left_table=edge.right_table,
            left_columns=edge.right_columns,
            right_table=edge.left_table,
            right_columns=edge.left_columns,
            kind=edge.kind,
        )
        graph[edge.right_table].append((cost, edge.left_table, reverse))

    declared: set[tuple[str, str]] = set()
    for t in catalog.tables:
        for fk in t.foreign_keys:
            targets = [
                r for r in by_name.get(fk.ref_table.lower(), []) if fk.ref_schema in (None, r.schema_name)
            ] or by_name.get(fk.ref_table.lower(), [])
            for ref in targets[:1]:
                ref_cols = fk.ref_columns or ref.primary_key
                add(
                    JoinEdge(
                        left_table=t.qualified,
                        left_columns=fk.columns,
                        right_table=ref.qualified,
                        right_columns=ref_cols,
                        kind="declared",
                    ),
                    DECLARED_COST,
                )
                declared.add(_pair(t.qualified, ref.qualified))

    # Inferred: t.x_id -> table x/xs (same schema) with a single-column key named id or x_id;
    # and a column named exactly like another table's single primary key.
    schema_tables: dict[tuple[str | None, str], list[TableInfo]] = defaultdict(list)
    for t in catalog.tables:
        schema_tables[(t.database, t.schema_name)].append(t)
    for members in schema_tables.values():
        pk_owner: dict[str, TableInfo] = {}
        stem_owner: dict[str, TableInfo] = {}
        for t in members:
            pk = t.primary_key
            if len(pk) == 1:
                pk_owner.setdefault(pk[0].lower(), t)
            stem_owner.setdefault(_singular(t.name.lower()), t)
        for t in members:
            for col in t.columns:
                name = col.name.lower()
                target: TableInfo | None = None
                target_col: str | None = None
                owner = pk_owner.get(name)
                if owner is not None and owner is not t and name != "id":
                    target, target_col = owner, owner.primary_key[0]
                else:
                    m = re.fullmatch(r"(.+?)_?id", name)
                    if m and m.group(1):
                        stem = stem_owner.get(_singular(m.group(1).rstrip("_")))
                        if stem is not None and stem is not t:
                            for candidate in ("id", name):
                                if any(c.name.lower() == candidate for c in stem.columns):
                                    target = stem
                                    target_col = next(
                                        c.name for c in stem.columns if c.name.lower() == candidate
                                    )
                                    break
                if target is None or target_col is None:
                    continue
                if _pair(t.qualified, target.qualified) in declared:
                    continue
                add(
                    JoinEdge(
                        left_table=t.qualified,
                        left_columns=[col.name],
                        right_table=target.qualified,
                        right_columns=[target_col],
                        kind="inferred",
                    ),
                    INFERRED_COST,
                )
    return graph


def _shortest(graph: _Graph, start: str, goals: set[str]) -> list[JoinEdge] | None:
    """Dijkstra from `start` to the nearest node in `goals`; returns the edges on the path."""
    queue: list[tuple[float, int, str]] = [(0.0, 0, start)]
    best: dict[str, float] = {start: 0.0}
    back: dict[str, tuple[str, JoinEdge]] = {}
    counter = 0
    while queue:
        cost, _, node = heapq.heappop(queue)
        if node in goals:
            path: list[JoinEdge] = []
            while node != start:
                prev, edge = back[node]
                path.append(edge)
                node = prev
            return list(reversed(path))
        if cost > best.get(node, float("inf")):
            continue
        for step, nxt, edge in graph.get(node, []):
            new = cost + step
            if new < best.get(nxt, float("inf")):
                best[nxt] = new
                back[nxt] = (node, edge)
                counter += 1
                heapq.heappush(queue, (new, counter, nxt))
    return None


class FindJoinPath(ToolArgs):
    tables: list[str] = Field(min_length=2, max_length=20, description="table names")
    source: SourceName = None


@tool(
    "Join conditions connecting tables: declared foreign keys first, inferred ones marked. "
    'Example: tables=["orders","customers"].'
)
def find_join_path(ctx: ToolContext, args: FindJoinPath) -> JoinPath:
    tables = args.tables
    src = ctx.source(args.source)
    catalog = src.catalog()
    resolved = [catalog.resolve(t).qualified for t in tables]
    wanted = list(dict.fromkeys(resolved))
    # catalog-derived: kept on the catalog, so a refresh drops it (a cache key with loaded_at piled up old graphs)
    graph = catalog.derived("joins", lambda: _edges(catalog))
    tree = {wanted[0]}
    joins: list[JoinEdge] = []
    missing: list[str] = []
    for target in wanted[1:]:
        if target in tree:
            continue
        path = _shortest(graph, target, tree)
        if path is None:
            missing.append(target)
            continue
        for edge in path:
            tree.update((edge.left_table, edge.right_table))
        joins.extend(
            reversed(
                [
                    JoinEdge(
                        left_table=e.right_table,
                        left_columns=e.right_columns,
                        right_table=e.left_table,
                        right_columns=e.left_columns,
                        kind=e.kind,
                    )
                    for e in path
                ]
            )
        )
    via = [t for t in tree if t not in wanted]
    sql = None
    if joins:
        parts = [f"FROM {wanted[0]}"] + [f"JOIN {j.right_table} ON {j.condition()}" for j in joins]
        sql = "\n".join(parts)
    note = None
    if missing:
        note = (
            f"no join path to {', '.join(missing)}: no declared or name-inferred keys connect it; "
            "look for shared columns with describe_table, or values with find_values"
        )
    elif any(j.kind == "inferred" for j in joins):
        note = (
            "inferred joins come from column names: check them with a quick run_query before relying on them"
        )
    return JoinPath(
        source=src.name,
        tables=wanted,
        via=sorted(via),
        joins=joins,
        connected=not missing,
        sql=sql,
        note=note,
    )
