"""Recall: the verified queries and document passages most relevant to a question.

A stored query is scored by
- meaning: the cosine of the question with the stored question (the sentence-embedding model of
  search_schema, tools/search/embeddings.py; vectors kept in its on-disk store, so a store of 10,000
  queries is encoded once);
- the tables the question links to: search_schema's ranking of the source's tables for the question;
  a query whose tables are all among the best linked ones gains, one reading a table the question does
  not reach loses;
- words, a little: the share of the stored question's content words the question has (a fallback when
  no embedding model is installed).
The first results are kept apart in what they read: a second query over the same tables as a better one
yields its place to a query over other tables when that one is close (the agent learns more from two
ways to read the schema than from two paraphrases).

Stale queries (status `stale`, or naming a table or column the catalog no longer has) are never offered.
Document passages (paragraphs under their heading) are ranked by meaning and words alike.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel

from flexsql.tools.engines import Catalog, Source, TableInfo
from flexsql.tools.knowledge.store import Knowledge, VerifiedQuery, load, store_dir
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.registry import ToolResult
from flexsql.tools.runtime.render import TextBudget
from flexsql.tools.search import embeddings
from flexsql.tools.search.embeddings import _one_blas_thread
from flexsql.tools.search.semantic import encode_cached, question_vector
from flexsql.tools.search.text import STOPWORDS, stem

QUESTION_TOKENS = 64
PASSAGE_TOKENS = 128
PASSAGE_CHARS = 900  # a passage longer than this is cut into parts at sentence ends


@dataclass(frozen=True)
class Weights:
    """Chosen by folds of Spider's databases (benchmarks/recall_heldout.py --grid: a grid of 72 chosen on
    one half of the databases, checked on the other). Hit@3 on the two halves (0/1): meaning alone
    0.841/0.862, words alone 0.859/0.871; with words at 0.3 and no diversity 0.857/0.878; keeping the three
    results on three different table sets lifts that most (0.884/0.901), the linked tables a little more
    (0.888/0.906). Half 0 chooses these weights (checked on half 1: 0.906); half 1 chooses linked=0
    (checked on half 0: 0.886)."""

    meaning: float = 1.0
    words: float = 0.6
    linked: float = 0.1  # all of a query's tables among the question's best linked tables
    unlinked: float = 0.1  # per table of the query the question's linking does not reach
    link_depth: int = 4  # the best N tables of search_schema count as linked
    diverse: float = 1.0  # a query over the same tables as a better one yields to one this close


WEIGHTS = Weights()


class RecalledQuery(BaseModel):
    question: str
    sql: str
    tables: list[str]
    score: float
    why: str
    verified_by: str | None = None
    verified_at: str | None = None
    evidence: str | None = None
    id: str


class RecalledPassage(BaseModel):
    document: str
    heading: str | None = None
    text: str
    score: float


class RecallResult(ToolResult):
    source: str
    question: str
    queries: list[RecalledQuery]
    passages: list[RecalledPassage] = []
    verified: int  # verified queries the store offers for this schema
    stale: int = 0  # stored queries left out because they no longer fit the schema
    store: str
    note: str | None = None

    def to_text(self, budget: TextBudget = TextBudget()) -> str:
        sql_chars = max(200, budget.max_chars // max(2 * len(self.queries), 1))
        if not self.queries and not self.passages:
            return (
                self.note or f"nothing recalled: the store ({self.store}) holds no verified query or document"
            )
        lines: list[str] = []
        for i, q in enumerate(self.queries, 1):
            who = ", ".join(x for x in (q.verified_by, q.verified_at) if x)
            lines.append(f"{i}. {q.question}" + (f" (verified by {who})" if who else ""))
            sql = q.sql if len(q.sql) <= sql_chars else q.sql[:sql_chars] + " …"
            lines.append("   " + sql.replace("\n", "\n   "))
            if q.evidence:
                lines.append(f"   evidence: {q.evidence}")
            lines.append(f"   why: {q.why}")
        for p in self.passages:
            head = f"{p.document}" + (f" — {p.heading}" if p.heading else "")
            lines.append(f"[{head}] {p.text}")
        if self.stale:
            lines.append(f"({self.stale} stored queries no longer fit the schema and were left out)")
        if self.note:
            lines.append(self.note)
        return "\n".join(lines)


# -- the store prepared for recall ---------------------------------------------------------------------

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def _content_words(text: str) -> frozenset[str]:
    return frozenset(stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS and len(w) > 1)


@dataclass
class _Passage:
    document: str
    heading: str | None
    text: str


def passages_of(name: str, text: str) -> list[_Passage]:
    """A document's paragraphs, each with the heading it sits under; long ones cut at sentence ends."""
    out: list[_Passage] = []
    heading: str | None = None
    for block in re.split(r"\n\s*\n", text):
        block = block.strip()
        if not block:
            continue
        lines = block.splitlines()
        while lines and re.match(r"^#{1,6}\s", lines[0]):
            heading = lines.pop(0).lstrip("#").strip()
        body = " ".join(line.strip() for line in lines).strip()
        while body:
            part = body[:PASSAGE_CHARS]
            if len(body) > PASSAGE_CHARS:
                cut = max(part.rfind(". "), part.rfind("; "))
                part = body[: cut + 1] if cut > PASSAGE_CHARS // 3 else part
            out.append(_Passage(name, heading, part.strip()))
            body = body[len(part) :].strip()
    return out


