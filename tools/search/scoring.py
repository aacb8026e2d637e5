"""The first scores of a question: its weighted words, their BM25F scores and its value evidence.

`score` builds the SearchState that the ranking rules (rules.py) then refine. The question's own
words weigh 1.0; words the catalog lacks reach it through catalog words they begin (acronyms) and
WordNet relatives, at lower weights, so a word the question itself uses always counts more.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from flexsql.tools.engines import TableInfo
from flexsql.tools.search.index import Params, SearchIndex
from flexsql.tools.search.text import (
    IRREGULAR,
    RESULT_PHRASES,
    STOPWORDS,
    Term,
    query_terms,
    stem,
    text_terms,
)

# (table index, column index, stored value, question words, weight): a question word found in the value index
ValueHit = tuple[int, int, str, str, float]
# (weight, stored value, question words, column index): a table's value evidence, for explaining it
ValueEvidence = tuple[float, str, str, int]


@dataclass
class SearchState:
    """One question's search under way: what the ranking rules read and write (tables and columns by
    their index in the SearchIndex)."""

    engine: SearchIndex
    query: str
    limit: int
    qterms: list[Term]  # the question's own words
    weights: dict[str, float]  # query term -> weight (expansions weigh less than the question's words)
    words: dict[str, str]  # query term -> the word (or expansion label) an explanation quotes
    column_lex: dict[int, float]
    schema_lex: dict[int, float]
    value_column: dict[int, float]
    value_why: dict[int, list[ValueEvidence]]
    base: dict[int, float]  # table -> its own evidence: its words and the values it holds
    scores: dict[int, float]  # table -> score so far
    schema_part: dict[int, float] = field(default_factory=dict)
    fk_part: dict[int, tuple[float, int]] = field(default_factory=dict)  # table -> (share, from which hit)
    shown: dict[int, TableInfo] = field(default_factory=dict)  # family -> the member its dates name
    dated: dict[int, list[TableInfo]] = field(default_factory=dict)
    companion: dict[int, tuple[float, int]] = field(default_factory=dict)
    bridges: dict[int, tuple[float, list[int]]] = field(default_factory=dict)
    # table -> (the score its meaning added, its text's cosine, its best column's cosine)
    semantic: dict[int, tuple[float, float, float]] = field(default_factory=dict)
    column_cos: Any = None  # numpy array: the question's cosine with each column of the index
    ranked: list[int] = field(default_factory=list)
    twin_of: dict[int, int] = field(default_factory=dict)
    col_scores: defaultdict[int, float] = field(default_factory=lambda: defaultdict(float))
    join_why: dict[int, str] = field(default_factory=dict)
    col_ranked: list[int] = field(default_factory=list)

    @property
    def params(self) -> Params:
        return self.engine.params


def score(engine: SearchIndex, query: str, limit: int, value_hits: list[ValueHit]) -> SearchState:
    """Lexical scores of tables, columns and schemas, plus the values the question names."""
    p = engine.params
    qterms, weights, words = query_weights(engine, query)
    table_lex = engine.bm25(engine.t_post, engine.t_idf, weights, p.k1)
    column_lex = engine.bm25(engine.c_post, engine.c_idf, weights, p.k1)
    schema_lex = engine.bm25(engine.s_post, engine.s_idf, weights, p.k1)
    value_table, value_column, value_why = _value_evidence(value_hits)
    for ti, v in value_table.items():
        schema_lex[engine.table_schema[ti]] += 0.5 * p.value_weight * v
    base: dict[int, float] = defaultdict(float)
    for ti, s in table_lex.items():
        base[ti] += s
    for ti, v in value_table.items():
        base[ti] += p.value_weight * v
    return SearchState(
        engine,
        query,
        limit,
        qterms,
        weights,
        words,
        column_lex,
        schema_lex,
        value_column,
        value_why,
        base,
        dict(base),
    )


def _value_evidence(
    hits: list[ValueHit],
) -> tuple[dict[int, float], dict[int, float], dict[int, list[ValueEvidence]]]:
    """(table -> value score, column -> value score, table -> its evidence, best first); a table counts
    each of its columns once, at that column's best value."""
    value_table: dict[int, float] = defaultdict(float)
    value_column: dict[int, float] = defaultdict(float)
    value_why: dict[int, list[ValueEvidence]] = defaultdict(list)
    for ti, ci, stored, text, weight in hits:
        value_column[ci] = max(value_column[ci], weight)
        value_why[ti].append((weight, stored, text, ci))
    for ti, items in value_why.items():
        items.sort(key=lambda x: -x[0])
        seen_cols: set[int] = set()
        total = 0.0
        for weight, _, _, ci in items:
            if ci not in seen_cols:
                seen_cols.add(ci)
                total += weight
        value_table[ti] = total
    return value_table, value_column, value_why


