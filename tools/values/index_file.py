"""The value index's SQLite file: its layout, opening it, and writing one table's entry.

Values are stored with their normalized form and word-order key (both indexed for exact lookups),
their compact key (the normalized form without spaces, kept only where it differs, so 'North Carolina',
'NorthCarolina' and 'north-carolina' meet), and a token index (postings) with a trigram index over the
token vocabulary, for prefixes, typos and words inside compounds.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import stat
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flexsql.tools.engines import TableInfo
from flexsql.tools.values.normalize import compact, normalize, sorted_key, trigrams

INDEX_VERSION = "5"  # 2: symbols are tokens; 3: compact keys; 4: nested paths; 5: file id and generation

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS tables (tkey TEXT PRIMARY KEY, signature TEXT, row_estimate INTEGER, built_at REAL,
                                   seconds REAL, error TEXT);
CREATE TABLE IF NOT EXISTS columns (cid INTEGER PRIMARY KEY, tkey TEXT, name TEXT, type TEXT, status TEXT,
                                    reason TEXT, sampled INTEGER, complete INTEGER, n_values INTEGER);
CREATE INDEX IF NOT EXISTS columns_tkey ON columns (tkey);
CREATE TABLE IF NOT EXISTS vals (vid INTEGER PRIMARY KEY, cid INTEGER, value TEXT, norm TEXT, skey TEXT, count INTEGER,
                                 ckey TEXT);
CREATE INDEX IF NOT EXISTS vals_norm ON vals (norm);
CREATE INDEX IF NOT EXISTS vals_skey ON vals (skey);
CREATE INDEX IF NOT EXISTS vals_cid ON vals (cid);
CREATE INDEX IF NOT EXISTS vals_ckey ON vals (ckey) WHERE ckey IS NOT NULL;
CREATE TABLE IF NOT EXISTS postings (tok TEXT, vid INTEGER, PRIMARY KEY (tok, vid)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS postings_vid ON postings (vid);
CREATE TABLE IF NOT EXISTS vocab (tok TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS grams (gram TEXT, tok TEXT, PRIMARY KEY (gram, tok)) WITHOUT ROWID;
"""
TABLES = ("meta", "tables", "columns", "vals", "postings", "vocab", "grams")

# what SQLite says when the file itself is bad, not the moment (busy, locked): the file is set aside
_DAMAGE_CODES = ("SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_CANTOPEN", "SQLITE_IOERR", "SQLITE_FORMAT")
_DAMAGE_TEXT = ("no such table", "no such column", "malformed", "not a database", "has no column")


class IndexDamaged(Exception):
    """The index file is no usable index: not a regular file, not SQLite, truncated, or missing part
    of its layout. It is a cache: the file is set aside and built again."""


