"""The words of questions and identifiers, as search_schema compares them.

Identifiers are split (camelCase, snake_case, digits, glued words like `firstname`), common database
abbreviations are expanded (qty -> quantity, fname -> first name), stopwords dropped and words
Porter-stemmed, so that a question's `located` meets a column's `location`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from flexsql.tools.values.normalize import fold, split_identifier

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
def approximate(value: str, word: str) -> bool:
    """Whether a value found for a question's word is another word ('France' for 'French'), not the
    word itself in another case, spacing or number ('stores' -> 'store')."""
    value_stems = [stem(w) for w in fold(value).split()]
    word_stems = [stem(w) for w in fold(word).split()]
    return value_stems != word_stems


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
# Kept over PyStemmer/snowballstemmer: their porter differs on 38 of 10,888 Spider and Spider 2.0-Snow
# words ('as' -> 'a', 'histology' -> 'histologi'), and with a cache per word the speed (7.6 against
# 1.6 us a word) costs a cold index 0.2 s at most.
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
RESULT_PHRASES = re.compile(
    r"\b(?:(?:sorted|ordered|ranked|arranged|grouped|listed)\s+(?:by|in|from|on)\b"
    r"|in\s+(?:an?\s+|the\s+)?(?:ascending|descending|alphabetical|alphabetic|increasing|decreasing|reverse|"
    r"lexicographic|chronological|numerical|numeric)?\s*(?:order|sequence)\b"
    r"|order\s+(?:of|by)\b|(?:ascending|descending)\s+order\b)",
    re.IGNORECASE,
)


def query_terms(query: str) -> list[Term]:
    """Terms of a question: result-presentation phrases dropped, then like any text."""
    return text_terms(RESULT_PHRASES.sub(" ", query))


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
