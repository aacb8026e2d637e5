"""The value index's SQLite file: its layout, opening it, and writing one table's entry.

Values are stored with their normalized form and word-order key (both indexed for exact lookups),
their compact key (the normalized form without spaces, kept only where it differs, so 'North Carolina',
'NorthCarolina' and 'north-carolina' meet), and a token index (postings) with a trigram index over the
token vocabulary, for prefixes, typos and words inside compounds.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from flexsql.tools.engines import TableInfo
from flexsql.tools.values.normalize import compact, normalize, sorted_key, trigrams

INDEX_VERSION = (
    "4"  # 2: emoji and other symbols are tokens; 3: compact keys (spacing-insensitive); 4: nested paths
)

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


def open_index(path: Path, source_url: str) -> sqlite3.Connection:
    """The index file, created with the current layout if missing or of an older one; private (0600)
    like everything under the cache dir, in WAL mode so readers do not wait for a build."""
    from flexsql.paths import private_file

    # SQLite gives the -wal and -shm files the database file's mode: 0600 for all three
    for extra in (
        path.with_name(path.name + "-wal"),
        path.with_name(path.name + "-shm"),
    ):
        if extra.exists():  # left by an older flexsql with the umask's mode
            private_file(extra)
    conn = sqlite3.connect(str(private_file(path)), check_same_thread=False, timeout=30)
    conn.isolation_level = None  # transactions are explicit: many tables per commit
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
    version = conn.execute("SELECT value FROM meta WHERE key='version'").fetchone()
    if version is None or version[0] != INDEX_VERSION:
        # an older layout: start over (it is a cache); its tables are dropped, their columns changed
        conn.execute("BEGIN IMMEDIATE")
        for name in ("tables", "columns", "vals", "postings", "vocab", "grams"):
            conn.execute(f"DROP TABLE IF EXISTS {name}")
        for statement in SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('version', ?)", (INDEX_VERSION,))
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('source', ?)", (source_url,))
        conn.execute("COMMIT")
    else:
        conn.executescript(SCHEMA)
    return conn


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