def is_damage(exc: BaseException) -> bool:
    """Whether a SQLite error says the file is bad (rather than busy for a moment)."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name.startswith(_DAMAGE_CODES):
        return True
    return any(text in str(exc).lower() for text in _DAMAGE_TEXT)


def file_identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the entry at `path` without following a link; None when there is none."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


def _companions(path: Path) -> list[Path]:
    return [path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]


def _check_entries(path: Path) -> None:
    """Refuse, before anything opens them, entries that are not regular files: opening a FIFO to write
    waits for a reader forever, a directory or a link is no index (a link could point anywhere)."""
    for entry in (path, *_companions(path)):
        try:
            st = entry.lstat()
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(st.st_mode):
            kind = (
                "a directory" if stat.S_ISDIR(st.st_mode)
                else "a FIFO" if stat.S_ISFIFO(st.st_mode)
                else "a symbolic link" if stat.S_ISLNK(st.st_mode)
                else "a special file"
            )  # fmt: skip
            raise IndexDamaged(f"{entry.name} is {kind}, not a file")


def open_index(path: Path, source_url: str) -> sqlite3.Connection:
    """The index file, created with the current layout if missing or of an older one; private (0600)
    like everything under the cache dir, in WAL mode so readers do not wait for a build. Raises
    IndexDamaged when the file is no usable index (reset_index then sets it aside)."""
    from flexsql.paths import private_file

    _check_entries(path)
    for extra in _companions(path):
        if extra.exists():  # left by an older flexsql with the umask's mode
            private_file(extra)  # SQLite gives the -wal and -shm files the database file's mode
    try:
        conn = sqlite3.connect(str(private_file(path)), check_same_thread=False, timeout=30)
    except (sqlite3.Error, OSError) as exc:
        raise IndexDamaged(str(exc)) from None
    try:
        conn.isolation_level = None  # transactions are explicit: many tables per commit
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        _prepare(conn, source_url)
    except sqlite3.DatabaseError as exc:
        conn.close()
        if is_damage(exc):
            raise IndexDamaged(str(exc).splitlines()[0]) from None
        raise
    except IndexDamaged:
        conn.close()
        raise
    return conn


def _prepare(conn: sqlite3.Connection, source_url: str) -> None:
    """Create the layout in a new (or older) file; check it whole in an existing one."""
    if _version(conn) == INDEX_VERSION:
        _check_layout(conn)
        return
    # new, or an older layout: start over (it is a cache); its tables are dropped, their columns changed
    conn.execute("BEGIN IMMEDIATE")
    try:
        if _version(conn) == INDEX_VERSION:  # another process made it while this one waited for the lock
            conn.execute("COMMIT")
            _check_layout(conn)
            return
        for name in TABLES[1:]:
            conn.execute(f"DROP TABLE IF EXISTS {name}")
        for statement in SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute("DELETE FROM meta")
        conn.executemany(
            "INSERT INTO meta VALUES (?, ?)",
            [
                ("version", INDEX_VERSION),
                ("source", source_url),
                ("file_id", uuid.uuid4().hex),
                ("generation", "0"),
            ],
        )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _version(conn: sqlite3.Connection) -> str | None:
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone():
        return None
    row = conn.execute("SELECT value FROM meta WHERE key='version'").fetchone()
    return str(row[0]) if row else None


def _check_layout(conn: sqlite3.Connection) -> None:
    """Raise IndexDamaged when part of the layout is gone: a table dropped (or made again, empty)."""
    present = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    missing = [t for t in TABLES if t not in present]
    if missing:
        raise IndexDamaged(f"its table {missing[0]} is missing")
    # rows of a table dropped and made again, or emptied: the columns list values that are not there
    held = conn.execute("SELECT 1 FROM columns WHERE status = 'indexed' AND n_values > 0 LIMIT 1").fetchone()
    has_values = conn.execute("SELECT 1 FROM vals LIMIT 1").fetchone() is not None
    if held and not has_values:
        raise IndexDamaged("its values are gone while its columns list some")
    worded = conn.execute("SELECT 1 FROM vals WHERE trim(norm) != '' LIMIT 1").fetchone()
    if worded and not conn.execute("SELECT 1 FROM postings LIMIT 1").fetchone():
        raise IndexDamaged("its word index is gone while it holds values")
    if not conn.execute("SELECT 1 FROM meta WHERE key = 'file_id'").fetchone():
        raise IndexDamaged("its file id is missing")


def file_key(conn: sqlite3.Connection) -> tuple[str, int]:
    """(file id, generation): which file and which committed state of it a connection reads. Every
    write commits a new generation, so views cached in memory are known to be current or not."""
    rows = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('file_id', 'generation')").fetchall())
    return str(rows.get("file_id", "")), int(rows.get("generation") or 0)


def commit(conn: sqlite3.Connection) -> None:
    """Commit a write transaction as a new generation (readers then drop their cached views)."""
    conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")
    conn.execute("COMMIT")


def reset_index(path: Path, seen: tuple[int, int] | None) -> bool:
    """Set the damaged index at `path` aside (as `<name>.damaged`, replacing an earlier one; its -wal and
    -shm are removed), unless another thread or process did already: `seen` is the identity of the
    entry found damaged. Returns whether this call set it aside. Serialized across processes by a lock
    file beside it."""
    with _file_lock(path.with_name(path.name + ".lock")):
        if seen is not None and file_identity(path) != seen:
            return False  # replaced meanwhile: the new file is someone's fresh index
        aside = path.with_name(path.name + ".damaged")
        _remove(aside)
        for extra in _companions(path):
            _remove(extra)
        with contextlib.suppress(FileNotFoundError):
            os.rename(path, aside)
        return True


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on `path` (created 0600) for the block; none where the platform has
    none or the entry is no regular file (the identity check alone then guards a reset)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    flags = os.O_CREAT | os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError:
        yield
        return
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            yield
            return
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def store_table(
    db: sqlite3.Connection,
    table: TableInfo,
    signature: str,
    columns: list[dict[str, Any]],
    vocab: set[str],
    seconds: float,
) -> None:
    """Replace one table's entry (columns, values, postings, new tokens and their trigrams) inside a
    savepoint, so a failure leaves the previous entry whole. `vocab`, the tokens already in the
    file, gains the new ones."""
    key = table.qualified
    added: set[str] = set()
    db.execute("SAVEPOINT one_table")
    try:
        old = [r[0] for r in db.execute("SELECT cid FROM columns WHERE tkey = ?", (key,))]
        if old:
            marks = ",".join("?" * len(old))
            db.execute(
                f"DELETE FROM postings WHERE vid IN (SELECT vid FROM vals WHERE cid IN ({marks}))", old
            )
            db.execute(f"DELETE FROM vals WHERE cid IN ({marks})", old)
            db.execute("DELETE FROM columns WHERE tkey = ?", (key,))
        for entry in columns:
            values = entry["values"]
            cur = db.execute(
                "INSERT INTO columns (tkey, name, type, status, reason, sampled, complete, n_values) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    entry["name"],
                    entry["type"],
                    entry["status"],
                    entry["reason"],
                    int(entry["sampled"]),
                    int(entry["complete"]),
                    len(values),
                ),
            )
            cid = cur.lastrowid
            if not values:
                continue
            rows = []
            for value, count in values:
                norm = normalize(value)
                ckey = compact(norm)
                rows.append((cid, value, norm, sorted_key(norm), count, ckey if ckey != norm else None))
            first = db.execute("SELECT coalesce(max(vid), 0) + 1 FROM vals").fetchone()[0]
            db.executemany(
                "INSERT INTO vals (vid, cid, value, norm, skey, count, ckey) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(first + i, *r) for i, r in enumerate(rows)],
            )
            postings = []
            new_tokens = set()
            for i, (_, _, norm, _, _, _) in enumerate(rows):
                for tok in set(norm.split()):
                    postings.append((tok, first + i))
                    if tok not in vocab and tok not in added:
                        new_tokens.add(tok)
            db.executemany("INSERT OR IGNORE INTO postings VALUES (?, ?)", postings)
            if new_tokens:
                db.executemany("INSERT OR IGNORE INTO vocab VALUES (?)", [(t,) for t in new_tokens])
                db.executemany(
                    "INSERT OR IGNORE INTO grams VALUES (?, ?)",
                    [(g, t) for t in new_tokens for g in trigrams(t)],
                )
                added.update(new_tokens)
        db.execute(
            "INSERT OR REPLACE INTO tables VALUES (?, ?, ?, ?, ?, NULL)",
            (key, signature, table.row_estimate, time.time(), round(seconds, 3)),
        )
        vocab.update(added)
    except BaseException:
        db.execute("ROLLBACK TO one_table")
        raise
    finally:
        db.execute("RELEASE one_table")
