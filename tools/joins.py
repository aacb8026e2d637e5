"""find_join_path: the join conditions that connect a set of tables — declared foreign keys and links
inferred from names (tools/search/keys.py), values sampled to confirm or rank the inferred ones — with,
for each pair of tables on the path, every other condition that joins them (`flights` to `airports` by
departure or by arrival airport), best first."""

from __future__ import annotations

import heapq
import time
from collections import defaultdict
from collections.abc import Sequence

from pydantic import BaseModel, Field

from flexsql.tools.engines import Catalog, Source
from flexsql.tools.knowledge.learned_joins import LEARNED, with_learned
from flexsql.tools.runtime.context import SourceName, ToolContext
from flexsql.tools.runtime.registry import ToolArgs, ToolResult, tool
from flexsql.tools.runtime.render import TextBudget
from flexsql.tools.search.key_values import confirm_by_values, discover_by_values
from flexsql.tools.search.keys import CatalogLinks, KeyLink, catalog_links

COST_SPREAD = 4.0  # a link's cost on the path: 1 declared, 1 + spread * (1 - weight) inferred
MAX_ALTERNATIVES = 8  # other conditions kept per pair of tables
TEXT_ALTERNATIVES = 3  # of which the text shows
VALUE_BUDGET_S = 2.0  # seconds one call may spend sampling values
MAX_REPLANS = 4  # plans made when values change which links are best


class JoinEdge(BaseModel):
    left_table: str
    left_columns: list[str]
    right_table: str
    right_columns: list[str]
    kind: str  # "declared", "learned" (from queries: the knowledge store) or "inferred"
    evidence: str | None = None  # why: "same name and type", "used in 12 queries (orders.sql 9, verified 3)"
    alternatives: list[JoinEdge] = []  # other conditions between the same two tables, best first

    def condition(self) -> str:
        return " AND ".join(
            f"{self.left_table}.{a} = {self.right_table}.{b}"
            for a, b in zip(self.left_columns, self.right_columns, strict=False)
        )

    def label(self) -> str:
        if self.kind == "declared":
            return self.evidence or self.kind  # "declared; used in 4 queries" when queries used it
        return f"{self.kind}: {self.evidence}" if self.evidence else self.kind


class JoinPath(ToolResult):
    source: str
    tables: list[str]
    via: list[str]  # intermediate tables the path needs
    joins: list[JoinEdge]  # one per pair of tables on the path, each with its alternatives
    connected: bool
    sql: str | None = None
    note: str | None = None

    def to_text(self, budget: TextBudget = TextBudget()) -> str:
        lines = []
        if not self.joins and len(self.tables) > 1:
            return self.note or "no join path found"
        for j in self.joins:
            lines.append(f"{j.condition()}  [{j.label()}]")
            for alt in j.alternatives[:TEXT_ALTERNATIVES]:
                lines.append(f"  or {alt.condition()}  [{alt.label()}]")
            if len(j.alternatives) > TEXT_ALTERNATIVES:
                lines.append(f"  ({len(j.alternatives) - TEXT_ALTERNATIVES} more in the structured result)")
        if self.via:
            lines.append("via: " + ", ".join(self.via))
        if self.sql:
            lines.append(self.sql)
        if self.note:
            lines.append(self.note)
        return "\n".join(lines)


def _edge(catalog: Catalog, link: KeyLink, start: int) -> JoinEdge:
    """The link as a condition read from table `start` (its left side)."""
    tables = catalog.tables
    mine, theirs = (
        (link.columns, link.ref_columns) if link.table == start else (link.ref_columns, link.columns)
    )
    other = link.ref_table if link.table == start else link.table
    return JoinEdge(
        left_table=tables[start].qualified,
        left_columns=list(mine),
        right_table=tables[other].qualified,
        right_columns=list(theirs),
        kind=link.kind,
        evidence=None if link.evidence == "declared" else link.evidence,
    )


def _cost(links: Sequence[KeyLink]) -> float:
    best = max(link.weight for link in links)
    return 1.0 if best >= 1.0 else 1.0 + COST_SPREAD * (1.0 - best)


