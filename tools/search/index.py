"""The search index of a catalog: BM25F postings over its tables, columns and schemas, and their links.

Built once per catalog load and cached in the ToolContext (`search_index`). Tables of one sharded
family or release series are one document; foreign keys, and links inferred from `<entity>_id`
column names, say which tables join.
"""

from __future__ import annotations

import heapq
import math
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from flexsql.tools.engines import Catalog, Column, Source, TableInfo
from flexsql.tools.engines.families import FamilyLabel, family_labels
from flexsql.tools.engines.paths import KnownPath, known_paths
from flexsql.tools.knowledge.store import TableNote, noted_text, schema_notes
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.search.families import families
from flexsql.tools.search.keys import inferred_links
from flexsql.tools.search.text import Term, identifier_terms, text_terms
from flexsql.tools.values.normalize import split_identifier

if TYPE_CHECKING:
    from flexsql.tools.search.semantic import CatalogVectors

SKETCH_SIZE = 128  # column-name hashes kept per table for telling twins apart


@dataclass
class Params:
    """Ranking weights (tuned on a Spider training sample; see benchmarks/schema_linking.py)."""

    k1: float = 1.2
    # table document fields: (weight, length normalisation b)
    t_name: tuple[float, float] = (3.0, 0.3)
    t_columns: tuple[float, float] = (1.0, 0.6)
    t_comment: tuple[float, float] = (0.6, 0.75)
    t_schema: tuple[float, float] = (1.0, 0.3)
    # column document fields
    c_name: tuple[float, float] = (3.0, 0.3)
    c_table: tuple[float, float] = (1.0, 0.3)
    c_comment: tuple[float, float] = (0.6, 0.75)
    # schema documents
    s_name: tuple[float, float] = (2.0, 0.3)
    s_tables: tuple[float, float] = (1.5, 0.5)
    s_columns: tuple[float, float] = (0.5, 0.5)
    schema_boost: float = 0.6  # share of the best schema score added to each table of a schema
    value_weight: float = 4.0
    fk_share: float = 0.25  # share of a strong hit's score passed to its FK neighbours
    fk_sources: int = 5  # how many top tables pass it on
    column_table_share: float = 15.0  # columns of the best tables first: best table's columns get this much
    column_value_weight: float = 8.0  # a column holding a word of the question is likely filtered on
    column_all_of_top: int = 3  # every column of the top N tables is a candidate
    join_tables: int = 3  # foreign keys among the top N tables lift their key columns
    join_weight: float = 6.0
    drop_result_phrases: bool = True
    schema_word_discount: float = 0.3  # value hits for one word that also names a table
    singular_values: bool = True  # 'stores' also looks up the value 'store'
    date_boost: float = 0.3  # share added to a family whose members the question's dates name
    date_only: float = 0.5  # a family named only by a date gets this share of the best table's score
    coverage_decay: float = 1.0  # <1: a word's weight decays per returned table already matching it (off:
    # on Spider 1.0 whole-catalog it cost 0.04 all-gold@10, on Spider 2.0-Snow it gained only 0.006)
    coverage_pool: int = 3  # re-rank the first limit * this many tables for coverage
    # tables of one schema with (almost) the same columns (posts_questions, posts_answers, posts_tag_wiki;
    # acs county_5yr, place_5yr) match a question through the same columns: each one after the first
    # counts this much less, so one slot of the result does not become five copies of one table
    # (a share per table-name word the question lacks, 'results' before 'sprint_results', was dropped:
    # by database folds of Spider 2.0-Snow it gained nothing on the half it was not tuned on)
    twin_decay: float = 0.7
    twin_overlap: float = 0.9  # Jaccard of the column names, over tables of at least twin_min_columns
    twin_min_columns: int = 8
    prefix_weight: float = 0.6  # a question word the catalog lacks matches catalog words it begins
    inferred_share: float = 0.25  # like fk_share, for links inferred from `<entity>_id` column names
    inferred_sources: int = 5  # how many top tables pass it on
    inferred_with_declared: bool = False  # infer links in schemas that declare foreign keys too
    # WordNet expansion of question words (tools/search/synonyms.py; off where WordNet is absent):
    # weights of a synonym, a broader and a narrower word, times sense_decay per rarer sense
    synonym_weight: float = 0.4
    broader_weight: float = 0.25
    narrower_weight: float = 0.2
    sense_decay: float = 0.7
    synonym_unknown_only: bool = False  # expand only question words the catalog lacks
    unknown_boost: float = 1.0  # times this for a question word the catalog lacks (its only evidence)
    synonym_verbs: bool = False  # verb senses too ('forward' ~ 'ship'), not only nouns
    # on a multi-schema catalog the top hits' schemas are the question's topic: a schema-mate whose
    # name carries a question word ('weather stations' -> NOAA_GSOD.STATIONS beside GSOD*) gets this
    # share of the best such hit's score (keys like stn/wban are not `<entity>_id`, so no link is inferred).
    # Not in schemas that declare foreign keys: there the FK share finds the neighbours, and this cost
    # Spider 1.0 train 0.009 all-gold@5
    companion_share: float = 0.25
    companion_sources: int = 3
    # a table joining two or more of the top hits (results between races, drivers and constructors)
    # gets this share of their mean score per bridged hit beyond the first (not in schemas declaring
    # foreign keys: on Spider 1.0 it cost train all-gold@5 0.888 -> 0.870 there)
    bridge_share: float = 0.3
    bridge_top: int = 10
    # semantic evidence (semantic.py, rules.fuse_semantic; off without the embedding model): a table's
    # score becomes its share of the best lexical score plus these times the question's cosine with the
    # table's text and with its best column's text; the semantic_pool best tables by cosine join the
    # candidates even with no word in common. Chosen by database folds (benchmarks/warehouse_linking.py
    # and schema_linking.py --folds): the table cosine at 1.0 was no worse on any half of any question
    # set and lifted paraphrases 0.651/0.660 -> 0.725/0.733 all-gold@10 (Spider 2.0-Snow 0.867/0.927 ->
    # 0.887/0.938). 1.5 over 1.0, by one objective over the question sets (the mean of paraphrases,
    # Spider-Syn originals, train and Spider 2.0-Snow all-gold@10): half 0 picks 2.0 and half 1 picks 1.5,
    # and each beats 1.0 on the half it was not tuned on (0.8955 vs 0.8908; 0.8953 vs 0.8945). At 1.5:
    # paraphrases 0.744/0.750, Spider-Syn originals 0.967/0.955, train 0.963/0.944, dev 0.991/0.987,
    # Spider 2.0-Snow 0.907/0.944 (half 0/1) — the originals of half 0 lose 0.007-0.009 for +0.02 on
    # paraphrases of both halves. The column cosine lowered Spider's original questions (train half 1
    # 0.938 -> 0.931 at 1.0), so column vectors are built only when semantic_column_weight is set
    semantic_weight: float = 1.5
    semantic_column_weight: float = 0.0
    semantic_pool: int = 0
    # the question's first this many tokens make its vector: the encoder's cost grows faster than its
    # length (a 256-token Spider 2.0-Snow instruction took 87 ms of CPU, 128 tokens 39, 64 tokens 23),
    # and by the folds 64 ranks as 128 and 256 did (Spider 2.0-Snow all-gold@10 0.907/0.938 against
    # 0.900/0.938, recall@10 0.967 against 0.968; Spider's questions are at most 39 tokens long).
    # Tried by the same folds and dropped, as each lifted paraphrases only by lowering the original
    # questions on a half (at table weight 1.0: train 0.972/0.940, Spider-Syn originals 0.974/0.952,
    # paraphrases 0.725/0.733): table weight 2.0 (0.761/0.750, 0.957/0.938); reciprocal-rank fusion (k=20: paraphrases 0.756/0.735, train
    # 0.938/0.907, Spider 2.0-Snow half 1 0.904); the column cosine only for tables of at most 20
    # columns (t2 c1: 0.777/0.745, train 0.940/0.922); a table weight growing with the share of the
    # question's words the catalog lacks (+2: 0.744/0.752, train 0.961/0.940) or the 3 best tables by
    # words lack (+4: 0.780/0.735, train 0.953/0.931). Figures: schema_linking.py, warehouse_linking.py
    # --folds (benchmarks/).
    # Also tried by the same folds (a replica of the fusion over the rules' scores, within one question of
    # search_schema's rankings at t0/t1/t1.5/t2) and dropped, paraphrases half 0/1 with the originals' (train)
    # figures: a schema's meaning added to its tables (its best table cosine x1: 0.754/0.743, train
    # 0.970/0.937; the mean of its table vectors x0.5: 0.749/0.737, 0.966/0.938); table texts of the name
    # alone, without the schema, schema first or columns only (at t1 no half of the paraphrases up by more
    # than 0.002; at t2 without the schema 0.754/0.756, train 0.948/0.918); the question without result
    # phrases or stopwords (t2: 0.766/0.752, train 0.955/0.940); cosines z-scored per question or centred on
    # the catalog's mean table vector (no half better at equal originals); the lexical score scaled by the
    # cosine (a1 p1 t0.5: 0.782/0.735, train 0.944/0.910); catalog words near a question word the catalog
    # lacks, by word vectors, as query terms (weight 0.4 x cosine >= 0.55: 0.746/0.741, train 0.974/0.940,
    # Spider-Syn originals half 1 0.952 -> 0.950; weight 0.3, >= 0.5: Spider 2.0-Snow half 1 0.938 -> 0.933).
    # No fusion reached 0.78 on both halves: half 1's paraphrases stay <= 0.76 (of its 121 misses at t2, 79
    # have a gold table outside the 30 tables closest by cosine).
    semantic_question_tokens: int = 64


