"""Optional WordNet synonyms for search_schema: 'medications' -> drug, 'pupils' -> student.

Reads the WordNet 3.0 database files (wndb(5): data.noun, index.noun, noun.exc, and the verb files
when present) from FLEXSQL_WORDNET_DIR, or from Debian's `wordnet-base` location
(/usr/share/wordnet). Without them nothing is expanded and nothing breaks. FLEXSQL_WORDNET_DIR=off
turns the expansion off even where the files exist.

The text files are 20 MB; parsing them costs seconds, so the first use writes a compact index (one
row per lemma: its synonyms, broader and narrower words in its most frequent senses) to a SQLite
file, 0600 in a 0700 folder under the cache dir, in a background thread (searches until then run
without synonyms), and every later process only looks up the few words of a question in it.

Measured beside it and not kept (benchmarks/schema_linking.py paraphrases, whole catalog, and
benchmarks/warehouse_linking.py, all-gold@10): static word vectors (WordLlama's, the one PyPI package
found that ships its vectors) as a second expansion, 0.656 -> 0.670..0.716 on the paraphrases but
0.912 -> 0.905..0.912 on Spider 2.0-Snow; a dense question-table cosine, no gain on either; WordNet
sister terms (town ~ city through municipality), 0.654 -> 0.659 and 0.912 -> 0.908; collocation
synonyms ('given name' ~ 'first name'), no change on either.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import sqlite3
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from flexsql import background

log = logging.getLogger("flexsql.search")

ENV = "FLEXSQL_WORDNET_DIR"
DEBIAN_DIR = Path("/usr/share/wordnet")
FORMAT = 2  # bump when the compact index changes shape
PARTS_OF_SPEECH = ("noun", "verb")
MAX_SENSES = 3  # WordNet lists a word's senses most frequent first; rarer ones are mostly noise here
MAX_NARROWER = 40  # per synset: 'person' has hundreds of hyponyms, none of them a synonym

# relation codes in the compact index
SYNONYM, BROADER, NARROWER = "s", "b", "n"
RELATION_NAMES = {SYNONYM: "synonym", BROADER: "broader", NARROWER: "narrower"}


@dataclass(frozen=True)
class Related:
    word: str  # the related lemma, words joined by spaces ('medicinal drug')
    relation: str  # SYNONYM, BROADER or NARROWER
    sense: int  # 0 = the word's most frequent sense
    pos: str = "n"  # the part of speech of that sense: n(oun) or v(erb)


def wordnet_dir() -> Path | None:
    """The configured WordNet folder, the Debian one when installed, else None."""
    configured = os.environ.get(ENV, "").strip()
    if configured.lower() in ("off", "0", "none", "false"):
        return None
    folder = Path(configured) if configured else DEBIAN_DIR
    return folder if (folder / "data.noun").is_file() and (folder / "index.noun").is_file() else None


# -- parsing the database files (wndb(5)) ---------------------------------------------------------------


def _lemma(text: str) -> str:
    # adjective lemmas carry a syntactic marker ('galore(ip)'); lemmas join words with '_'
    return re.sub(r"\(\w+\)$", "", text).lower()


def parse_data(
    path: Path, pos: str
) -> dict[tuple[str, str], tuple[list[str], list[tuple[str, tuple[str, str]]]]]:
    """(pos letter, offset) -> (lemmas, [(pointer symbol, (pos letter, offset))]) for one data.<pos> file."""
    letter = pos[0]
    synsets: dict[tuple[str, str], tuple[list[str], list[tuple[str, tuple[str, str]]]]] = {}
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if line.startswith("  "):  # the licence header
                continue
            fields = line.split(" | ", 1)[0].split()
            if len(fields) < 6:
                continue
            count = int(fields[3], 16)
            lemmas = [_lemma(fields[4 + 2 * i]) for i in range(count)]
            at = 4 + 2 * count
            pointers = []
            for _ in range(int(fields[at])):
                symbol, offset, target_pos = fields[at + 1], fields[at + 2], fields[at + 3]
                pointers.append((symbol, ("a" if target_pos == "s" else target_pos, offset)))
                at += 4
            synsets[(letter, fields[0])] = (lemmas, pointers)
    return synsets


def parse_index(path: Path, pos: str) -> dict[str, list[tuple[str, str]]]:
    """lemma -> its synsets, most frequent sense first, for one index.<pos> file."""
    letter = pos[0]
    senses: dict[str, list[tuple[str, str]]] = {}
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if line.startswith("  "):
                continue
            fields = line.split()
            if len(fields) < 6:
                continue
            n_synsets, n_pointers = int(fields[2]), int(fields[3])
            offsets = fields[6 + n_pointers : 6 + n_pointers + n_synsets]
            senses[fields[0].lower()] = [(letter, o) for o in offsets]
    return senses


def parse_exceptions(path: Path) -> dict[str, str]:
    """Irregular forms (noun.exc: 'mice mouse'): inflected -> base."""
    out: dict[str, str] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            parts = line.split()
            if len(parts) >= 2:
                out.setdefault(parts[0].lower(), parts[1].lower())
    return out


def relations(folder: Path) -> tuple[dict[str, list[Related]], dict[str, str]]:
    """Every lemma's related words (top senses only) and the irregular forms, from the database files."""
    synsets: dict[tuple[str, str], tuple[list[str], list[tuple[str, tuple[str, str]]]]] = {}
    senses: dict[str, list[tuple[str, str]]] = {}
    exceptions: dict[str, str] = {}
    for pos in PARTS_OF_SPEECH:
        data, index = folder / f"data.{pos}", folder / f"index.{pos}"
        if not (data.is_file() and index.is_file()):
            continue
        synsets.update(parse_data(data, pos))
        for lemma, offsets in parse_index(index, pos).items():
            senses.setdefault(lemma, []).extend(offsets)
        for inflected, base in parse_exceptions(folder / f"{pos}.exc").items():
            exceptions.setdefault(inflected, base)
    out: dict[str, list[Related]] = {}
    for lemma, offsets in senses.items():
        seen: set[str] = {lemma}
        items: list[Related] = []

        def add(
            words: list[str],
            relation: str,
            sense: int,
            pos: str,
            seen: set[str] = seen,
            items: list[Related] = items,
        ) -> None:
            for w in words:
                if w not in seen:  # each related word once, under its closest relation
                    seen.add(w)
                    items.append(Related(w.replace("_", " "), relation, sense, pos))

        by_pos: dict[str, int] = {}
        for key in offsets:  # nouns first, then verbs; each most frequent sense first
            sense = by_pos.get(key[0], 0)
            by_pos[key[0]] = sense + 1
            if sense >= MAX_SENSES or key not in synsets:
                continue
            words, pointers = synsets[key]
            add(words, SYNONYM, sense, key[0])
            for symbol, target in pointers:
                if symbol in ("@", "@i") and target in synsets:
                    add(synsets[target][0], BROADER, sense, key[0])
            narrower = [t for s, t in pointers if s in ("~", "~i") and t in synsets][:MAX_NARROWER]
            for target in narrower:
                add(synsets[target][0], NARROWER, sense, key[0])
        if items:
            out[lemma.replace("_", " ")] = items
    return out, exceptions


