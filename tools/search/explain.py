"""Why each hit matched: the table and column hits of a ranked SearchState, with their explanations.

An explanation quotes the question's words (or the WordNet relation that brought a word in) and
names the evidence: the table's name, columns and comment, the values it holds, its schema, the
neighbour or top hit it joins, its family and the dates naming a member.
"""

from __future__ import annotations

from flexsql.tools.search.results import ColumnHit, TableHit
from flexsql.tools.search.scoring import SearchState
from flexsql.tools.search.text import approximate
from flexsql.tools.values.normalize import fold

# A table whose only evidence is that other tables of its schema matched. Kept, and said so: dropping
# them cost all-gold@10 0.869 -> 0.829 on Spider 2.0-Snow and 0.978 -> 0.970 on Spider 1.0 dev, because
# on warehouses the tables a question needs sit together in one schema.
SCHEMA_FILLER = "only its schema matches: other tables of {schema} match the query"


def table_hits(s: SearchState) -> list[TableHit]:
    """The top `limit` tables of the ranking, each with why it matched."""
    return [_table_hit(s, ti) for ti in s.ranked[: s.limit]]


def column_hits(s: SearchState) -> list[ColumnHit]:
    """The ranked columns, each with why it matched."""
    engine = s.engine
    hits = []
    for ci in s.col_ranked:
        ti, name = engine.columns[ci]
        col = next((c for c in engine.tables[ti].columns if c.name == name), None)  # None: a nested path
        table = s.shown.get(ti, engine.tables[ti])
        why = _explain_column(s, ci)
        if ci in s.join_why:
            why = [w for w in why if w != "in a matching table"] + [s.join_why[ci]]
        hits.append(
            ColumnHit(
                table=table.qualified,
                column=name,
                type=col.type if col is not None else engine.path_types.get((ti, name), "VARCHAR"),
                score=round(s.col_scores[ci], 3),
                why=why,
            )
        )
    return hits


def _table_hit(s: SearchState, ti: int) -> TableHit:
    engine, score = s.engine, s.scores[ti]
    table = s.shown.get(ti, engine.tables[ti])
    why = _explain_table(s, ti)
    if ti in s.companion and s.companion[ti][0] > 0.2 * score:
        why.append(f"beside top hit {engine.tables[s.companion[ti][1]].name} in schema {table.schema_name}")
    if ti in s.bridges and s.bridges[ti][0] > 0.2 * score:
        why.append("joins " + " and ".join(engine.tables[b].name for b in s.bridges[ti][1][:3]))
    if ti in s.twin_of:
        why.append(f"same columns as {engine.tables[s.twin_of[ti]].name}")
    meaning = _meaning(s, ti)
    if meaning:
        why = [w for w in why if w != "weak match"] + [meaning]
    hit = TableHit(
        table=table.qualified,
        score=round(score, 3),
        why=why,
        kind=table.kind,
        row_estimate=table.row_estimate,
        rows_exact=table.rows_exact,
        rows_from=None if table.rows_exact else table.rows_from,
    )
    fam = engine.family[ti]
    if fam is not None:
        pattern, members = fam
        label = engine.labels.get(table.qualified)
        if label is not None:  # named as list_tables and describe_table name it
            hit.family, hit.family_size = label.name, label.size
            hit.family_range = f"{label.first} … {label.last}"
            hit.family_reads_all = label.reads_all() or None
        else:  # a shard whose columns are its own: search's grouping is the only name it has
            hit.family = ".".join(x for x in (table.database, table.schema_name, pattern) if x)
            hit.family_size = len(members)
            hit.family_range = f"{members[0].name} … {members[-1].name}"
        if ti in s.dated:
            dated = s.dated[ti]
            hit.date_members = [m.name for m in dated[:12]]
            more = f" (+{len(dated) - 3} more)" if len(dated) > 3 else ""
            hit.why.insert(0, "question dates name " + ", ".join(m.name for m in dated[:3]) + more)
        else:
            hit.why.append(f"latest of the family: {members[-1].name}")
    return hit