class RecallIndex:
    """One store's verified queries that fit one catalog, with their vectors and words."""

    def __init__(self, knowledge: Knowledge, catalog: Catalog) -> None:
        self.queries: list[VerifiedQuery] = []
        self.stale = 0
        names = {t.qualified.lower(): t for t in catalog.tables}
        for q in knowledge.queries:
            if q.status == "stale" or not _fits(q, names):
                self.stale += 1
                continue
            self.queries.append(q)
        self.table_sets = [frozenset(t.lower() for t in q.tables) for q in self.queries]
        self.words = [_content_words(q.question) for q in self.queries]
        self.word_index = _WordIndex(self.words)
        # which stored queries read which table: a question's linked tables score every query at once
        self.table_ids: dict[str, int] = {}
        rows, cols = [], []
        for i, tables in enumerate(self.table_sets):
            for t in tables:
                rows.append(i)
                cols.append(self.table_ids.setdefault(t, len(self.table_ids)))
        self.reads = np.zeros((len(self.queries), max(len(self.table_ids), 1)), dtype=np.int8)
        self.reads[rows, cols] = 1
        self.table_counts = self.reads.sum(axis=1, dtype=np.int64)
        self.passages = [p for name, text in knowledge.documents.items() for p in passages_of(name, text)]
        self.passage_words = [_content_words(f"{p.heading or ''} {p.text}") for p in self.passages]
        self.vectors: npt.NDArray[np.float32] | None = None
        self.passage_vectors: npt.NDArray[np.float32] | None = None
        model = embeddings.model(wait=True)
        if model is not None:
            if self.queries:
                texts = [q.question for q in self.queries]
                self.vectors = encode_cached(model, texts, QUESTION_TOKENS)
            if self.passages:
                texts = [f"{p.heading}: {p.text}" if p.heading else p.text for p in self.passages]
                self.passage_vectors = encode_cached(model, texts, PASSAGE_TOKENS)


def _fits(query: VerifiedQuery, tables: Mapping[str, TableInfo]) -> bool:
    """Whether every table and column the query read is still in the catalog."""
    for name in query.tables:
        if name.lower() not in tables:
            return False
    for col in query.columns:
        table, _, column = col.rpartition(".")
        info = tables.get(table.lower())
        if info is None or not any(c.name.lower() == column.lower() for c in info.columns):
            return False
    return True


_INDEXES: dict[tuple[str, float], tuple[object, RecallIndex]] = {}
_INDEX_LOCK = threading.Lock()


def recall_index(source: Source) -> tuple[RecallIndex, str]:
    """The source's recall index, rebuilt when its store's files or its catalog change."""
    knowledge, stamp = load(source)
    catalog = source.catalog()
    folder = str(store_dir(source))
    key = (folder, catalog.loaded_at)
    with _INDEX_LOCK:
        found = _INDEXES.get(key)
        if found is not None and found[0] == stamp:
            return found[1], folder
    index = RecallIndex(knowledge, catalog)
    with _INDEX_LOCK:
        for old in [k for k in _INDEXES if k[0] == folder]:
            del _INDEXES[old]
        _INDEXES[key] = (stamp, index)
    return index, folder