# -- the compact index ------------------------------------------------------------------------------------

_SCHEMA = """
CREATE TABLE IF NOT EXISTS related (word TEXT PRIMARY KEY, items TEXT) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS irregular (form TEXT PRIMARY KEY, base TEXT) WITHOUT ROWID;
"""


def _fingerprint(folder: Path) -> str:
    parts = [str(FORMAT), str(folder.resolve())]
    for name in sorted(os.listdir(folder)):
        if name.startswith(("data.", "index.")) or name.endswith(".exc"):
            st = (folder / name).stat()
            parts.append(f"{name}:{st.st_size}:{int(st.st_mtime)}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def index_file(folder: Path) -> Path:
    from flexsql.paths import cache_dir, private_dir

    return private_dir(cache_dir() / "synonyms") / f"wordnet-{_fingerprint(folder)}.sqlite"


def build_index(folder: Path, target: Path) -> Path:
    """Write the compact index for `folder` to `target` (atomically: concurrent builders are safe)."""
    from flexsql.paths import private_file

    related, exceptions = relations(folder)
    partial = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.partial")
    with contextlib.suppress(FileNotFoundError):
        partial.unlink()
    private_file(partial)
    conn = sqlite3.connect(str(partial))
    try:
        conn.executescript(_SCHEMA)
        conn.executemany(
            "INSERT INTO related VALUES (?, ?)",
            (
                (w, ";".join(f"{r.word}|{r.relation}{r.sense}{r.pos}" for r in items))
                for w, items in related.items()
            ),
        )
        conn.executemany("INSERT OR IGNORE INTO irregular VALUES (?, ?)", exceptions.items())
        conn.commit()
    finally:
        conn.close()
    os.replace(partial, target)
    return target


# Regular inflections (WordNet's morphy rules for nouns and verbs): suffix -> replacement.
_SUFFIXES = (
    ("ies", "y"),
    ("ses", "s"),
    ("xes", "x"),
    ("zes", "z"),
    ("ches", "ch"),
    ("shes", "sh"),
    ("men", "man"),
    ("es", "e"),
    ("es", ""),
    ("s", ""),
    ("ied", "y"),
    ("ed", "e"),
    ("ed", ""),
    ("ing", "e"),
    ("ing", ""),
)


class WordNet:
    """Lookups in one compact index file. Thread-safe; each lookup is one indexed SQLite read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        self._cache: dict[str, list[Related]] = {}

    def base_forms(self, word: str) -> list[str]:
        """The word and its candidate dictionary forms ('medications' -> medication)."""
        word = word.lower()
        out = [word]
        for suffix, repl in _SUFFIXES:
            if word.endswith(suffix) and len(word) - len(suffix) + len(repl) >= 3:
                out.append(word[: len(word) - len(suffix)] + repl)
        return out

    def related(self, word: str) -> list[Related]:
        """Related words of the first dictionary form of `word` that WordNet knows ([] if none)."""
        key = word.lower().strip()
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        forms = self.base_forms(key) if " " not in key else [key]
        with self._lock:
            irregular = self._conn.execute("SELECT base FROM irregular WHERE form = ?", (key,)).fetchone()
            if irregular:
                forms.insert(1, irregular[0])
            marks = ",".join("?" * len(forms))
            rows = dict(self._conn.execute(f"SELECT word, items FROM related WHERE word IN ({marks})", forms))
        items: list[Related] = []
        for form in forms:
            if form in rows:
                for part in rows[form].split(";"):
                    lemma, _, code = part.rpartition("|")
                    items.append(Related(lemma, code[0], int(code[1:-1]), code[-1]))
                break
        if len(self._cache) > 50_000:
            self._cache.clear()
        self._cache[key] = items
        return items

    def close(self) -> None:
        with self._lock:
            self._conn.close()


_LOADED: dict[Path, WordNet] = {}
_BUILDS: dict[Path, threading.Thread] = {}
_FAILED: dict[Path, str] = {}  # folder -> why its files could not be read (never retried in this process)
_LOAD_LOCK = threading.Lock()


def _build(folder: Path, target: Path) -> None:
    try:
        build_index(folder, target)
    except (OSError, ValueError, IndexError, sqlite3.Error) as exc:  # unreadable or not WordNet's format
        _FAILED[folder] = f"{type(exc).__name__}: {exc}"
        log.warning(
            "WordNet files in %s could not be read (%s); search_schema runs without synonyms",
            folder,
            _FAILED[folder],
        )


def wordnet(folder: Path | None = None, wait: bool = False) -> WordNet | None:
    """The process's WordNet lookups, or None without WordNet. The first use on a machine builds
    the compact index in a background thread (seconds) and answers None until it is there, so no
    search stalls on it; `wait` blocks until it is built instead (benchmarks, tests)."""
    folder = folder or wordnet_dir()
    if folder is None or folder in _FAILED:
        return None
    with _LOAD_LOCK:
        loaded = _LOADED.get(folder)
        if loaded is not None:
            return loaded
        target = index_file(folder)
        if target.exists():
            loaded = _LOADED[folder] = WordNet(target)
            return loaded
        thread = _BUILDS.get(folder)
        if thread is None or not thread.is_alive():
            thread = _BUILDS[folder] = background.start(_build, folder, target, name="flexsql-wordnet-index")
    if not wait:
        return None
    thread.join()
    return None if folder in _FAILED or not target.exists() else wordnet(folder)


@lru_cache(maxsize=1)
def _phrase_pattern() -> re.Pattern[str]:
    return re.compile(r"[A-Za-z]+(?:-[A-Za-z]+)*")


def question_phrases(text: str, max_words: int = 3) -> list[tuple[str, int, int]]:
    """(phrase, first word, word count) for every run of up to `max_words` words, longest first:
    WordNet has collocations ('motion picture', 'grade point average') as lemmas of their own."""
    words = [w.lower() for w in _phrase_pattern().findall(text)]
    out: list[tuple[str, int, int]] = []
    for n in range(max_words, 0, -1):
        for i in range(len(words) - n + 1):
            out.append((" ".join(words[i : i + n]), i, n))
    return out


__all__ = [
    "BROADER",
    "NARROWER",
    "SYNONYM",
    "Related",
    "WordNet",
    "build_index",
    "question_phrases",
    "relations",
    "wordnet",
    "wordnet_dir",
]