@dataclass
class _Field:
    weight: float
    b: float
    terms: list[list[str]] = field(default_factory=list)  # per document


def _bm25f_postings(fields: list[_Field], n_docs: int) -> dict[str, dict[int, float]]:
    """term -> {doc: pseudo term frequency}, combining fields BM25F-style."""
    postings: dict[str, dict[int, float]] = defaultdict(dict)
    for f in fields:
        # average over documents that have the field: sparse fields (comments) must not look huge
        lengths = [len(t) for t in f.terms if t]
        avg = (sum(lengths) / len(lengths)) if lengths else 1.0
        for doc, terms in enumerate(f.terms):
            if not terms:
                continue
            norm = f.weight / (1 - f.b + f.b * len(terms) / avg)
            counts: dict[str, int] = defaultdict(int)
            for t in terms:
                counts[t] += 1
            for t, c in counts.items():
                postings[t][doc] = postings[t].get(doc, 0.0) + c * norm
    return dict(postings)


def _idf(postings: dict[str, dict[int, float]], n_docs: int) -> dict[str, float]:
    return {t: math.log(1 + (n_docs - len(d) + 0.5) / (len(d) + 0.5)) for t, d in postings.items()}


class _Terms:
    """Terms of names and comments, each distinct one split and stemmed once: warehouses repeat names
    and comments (shards, twins, standard columns; 60 tables x 3,000 shared columns: 7 s -> well under 1 s)."""

    def __init__(self, vocabulary: frozenset[str]) -> None:
        self.vocabulary = vocabulary
        self._names: dict[str, list[Term]] = {}
        self._texts: dict[str | None, list[Term]] = {}

    def identifier(self, name: str) -> list[Term]:
        found = self._names.get(name)
        if found is None:
            found = self._names[name] = identifier_terms(name, self.vocabulary)
        return found

    def comment(self, text: str | None) -> list[Term]:
        found = self._texts.get(text)
        if found is None:
            found = self._texts[text] = text_terms(text)
        return found


