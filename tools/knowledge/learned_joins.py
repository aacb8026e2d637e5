"""Join conditions learned from queries (the store's facts.yaml: verified queries, query logs, the engine's
history, a semantic model's relationships) as links for find_join_path, with their counts as evidence.

A learned condition ranks above every link inferred from names and below declared keys; among learned
ones the most used comes first. A condition that is also declared stays declared and says how often it
was used; one that was inferred becomes learned.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import replace

from flexsql.tools.engines import Catalog, Source
from flexsql.tools.knowledge.store import FACTS, JoinFact, load, store_dir
from flexsql.tools.search.keys import CatalogLinks, KeyLink

LEARNED = "learned"
BASE_WEIGHT = 0.92  # above the surest inferred rule (0.9), below declared (1.0)
COUNT_WEIGHT = 0.07  # added as the count grows to 100 uses (log scale)


def weight_of(count: int) -> float:
    return BASE_WEIGHT + COUNT_WEIGHT * min(1.0, math.log1p(max(count, 1)) / math.log1p(100))


def evidence_of(fact: JoinFact) -> str:
    uses = "1 query" if fact.count == 1 else f"{fact.count} queries"
    origins = sorted(fact.by.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ", ".join(f"{origin} {n}" for origin, n in origins[:3])
    return f"used in {uses}" + (
        f" ({shown})" if len(origins) > 1 or origins[0][0] != "verified queries" else " (verified)"
    )


def _column(catalog: Catalog, position: dict[str, int], text: str) -> tuple[int, str] | None:
    table, _, column = text.rpartition(".")
    ti = position.get(table.lower())
    if ti is None:
        return None
    match = next((c.name for c in catalog.tables[ti].columns if c.name.lower() == column.lower()), None)
    return (ti, match) if match else None


def with_learned(source: Source, catalog: Catalog, graph: CatalogLinks) -> CatalogLinks:
    """`graph` with the store's learned join conditions merged in (the same graph when it has none)."""
    if not (store_dir(source) / FACTS).exists():
        return graph
    knowledge, stamp = load(source)
    if not knowledge.facts.joins:
        return graph
    cache: dict[object, CatalogLinks] = catalog.derived("learned_links", dict)
    found = cache.get(stamp)
    if found is None:
        cache.clear()
        found = cache[stamp] = _merged(catalog, graph, knowledge.facts.joins)
    return found


def _merged(catalog: Catalog, graph: CatalogLinks, facts: list[JoinFact]) -> CatalogLinks:
    position = {t.qualified.lower(): i for i, t in enumerate(catalog.tables)}
    pairs: dict[tuple[int, int], list[KeyLink]] = {k: list(v) for k, v in graph.pairs.items()}
    neighbours: dict[int, list[int]] = defaultdict(list, {k: list(v) for k, v in graph.neighbours.items()})
    for fact in facts:
        a, b = _column(catalog, position, fact.left), _column(catalog, position, fact.right)
        if a is None or b is None or a[0] == b[0]:
            continue  # a table or column the schema no longer has
        link = KeyLink(
            table=a[0],
            columns=(a[1],),
            ref_table=b[0],
            ref_columns=(b[1],),
            kind=LEARNED,
            evidence=evidence_of(fact),
            weight=weight_of(fact.count),
        )
        pair = link.pair()
        held = pairs.setdefault(pair, [])
        if not held:
            neighbours[pair[0]].append(pair[1])
            neighbours[pair[1]].append(pair[0])
        same = next((i for i, old in enumerate(held) if old.column_pairs() == link.column_pairs()), None)
        if same is None:
            held.append(link)
        elif held[same].declared:
            held[same] = replace(held[same], evidence=f"declared; {link.evidence}")
        else:
            held[same] = link
    for held in pairs.values():
        held.sort(key=lambda link: -link.weight)
    links = [link for held in pairs.values() for link in held]
    return CatalogLinks(links, pairs, dict(neighbours), graph.keys, graph.referencing)


__all__ = ["LEARNED", "evidence_of", "weight_of", "with_learned"]
