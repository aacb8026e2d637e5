"""Join links inferred from column names, for catalogs that declare no foreign keys.

Warehouses (Snowflake, BigQuery exports) rarely declare keys, yet their tables join all the same:
`pit_stops.race_id` points at `races`, `condition_occurrence.person_id` at `person`. A column named
`<entity>_id` / `<entity>Id` / `<entity>_key` links its table to the table of that schema named for
the entity (singular or plural). Search uses the links like declared foreign keys: a hub table the
question never names (`races`, `person`) collects a share of the score of the strong hits that
reference it, which is what a question needing four or more tables most often misses.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

from flexsql.tools.engines import TableInfo

_KEY = re.compile(r"^(?P<entity>.+?)_?(?:id|key)$", re.IGNORECASE)
_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def _entity_forms(word: str) -> set[str]:
    """'races' -> {'races', 'race'}; 'categories' -> {'categories', 'category'}."""
    out = {word}
    if word.endswith("ies") and len(word) > 4:
        out.add(word[:-3] + "y")
    if word.endswith("es") and len(word) > 4:
        out.add(word[:-2])
    if word.endswith("s") and len(word) > 3:
        out.add(word[:-1])
    return out


def key_entity(column: str) -> str | None:
    """'race_id' / 'raceId' / 'RaceID' / 'person_key' -> 'race' / 'person'; None for plain `id`."""
    m = _KEY.match(column)
    if not m:
        return None
    entity = _NON_ALNUM.sub("", m.group("entity").lower())
    return entity if len(entity) >= 3 else None


def inferred_links(
    tables: Sequence[TableInfo], schema_of: Sequence[int], names: Sequence[str] | None = None
) -> list[tuple[int, int, str]]:
    """(referencing table, referenced table, column) for every `<entity>_id` column whose entity names
    another table of the same schema. `schema_of[i]` groups the tables (links never cross schemas);
    `names[i]`, when given, is the name a table is known by (a family's pattern, `accident_*`)."""
    home: dict[tuple[int, str], int] = {}
    for i, t in enumerate(tables):
        name = names[i] if names is not None else t.name
        for form in _entity_forms(_NON_ALNUM.sub("", re.sub(r"\d+|\*", "", name.lower()))):
            home.setdefault((schema_of[i], form), i)
    out: list[tuple[int, int, str]] = []
    seen: set[tuple[int, int]] = set()
    for i, t in enumerate(tables):
        for col in t.columns:
            entity = key_entity(col.name)
            if entity is None:
                continue
            target = home.get((schema_of[i], entity))
            if target is None or target == i or (i, target) in seen:
                continue
            seen.add((i, target))
            out.append((i, target, col.name))
    return out


def link_counts(links: Sequence[tuple[int, int, str]]) -> dict[int, int]:
    """How many tables reference each table (hubs: people, orders, races)."""
    counts: dict[int, int] = defaultdict(int)
    for _, target, _ in links:
        counts[target] += 1
    return dict(counts)


__all__ = ["inferred_links", "key_entity", "link_counts"]