class SearchIndex:
    """Inverted indexes over one catalog's tables, columns and schemas."""

    def __init__(
        self, catalog: Catalog, params: Params | None = None, notes: dict[str, TableNote] | None = None
    ) -> None:
        self.params = params or Params()
        self.loaded_at = catalog.loaded_at
        # paths inside nested columns seen so far (describe_table, the value index): columns to search too
        self.paths_version, known = known_paths(catalog)
        self.known_paths = {k.lower(): v for k, v in known.items()}  # a family as the caller spelt it
        self._column_sketches: dict[int, tuple[int, frozenset[int]]] = {}
        self._twin_pairs: dict[tuple[int, int, float], bool] = {}
        self.semantic: CatalogVectors | None = None  # built in the background (semantic.attach)
        self.semantic_started = False
        self.retired = False  # replaced by the index of a newer catalog load: background work stops
        self.notes_stamp: object = ()  # the knowledge store's state its synonyms were read from
        self._group_families(catalog, notes or {})
        self._index_documents()
        self._link_declared()
        self._link_inferred()

    def _group_families(self, catalog: Catalog, notes: dict[str, TableNote]) -> None:
        """One entry per sharded family / release series (its latest member stands for it): one slot of
        the result covers the family, and 300 daily shards do not drown the idf of their words. The
        knowledge store's synonyms and descriptions (`notes`) are read as the tables' and columns' comments."""
        fams = families(catalog.tables)
        # the names list_tables gives: search's families may join column sets that those name apart
        self.labels: dict[str, FamilyLabel] = family_labels(catalog.tables)
        family_of = {i: f for f in fams for i in f.members}
        self.tables: list[TableInfo] = []
        self.family: list[tuple[str, list[TableInfo]] | None] = []
        self.by_key: dict[str, int] = {}
        for i, t in enumerate(catalog.tables):
            fam = family_of.get(i)
            if fam is None:
                self.by_key[t.qualified] = len(self.tables)
                self.tables.append(_noted(t, notes.get(t.qualified.lower())))
                self.family.append(None)
            elif i == fam.members[0]:
                members = [catalog.tables[m] for m in fam.members]
                for m in members:
                    self.by_key[m.qualified] = len(self.tables)
                self.tables.append(_noted(members[-1], notes.get(members[-1].qualified.lower())))
                self.family.append((fam.pattern, members))

    def _paths_of(self, ti: int) -> list[Column]:
        """The paths seen inside a table's nested columns (any shard's, for a family), as column documents."""
        fam = self.family[ti]
        members = fam[1] if fam else [self.tables[ti]]
        keys = [m.qualified for m in members]
        # a family described by its name (list_tables' or the group's pattern) recorded its paths there
        labels = [self.labels[m.qualified] for m in members if m.qualified in self.labels]
        keys += dict.fromkeys(n for label in labels for n in (label.name, label.group) if n)
        seen: dict[str, KnownPath] = {}
        for key in keys:
            for path, known in self.known_paths.get(key.lower(), {}).items():
                if path not in seen or (known.described and not seen[path].described):
                    seen[path] = known  # the type describe_table shows wins
        return [Column(name=p, type=k.type) for p, k in seen.items()]

    def _index_documents(self) -> None:
        """Table and column documents (BM25F fields), and the catalog word behind each term for explaining
        matches; the schema documents gather their tables' words."""
        p = self.params
        distinct = {n for t in self.tables for n in (t.name, *(c.name for c in t.columns))}
        vocabulary = frozenset(w for n in distinct for w in split_identifier(n) if len(w) >= 3)
        words = _Terms(vocabulary)
        self.schemas: list[str] = []
        schema_of: dict[str, int] = {}
        t_name, t_cols, t_comment, t_schema = (
            _Field(*p.t_name),
            _Field(*p.t_columns),
            _Field(*p.t_comment),
            _Field(*p.t_schema),
        )
        c_name, c_table, c_comment = _Field(*p.c_name), _Field(*p.c_table), _Field(*p.c_comment)
        self.columns: list[tuple[int, str]] = []  # (table index, column name)
        self.path_types: dict[tuple[int, str], str] = {}  # (table index, nested path) -> its type
        self.table_schema: list[int] = []
        # per table: term -> catalog word, per field, for explaining matches
        self.name_words: list[dict[str, str]] = []
        self.comment_words: list[dict[str, str]] = []
        self.column_words: list[dict[str, str]] = []  # per column
        self.column_comment_words: list[dict[str, str]] = []
        schema_terms: dict[int, tuple[list[str], list[str], list[str]]] = {}
        for ti, table in enumerate(self.tables):
            skey = ".".join(part for part in (table.database, table.schema_name) if part)
            if skey not in schema_of:
                schema_of[skey] = len(self.schemas)
                self.schemas.append(skey)
                schema_terms[schema_of[skey]] = (
                    [x.term for x in identifier_terms(table.schema_name, vocabulary)],
                    [],
                    [],
                )
            si = schema_of[skey]
            self.table_schema.append(si)
            name_terms = words.identifier(table.name)
            self.name_words.append({x.term: x.word for x in name_terms})
            comment_terms = list(words.comment(table.comment))
            table_terms = [x.term for x in name_terms]  # shared by the table's columns (read only)
            col_all: list[str] = []
            paths = self._paths_of(ti)
            self.path_types.update({(ti, c.name): c.type for c in paths})
            for col in [*table.columns, *paths]:
                cterms = words.identifier(col.name)
                ccomment = words.comment(col.comment)
                self.columns.append((ti, col.name))
                self.column_words.append({x.term: col.name for x in cterms})
                self.column_comment_words.append({x.term: x.word for x in ccomment})
                c_name.terms.append([x.term for x in cterms])
                c_table.terms.append(table_terms)
                c_comment.terms.append([x.term for x in ccomment])
                col_all += [x.term for x in cterms]
                comment_terms += ccomment
            self.comment_words.append({x.term: x.word for x in comment_terms})
            t_name.terms.append([x.term for x in name_terms])
            t_cols.terms.append(col_all)
            t_comment.terms.append([x.term for x in comment_terms])
            t_schema.terms.append(schema_terms[si][0])
            schema_terms[si][1].extend(x.term for x in name_terms)
            schema_terms[si][2].extend(col_all)
        self.table_name_terms = frozenset(t for terms in t_name.terms for t in terms)
        self.t_post = _bm25f_postings([t_name, t_cols, t_comment, t_schema], len(self.tables))
        self.t_idf = _idf(self.t_post, len(self.tables))
        self.vocab = sorted(self.t_post)
        self.c_post = _bm25f_postings([c_name, c_table, c_comment], len(self.columns))
        self.c_idf = _idf(self.c_post, len(self.columns))
        self._index_schemas(schema_terms, vocabulary)

    def _index_schemas(
        self, schema_terms: dict[int, tuple[list[str], list[str], list[str]]], vocabulary: frozenset[str]
    ) -> None:
        """Schema documents (name, table names, column names) and who sits where."""
        p = self.params
        s_name, s_tables, s_cols = _Field(*p.s_name), _Field(*p.s_tables), _Field(*p.s_columns)
        for si in range(len(self.schemas)):
            names, tnames, cnames = schema_terms[si]
            s_name.terms.append(names)
            s_tables.terms.append(tnames)
            s_cols.terms.append(cnames)
        self.s_post = _bm25f_postings([s_name, s_tables, s_cols], len(self.schemas))
        self.s_idf = _idf(self.s_post, len(self.schemas))
        self.schema_words = [
            {x.term: x.word for x in identifier_terms(s.split(".")[-1], vocabulary)} for s in self.schemas
        ]
        self.schema_tables: list[list[int]] = [[] for _ in self.schemas]
        for ti, si in enumerate(self.table_schema):
            self.schema_tables[si].append(ti)
        self.table_columns: list[list[int]] = [[] for _ in self.tables]
        for ci, (ti, _) in enumerate(self.columns):
            self.table_columns[ti].append(ci)
        self.column_by_name: dict[tuple[int, str], int] = {
            (ti, name.lower()): ci for ci, (ti, name) in enumerate(self.columns)
        }

    def _link_declared(self) -> None:
        """Neighbours and join columns from the declared foreign keys."""
        self.neighbours: list[set[int]] = [set() for _ in self.tables]
        self.joins: list[list[tuple[list[int], int, list[int]]]] = [
            [] for _ in self.tables
        ]  # FK column links
        lowered = {key.lower(): i for key, i in self.by_key.items()}
        for ti, table in enumerate(self.tables):
            for fk in table.foreign_keys:
                parts = [table.database, fk.ref_schema or table.schema_name, fk.ref_table]
                ref = lowered.get(".".join(x for x in parts if x).lower())
                if ref is not None and ref != ti:
                    self.neighbours[ti].add(ref)
                    self.neighbours[ref].add(ti)
                    mine = [self.column_by_name.get((ti, c.lower())) for c in fk.columns]
                    theirs = [self.column_by_name.get((ref, c.lower())) for c in fk.ref_columns]
                    self.joins[ti].append(
                        ([c for c in mine if c is not None], ref, [c for c in theirs if c is not None])
                    )

    def _link_inferred(self) -> None:
        """Links inferred from key-like column names (race_id -> races), for schemas without foreign keys."""
        declared = {self.table_schema[ti] for ti in range(len(self.tables)) if self.neighbours[ti]}
        self.declared_schemas = frozenset(declared)
        self.inferred: list[dict[int, str]] = [{} for _ in self.tables]  # neighbour -> column
        for a, b, col in inferred_links(
            self.tables,
            self.table_schema,
            [f[0] if f else t.name for t, f in zip(self.tables, self.family, strict=True)],
        ):
            if b in self.neighbours[a] or (
                self.table_schema[a] in declared and not self.params.inferred_with_declared
            ):
                continue
            self.inferred[a].setdefault(b, col)
            self.inferred[b].setdefault(a, col)

    def column_sketch(self, ti: int) -> tuple[int, frozenset[int]]:
        """(column count, hashes of the lower-cased column names — of a table wider than SKETCH_SIZE only
        the smallest SKETCH_SIZE): enough to tell twins apart in O(SKETCH_SIZE) however wide the tables.
        Built on first use: most tables are never asked."""
        sketch = self._column_sketches.get(ti)
        if sketch is None:
            # crc32, not hash(): str hashes change per process, and rankings must not
            hashes = {zlib.crc32(c.name.lower().encode()) for c in self.tables[ti].columns}
            kept = frozenset(hashes if len(hashes) <= SKETCH_SIZE else heapq.nsmallest(SKETCH_SIZE, hashes))
            sketch = self._column_sketches[ti] = (len(hashes), kept)
        return sketch

    def twins(self, ti: int, tj: int, a: frozenset[int], b: frozenset[int], overlap: float) -> bool:
        """Whether two tables' column sketches overlap enough; remembered per pair (wide tables cost
        100 µs a pair, and a query compares up to 1,770 pairs)."""
        key = (min(ti, tj), max(ti, tj), overlap)
        verdict = self._twin_pairs.get(key)
        if verdict is None:
            if len(self._twin_pairs) > 200_000:
                self._twin_pairs.clear()
            verdict = self._twin_pairs[key] = _jaccard(a, b) >= overlap
        return verdict

    @staticmethod
    def bm25(
        post: dict[str, dict[int, float]], idf: dict[str, float], terms: dict[str, float], k1: float
    ) -> dict[int, float]:
        scores: dict[int, float] = defaultdict(float)
        k = k1 + 1  # the same value, and so the same scores, as computed per posting
        for term, qweight in terms.items():
            docs = post.get(term)
            if not docs:
                continue
            w = idf[term] * qweight
            for doc, tf in docs.items():
                scores[doc] += w * tf * k / (tf + k1)
        return scores


