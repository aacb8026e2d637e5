"""search_schema: rank tables and columns for a natural-language question or keywords.

Pure Python, no model and no network. One BM25F index per catalog load (cached in the ToolContext):
identifiers are split (camelCase, snake_case, digits, glued words like `firstname`), common database
abbreviations are expanded (qty -> quantity, fname -> first name), words are Porter-stemmed, and
comments count too. On top of the lexical score:
- value hits: words of the question found in the value index (`French` -> a column holding
  `France`) lift that column and its table (only when an index exists: search never scans);
- schema reinforcement: a schema whose tables together match the question lifts all its tables;
- foreign-key neighbours of strong hits get a share of their score (join tables, lookups).
Every hit says why it matched.
"""

from __future__ import annotations

import heapq
import math
import re
import time
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache

from pydantic import BaseModel

from flexsql.errors import InvalidArgument
from flexsql.tools.engines.base import Catalog, Source, TableInfo
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.search.families import date_members, families, question_dates
from flexsql.tools.search.keys import inferred_links
from flexsql.tools.values.index import ValueIndex, fold, normalize, split_identifier

MAX_QUERY_CHARS = 2000

# -- words -------------------------------------------------------------------------------------------

STOPWORDS = frozenset(
    """
a an the and or but if then else of in on at to for from by with without about into over under between
through during before after above below up down out off than as is are was were be been being have has had
do does did doing will would shall should can could may might must this that these those there here it its
they them their theirs he him his she her hers we us our you your yours i me my mine who whom whose which what
when where why how all any both each few more most other some such no nor not only own same so too very just
also please show list give find get display return tell me named called whats what's much many number
count value values table tables column columns database data record records info row rows
""".split()
)

# Common abbreviations in database identifiers (expanded on both sides, so either form matches).
ABBREVIATIONS: dict[str, tuple[str, ...]] = {
    "qty": ("quantity",),
    "amt": ("amount",),
    "num": ("number",),
    "nbr": ("number",),
    "no": ("number",),
    "cnt": ("count",),
    "dt": ("date",),
    "ts": ("timestamp",),
    "yr": ("year",),
    "mth": ("month",),
    "mon": ("month",),
    "wk": ("week",),
    "cust": ("customer",),
    "addr": ("address",),
    "desc": ("description",),
    "descr": ("description",),
    "dept": ("department",),
    "emp": ("employee",),
    "empl": ("employee",),
    "mgr": ("manager",),
    "org": ("organization",),
    "acct": ("account",),
    "acc": ("account",),
    "pct": ("percent",),
    "perc": ("percent",),
    "avg": ("average",),
    "tot": ("total",),
    "prod": ("product",),
    "txn": ("transaction",),
    "trx": ("transaction",),
    "msg": ("message",),
    "pwd": ("password",),
    "tel": ("telephone",),
    "ph": ("phone",),
    "lat": ("latitude",),
    "lng": ("longitude",),
    "lon": ("longitude",),
    "loc": ("location",),
    "fname": ("first", "name"),
    "lname": ("last", "name"),
    "mname": ("middle", "name"),
    "dob": ("date", "birth"),
    "sal": ("salary",),
    "stu": ("student",),
    "fac": ("faculty",),
    "prof": ("professor",),
    "dest": ("destination",),
    "src": ("source",),
    "ref": ("reference",),
    "seq": ("sequence",),
    "pos": ("position",),
    "info": ("information",),
    "config": ("configuration",),
    "lang": ("language",),
    "pop": ("population",),
    "sq": ("square",),
    "km": ("kilometer",),
    "hr": ("hour",),
    "min": ("minimum",),
    "max": ("maximum",),
    "temp": ("temperature",),
    "cat": ("category",),
    "catg": ("category",),
    "inv": ("invoice",),
    "ord": ("order",),
    "pmt": ("payment",),
    "pymt": ("payment",),
    "bal": ("balance",),
    "curr": ("currency",),
    "ccy": ("currency",),
    "std": ("standard",),
    "intl": ("international",),
    "natl": ("national",),
    "govt": ("government",),
    "univ": ("university",),
    "dir": ("director",),
    "assoc": ("association",),
    "co": ("company",),
    "corp": ("corporation",),
    "mfr": ("manufacturer",),
    "mfg": ("manufacturing",),
    "yrs": ("year",),
    "stat": ("statistic",),
    "stats": ("statistic",),
    "eff": ("effective",),
    "exp": ("expiration",),
    "reg": ("registration",),
    "res": ("reservation",),
    "emp_no": ("employee", "number"),
}

