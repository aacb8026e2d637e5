"""The ranking rules of search_schema, applied in order to a question's SearchState (see RULES).

Each rule reads and updates the state: first the table scores gain evidence beyond a table's own words
(its schema, its neighbours, the question's dates, its schema-mates, the tables it bridges), then the
tables are ranked and re-ranked (concept coverage, twins spread apart), then the columns are scored
from their own evidence and their tables'. The order matters: a rule sees the scores the rules before
it left, and a rule switched off in Params leaves the state as it found it.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from flexsql.tools.search.families import date_members, question_dates
from flexsql.tools.search.index import SearchIndex
from flexsql.tools.search.scoring import SearchState

Rule = Callable[[SearchState], None]

# -- table scores ------------------------------------------------------------------------------------


def boost_schemas(s: SearchState) -> None:
    """Schema reinforcement: a schema whose tables together match the question lifts all its tables."""
    p = s.params
    best_schema = max(s.schema_lex.values(), default=0.0)
    if not (best_schema > 0 and p.schema_boost):
        return
    for si, lex in s.schema_lex.items():
        if lex <= 0:
            continue
        for ti in s.engine.schema_tables[si]:
            boost = p.schema_boost * lex
            s.schema_part[ti] = boost
            s.scores[ti] = s.scores.get(ti, 0.0) + boost


def share_with_neighbours(s: SearchState) -> None:
    """FK neighbours of the strongest hits get a share of their score (join tables, lookups): a table
    joining two hits collects a share from each. Links inferred from key names count like foreign keys."""
    p = s.params
    _pass_shares(s, s.engine.neighbours, p.fk_share, p.fk_sources)
    if p.inferred_share:
        _pass_shares(s, s.engine.inferred, p.inferred_share, p.inferred_sources)
    for nb, (share, _) in s.fk_part.items():
        s.scores[nb] = s.scores.get(nb, 0.0) + share


def _pass_shares(s: SearchState, links: Sequence[Iterable[int]], share_of: float, sources: int) -> None:
    base = s.base
    for ti in sorted(base, key=lambda ti: -base[ti])[:sources]:
        if base[ti] <= 0:
            continue
        for nb in links[ti]:
            share = share_of * base[ti]
            total, via = s.fk_part.get(nb, (0.0, ti))
            s.fk_part[nb] = (total + share, via if total >= share else ti)


def match_dated_families(s: SearchState) -> None:
    """A family whose members carry the question's dates ("2016" -> GSOD2016) is likely the one meant."""
    dates = question_dates(s.query)
    if not dates:
        return
    p = s.params
    precision: dict[int, int] = {}
    for ti, fam in enumerate(s.engine.family):
        if fam is None:
            continue
        hits, digits = date_members([m.name for m in fam[1]], dates)
        if hits:
            s.dated[ti] = [fam[1][h] for h in hits]
            s.shown[ti] = s.dated[ti][0]
            precision[ti] = digits
    top_score = max(s.scores.values(), default=0.0) or 1.0
    for ti in s.dated:
        # a date alone names a shard family (events_20180915 for "September 15, 2018"); a day
        # matched says more than a year
        share = p.date_only * (0.5 + precision[ti] / 16)
        s.scores[ti] = s.scores.get(ti, 0.0) + max(p.date_boost * s.scores.get(ti, 0.0), share * top_score)


def lift_companions(s: SearchState) -> None:
    """Schema-mates of the top hits whose name holds a word of the question itself (not a synonym) get a
    share of the hit's score: the dimension table beside a matched fact table."""
    p, engine = s.params, s.engine
    if not (p.companion_share and len(engine.schemas) > 1):
        return
    asked = {t.term for t in s.qterms}
    top = sorted((ti for ti in s.scores if s.scores[ti] > 0), key=lambda ti: -s.scores[ti])[
        : p.companion_sources
    ]
    for src in top:
        si = engine.table_schema[src]
        if si in engine.declared_schemas:
            continue
        share = p.companion_share * s.scores[src]
        for ti in engine.schema_tables[si]:
            if ti == src or ti in top or not asked.intersection(engine.name_words[ti]):
                continue
            if share > s.companion.get(ti, (0.0, src))[0]:
                s.companion[ti] = (share, src)
    for ti, (share, _) in s.companion.items():
        s.scores[ti] = s.scores.get(ti, 0.0) + share


def _column_names(engine: SearchIndex, ti: int) -> frozenset[str]:
    return frozenset(engine.columns[ci][1].lower() for ci in engine.table_columns[ti])


