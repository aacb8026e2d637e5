"""search_schema: rank tables and columns for a natural-language question or keywords.

Pure Python, no model and no network. One BM25F index per catalog load (index.py, cached in the
ToolContext): identifiers are split (camelCase, snake_case, digits, glued words like `firstname`), common
database abbreviations are expanded (qty -> quantity, fname -> first name), words are Porter-stemmed
(text.py), and comments count too. On top of the lexical score:
- value hits (scoring.py): words of the question found in the value index (`French` -> a column
  holding `France`) lift that column and its table (only when an index exists: search never scans);
then the ranking rules (rules.py), among them:
- schema reinforcement: a schema whose tables together match the question lifts all its tables;
- foreign-key neighbours of strong hits get a share of their score (join tables, lookups).
Every hit says why it matched (explain.py).
"""

from __future__ import annotations

import math
import re
import time
from collections import defaultdict

from pydantic import Field

from flexsql.errors import InvalidArgument
from flexsql.tools.engines import Source
from flexsql.tools.runtime.context import SourceName, ToolContext
from flexsql.tools.runtime.registry import ToolArgs, tool
from flexsql.tools.runtime.schema import unlisted
from flexsql.tools.search import embeddings
from flexsql.tools.search.explain import column_hits, table_hits
from flexsql.tools.search.index import SearchIndex, search_index
from flexsql.tools.search.path_discovery import discover_paths
from flexsql.tools.search.results import SchemaSearchResult
from flexsql.tools.search.rules import RULES
from flexsql.tools.search.scoring import ValueHit, score
from flexsql.tools.search.semantic import attach, tables_stored
from flexsql.tools.search.text import DEMONYMS, STOPWORDS, approximate, stem
from flexsql.tools.values.index import IndexReset, ValueIndex
from flexsql.tools.values.normalize import fold, normalize

MAX_QUERY_CHARS = 2000
APPROXIMATE_SHARE = (
    0.4  # a value hit through another word (a demonym's place) weighs this much of an exact one
)
FIRST_SEARCH_WAIT_S = 1.5  # the most a first search waits for stored table vectors (model load + read)


class SearchSchema(ToolArgs):
    query: str = Field(
        max_length=MAX_QUERY_CHARS,
        description="question or keywords",
        json_schema_extra=unlisted("maxLength"),
    )
    limit: int = Field(10, ge=1, le=100)
    source: SourceName = None


@tool(
    "Rank tables and columns for a question or keywords; each hit says why it matched. "
    'Example: query="revenue per country".'
)
def search_schema(ctx: ToolContext, args: SearchSchema) -> SchemaSearchResult:
    """Tables and columns ranked for a question or keywords, each with why it matched."""
    query, limit = args.query, args.limit
    if not query.strip():
        raise InvalidArgument(
            "query is required: a question or keywords, e.g. 'singers from France' or 'order date'"
        )
    started = time.perf_counter()
    src = ctx.source(args.source)
    embeddings.model()  # a first search starts loading the model here: it loads while the index builds
    discover_paths(src)  # the keys inside nested columns, searched as columns (once per catalog)
    engine = search_index(ctx, src)
    if engine.params.semantic_weight or engine.params.semantic_column_weight:
        # starts the table vectors in the background, and this search ranks without them — unless the
        # on-disk store has them all (a later start): then it waits the second they take to load
        first = engine.semantic is None and not engine.semantic_started
        attach(engine, wait=FIRST_SEARCH_WAIT_S if first and tables_stored(engine) else False)
    vindex = _value_index_if_built(ctx, src)
    try:
        hits = _value_hits(vindex, engine, query) if vindex is not None else []
    except IndexReset:  # its file was found damaged and set aside: rank without values this once
        vindex, hits = None, []
    state = score(engine, query, limit, hits)
    for rule in RULES:
        rule(state)
    return SchemaSearchResult(
        query=query,
        source=src.name,
        tables=table_hits(state),
        columns=column_hits(state),
        tables_matched=len(state.ranked),
        truncated=len(state.ranked) > limit,
        value_index="used" if vindex is not None else "not built",
        elapsed_ms=round((time.perf_counter() - started) * 1000, 2),
    )