# Demonyms and adjectives that name a place stored as a noun in the data ("French" -> France).
DEMONYMS: dict[str, tuple[str, ...]] = {
    "american": ("united states", "usa", "us", "america"),
    "british": ("united kingdom", "uk", "britain", "england"),
    "english": ("england", "english"),
    "french": ("france",),
    "german": ("germany",),
    "italian": ("italy",),
    "spanish": ("spain",),
    "portuguese": ("portugal",),
    "dutch": ("netherlands", "holland"),
    "belgian": ("belgium",),
    "swiss": ("switzerland",),
    "austrian": ("austria",),
    "swedish": ("sweden",),
    "norwegian": ("norway",),
    "danish": ("denmark",),
    "finnish": ("finland",),
    "irish": ("ireland",),
    "scottish": ("scotland",),
    "welsh": ("wales",),
    "polish": ("poland",),
    "czech": ("czech republic", "czechia"),
    "hungarian": ("hungary",),
    "greek": ("greece",),
    "turkish": ("turkey",),
    "russian": ("russia",),
    "ukrainian": ("ukraine",),
    "chinese": ("china",),
    "japanese": ("japan",),
    "korean": ("korea", "south korea"),
    "indian": ("india",),
    "pakistani": ("pakistan",),
    "thai": ("thailand",),
    "vietnamese": ("vietnam",),
    "indonesian": ("indonesia",),
    "filipino": ("philippines",),
    "australian": ("australia",),
    "canadian": ("canada",),
    "mexican": ("mexico",),
    "brazilian": ("brazil",),
    "argentine": ("argentina",),
    "argentinian": ("argentina",),
    "chilean": ("chile",),
    "colombian": ("colombia",),
    "peruvian": ("peru",),
    "egyptian": ("egypt",),
    "nigerian": ("nigeria",),
    "kenyan": ("kenya",),
    "israeli": ("israel",),
    "iranian": ("iran",),
    "iraqi": ("iraq",),
    "saudi": ("saudi arabia",),
    "european": ("europe",),
    "african": ("africa",),
    "asian": ("asia",),
    "zealander": ("new zealand",),
    "romanian": ("romania",),
    "bulgarian": ("bulgaria",),
    "croatian": ("croatia",),
    "serbian": ("serbia",),
    "slovak": ("slovakia",),
    "icelandic": ("iceland",),
    "cuban": ("cuba",),
    "jamaican": ("jamaica",),
    "moroccan": ("morocco",),
    "malaysian": ("malaysia",),
    "singaporean": ("singapore",),
    "taiwanese": ("taiwan",),
}


# Porter (1980) stemmer: standard, predictable conflation for retrieval ('located' ~ 'location').
def _cons(w: str, i: int) -> bool:
    ch = w[i]
    if ch in "aeiou":
        return False
    if ch == "y":
        return i == 0 or not _cons(w, i - 1)
    return True


def _measure(stem: str) -> int:
    n, i, size = 0, 0, len(stem)
    while i < size and _cons(stem, i):
        i += 1
    while i < size:
        while i < size and not _cons(stem, i):
            i += 1
        if i >= size:
            break
        while i < size and _cons(stem, i):
            i += 1
        n += 1
    return n


def _has_vowel(stem: str) -> bool:
    return any(not _cons(stem, i) for i in range(len(stem)))


def _double_cons(w: str) -> bool:
    return len(w) >= 2 and w[-1] == w[-2] and _cons(w, len(w) - 1)


def _cvc(w: str) -> bool:
    n = len(w)
    return n >= 3 and _cons(w, n - 3) and not _cons(w, n - 2) and _cons(w, n - 1) and w[-1] not in "wxy"


