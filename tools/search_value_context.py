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

from flexsql.tools.search import identifier_terms, text_terms
from flexsql.tools.sources.base import Catalog

CONTEXT_WEIGHT = 0.12  # most a column gains from the context (exact 1.0 vs normalized 0.94)
PLAUSIBLE_WEIGHT = 0.03  # most it gains or loses from its type and name for the bare literal
_KEYISH = re.compile(r"(?:^|_)(?:id|key|code|uuid|guid|hash)$|Id$|ID$")
_TEXT = re.compile(r"CHAR|TEXT|STRING|VARCHAR", re.IGNORECASE)
_NUMBER = re.compile(r"INT|DEC|NUM|REAL|FLOAT|DOUBLE", re.IGNORECASE)


def context_terms(context: str | None, literal: str) -> set[str]:
    """Stemmed words of the context, less the literal's own words (they say nothing about the column)."""
    own = {t.term for t in text_terms(literal)}
    return {t.term for t in text_terms(context)} - own


def relevance(catalog: Catalog, table: str, column: str, terms: set[str]) -> tuple[float, list[str]]:
    """0..1 and the words shared by the context with the column (name, comment), its table and schema."""
    if not terms:
        return 0.0, []
    try:
        info = catalog.resolve(table)
    except Exception:
        return 0.0, []
    col = next((c for c in info.columns if c.name.lower() == column.lower()), None)
    col_terms = {t.term: t.word for t in identifier_terms(column)}
    if col is not None and col.comment:
        col_terms.update({t.term: t.word for t in text_terms(col.comment)[:40] if t.term not in col_terms})
    table_terms = {t.term: t.word for t in identifier_terms(info.name)}
    schema_terms = {t.term: t.word for t in identifier_terms(info.schema_name)}
    score, words = 0.0, []
    for term in terms:
        if term in col_terms:
            score, _ = score + 1.0, words.append(col_terms[term])
        elif term in table_terms:
            score, _ = score + 0.7, words.append(table_terms[term])
        elif term in schema_terms:
            score, _ = score + 0.5, words.append(schema_terms[term])
    return min(1.0, score / 2.0), words


def plausibility(column: str, ctype: str, literal: str, count: int) -> float:
    """-1..1: does a column of this name and type hold a literal like this one, often?"""
    numeric = bool(re.fullmatch(r"[-+]?\d+(?:[.,]\d+)?", literal.strip()))
    score = 0.0
    if numeric:
        score += 0.5 if _NUMBER.search(ctype) else 0.0
    else:
        score += 0.5 if _TEXT.search(ctype) else -0.5
        if _KEYISH.search(column) and " " in literal.strip():
            score -= 0.5  # a phrase is a name or a label, not a key
    score += min(0.5, math.log10(1 + count) / 6)
    return max(-1.0, min(1.0, score))


def rank_bonus(catalog: Catalog, matches: Sequence[object], literal: str, context: str | None) -> dict[int, float]:
    """id(match) -> bonus to its score for ordering; sets `context_words` on matches the context names."""
    terms = context_terms(context, literal)
    out: dict[int, float] = {}
    for m in matches:
        ctype = ""
        try:
            info = catalog.resolve(m.table)  # type: ignore[attr-defined]
            col = next((c for c in info.columns if c.name.lower() == m.column.lower()), None)  # type: ignore[attr-defined]
            ctype = col.type if col is not None else ""
        except Exception:
            pass
        rel, words = relevance(catalog, m.table, m.column, terms)  # type: ignore[attr-defined]
        if words:
            m.context_words = sorted(set(words))[:4]  # type: ignore[attr-defined]
        out[id(m)] = CONTEXT_WEIGHT * rel + PLAUSIBLE_WEIGHT * plausibility(
            m.column, ctype, literal, m.count)  # type: ignore[attr-defined]
    return out


__all__ = ["context_terms", "plausibility", "rank_bonus", "relevance"]