def search_index(ctx: ToolContext, source: Source) -> SearchIndex:
    catalog = source.catalog()
    key = f"search:{source.name}"
    cached = ctx.caches.get(key)
    stamp, notes = schema_notes(source)
    if (
        cached is None
        or cached.loaded_at != catalog.loaded_at
        or cached.paths_version != known_paths(catalog)[0]
        or cached.notes_stamp != stamp
    ):
        if cached is not None:
            cached.retired = True
        cached = SearchIndex(catalog, notes=notes)
        cached.notes_stamp = stamp
        ctx.caches[key] = cached
    return cached


def _noted(table: TableInfo, note: TableNote | None) -> TableInfo:
    """The table with the knowledge store's synonyms and descriptions added to its and its columns' comments."""
    if note is None:
        return table
    columns = {name.lower(): cnote for name, cnote in note.columns.items()}
    return table.model_copy(
        update={
            "comment": noted_text(table.comment, note.synonyms, note.description),
            "columns": [
                c.model_copy(update={"comment": noted_text(c.comment, n.synonyms, n.description)})
                if (n := columns.get(c.name.lower())) is not None
                else c
                for c in table.columns
            ],
        }
    )


def _jaccard(a: frozenset[int], b: frozenset[int]) -> float:
    """Jaccard of two column sets from their sketches: exact when both are whole, else the bottom-k
    estimate (the share of the union's smallest hashes that both hold)."""
    if len(a) < SKETCH_SIZE and len(b) < SKETCH_SIZE:
        both = len(a & b)
        return both / (len(a) + len(b) - both)
    smallest = heapq.nsmallest(SKETCH_SIZE, a | b)
    return sum(1 for h in smallest if h in a and h in b) / len(smallest)