_STEP2 = sorted(
    [
        ("ational", "ate"),
        ("tional", "tion"),
        ("enci", "ence"),
        ("anci", "ance"),
        ("izer", "ize"),
        ("bli", "ble"),
        ("alli", "al"),
        ("entli", "ent"),
        ("eli", "e"),
        ("ousli", "ous"),
        ("ization", "ize"),
        ("ation", "ate"),
        ("ator", "ate"),
        ("alism", "al"),
        ("iveness", "ive"),
        ("fulness", "ful"),
        ("ousness", "ous"),
        ("aliti", "al"),
        ("iviti", "ive"),
        ("biliti", "ble"),
        ("logi", "log"),
    ],
    key=lambda p: -len(p[0]),
)
_STEP3 = sorted(
    [
        ("icate", "ic"),
        ("ative", ""),
        ("alize", "al"),
        ("iciti", "ic"),
        ("ical", "ic"),
        ("ful", ""),
        ("ness", ""),
    ],
    key=lambda p: -len(p[0]),
)
_STEP4 = sorted(
    [
        "al",
        "ance",
        "ence",
        "er",
        "ic",
        "able",
        "ible",
        "ant",
        "ement",
        "ment",
        "ent",
        "ion",
        "ou",
        "ism",
        "ate",
        "iti",
        "ous",
        "ive",
        "ize",
    ],
    key=lambda s: -len(s),
)


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    w = word
    if len(w) <= 2 or not w.isalpha():
        return w
    if w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("ies"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    again = False
    if w.endswith("eed"):
        if _measure(w[:-3]) > 0:
            w = w[:-1]
    elif w.endswith("ed") and _has_vowel(w[:-2]):
        w, again = w[:-2], True
    elif w.endswith("ing") and _has_vowel(w[:-3]):
        w, again = w[:-3], True
    if again:
        if w.endswith(("at", "bl", "iz")):
            w += "e"
        elif _double_cons(w) and w[-1] not in "lsz":
            w = w[:-1]
        elif _measure(w) == 1 and _cvc(w):
            w += "e"
    if w.endswith("y") and _has_vowel(w[:-1]):
        w = w[:-1] + "i"
    for table in (_STEP2, _STEP3):
        for suffix, repl in table:
            if w.endswith(suffix):
                if _measure(w[: -len(suffix)]) > 0:
                    w = w[: -len(suffix)] + repl
                break
    for suffix in _STEP4:
        if w.endswith(suffix):
            base = w[: -len(suffix)]
            if _measure(base) > 1 and (suffix != "ion" or base[-1:] in ("s", "t")):
                w = base
            break
    if w.endswith("e"):
        base = w[:-1]
        m = _measure(base)
        if m > 1 or (m == 1 and not _cvc(base)):
            w = base
    if _measure(w) > 1 and _double_cons(w) and w.endswith("l"):
        w = w[:-1]
    return w


@dataclass
class Term:
    term: str  # stemmed
    word: str  # as the user or the catalog wrote it


# Irregular plurals the stemmer cannot see ("people" is the plural of "person").
IRREGULAR = {
    "people": "person",
    "persons": "person",
    "men": "man",
    "women": "woman",
    "children": "child",
    "feet": "foot",
    "teeth": "tooth",
    "mice": "mouse",
    "geese": "goose",
    "indices": "index",
    "criteria": "criterion",
    "analyses": "analysis",
    "media": "medium",
    "staves": "staff",
}


def _expand(part: str) -> list[str]:
    if part in IRREGULAR:
        return [IRREGULAR[part]]
    return list(ABBREVIATIONS.get(part, (part,)))


def identifier_terms(name: str, vocabulary: frozenset[str] = frozenset()) -> list[Term]:
    """Terms of a table or column name: split, abbreviations expanded, glued words split, stemmed."""
    out: list[Term] = []
    for part in split_identifier(name):
        pieces = _expand(part)
        if len(pieces) == 1 and part not in ABBREVIATIONS and vocabulary:
            pieces = _split_glued(part, vocabulary) or pieces
        for piece in pieces:
            if piece in STOPWORDS and piece not in ABBREVIATIONS:
                continue
            out.append(Term(stem(piece), part))
    return out


def _split_glued(word: str, vocabulary: frozenset[str]) -> list[str] | None:
    """'firstname' -> ['first', 'name'] when both halves are words used elsewhere in the catalog."""
    if len(word) < 7 or word in vocabulary or not word.isalpha():
        return None
    for i in range(3, len(word) - 2):
        left, right = word[:i], word[i:]
        if left in vocabulary and right in vocabulary:
            return [left, right]
    return None


# Phrases about presenting a result, not about the data: "ordered by name", "in descending order".
_RESULT_PHRASES = re.compile(
    r"\b(?:(?:sorted|ordered|ranked|arranged|grouped|listed)\s+(?:by|in|from|on)\b"
    r"|in\s+(?:an?\s+|the\s+)?(?:ascending|descending|alphabetical|alphabetic|increasing|decreasing|reverse|"
    r"lexicographic|chronological|numerical|numeric)?\s*(?:order|sequence)\b"
    r"|order\s+(?:of|by)\b|(?:ascending|descending)\s+order\b)",
    re.IGNORECASE,
)


def query_terms(query: str) -> list[Term]:
    """Terms of a question: result-presentation phrases dropped, then like any text."""
    return text_terms(_RESULT_PHRASES.sub(" ", query))


def text_terms(text: str | None) -> list[Term]:
    """Terms of free text (comments, questions): words split like identifiers, stopwords dropped."""
    if not text:
        return []
    out: list[Term] = []
    for word in re.findall(r"[^\W_]+", text):
        for part in split_identifier(word):
            if part in STOPWORDS:
                continue
            for piece in _expand(part):
                if piece not in STOPWORDS:
                    out.append(Term(stem(piece), word))
    return out


# -- the index ---------------------------------------------------------------------------------------

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
    # (with twin_unasked: Spider 2.0-Snow all-gold@10 0.912 -> 0.930, @20 0.970 -> 0.979; Spider 1.0 unchanged)
    twin_decay: float = 0.7
    twin_overlap: float = 0.9  # Jaccard of the column names, over tables of at least twin_min_columns
    twin_min_columns: int = 8
    # among twins, each table-name word the question lacks costs this share: 'results' before
    # 'sprint_results', 'posts_questions' before 'posts_questions_archive', unless the question says so
    twin_unasked: float = 0.9
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


class SearchIndex:
    """Inverted indexes over one catalog's tables, columns and schemas."""

    def __init__(self, catalog: Catalog, params: Params | None = None) -> None:
        self.params = p = params or Params()
        self.loaded_at = catalog.loaded_at
        self._column_sketches: dict[int, tuple[int, frozenset[int]]] = {}
        self._twin_pairs: dict[tuple[int, int, float], bool] = {}
        # one entry per sharded family / release series (its latest member stands for it): one slot of
        # the result covers the family, and 300 daily shards do not drown the idf of their words
        fams = families(catalog.tables)
        family_of = {i: f for f in fams for i in f.members}
        self.tables: list[TableInfo] = []
        self.family: list[tuple[str, list[TableInfo]] | None] = []
        self.by_key: dict[str, int] = {}
        for i, t in enumerate(catalog.tables):
            fam = family_of.get(i)
            if fam is None:
                self.by_key[t.qualified] = len(self.tables)
                self.tables.append(t)
                self.family.append(None)
            elif i == fam.members[0]:
                members = [catalog.tables[m] for m in fam.members]
                for m in members:
                    self.by_key[m.qualified] = len(self.tables)
                self.tables.append(members[-1])
                self.family.append((fam.pattern, members))
        # warehouses repeat names and comments (shards, twins, standard columns): each distinct one is
        # split and stemmed once (60 tables x 3,000 shared columns: 7 s -> well under 1 s)
        distinct = {n for t in self.tables for n in (t.name, *(c.name for c in t.columns))}
        vocabulary = frozenset(w for n in distinct for w in split_identifier(n) if len(w) >= 3)
        id_memo: dict[str, list[Term]] = {}
        text_memo: dict[str | None, list[Term]] = {}

        def id_terms(name: str) -> list[Term]:
            found = id_memo.get(name)
            if found is None:
                found = id_memo[name] = identifier_terms(name, vocabulary)
            return found

        def comment_terms_of(text: str | None) -> list[Term]:
            found = text_memo.get(text)
            if found is None:
                found = text_memo[text] = text_terms(text)
            return found

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
        self.table_schema: list[int] = []
        # per table: term -> catalog word, per field, for explaining matches
        self.name_words: list[dict[str, str]] = []
        self.comment_words: list[dict[str, str]] = []
        self.column_words: list[dict[str, str]] = []  # per column
        self.column_comment_words: list[dict[str, str]] = []
        schema_terms: dict[int, tuple[list[str], list[str], list[str]]] = {}
        for ti, table in enumerate(self.tables):
            skey = ".".join(p for p in (table.database, table.schema_name) if p)
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
            name_terms = id_terms(table.name)
            self.name_words.append({x.term: x.word for x in name_terms})
            comment_terms = list(comment_terms_of(table.comment))
            table_terms = [x.term for x in name_terms]  # shared by the table's columns (read only)
            col_all: list[str] = []
            for col in table.columns:
                cterms = id_terms(col.name)
                ccomment = comment_terms_of(col.comment)
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
        # links inferred from key-like column names (race_id -> races), for schemas without foreign keys
        declared = {self.table_schema[ti] for ti in range(len(self.tables)) if self.neighbours[ti]}
        self.declared_schemas = frozenset(declared)
        self.inferred: list[dict[int, str]] = [{} for _ in self.tables]  # neighbour -> column
        for a, b, col in inferred_links(
            self.tables,
            self.table_schema,
            [f[0] if f else t.name for t, f in zip(self.tables, self.family, strict=True)],
        ):
            if b in self.neighbours[a] or (self.table_schema[a] in declared and not p.inferred_with_declared):
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
        for term, qweight in terms.items():
            docs = post.get(term)
            if not docs:
                continue
            w = idf[term] * qweight
            for doc, tf in docs.items():
                scores[doc] += w * tf * (k1 + 1) / (tf + k1)
        return scores


# -- results -----------------------------------------------------------------------------------------


class TableHit(BaseModel):
    table: str  # for a family: the member the question's dates name, else the latest
    score: float
    why: list[str]
    kind: str = "table"
    row_estimate: int | None = None
    family: str | None = None  # e.g. NOAA_GSOD.GSOD*: tables differing only in digits, similar columns
    family_size: int | None = None
    family_range: str | None = None  # first … last member
    date_members: list[str] = []  # members named by the question's dates (up to 12)


class ColumnHit(BaseModel):
    table: str
    column: str
    type: str
    score: float
    why: list[str]


class SchemaSearchResult(BaseModel):
    query: str
    source: str
    tables: list[TableHit]
    columns: list[ColumnHit]
    tables_matched: int  # tables with any evidence at all
    truncated: bool
    value_index: str  # "used", "not built" (build it with find_values or build_value_index)
    elapsed_ms: float

    def to_text(self) -> str:
        lines = [
            f"search_schema {self.query!r} in {self.source}: {self.tables_matched} tables matched, "
            f"top {len(self.tables)}" + (" (truncated: true)" if self.truncated else "")
        ]
        for i, t in enumerate(self.tables, 1):
            rows = f", ~{t.row_estimate:,} rows" if t.row_estimate is not None else ""
            kind = " (view)" if t.kind == "view" else ""
            fam = ""
            if t.family:
                fam = f" (family {t.family}: {t.family_size} tables {t.family_range})"
            lines.append(f"{i}. {t.table}{kind}{fam} [{t.score:.2f}{rows}] — " + "; ".join(t.why))
        if self.columns:
            lines.append("columns:")
            for c in self.columns:
                lines.append(f"- {c.table}.{c.column} ({c.type}) [{c.score:.2f}] — " + "; ".join(c.why))
        if self.value_index != "used":
            lines.append(
                f"(value index {self.value_index}: words that are data values, like 'France', are not "
                "matched yet; find_values builds it)"
            )
        return "\n".join(lines)


# -- searching ---------------------------------------------------------------------------------------


def search_index(ctx: ToolContext, source: Source) -> SearchIndex:
    catalog = source.catalog()
    key = f"search:{source.name}"
    cached = ctx.caches.get(key)
    if cached is None or cached.loaded_at != catalog.loaded_at:
        cached = SearchIndex(catalog)
        ctx.caches[key] = cached
    return cached


def _value_index_if_built(ctx: ToolContext, source: Source) -> ValueIndex | None:
    from flexsql.tools.values.find import value_index

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


def _value_hits(index: ValueIndex, engine: SearchIndex, query: str) -> list[tuple[int, int, str, str, float]]:
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
    hits = []
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
    return hits


def search_schema(
    ctx: ToolContext, query: str, limit: int = 10, source: str | None = None
) -> SchemaSearchResult:
    """Tables and columns ranked for a question or keywords, each with why it matched."""
    from flexsql.tools.runtime.args import check_limit

    if not isinstance(query, str) or not query.strip():
        raise InvalidArgument(
            "query is required: a question or keywords, e.g. 'singers from France' or 'order date'"
        )
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidArgument(f"query is {len(query)} characters; give at most {MAX_QUERY_CHARS}")
    check_limit("limit", limit, 1, 100)
    started = time.perf_counter()
    src = ctx.source(source)
    engine = search_index(ctx, src)
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

    table_lex = engine.bm25(engine.t_post, engine.t_idf, weights, p.k1)
    column_lex = engine.bm25(engine.c_post, engine.c_idf, weights, p.k1)
    schema_lex = engine.bm25(engine.s_post, engine.s_idf, weights, p.k1)

    vindex = _value_index_if_built(ctx, src)
    value_table: dict[int, float] = defaultdict(float)
    value_column: dict[int, float] = defaultdict(float)
    value_why: dict[int, list[tuple[float, str, str, int]]] = defaultdict(list)
    if vindex is not None:
        for ti, ci, stored, text, weight in _value_hits(vindex, engine, query):
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
    for ti, v in value_table.items():
        schema_lex[engine.table_schema[ti]] += 0.5 * p.value_weight * v

    base: dict[int, float] = defaultdict(float)
    for ti, s in table_lex.items():
        base[ti] += s
    for ti, v in value_table.items():
        base[ti] += p.value_weight * v
    best_schema = max(schema_lex.values(), default=0.0)
    scores: dict[int, float] = dict(base)
    schema_part: dict[int, float] = {}
    if best_schema > 0 and p.schema_boost:
        for si, s in schema_lex.items():
            if s <= 0:
                continue
            for ti in engine.schema_tables[si]:
                boost = p.schema_boost * s
                schema_part[ti] = boost
                scores[ti] = scores.get(ti, 0.0) + boost
    # FK neighbours of the strongest hits: a table joining two hits collects a share from each
    fk_part: dict[int, tuple[float, int]] = {}
    strong = sorted(base, key=lambda ti: -base[ti])[: p.fk_sources]
    for ti in strong:
        if base[ti] <= 0:
            continue
        for nb in engine.neighbours[ti]:
            share = p.fk_share * base[ti]
            total, via = fk_part.get(nb, (0.0, ti))
            fk_part[nb] = (total + share, via if total >= share else ti)
    if p.inferred_share:
        for ti in sorted(base, key=lambda ti: -base[ti])[: p.inferred_sources]:
            if base[ti] <= 0:
                continue
            for nb in engine.inferred[ti]:
                share = p.inferred_share * base[ti]
                total, via = fk_part.get(nb, (0.0, ti))
                fk_part[nb] = (total + share, via if total >= share else ti)
    for nb, (share, _) in fk_part.items():
        scores[nb] = scores.get(nb, 0.0) + share

    # a family whose members carry the question's dates ("2016" -> GSOD2016) is likely the one meant
    dates = question_dates(query)
    shown: dict[int, TableInfo] = {}
    dated: dict[int, list[TableInfo]] = {}
    if dates:
        precision: dict[int, int] = {}
        for ti, fam in enumerate(engine.family):
            if fam is None:
                continue
            hits, digits = date_members([m.name for m in fam[1]], dates)
            if hits:
                dated[ti] = [fam[1][h] for h in hits]
                shown[ti] = dated[ti][0]
                precision[ti] = digits
        top_score = max(scores.values(), default=0.0) or 1.0
        for ti in dated:
            # a date alone names a shard family (events_20180915 for "September 15, 2018"); a day
            # matched says more than a year
            share = p.date_only * (0.5 + precision[ti] / 16)
            scores[ti] = scores.get(ti, 0.0) + max(p.date_boost * scores.get(ti, 0.0), share * top_score)

    companion = (
        _companions(engine, scores, qterms, p) if p.companion_share and len(engine.schemas) > 1 else {}
    )
    for ti, (share, _) in companion.items():
        scores[ti] = scores.get(ti, 0.0) + share
    bridges = _bridges(engine, scores, p) if p.bridge_share else {}
    for ti, (share, _) in bridges.items():
        scores[ti] = scores.get(ti, 0.0) + share
    ranked = sorted(
        (ti for ti in scores if scores[ti] > 0), key=lambda ti: (-scores[ti], engine.tables[ti].qualified)
    )
    if p.coverage_decay < 1 and len(ranked) > 1:
        ranked = _cover_concepts(engine, ranked, scores, weights, limit, p)
    twin_of: dict[int, int] = {}
    if p.twin_decay < 1 and len(ranked) > 1:
        ranked, twin_of = _spread_twins(engine, ranked, scores, weights, limit, p)
    top = ranked[:limit]
    table_hits = []
    for ti in top:
        table = shown.get(ti, engine.tables[ti])
        why = _explain_table(
            engine,
            ti,
            weights,
            words,
            value_why.get(ti, []),
            schema_part.get(ti, 0.0),
            fk_part.get(ti),
            scores[ti],
        )
        if ti in companion and companion[ti][0] > 0.2 * scores[ti]:
            why.append(f"beside top hit {engine.tables[companion[ti][1]].name} in schema {table.schema_name}")
        if ti in bridges and bridges[ti][0] > 0.2 * scores[ti]:
            why.append("joins " + " and ".join(engine.tables[b].name for b in bridges[ti][1][:3]))
        if ti in twin_of:
            why.append(f"same columns as {engine.tables[twin_of[ti]].name}")
        hit = TableHit(
            table=table.qualified,
            score=round(scores[ti], 3),
            why=why,
            kind=table.kind,
            row_estimate=table.row_estimate,
        )
        fam = engine.family[ti]
        if fam is not None:
            pattern, members = fam
            hit.family = ".".join(x for x in (table.database, table.schema_name, pattern) if x)
            hit.family_size = len(members)
            hit.family_range = f"{members[0].name} … {members[-1].name}"
            if ti in dated:
                hit.date_members = [m.name for m in dated[ti][:12]]
                more = f" (+{len(dated[ti]) - 3} more)" if len(dated[ti]) > 3 else ""
                hit.why.insert(0, "question dates name " + ", ".join(m.name for m in dated[ti][:3]) + more)
            else:
                hit.why.append(f"latest of the family: {members[-1].name}")
        table_hits.append(hit)

    # columns: their own evidence plus a share of their table's
    best_table = max((scores[ti] for ti in ranked[:1]), default=1.0) or 1.0
    col_scores: dict[int, float] = defaultdict(float)
    for ci, s in column_lex.items():
        col_scores[ci] += s
    for ci, v in value_column.items():
        col_scores[ci] += p.column_value_weight * v
    if p.column_all_of_top:
        for ti in ranked[: p.column_all_of_top]:
            for ci in engine.table_columns[ti]:
                col_scores.setdefault(ci, 0.0)
    for ci in list(col_scores):
        ti = engine.columns[ci][0]
        col_scores[ci] += p.column_table_share * scores.get(ti, 0.0) / best_table
    # the columns that join the top tables to each other (declared foreign keys)
    join_why: dict[int, str] = {}
    top_set = set(ranked[: p.join_tables])
    for ti in ranked[: p.join_tables]:
        for mine, ref, theirs in engine.joins[ti]:
            if ref not in top_set:
                continue
            weight = p.join_weight * min(scores[ti], scores[ref]) / best_table
            for ci, other in [(c, ref) for c in mine] + [(c, ti) for c in theirs]:
                col_scores[ci] = col_scores.get(ci, 0.0) + weight
                join_why.setdefault(ci, f"joins {engine.tables[other].name}")
    col_ranked = heapq.nsmallest(
        limit,
        (ci for ci in col_scores if col_scores[ci] > 0),
        key=lambda ci: (-col_scores[ci], engine.columns[ci][1]),
    )
    column_hits = []
    for ci in col_ranked:
        ti, name = engine.columns[ci]
        col = next(c for c in engine.tables[ti].columns if c.name == name)
        table = shown.get(ti, engine.tables[ti])
        why = _explain_column(engine, ci, weights, words, value_why.get(ti, []))
        if ci in join_why:
            why = [w for w in why if w != "in a matching table"] + [join_why[ci]]
        column_hits.append(
            ColumnHit(
                table=table.qualified, column=name, type=col.type, score=round(col_scores[ci], 3), why=why
            )
        )
    return SchemaSearchResult(
        query=query,
        source=src.name,
        tables=table_hits,
        columns=column_hits,
        tables_matched=len(ranked),
        truncated=len(ranked) > limit,
        value_index="used" if vindex is not None else "not built",
        elapsed_ms=round((time.perf_counter() - started) * 1000, 2),
    )


def _companions(
    engine: SearchIndex, scores: dict[int, float], qterms: list[Term], p: Params
) -> dict[int, tuple[float, int]]:
    """table -> (share, top hit) for schema-mates of the top hits whose name holds a word of the
    question itself (not a synonym): the dimension table beside a matched fact table."""
    asked = {t.term for t in qterms}
    top = sorted((ti for ti in scores if scores[ti] > 0), key=lambda ti: -scores[ti])[: p.companion_sources]
    out: dict[int, tuple[float, int]] = {}
    for src in top:
        si = engine.table_schema[src]
        if si in engine.declared_schemas:
            continue
        share = p.companion_share * scores[src]
        for ti in engine.schema_tables[si]:
            if ti == src or ti in top or not asked.intersection(engine.name_words[ti]):
                continue
            if share > out.get(ti, (0.0, src))[0]:
                out[ti] = (share, src)
    return out


def _bridges(engine: SearchIndex, scores: dict[int, float], p: Params) -> dict[int, tuple[float, list[int]]]:
    """table -> (share, the top hits it joins) for tables linked (declared or inferred) to two or more
    of the top hits: the table a query must go through to combine them. Inferred links count only
    while inferred_share is on (off: name-inferred links are not trusted at all)."""
    top = sorted((ti for ti in scores if scores[ti] > 0), key=lambda ti: -scores[ti])[: p.bridge_top]
    top_set = set(top)
    out: dict[int, tuple[float, list[int]]] = {}
    for ti in range(len(engine.tables)):
        if engine.table_schema[ti] in engine.declared_schemas:
            continue  # declared foreign keys: the FK share already lifts such tables
        links = (
            engine.neighbours[ti] | engine.inferred[ti].keys() if p.inferred_share else engine.neighbours[ti]
        )
        linked = [nb for nb in links if nb in top_set and nb != ti]
        if len(linked) < 2:
            continue
        linked.sort(key=lambda nb: -scores[nb])
        mean = sum(scores[nb] for nb in linked) / len(linked)
        out[ti] = (p.bridge_share * mean * (len(linked) - 1), linked)
    return out


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
        _RESULT_PHRASES.sub(" ", query) if p.drop_result_phrases else query
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
    import bisect

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


def _cover_concepts(
    engine: SearchIndex,
    ranked: list[int],
    scores: dict[int, float],
    weights: dict[str, float],
    limit: int,
    p: Params,
) -> list[int]:
    """Greedy re-rank so the returned set covers the question's distinct words: a table's lexical
    score for a word decays with each table already picked that matches that word (a question
    needing five tables gets five different tables, not five siblings of one)."""
    pool = ranked[: max(limit * p.coverage_pool, limit)]
    contrib: dict[int, dict[str, float]] = {ti: {} for ti in pool}
    for term, qweight in weights.items():
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
            return scores[ti] - sum(v * (1 - p.coverage_decay ** covered[t]) for t, v in lex.items())

        best = max(left, key=lambda ti: (gain(ti), -pool.index(ti)))
        chosen.append(best)
        left.remove(best)
        for t in contrib[best]:
            covered[t] += 1
    return chosen + [ti for ti in ranked if ti not in set(chosen)]


def _spread_twins(
    engine: SearchIndex,
    ranked: list[int],
    scores: dict[int, float],
    weights: dict[str, float],
    limit: int,
    p: Params,
) -> tuple[list[int], dict[int, int]]:
    """Greedy re-rank: a table's score decays with each higher-ranked table of its schema that has
    nearly the same columns (see Params.twin_decay); the picked tables' scores are updated in place.
    Also returns each picked twin's first such table."""
    pool = ranked[: max(limit * p.coverage_pool, limit)]
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
    if not twins:
        return ranked, {}
    for i in twins:
        unasked = sum(1 for term in engine.name_words[pool[i]] if term not in weights)
        scores[pool[i]] *= p.twin_unasked**unasked
    seen = [0] * len(pool)  # picked twins of each pool entry so far
    first_twin: dict[int, int] = {}
    chosen: list[int] = []
    left = set(range(len(pool)))
    while left and len(chosen) < limit:
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
    return picked + [ti for ti in ranked if ti not in kept], {
        ti: t for ti, t in first_twin.items() if ti in kept
    }


def _jaccard(a: frozenset[int], b: frozenset[int]) -> float:
    """Jaccard of two column sets from their sketches: exact when both are whole, else the bottom-k
    estimate (the share of the union's smallest hashes that both hold)."""
    if len(a) < SKETCH_SIZE and len(b) < SKETCH_SIZE:
        both = len(a & b)
        return both / (len(a) + len(b) - both)
    smallest = heapq.nsmallest(SKETCH_SIZE, a | b)
    return sum(1 for h in smallest if h in a and h in b) / len(smallest)


def _quote_words(terms: list[str], words: dict[str, str]) -> str:
    # a WordNet expansion's label is already quoted: "'medication' ~ 'drug' (WordNet)"
    shown = (words.get(t, t) for t in terms)
    return ", ".join(w if w.startswith("'") else f"'{w}'" for w in shown)


# A table whose only evidence is that other tables of its schema matched. Kept, and said so: dropping
# them cost all-gold@10 0.869 -> 0.829 on Spider 2.0-Snow and 0.978 -> 0.970 on Spider 1.0 dev, because
# on warehouses the tables a question needs sit together in one schema.
SCHEMA_FILLER = "only its schema matches: other tables of {schema} match the query"


def _explain_table(
    engine: SearchIndex,
    ti: int,
    weights: dict[str, float],
    words: dict[str, str],
    values: list[tuple[float, str, str, int]],
    schema_boost: float,
    fk: tuple[float, int] | None,
    score: float,
) -> list[str]:
    why: list[str] = []
    table = engine.tables[ti]
    name_hits = [t for t in weights if t in engine.name_words[ti]]
    if name_hits:
        why.append(f"name matches {_quote_words(name_hits, words)}")
    col_hits: dict[str, list[str]] = {}
    for ci in engine.table_columns[ti]:
        for t in weights:
            if t in engine.column_words[ci] and t not in name_hits:
                col_hits.setdefault(engine.columns[ci][1], []).append(t)
    if col_hits:
        shown = sorted(col_hits.items(), key=lambda kv: -len(kv[1]))[:3]
        why.append("columns " + ", ".join(f"{c} ({_quote_words(ts, words)})" for c, ts in shown))
    comment_hits = [t for t in weights if t in engine.comment_words[ti] and t not in name_hits]
    if comment_hits:
        why.append(f"comment mentions {_quote_words(comment_hits, words)}")
    seen: set[int] = set()
    for _, stored, text, ci in values:
        if ci in seen or len(seen) >= 2:
            continue
        seen.add(ci)
        via = f" (for '{text}')" if fold(text) != fold(stored) else ""
        why.append(f"column {engine.columns[ci][1]} holds value '{stored}'{via}")
    si = engine.table_schema[ti]
    schema_hits = [t for t in weights if t in engine.schema_words[si]]
    if schema_hits:
        why.append(f"schema {table.schema_name} matches {_quote_words(schema_hits, words)}")
    elif schema_boost > 0.3 * score and not why:
        why.append(SCHEMA_FILLER.format(schema=table.schema_name))
    if fk is not None and fk[0] > 0.2 * score:
        col = engine.inferred[ti].get(fk[1])
        if col is not None:
            why.append(f"joins {engine.tables[fk[1]].name} by {col} (inferred from the name)")
        else:
            why.append(f"FK neighbour of {engine.tables[fk[1]].name}")
    return why or ["weak match"]


def _explain_column(
    engine: SearchIndex,
    ci: int,
    weights: dict[str, float],
    words: dict[str, str],
    values: list[tuple[float, str, str, int]],
) -> list[str]:
    why: list[str] = []
    ti, _name = engine.columns[ci]
    hits = [t for t in weights if t in engine.column_words[ci]]
    if hits:
        why.append(f"name matches {_quote_words(hits, words)}")
    comment = [t for t in weights if t in engine.column_comment_words[ci]]
    if comment:
        why.append(f"comment mentions {_quote_words(comment, words)}")
    for _, stored, text, vci in values:
        if vci == ci:
            via = f" (for '{text}')" if fold(text) != fold(stored) else ""
            why.append(f"holds value '{stored}'{via}")
            break
    table_hits = [t for t in weights if t in engine.name_words[ti]]
    if table_hits:
        why.append(f"table {engine.tables[ti].name} matches {_quote_words(table_hits, words)}")
    return why or ["in a matching table"]


__all__ = [
    "ColumnHit",
    "Params",
    "SchemaSearchResult",
    "SearchIndex",
    "TableHit",
    "identifier_terms",
    "search_schema",
    "stem",
    "text_terms",
]