def lift_bridges(s: SearchState) -> None:
    """Tables linked (declared or inferred) to two or more of the top hits: the table a query must go
    through to combine them. Inferred links count only while inferred_share is on (off: name-inferred
    links are not trusted at all)."""
    p, engine = s.params, s.engine
    if not p.bridge_share:
        return
    top = sorted((ti for ti in s.scores if s.scores[ti] > 0), key=lambda ti: -s.scores[ti])[: p.bridge_top]
    top_set = set(top)
    for ti in range(len(engine.tables)):
        if engine.table_schema[ti] in engine.declared_schemas:
            continue  # declared foreign keys: the FK share already lifts such tables
        links = (
            (engine.neighbours[ti] | engine.inferred[ti].keys())
            if p.inferred_share
            else engine.neighbours[ti]
        )
        linked = [nb for nb in links if nb in top_set and nb != ti]
        if len(linked) < 2:
            continue
        linked.sort(key=lambda nb: -s.scores[nb])
        # copies of one column list (daily shards, archives) are one thing to combine, not eleven: a
        # users table that every post table points to is not what a question about posts goes through
        kinds = {_column_names(engine, nb) for nb in linked}
        if len(kinds) < 2:
            continue
        mean = sum(s.scores[nb] for nb in linked) / len(linked)
        s.bridges[ti] = (p.bridge_share * mean * (len(kinds) - 1), linked)
    for ti, (share, _) in s.bridges.items():
        s.scores[ti] = s.scores.get(ti, 0.0) + share


def fuse_semantic(s: SearchState) -> None:
    """Meaning beyond shared words (semantic.py): each table's score becomes its share of the best
    lexical score plus the weighted cosines of the question with the table's text and with its best
    column's; the semantic_pool closest tables join the candidates. Off without the model or vectors."""
    p, engine = s.params, s.engine
    if not (p.semantic_weight or p.semantic_column_weight) or engine.semantic is None:
        return
    from flexsql.tools.search.semantic import question_vector

    question = question_vector(s.query, p.semantic_question_tokens)
    if question is None:
        return
    table_cos, best_column, column_cos = engine.semantic.similarities(question)
    meaning = p.semantic_weight * table_cos + p.semantic_column_weight * best_column
    best = max(s.scores.values(), default=0.0)
    scale = 1.0 / best if best > 0 else 0.0
    candidates = {ti for ti, v in s.scores.items() if v > 0}
    if p.semantic_pool:
        pool = min(p.semantic_pool, len(meaning))
        candidates.update(int(ti) for ti in np.argpartition(-meaning, pool - 1)[:pool])
    shift = max(-float(meaning.min()), 0.0) if len(meaning) else 0.0  # >= 0 for every table
    for ti in candidates:
        added = float(meaning[ti]) + shift
        s.semantic[ti] = (added, float(table_cos[ti]), float(best_column[ti]))
        s.scores[ti] = s.scores.get(ti, 0.0) * scale + added
    # the parts explanations compare with a table's score, on the new scale
    for part in (s.schema_part,):
        for ti in part:
            part[ti] *= scale
    for shares in (s.fk_part, s.companion):
        for ti, (share, via) in shares.items():
            shares[ti] = (share * scale, via)
    for ti, (share, linked) in s.bridges.items():
        s.bridges[ti] = (share * scale, linked)
    s.column_cos = column_cos


# -- the order of the tables -------------------------------------------------------------------------


def rank_tables(s: SearchState) -> None:
    """Every table with any evidence, best first (ties by name, so rankings are stable)."""
    s.ranked = sorted(
        (ti for ti in s.scores if s.scores[ti] > 0),
        key=lambda ti: (-s.scores[ti], s.engine.tables[ti].qualified),
    )


def cover_concepts(s: SearchState) -> None:
    """Greedy re-rank so the returned set covers the question's distinct words: a table's lexical
    score for a word decays with each table already picked that matches that word (a question
    needing five tables gets five different tables, not five siblings of one)."""
    p, engine, ranked, limit = s.params, s.engine, s.ranked, s.limit
    if not (p.coverage_decay < 1 and len(ranked) > 1):
        return
    pool = ranked[: max(limit * p.coverage_pool, limit)]
    contrib: dict[int, dict[str, float]] = {ti: {} for ti in pool}
    for term, qweight in s.weights.items():
        docs = engine.t_post.get(term)
        if not docs:
            continue
        w = engine.t_idf[term] * qweight
        for ti in pool:
            tf = docs.get(ti)
            if tf:
                contrib[ti][term] = w * tf * (p.k1 + 1) / (tf + p.k1)
    covered: dict[str, int] = defaultdict(int)
    chosen: list[int] = []
    left = list(pool)
    while left and len(chosen) < limit:

        def gain(ti: int) -> float:
            lex = contrib[ti]
            return s.scores[ti] - sum(v * (1 - p.coverage_decay ** covered[t]) for t, v in lex.items())

        best = max(left, key=lambda ti: (gain(ti), -pool.index(ti)))
        chosen.append(best)
        left.remove(best)
        for t in contrib[best]:
            covered[t] += 1
    s.ranked = chosen + [ti for ti in ranked if ti not in set(chosen)]