# -- ranking -------------------------------------------------------------------------------------------


_LINKED: OrderedDict[tuple[str, float, str, int], list[str]] = OrderedDict()
LINKED_REMEMBERED = 256  # an agent recalls for one question in several stages: one search serves them


def linked_tables(ctx: ToolContext, source: Source, question: str, depth: int) -> list[str]:
    """The tables search_schema ranks best for the question (lower-case qualified names), best first."""
    from flexsql.tools.search.ranking import SearchSchema, search_schema

    key = (source.name, source.catalog().loaded_at, question, depth)
    with _INDEX_LOCK:
        if key in _LINKED:
            _LINKED.move_to_end(key)
            return _LINKED[key]
    found = search_schema(ctx, SearchSchema(query=question[:2000], limit=depth, source=source.name))
    tables = [t.table.lower() for t in found.tables]
    with _INDEX_LOCK:
        _LINKED[key] = tables
        while len(_LINKED) > LINKED_REMEMBERED:
            _LINKED.popitem(last=False)
    return tables


class _WordIndex:
    """Stored texts by word: a question's word overlap with each (Jaccard) from the texts that share a word."""

    def __init__(self, texts: Sequence[frozenset[str]]) -> None:
        self.sizes = np.array([len(t) for t in texts], dtype=np.float32)
        postings: dict[str, list[int]] = {}
        for i, words in enumerate(texts):
            for w in words:
                postings.setdefault(w, []).append(i)
        self.postings = {w: np.array(ids, dtype=np.int64) for w, ids in postings.items()}

    def share(self, question: frozenset[str]) -> npt.NDArray[np.float32]:
        shared = np.zeros(len(self.sizes), dtype=np.float32)
        for w in question:
            ids = self.postings.get(w)
            if ids is not None:
                shared[ids] += 1
        union = self.sizes + len(question) - shared
        out: npt.NDArray[np.float32] = np.divide(shared, union, out=np.zeros_like(shared), where=union > 0)
        return out


def _words_share(question: frozenset[str], stored: Sequence[frozenset[str]]) -> npt.NDArray[np.float32]:
    out = np.zeros(len(stored), dtype=np.float32)
    if not question:
        return out
    for i, words in enumerate(stored):
        if words:
            out[i] = len(question & words) / len(question | words)
    return out


def _why(meaning: float | None, words: float, linked: bool, missing: int, tables: Sequence[str]) -> str:
    parts = []
    if meaning is not None:
        parts.append(f"question close in meaning ({meaning:.2f})")
    if words >= 0.2:
        parts.append(f"shares {words:.0%} of its words")
    short = ", ".join(t.rsplit(".", 1)[-1] for t in tables)
    if linked:
        parts.append(f"reads {short}, the tables the question links to")
    elif missing:
        parts.append(f"reads {short}; {missing} of them the question does not link to")
    return "; ".join(parts) or "the closest stored question"


def _best(score: npt.NDArray[np.float32], k: int) -> npt.NDArray[np.intp]:
    """Positions of the k best scores, best first (ties by position): a partial sort of 10,000 scores."""
    if len(score) > k:
        top = np.argpartition(-score, k - 1)[:k]
        top.sort()  # ties in stored order, as a full stable sort would give them
        ordered: npt.NDArray[np.intp] = top[np.argsort(-score[top], kind="stable")]
        return ordered
    full: npt.NDArray[np.intp] = np.argsort(-score, kind="stable")
    return full