class _Planner:
    """Paths over a catalog's links, with what this call learnt from values: pairs whose inferred links
    were weighed by sampled values, and links found by values between tables no name connects."""

    def __init__(self, ctx: ToolContext, src: Source, graph: CatalogLinks) -> None:
        self.ctx, self.src, self.graph = ctx, src, graph
        self.deadline = time.monotonic() + VALUE_BUDGET_S
        self.weighed: dict[tuple[int, int], list[KeyLink]] = {}
        self.found: dict[tuple[int, int], list[KeyLink]] = {}
        self.extra_neighbours: dict[int, list[int]] = defaultdict(list)

    def links(self, pair: tuple[int, int]) -> list[KeyLink]:
        if pair in self.weighed:
            return self.weighed[pair]
        return self.graph.pairs.get(pair, []) + self.found.get(pair, [])

    def neighbours(self, node: int) -> list[int]:
        return self.graph.neighbours.get(node, []) + self.extra_neighbours.get(node, [])

    def shortest(self, start: int, goals: set[int]) -> list[int] | None:
        """Dijkstra from `start` to the nearest table in `goals`; the tables on the way, `start` first."""
        queue: list[tuple[float, int, int]] = [(0.0, 0, start)]
        best: dict[int, float] = {start: 0.0}
        back: dict[int, int] = {}
        counter = 0
        while queue:
            cost, _, node = heapq.heappop(queue)
            if node in goals:
                path = [node]
                while node != start:
                    node = back[node]
                    path.append(node)
                return list(reversed(path))
            if cost > best.get(node, float("inf")):
                continue
            for nxt in self.neighbours(node):
                new = cost + _cost(self.links((min(node, nxt), max(node, nxt))))
                if new < best.get(nxt, float("inf")):
                    best[nxt] = new
                    back[nxt] = node
                    counter += 1
                    heapq.heappush(queue, (new, counter, nxt))
        return None

    def plan(self, wanted: list[int]) -> tuple[set[int], list[tuple[int, int]], list[int]]:
        """(tables joined, (joined, joining) steps read outward from the first table, tables unreachable)."""
        tree = {wanted[0]}
        steps: list[tuple[int, int]] = []
        missing: list[int] = []
        for target in wanted[1:]:
            if target in tree:
                continue
            path = self.shortest(target, tree)
            if path is None:
                missing.append(target)
                continue
            tree.update(path)
            steps.extend((b, a) for a, b in reversed(list(zip(path, path[1:], strict=False))))
        return tree, steps, missing

    def weigh(self, pair: tuple[int, int]) -> bool:
        """Weigh a pair's inferred links by values; whether its best link came out weaker."""
        if pair in self.weighed:
            return False
        links = self.links(pair)
        before = max(link.weight for link in links)
        # declared keys and conditions learned from queries are trusted as they are; values weigh the rest
        trusted = [link for link in links if link.declared or link.kind == LEARNED]
        if len(trusted) == len(links) or time.monotonic() >= self.deadline:
            self.weighed[pair] = links
            return False
        timeout = min(self.ctx.limits.query_timeout_s, VALUE_BUDGET_S)
        rest = [link for link in links if link not in trusted]
        weighed = trusted + confirm_by_values(self.src, rest, deadline=self.deadline, timeout_s=timeout)
        self.weighed[pair] = sorted(weighed, key=lambda link: -link.weight)
        return self.weighed[pair][0].weight < before

    def discover(self, missing: list[int], joined: list[int]) -> bool:
        """Links by values alone between unreachable tables and the joined ones asked for; whether any."""
        timeout = min(self.ctx.limits.query_timeout_s, VALUE_BUDGET_S)
        any_found = False
        for m in missing:
            for t in joined:
                pair = (min(m, t), max(m, t))
                if pair in self.found:
                    continue
                self.found[pair] = discover_by_values(self.src, self.graph, m, t, self.deadline, timeout)
                if self.found[pair]:
                    self.extra_neighbours[m].append(t)
                    self.extra_neighbours[t].append(m)
                    any_found = True
        return any_found


class FindJoinPath(ToolArgs):
    tables: list[str] = Field(min_length=2, max_length=20, description="table names")
    source: SourceName = None


@tool(
    "Join conditions between tables, each alternative: declared keys, then learned from queries, "
    'inferred ones marked. Example: tables=["orders","customers"].'
)
def find_join_path(ctx: ToolContext, args: FindJoinPath) -> JoinPath:
    src = ctx.source(args.source)
    catalog = src.catalog()
    position = {id(t): i for i, t in enumerate(catalog.tables)}
    wanted = list(dict.fromkeys(position[id(catalog.resolve(t))] for t in args.tables))
    planner = _Planner(ctx, src, with_learned(src, catalog, catalog_links(catalog)))
    # plan on names, weigh the chosen pairs by values, plan again while that changed the best links
    for _ in range(MAX_REPLANS):
        tree, steps, missing = planner.plan(wanted)
        changed = False
        for left, right in steps:
            changed = planner.weigh((min(left, right), max(left, right))) or changed
        if missing:
            changed = planner.discover(missing, [t for t in wanted if t in tree]) or changed
        if not changed:
            break
    joins: list[JoinEdge] = []
    for left, right in steps:
        pair = (min(left, right), max(left, right))
        planner.weigh(pair)
        edges = [_edge(catalog, link, left) for link in planner.links(pair)]
        first = edges[0]
        first.alternatives = edges[1 : 1 + MAX_ALTERNATIVES]
        joins.append(first)
    names = [catalog.tables[i].qualified for i in wanted]
    via = sorted(catalog.tables[i].qualified for i in tree if i not in wanted)
    sql = None
    if joins:
        parts = [f"FROM {names[0]}"] + [f"JOIN {j.right_table} ON {j.condition()}" for j in joins]
        sql = "\n".join(parts)
    note = None
    if missing:
        note = (
            f"no join path to {', '.join(catalog.tables[i].qualified for i in missing)}: no declared or "
            "inferred keys connect it; look for shared columns with describe_table, or values with find_values"
        )
    elif any(j.kind == "inferred" for j in joins):
        note = "inferred joins come from names (and sampled values): check one with a quick run_query"
    return JoinPath(
        source=src.name,
        tables=names,
        via=via,
        joins=joins,
        connected=not missing,
        sql=sql,
        note=note,
    )
