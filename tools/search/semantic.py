"""Semantic evidence for search_schema: the cosine of the question with each table and column.

A table's text is its name, its schema's name, its comment and its column names ('singer (concert
singer): singer id, name, country, song name, age'), a column's its name and comment. Their vectors
(embeddings.py) are computed once per text and kept on disk in a SQLite file per model under the cache
dir (0600 in a 0700 folder), keyed by a hash of the text: a catalog that comes back, or changes a
little, re-encodes only what is new. The vectors of a catalog are gathered in a background thread when
its SearchIndex is built, so no search waits on them; searches until then rank without them.

The ranking rule that uses them is `fuse_semantic` (rules.py); its weights are in Params.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from flexsql import background
from flexsql.tools.search import embeddings
from flexsql.tools.values.normalize import split_identifier

if TYPE_CHECKING:
    from flexsql.tools.engines import TableInfo
    from flexsql.tools.search.index import SearchIndex

log = logging.getLogger("flexsql.search")

FORMAT = 1  # bump when the texts change shape: old vectors are then simply not found
TABLE_TOKENS = embeddings.MAX_TOKENS
COLUMN_TOKENS = 64
COMMENT_CHARS = 300  # of a table's comment in its text; a column's comment is cut at COLUMN_TOKENS
SAVE_EVERY = 512  # texts encoded between two writes to the store (a stopped build keeps its work)
FINISH_AT_EXIT = 64  # texts still encoded when the process exits before they are (a small catalog's)


def _words(name: str) -> str:
    return " ".join(split_identifier(name.replace("*", " ")))


def table_text(table: TableInfo, name: str | None = None) -> str:
    """'singer (concert singer): singer id, name, country': the table's words, its schema's, its
    comment's start, then its column names (a long list is cut by the model's token limit)."""
    head = _words(name or table.name)
    schema = _words(table.schema_name) if table.schema_name else ""
    if schema and schema != head:
        head += f" ({schema})"
    if table.comment:
        head += f". {table.comment.strip()[:COMMENT_CHARS]}"
    return head + ": " + ", ".join(_words(c.name) for c in table.columns)


def column_text(name: str, comment: str | None) -> str:
    words = _words(name)
    return f"{words}: {comment.strip()}" if comment and comment.strip() else words


def _key(model: embeddings.MiniLM | str, text: str) -> bytes:
    name = model if isinstance(model, str) else model.name
    return hashlib.sha1(f"{name}|{FORMAT}|{text}".encode()).digest()


class VectorStore:
    """text hash -> float16 vector, in one SQLite file per model; safe across threads and processes."""

    def __init__(self, path: Path) -> None:
        from flexsql.paths import private_file

        self.path = private_file(path)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(path), timeout=30, check_same_thread=False)
        with self._lock:
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vec BLOB) WITHOUT ROWID"
            )
            self._conn.commit()

    def get(self, keys: Sequence[bytes]) -> dict[bytes, npt.NDArray[np.float32]]:
        out: dict[bytes, npt.NDArray[np.float32]] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for key, vec in self._conn.execute(
                    f"SELECT key, vec FROM vectors WHERE key IN ({marks})", chunk
                ):
                    out[bytes(key)] = np.frombuffer(vec, dtype=np.float16).astype(np.float32)
        return out

    def put(self, items: Sequence[tuple[bytes, npt.NDArray[np.float32]]]) -> None:
        with self._lock:
            self._conn.executemany(
                "INSERT OR REPLACE INTO vectors VALUES (?, ?)",
                ((key, vec.astype(np.float16).tobytes()) for key, vec in items),
            )
            self._conn.commit()

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def store_file(model: embeddings.MiniLM | str) -> Path:
    from flexsql.paths import cache_dir, private_dir

    name = model if isinstance(model, str) else model.name
    return private_dir(cache_dir() / "embeddings") / f"{name.lower()}-v{FORMAT}.sqlite"


_STORES: dict[Path, VectorStore] = {}
_STORE_LOCK = threading.Lock()


def vector_store(model: embeddings.MiniLM) -> VectorStore:
    path = store_file(model)
    with _STORE_LOCK:
        store = _STORES.get(path)
        if store is None:
            store = _STORES[path] = VectorStore(path)
        return store


def encode_cached(
    model: embeddings.MiniLM, texts: Sequence[str], max_tokens: int, stop: Callable[[], bool] | None = None
) -> npt.NDArray[np.float32] | None:
    """Vectors of `texts` (distinct), from the store where it has them, encoded (and stored) where not;
    None when `stop` says to give up part way."""
    store = vector_store(model)
    keys = [_key(model, f"{max_tokens}|{t}") for t in texts]
    found = store.get(keys)
    out = np.zeros((len(texts), model.dim), dtype=np.float32)
    missing = []
    for i, key in enumerate(keys):
        vec = found.get(key)
        if vec is None:
            missing.append(i)
        else:
            out[i] = vec
    for start in range(0, len(missing), SAVE_EVERY):
        # a stop (the process exiting) abandons the work — except a small catalog's few texts, which
        # take a fraction of a second: a one-shot command (`flexsql call`) then leaves them stored, and
        # the next one's first search ranks with them (tables_stored)
        if stop is not None and stop() and (start or len(missing) > FINISH_AT_EXIT):
            return None
        chunk = missing[start : start + SAVE_EVERY]
        vecs = model.encode([texts[i] for i in chunk], max_tokens=max_tokens)
        out[chunk] = vecs
        store.put([(keys[i], vecs[row]) for row, i in enumerate(chunk)])
    return out


@dataclass
class CatalogVectors:
    """The vectors of one SearchIndex: a row per table (family) and per distinct column text."""

    tables: npt.NDArray[np.float32]  # (tables, dim)
    columns: npt.NDArray[np.float32]  # (distinct column texts, dim)
    column_row: npt.NDArray[np.int64]  # per column of the index: its row in `columns`
    first_column: npt.NDArray[np.int64]  # per table: its first column's index (tables with columns only)
    with_columns: npt.NDArray[np.int64]  # the tables that have columns
    seconds: float = 0.0

    def similarities(
        self, question: npt.NDArray[np.float32]
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32], npt.NDArray[np.float32] | None]:
        """(cosine per table, best column cosine per table, cosine per column of the index or None when
        the columns were not encoded: their best cosines are then 0)."""
        table_cos = self.tables @ question
        best = np.zeros(len(self.tables), dtype=np.float32)
        if not len(self.columns):
            return table_cos.astype(np.float32), best, None
        col_cos = (
            (self.columns @ question)[self.column_row] if len(self.column_row) else np.zeros(0, np.float32)
        )
        if len(self.with_columns):
            best[self.with_columns] = np.maximum.reduceat(col_cos, self.first_column)
        return table_cos.astype(np.float32), best, col_cos.astype(np.float32)


def build_vectors(
    index: SearchIndex,
    model: embeddings.MiniLM,
    stop: Callable[[], bool] | None = None,
    columns: bool | None = None,
) -> CatalogVectors | None:
    """The index's table vectors, and its column vectors when `columns` (default: when the index's
    params weigh columns; a 70k-column warehouse has tens of thousands of column texts to encode)."""
    started = time.perf_counter()
    if columns is None:
        columns = bool(index.params.semantic_column_weight)
    ttexts = _table_texts(index)
    comments = {(ti, c.name): c.comment for ti, t in enumerate(index.tables) for c in t.columns}
    ctexts_all = [column_text(name, comments.get((ti, name))) for ti, name in index.columns]
    distinct: dict[str, int] = {}
    rows = np.array([distinct.setdefault(t, len(distinct)) for t in ctexts_all], dtype=np.int64)
    tvecs = encode_cached(model, list(dict.fromkeys(ttexts)), TABLE_TOKENS, stop)
    if tvecs is None:
        return None
    trow = {t: i for i, t in enumerate(dict.fromkeys(ttexts))}
    cvecs = (
        encode_cached(model, list(distinct), COLUMN_TOKENS, stop)
        if columns
        else np.zeros((0, model.dim), np.float32)
    )
    if cvecs is None:
        return None
    starts = [cols[0] for cols in index.table_columns if cols]
    with_columns = [ti for ti, cols in enumerate(index.table_columns) if cols]
    return CatalogVectors(
        tables=tvecs[[trow[t] for t in ttexts]] if ttexts else np.zeros((0, model.dim), np.float32),
        columns=cvecs,
        column_row=rows,
        first_column=np.array(starts, dtype=np.int64),
        with_columns=np.array(with_columns, dtype=np.int64),
        seconds=time.perf_counter() - started,
    )


# -- in the background -----------------------------------------------------------------------------------

_BUILDS: dict[int, threading.Thread] = {}
_BUILD_LOCK = threading.Lock()


def _table_texts(index: SearchIndex) -> list[str]:
    names = [f[0] if f else None for f in index.family]
    return [table_text(t, n) for t, n in zip(index.tables, names, strict=True)]


def tables_stored(index: SearchIndex) -> bool:
    """Whether the on-disk store already holds every table vector of `index` (a later start on this
    catalog): then building them costs the model's load and a read, about a second, and a first search
    can wait for them. Known before the model loads, from the name the store is keyed by
    (embeddings.model_name)."""
    name = embeddings.model_name()
    if name is None or not index.tables:
        return False
    path = store_file(name)
    if not path.exists():
        return False
    keys = list({_key(name, f"{TABLE_TOKENS}|{t}") for t in _table_texts(index)})
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)) as conn:
            found = 0
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                row = conn.execute(f"SELECT count(*) FROM vectors WHERE key IN ({marks})", chunk).fetchone()
                found += int(row[0])
    except sqlite3.Error:
        return False
    return found == len(keys)


def _build_into(index: SearchIndex, columns: bool | None) -> None:
    try:
        model = embeddings.model(wait=True)
        if model is None:
            return
        index.semantic = build_vectors(
            index, model, stop=lambda: index.retired or background.exiting(), columns=columns
        )
    except (OSError, sqlite3.Error, ValueError, MemoryError) as exc:
        log.warning("search_schema: table embeddings could not be built (%s); searching without them", exc)
    finally:
        with _BUILD_LOCK:
            _BUILDS.pop(id(index), None)


def attach(
    index: SearchIndex, wait: bool | float = False, columns: bool | None = None
) -> CatalogVectors | None:
    """The index's vectors when ready; otherwise start building them in a background thread (once per
    index) and answer None, or with `wait` block until they are built (a number: at most that many
    seconds). None without a model. `columns`: see build_vectors (benchmarks that try column weights on
    one index ask for them)."""
    if index.semantic is not None or not embeddings.available():
        return index.semantic
    with _BUILD_LOCK:
        thread = _BUILDS.get(id(index))
        if thread is None and index.semantic is None and not index.semantic_started:
            index.semantic_started = True
            thread = _BUILDS[id(index)] = background.start(
                _build_into, index, columns, name="flexsql-table-embeddings"
            )
    if wait is not False and thread is not None:
        thread.join(None if wait is True else float(wait))
    return index.semantic


QUESTION_TOKENS = 64  # Params.semantic_question_tokens' default
REMEMBERED = 256
_QUESTIONS: OrderedDict[tuple[int, str], npt.NDArray[np.float32]] = OrderedDict()
_QUESTIONS_LOCK = threading.Lock()


def question_vector(query: str, max_tokens: int = QUESTION_TOKENS) -> npt.NDArray[np.float32] | None:
    """The vector of the question's first `max_tokens` tokens; the last REMEMBERED questions are kept
    (an agent repeats its searches). None while no model is loaded. (Encoding it in a thread beside the
    lexical scoring saved nothing: that scoring holds the GIL, which the encoder needs between its
    numpy calls.)"""
    key = (max_tokens, query)
    with _QUESTIONS_LOCK:
        found = _QUESTIONS.get(key)
        if found is not None:
            _QUESTIONS.move_to_end(key)
            return found
    model = embeddings.model()
    if model is None:
        return None
    vec: npt.NDArray[np.float32] = model.encode([query], max_tokens=max_tokens)[0]
    with _QUESTIONS_LOCK:
        _QUESTIONS[key] = vec
        while len(_QUESTIONS) > REMEMBERED:
            _QUESTIONS.popitem(last=False)
    return vec


def _reset_for_tests() -> None:
    with _STORE_LOCK:
        for store in _STORES.values():
            store.close()
        _STORES.clear()
    _QUESTIONS.clear()


__all__ = [
    "CatalogVectors",
    "VectorStore",
    "attach",
    "build_vectors",
    "column_text",
    "encode_cached",
    "question_vector",
    "table_text",
    "vector_store",
]