# -- value evidence ----------------------------------------------------------------------------------


def _value_index_if_built(ctx: ToolContext, source: Source) -> ValueIndex | None:
    from flexsql.tools.values.index import value_index

    index = value_index(ctx, source)
    return None if index.is_empty() else index


def _question_ngrams(query: str, max_n: int = 4, singular: bool = True) -> list[tuple[str, str]]:
    """(normalized n-gram, original text) candidates for value lookups; demonyms add their place."""
    words = re.findall(r"[^\W_]+(?:['’][^\W_]+)?", query)
    out: list[tuple[str, str]] = []
    for n in range(1, max_n + 1):
        for i in range(len(words) - n + 1):
            chunk = words[i : i + n]
            lowered = [fold(w) for w in chunk]
            if all(w in STOPWORDS for w in lowered) or lowered[0] in STOPWORDS or lowered[-1] in STOPWORDS:
                continue
            if n == 1 and (len(lowered[0]) < 3 and not chunk[0].isupper()):
                continue
            text = " ".join(chunk)
            out.append((normalize(text), text))
            if n == 1:
                for place in DEMONYMS.get(lowered[0], ()):
                    out.append((place, text))
                if singular and lowered[0].endswith("s") and len(lowered[0]) > 4:
                    out.append((lowered[0][:-1], text))
    return out


def _value_hits(index: ValueIndex, engine: SearchIndex, query: str) -> list[ValueHit]:
    """(table index, column index, stored value, question words, weight) for question words that
    are values in the index; values held by many columns weigh less."""
    grams = _question_ngrams(query, singular=engine.params.singular_values)
    if not grams:
        return []
    origin: dict[str, str] = {}
    for norm, text in grams:
        origin.setdefault(norm, text)
    found = index.by_norm(list(origin))
    if not found:
        return []
    cmap = index.column_map()
    if any(v.cid not in cmap for v in found):  # another process extended the index meanwhile
        cmap = index.column_map(reload=True)
    spread: dict[str, int] = defaultdict(int)
    for v in found:
        spread[v.norm] += 1
    hits: list[ValueHit] = []
    for v in found:
        where = cmap.get(v.cid)
        if where is None:
            continue
        ti = engine.by_key.get(where[0])
        if ti is None:
            continue
        ci = engine.column_by_name.get((ti, where[1].lower()))
        if ci is None:
            continue
        text = origin[v.norm]
        words = len(v.norm.split())
        numeric = v.norm.replace(" ", "").isdigit()
        weight = (1.0 + 0.5 * (words - 1)) / math.log2(1 + spread[v.norm])
        if numeric:
            weight *= 0.2
        if words == 1 and engine.params.schema_word_discount < 1 and stem(v.norm) in engine.table_name_terms:
            weight *= engine.params.schema_word_discount  # 'stores' names a table more likely than a value
        if any(ch.isupper() for ch in text) or v.norm != fold(text).strip():
            weight *= 1.3  # proper nouns and demonyms are more likely values than schema words
        hits.append((ti, ci, v.value, text, weight))
    # a value that is another word than the question's ('France' for 'French', 'England' for 'English')
    # ranks below the question's own word stored as a value (the language 'French'), and is explained as
    # approximate; with no such value it is the best evidence there is and keeps its weight
    exact = {text for _ti, _ci, stored, text, _w in hits if not approximate(stored, text)}
    return [
        (
            ti,
            ci,
            stored,
            text,
            weight * APPROXIMATE_SHARE if text in exact and approximate(stored, text) else weight,
        )
        for ti, ci, stored, text, weight in hits
    ]


__all__ = ["MAX_QUERY_CHARS", "search_schema"]
