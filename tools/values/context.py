"""Ranking find_values candidates by how plausible each column is for the literal.

The same value often sits in many columns of a warehouse ('France' in customers.country,
suppliers.country, a log's free text). Two kinds of evidence order them beyond the match itself:
- the context (the question, or the words around the literal): columns, tables and schemas whose
  names or comments share its words come first (`singers from France` -> singer.country);
- the literal alone: a text literal fits a text column better than an id or code column, a
  number a numeric one, and a column where the value is frequent better than one holding it once.
The bonus is small next to the gap between match kinds: an exact match stays above a typo.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from flexsql.tools.engines import Catalog, TableInfo
from flexsql.tools.search.text import identifier_terms, text_terms

if TYPE_CHECKING:  # for annotations only: find.py imports this module, the search index is built lazily
    from flexsql.tools.search.index import SearchIndex
    from flexsql.tools.values.find import ValueMatch

CONTEXT_WEIGHT = 0.12  # most a column gains from the context (exact 1.0 vs normalized 0.94)
# how the context bonus splits: the column's own words, its table's and its schema's relevance to the
# context as search_schema ranks them (idf-weighted, so 'name' or 'id' says little)
CONTEXT_SPLIT = (0.4, 0.3, 0.3)
_ENGINES: dict[int, tuple[Catalog, SearchIndex]] = {}  # id(catalog) -> (catalog, its search index)
PLAUSIBLE_WEIGHT = 0.03  # most it gains or loses from its type and name for the bare literal
_KEYISH = re.compile(r"(?:^|_)(?:id|key|code|uuid|guid|hash)$|Id$|ID$")
_TEXT = re.compile(r"CHAR|TEXT|STRING|VARCHAR", re.IGNORECASE)
_NUMBER = re.compile(r"INT|DEC|NUM|REAL|FLOAT|DOUBLE", re.IGNORECASE)


def context_terms(context: str | None, literal: str) -> set[str]:
    """Stemmed words of the context, less the literal's own words (they say nothing about the column)."""
    own = {t.term for t in text_terms(literal)}
    return {t.term for t in text_terms(context)} - own


def _table(catalog: Catalog, name: str) -> TableInfo | None:
    """The catalog's table of this qualified name (as the value index names it), by a map built once per
    catalog: Catalog.resolve walks every table, which costs on a catalog of thousands."""
    by_key = catalog.derived("values.context.tables", lambda: {t.qualified: t for t in catalog.tables})
    found = by_key.get(name)
    if found is not None:
        return found
    try:
        return catalog.resolve(name)
    except Exception:
        return None


def relevance(catalog: Catalog, table: str, column: str, terms: set[str]) -> tuple[float, list[str]]:
    """0..1 and the words shared by the context with the column (name, comment), its table and schema."""
    if not terms:
        return 0.0, []
    info = _table(catalog, table)
    if info is None:
        return 0.0, []
    col = next((c for c in info.columns if c.name.lower() == column.lower()), None)
    col_terms = {t.term: t.word for t in identifier_terms(column)}
    if col is not None and col.comment:
        col_terms.update({t.term: t.word for t in text_terms(col.comment)[:40] if t.term not in col_terms})
    table_terms = {t.term: t.word for t in identifier_terms(info.name)}
    schema_terms = {t.term: t.word for t in identifier_terms(info.schema_name)}
    score, words = 0.0, []
    for term in terms:
        for found, weight in ((col_terms, 1.0), (table_terms, 0.7), (schema_terms, 0.5)):
            if term in found:
                score += weight
                words.append(found[term])
                break
    return min(1.0, score / 2.0), words


CARDINALITY_SHARE = (
    1.0  # of the frequency part given to few distinct values (sex, a country among 20) over a long list
)
CARDINALITY_SCALE = 3.0  # log10 of a distinct-value count that earns nothing


def plausibility(column: str, ctype: str, literal: str, count: int, distinct: int | None = None) -> float:
    """-1..1: does a column of this name and type hold a literal like this one, often? `distinct` (the
    column's distinct values, where known): a value stands out more in a short list than a long one."""
    numeric = bool(re.fullmatch(r"[-+]?\d+(?:[.,]\d+)?", literal.strip()))
    score = 0.0
    if numeric:
        score += 0.5 if _NUMBER.search(ctype) else 0.0
    else:
        score += 0.5 if _TEXT.search(ctype) else -0.5
        if _KEYISH.search(column) and " " in literal.strip():
            score -= 0.5  # a phrase is a name or a label, not a key
    frequency = min(0.5, math.log10(1 + count) / 6)
    if distinct is not None and distinct > 1:  # a constant column says nothing about the value's kind
        few = 0.5 * max(0.0, 1 - math.log10(distinct) / CARDINALITY_SCALE)
        frequency = (1 - CARDINALITY_SHARE) * frequency + CARDINALITY_SHARE * few
    score += frequency
    return max(-1.0, min(1.0, score))