def _meaning(s: SearchState, ti: int) -> str | None:
    """'close in meaning to the question (cosine: the table 0.48, column pupil_name 0.61)', when the
    embedding similarity is at least half of the table's score (the table: its name and columns' text)."""
    found = s.semantic.get(ti)
    if found is None or found[0] < 0.5 * s.scores[ti]:
        return None
    added, table_cos, column_cos = found
    text = f"close in meaning to the question (cosine: the table {table_cos:.2f}"
    cols = s.engine.table_columns[ti]
    if s.column_cos is not None and cols:
        best = max(cols, key=lambda ci: float(s.column_cos[ci]))
        text += f", column {s.engine.columns[best][1]} {column_cos:.2f}"
    return text + ")"


def _quote_words(terms: list[str], words: dict[str, str]) -> str:
    # a WordNet expansion's label is already quoted: "'medication' ~ 'drug' (WordNet)"
    shown = (words.get(t, t) for t in terms)
    return ", ".join(w if w.startswith("'") else f"'{w}'" for w in shown)


def _via(stored: str, text: str) -> str:
    """What a value hit was found for: nothing for the question's own word, the word for another
    spelling of it, and 'approximate' for another word ('France' for 'French')."""
    if approximate(stored, text):
        return f" (approximate: for '{text}')"
    return f" (for '{text}')" if fold(text) != fold(stored) else ""


def _explain_table(s: SearchState, ti: int) -> list[str]:
    engine, weights, words = s.engine, s.weights, s.words
    why: list[str] = []
    table = engine.tables[ti]
    name_hits = [t for t in weights if t in engine.name_words[ti]]
    if name_hits:
        why.append(f"name matches {_quote_words(name_hits, words)}")
    col_hits: dict[str, list[str]] = {}
    # a column's few words against the question's terms, not every term against every column: a
    # long question over a table of a thousand columns made this the search's largest cost
    terms = set(weights).difference(name_hits)
    order = {t: i for i, t in enumerate(weights)}
    for ci in engine.table_columns[ti]:
        found = terms.intersection(engine.column_words[ci])
        if found:
            col_hits.setdefault(engine.columns[ci][1], []).extend(sorted(found, key=order.__getitem__))
    if col_hits:
        shown = sorted(col_hits.items(), key=lambda kv: -len(kv[1]))[:3]
        why.append("columns " + ", ".join(f"{c} ({_quote_words(ts, words)})" for c, ts in shown))
    comment_hits = [t for t in weights if t in engine.comment_words[ti] and t not in name_hits]
    if comment_hits:
        why.append(f"comment mentions {_quote_words(comment_hits, words)}")
    seen: set[int] = set()
    for _, stored, text, ci in s.value_why.get(ti, []):
        if ci in seen or len(seen) >= 2:
            continue
        seen.add(ci)
        why.append(f"column {engine.columns[ci][1]} holds value '{stored}'{_via(stored, text)}")
    si = engine.table_schema[ti]
    schema_hits = [t for t in weights if t in engine.schema_words[si]]
    if schema_hits:
        why.append(f"schema {table.schema_name} matches {_quote_words(schema_hits, words)}")
    elif s.schema_part.get(ti, 0.0) > 0.3 * s.scores[ti] and not why:
        why.append(SCHEMA_FILLER.format(schema=table.schema_name))
    fk = s.fk_part.get(ti)
    if fk is not None and fk[0] > 0.2 * s.scores[ti]:
        col = engine.inferred[ti].get(fk[1])
        if col is not None:
            why.append(f"joins {engine.tables[fk[1]].name} by {col} (inferred from the name)")
        else:
            why.append(f"FK neighbour of {engine.tables[fk[1]].name}")
    return why or ["weak match"]


def _explain_column(s: SearchState, ci: int) -> list[str]:
    engine, weights, words = s.engine, s.weights, s.words
    why: list[str] = []
    ti, _name = engine.columns[ci]
    hits = [t for t in weights if t in engine.column_words[ci]]
    if hits:
        why.append(f"name matches {_quote_words(hits, words)}")
    comment = [t for t in weights if t in engine.column_comment_words[ci]]
    if comment:
        why.append(f"comment mentions {_quote_words(comment, words)}")
    for _, stored, text, vci in s.value_why.get(ti, []):
        if vci == ci:
            why.append(f"holds value '{stored}'{_via(stored, text)}")
            break
    table_name_hits = [t for t in weights if t in engine.name_words[ti]]
    if table_name_hits:
        why.append(f"table {engine.tables[ti].name} matches {_quote_words(table_name_hits, words)}")
    return why or ["in a matching table"]


__all__ = ["SCHEMA_FILLER", "column_hits", "table_hits"]