def query_weights(engine: SearchIndex, query: str) -> tuple[list[Term], dict[str, float], dict[str, str]]:
    """The question's terms, every query term's weight, and the word an explanation quotes for it."""
    p = engine.params
    qterms = query_terms(query) if p.drop_result_phrases else text_terms(query)
    weights: dict[str, float] = {}
    words: dict[str, str] = {}
    for t in qterms:
        weights[t.term] = 1.0
        words.setdefault(t.term, t.word)
    if p.prefix_weight:
        acronyms = {t: w for t, w in weights.items() if words.get(t, "").isupper()}
        for term, word in _prefix_terms(engine, acronyms):
            weights.setdefault(term, p.prefix_weight)
            words.setdefault(term, word)
    if p.synonym_weight or p.broader_weight or p.narrower_weight:
        for term, weight, label in _synonym_terms(engine, query, weights, p):
            weights[term] = weight
            words[term] = label
    return qterms, weights, words


def _synonym_terms(
    engine: SearchIndex, query: str, weights: dict[str, float], p: Params
) -> list[tuple[str, float, str]]:
    """(catalog term, weight, why) for catalog words WordNet relates to a question word or phrase
    ('medications' -> drug): low weights, so a word the question itself uses always counts more."""
    from flexsql.tools.search.synonyms import BROADER, NARROWER, SYNONYM, question_phrases, wordnet

    wn = wordnet()
    if wn is None:
        return []
    base = {SYNONYM: p.synonym_weight, BROADER: p.broader_weight, NARROWER: p.narrower_weight}
    best: dict[str, tuple[float, str]] = {}
    covered: set[int] = set()  # words inside a phrase WordNet knows are not expanded one by one
    for phrase, first, n in question_phrases(
        RESULT_PHRASES.sub(" ", query) if p.drop_result_phrases else query
    ):
        if n == 1 and (phrase in STOPWORDS or len(phrase) < 3 or first in covered):
            continue
        if p.synonym_unknown_only and n == 1 and stem(phrase) in engine.t_post:
            continue
        related = wn.related(phrase)
        if not related:
            continue
        boost = p.unknown_boost if n > 1 or stem(phrase) not in engine.t_post else 1.0
        if n > 1:
            covered.update(range(first, first + n))
        for r in related:
            if " " in r.word or "-" in r.word:
                continue
            term = stem(IRREGULAR.get(r.word, r.word))
            if r.pos == "v" and not p.synonym_verbs:
                continue
            weight = base[r.relation] * p.sense_decay**r.sense * boost
            if weight <= 0 or term in weights or term not in engine.t_post or term in STOPWORDS:
                continue
            if weight > best.get(term, (0.0, ""))[0]:
                best[term] = (weight, f"'{phrase}' ~ '{r.word}' (WordNet)")
    return [(term, w, label) for term, (w, label) in best.items()]


def _prefix_terms(engine: SearchIndex, weights: dict[str, float]) -> list[tuple[str, str]]:
    """Catalog words that an acronym of the question the catalog lacks begins ('GHCN' -> ghcnd_stations):
    neither stemming nor the abbreviation list can see them (lower-case words cost Spider 1.0 dev)."""
    out: list[tuple[str, str]] = []
    for term in list(weights):
        if len(term) < 3 or term in engine.t_post or not term.isalpha():
            continue
        i = bisect.bisect_left(engine.vocab, term)
        found = 0
        while i < len(engine.vocab) and engine.vocab[i].startswith(term) and found < 3:
            if len(engine.vocab[i]) <= len(term) + 3:
                out.append((engine.vocab[i], term))
                found += 1
            i += 1
    return out


__all__ = ["SearchState", "ValueEvidence", "ValueHit", "query_weights", "score"]