def _engine(catalog: Catalog) -> SearchIndex:
    """The search index of a catalog (built once per catalog load)."""
    from flexsql.tools.search.index import SearchIndex

    held = _ENGINES.get(id(catalog))
    if held is None or held[0] is not catalog:
        if len(_ENGINES) > 8:
            _ENGINES.clear()
        held = (catalog, SearchIndex(catalog))
        _ENGINES[id(catalog)] = held
    return held[1]


def lexical_relevance(catalog: Catalog, tables: set[str], terms: set[str]) -> dict[str, tuple[float, float]]:
    """qualified table -> (table, schema) relevance to the context terms, each 0..1 relative to the best
    table and schema of the catalog."""
    if not terms or not tables:
        return {}
    engine = _engine(catalog)
    weights = {t: 1.0 for t in terms}
    k1 = engine.params.k1
    t_lex = engine.bm25(engine.t_post, engine.t_idf, weights, k1)
    s_lex = engine.bm25(engine.s_post, engine.s_idf, weights, k1)
    t_best = max(t_lex.values(), default=0.0) or 1.0
    s_best = max(s_lex.values(), default=0.0) or 1.0
    out = {}
    for name in tables:
        ti = engine.by_key.get(name)
        if ti is None:
            continue
        si = engine.table_schema[ti]
        out[name] = (t_lex.get(ti, 0.0) / t_best, s_lex.get(si, 0.0) / s_best)
    return out


def rank_bonus(
    catalog: Catalog,
    matches: Sequence[ValueMatch],
    literal: str,
    context: str | None,
    distinct: dict[tuple[str, str], int] | None = None,
) -> dict[int, float]:
    """id(match) -> bonus to its score for ordering; sets `context_words` on matches the context names.
    `distinct`: (table, column) -> its distinct values in the index, for the plausibility part."""
    terms = context_terms(context, literal)
    lexical = lexical_relevance(catalog, {m.table for m in matches}, terms)
    own, of_table, of_schema = CONTEXT_SPLIT
    out: dict[int, float] = {}
    for m in matches:
        ctype = ""
        info = _table(catalog, m.table)
        if info is not None:
            col = next((c for c in info.columns if c.name.lower() == m.column.lower()), None)
            ctype = col.type if col is not None else ""
        rel, words = relevance(catalog, m.table, m.column, terms)
        if words:
            m.context_words = sorted(set(words))[:4]
        t_rel, s_rel = lexical.get(m.table, (0.0, 0.0))
        if lexical:
            rel = own * rel + of_table * t_rel + of_schema * s_rel
        out[id(m)] = CONTEXT_WEIGHT * rel + PLAUSIBLE_WEIGHT * plausibility(
            m.column,
            ctype,
            literal,
            m.count,
            (distinct or {}).get((m.table, m.column)),
        )
    return out


SPREAD_PENALTY = 0.01  # per better-placed match of the same schema, for a bare literal over many schemas
SPREAD_CAP = 0.025  # below the gap between an exact and a case-insensitive match


def spread_schemas(matches: list[ValueMatch], bonus: dict[int, float]) -> list[ValueMatch]:
    """A bare literal over many schemas: among near-equal matches, the first of each schema (database)
    comes before a third sibling of one schema ('China' in flight_4.airports and flight_4.airlines,
    then the other databases that hold it), so the top few name several places the value lives."""
    seen: dict[str, int] = {}
    keyed = []
    for pos, m in enumerate(matches):
        schema = m.table.rsplit(".", 1)[0] if "." in m.table else ""
        penalty = min(SPREAD_CAP, SPREAD_PENALTY * seen.get(schema, 0))
        seen[schema] = seen.get(schema, 0) + 1
        keyed.append((-(m.score + bonus[id(m)] - penalty), pos, m))
    keyed.sort(key=lambda x: (x[0], x[1]))
    return [m for _, _, m in keyed]


__all__ = ["context_terms", "spread_schemas", "plausibility", "rank_bonus", "relevance"]