def rank(
    index: RecallIndex,
    question: str,
    linked: Sequence[str],
    limit: int,
    weights: Weights = WEIGHTS,
) -> list[tuple[int, float, str]]:
    """(query position, score, why) of the best `limit` queries."""
    n = len(index.queries)
    if not n:
        return []
    words = index.word_index.share(_content_words(question))
    score = weights.words * words
    meaning: npt.NDArray[np.float32] | None = None
    if index.vectors is not None:
        qvec = question_vector(question, QUESTION_TOKENS)
        if qvec is not None:
            with _one_blas_thread():  # a second BLAS thread spins: 27 ms for 10,000 rows, 0.9 on one
                meaning = index.vectors @ qvec
            score = score + weights.meaning * meaning
    covered = np.zeros(n, dtype=bool)
    missing = np.zeros(n, dtype=np.int64)
    if linked:
        ids = sorted({index.table_ids[t] for t in linked if t in index.table_ids})
        inside = index.reads[:, ids].sum(axis=1, dtype=np.int64) if ids else np.zeros(n, dtype=np.int64)
        missing = index.table_counts - inside
        covered = (index.table_counts > 0) & (missing == 0)
        score = score + weights.linked * covered - weights.unlinked * missing
    order = _best(score, max(limit * 8, 20))
    chosen: list[int] = []
    seen_sets: set[frozenset[str]] = set()
    pending = [int(i) for i in order]
    while pending and len(chosen) < limit:
        best = pending[0]
        if index.table_sets[best] in seen_sets:
            # a query over other tables close behind takes this place
            other = next(
                (
                    j
                    for j in pending[1:]
                    if index.table_sets[j] not in seen_sets and score[best] - score[j] <= weights.diverse
                ),
                None,
            )
            if other is not None:
                best = other
        pending.remove(best)
        chosen.append(best)
        seen_sets.add(index.table_sets[best])
    out = []
    for i in chosen:
        q = index.queries[i]
        why = _why(
            float(meaning[i]) if meaning is not None else None,
            float(words[i]),
            bool(covered[i]),
            int(missing[i]),
            q.tables,
        )
        out.append((i, round(float(score[i]), 4), why))
    return out


def rank_passages(index: RecallIndex, question: str, limit: int) -> list[tuple[int, float]]:
    if not index.passages or limit <= 0:
        return []
    score = _words_share(_content_words(question), index.passage_words)
    if index.passage_vectors is not None:
        qvec = question_vector(question, QUESTION_TOKENS)
        if qvec is not None:
            with _one_blas_thread():
                score = score + index.passage_vectors @ qvec
    order = np.argsort(-score, kind="stable")[:limit]
    return [(int(i), round(float(score[i]), 4)) for i in order if score[i] > 0.15]


def recall(
    ctx: ToolContext,
    question: str,
    *,
    source: str | None = None,
    limit: int = 3,
    passages: int = 2,
    weights: Weights = WEIGHTS,
) -> RecallResult:
    """The verified queries and document passages of the source's store most relevant to `question`."""
    src = ctx.source(source)
    index, folder = recall_index(src)
    linked = linked_tables(ctx, src, question, weights.link_depth) if index.queries else []
    ranked = rank(index, question, linked, limit, weights)
    queries = [
        RecalledQuery(
            question=index.queries[i].question,
            sql=index.queries[i].sql,
            tables=index.queries[i].tables,
            score=score,
            why=why,
            verified_by=index.queries[i].verified_by,
            verified_at=index.queries[i].verified_at,
            evidence=index.queries[i].evidence,
            id=index.queries[i].id,
        )
        for i, score, why in ranked
    ]
    found = [
        RecalledPassage(
            document=index.passages[i].document,
            heading=index.passages[i].heading,
            text=index.passages[i].text,
            score=score,
        )
        for i, score in rank_passages(index, question, passages)
    ]
    note = None
    if index.vectors is None and index.queries:
        note = "ranked without the embedding model (not installed or FLEXSQL_EMBEDDINGS=off): words and tables only"
    if not index.queries and not index.passages:
        note = (
            f"the knowledge store of {src.name} ({folder}) holds no verified query or document yet: "
            "`flexsql learn FILE --db URL` imports some, and remember stores a confirmed one"
        )
    return RecallResult(
        source=src.name,
        question=question,
        queries=queries,
        passages=found,
        verified=len(index.queries),
        stale=index.stale,
        store=folder,
        note=note,
    )


__all__ = [
    "WEIGHTS",
    "RecallIndex",
    "RecallResult",
    "RecalledPassage",
    "RecalledQuery",
    "Weights",
    "recall",
    "recall_index",
]