def spread_twins(s: SearchState) -> None:
    """Greedy re-rank: a table's score decays with each higher-ranked table of its schema that has
    nearly the same columns (see Params.twin_decay); the picked tables' scores are updated in place.
    Each picked twin is named after its first such table."""
    p, ranked, scores = s.params, s.ranked, s.scores
    if not (p.twin_decay < 1 and len(ranked) > 1):
        return
    pool = ranked[: max(s.limit * p.coverage_pool, s.limit)]
    twins = _twins(s, pool)
    if not twins:
        return
    seen = [0] * len(pool)  # picked twins of each pool entry so far
    first_twin: dict[int, int] = {}
    chosen: list[int] = []
    left = set(range(len(pool)))
    while left and len(chosen) < s.limit:
        best = max(left, key=lambda i: (scores[pool[i]] * p.twin_decay ** seen[i], -i))
        chosen.append(best)
        left.discard(best)
        scores[pool[best]] *= p.twin_decay ** seen[best]  # the score shown (and its columns' share) says so
        for k in twins.get(best, ()):
            seen[k] += 1
            if k in left:  # named after the twin above it
                first_twin.setdefault(pool[k], pool[best])
    picked = [pool[i] for i in chosen]
    kept = set(picked)
    s.ranked = picked + [ti for ti in ranked if ti not in kept]
    s.twin_of = {ti: t for ti, t in first_twin.items() if ti in kept}


def _twins(s: SearchState, pool: list[int]) -> dict[int, list[int]]:
    """pool position -> the positions of its twins: tables of one schema, both at least twin_min_columns
    wide, whose column names overlap at least twin_overlap."""
    p, engine = s.params, s.engine
    sketches = [engine.column_sketch(ti) for ti in pool]
    wide = [i for i, (n, _) in enumerate(sketches) if n >= p.twin_min_columns]
    twins: dict[int, list[int]] = defaultdict(list)
    for x, i in enumerate(wide):
        for j in wide[x + 1 :]:
            (na, a), (nb, b) = sketches[i], sketches[j]
            if engine.table_schema[pool[i]] != engine.table_schema[pool[j]]:
                continue
            if min(na, nb) < p.twin_overlap * max(na, nb):  # the sizes alone rule it out
                continue
            if engine.twins(pool[i], pool[j], a, b, p.twin_overlap):
                twins[i].append(j)
                twins[j].append(i)
    return twins


# -- columns -----------------------------------------------------------------------------------------


def score_columns(s: SearchState) -> None:
    """A column's own evidence: its words, and the values of the question it holds (likely filtered on)."""
    for ci, lex in s.column_lex.items():
        s.col_scores[ci] += lex
    for ci, v in s.value_column.items():
        s.col_scores[ci] += s.params.column_value_weight * v


def add_top_table_columns(s: SearchState) -> None:
    """Every column of the top tables is a candidate, matched or not — not every path inside their nested
    columns: those come in when the question matches them (hundreds would crowd out the columns)."""
    p = s.params
    if not p.column_all_of_top:
        return
    paths = s.engine.path_columns
    for ti in s.ranked[: p.column_all_of_top]:
        for ci in s.engine.table_columns[ti]:
            if ci not in paths:
                s.col_scores.setdefault(ci, 0.0)


def share_table_scores(s: SearchState) -> None:
    """Columns of the best tables first: each gets a share of its table's score relative to the best."""
    share, best_table = s.params.column_table_share, _best_table(s)
    columns, table_score, col_scores = s.engine.columns, s.scores.get, s.col_scores
    for ci, score in col_scores.items():  # values change, keys do not: safe while iterating
        col_scores[ci] = score + share * table_score(columns[ci][0], 0.0) / best_table


def lift_join_columns(s: SearchState) -> None:
    """The columns that join the top tables to each other (declared foreign keys)."""
    p, engine = s.params, s.engine
    best_table = _best_table(s)
    top_set = set(s.ranked[: p.join_tables])
    for ti in s.ranked[: p.join_tables]:
        for mine, ref, theirs in engine.joins[ti]:
            if ref not in top_set:
                continue
            weight = p.join_weight * min(s.scores[ti], s.scores[ref]) / best_table
            for ci, other in [(c, ref) for c in mine] + [(c, ti) for c in theirs]:
                s.col_scores[ci] = s.col_scores.get(ci, 0.0) + weight
                s.join_why.setdefault(ci, f"joins {engine.tables[other].name}")


def _best_table(s: SearchState) -> float:
    return max((s.scores[ti] for ti in s.ranked[:1]), default=1.0) or 1.0


def rank_columns(s: SearchState) -> None:
    """The top columns with any score, best first (ties by name)."""
    scored = [(score, ci) for ci, score in s.col_scores.items() if score > 0]
    if len(scored) > s.limit:  # the limit-th best score, compared in C; only ties on it need names
        cut = heapq.nlargest(s.limit, scored)[-1][0]
        scored = [pair for pair in scored if pair[0] >= cut]
    columns = s.engine.columns
    scored.sort(key=lambda pair: (-pair[0], columns[pair[1]][1]))
    s.col_ranked = [ci for _, ci in scored[: s.limit]]


RULES: tuple[Rule, ...] = (
    # table scores: evidence beyond a table's own words
    boost_schemas,
    share_with_neighbours,
    match_dated_families,
    lift_companions,
    lift_bridges,
    fuse_semantic,
    # the order of the tables
    rank_tables,
    cover_concepts,
    spread_twins,
    # columns
    score_columns,
    add_top_table_columns,
    share_table_scores,
    lift_join_columns,
    rank_columns,
)

__all__ = ["RULES", "Rule"]
