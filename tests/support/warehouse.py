"""A small web-analytics warehouse on every engine: daily `ga_sessions_YYYYMMDD` shards in two column sets
(2016's lack `device`) and a `ga_sessions_notes` table that is no shard, with nested JSON columns (`traffic` objects, `hits` arrays of objects).

Rows: 2 shards x 2 rows in 2016, 3 shards x 3 rows in 2017 (13 in all, 9 in 2017); traffic.source is
'(direct)' in 7 rows and 'google' in 6.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tests.support.engines import fakesnow_database, pg_schema

JSON_TYPE = {"duckdb": "JSON", "sqlite": "TEXT", "postgres": "JSONB", "snowflake": "VARIANT"}
TEXT_TYPE = {"duckdb": "VARCHAR", "sqlite": "TEXT", "postgres": "TEXT", "snowflake": "VARCHAR"}
SHARDS_2016 = ["ga_sessions_20161230", "ga_sessions_20161231"]
SHARDS_2017 = ["ga_sessions_20170101", "ga_sessions_20170102", "ga_sessions_20170103"]
TOTAL_ROWS, ROWS_2017, DIRECT_ROWS = 13, 9, 7


def _rows(shard: str, n: int, start: int) -> list[tuple[Any, ...]]:
    rows = []
    for k in range(n):
        i = start + k
        traffic = {
            "source": "(direct)" if i % 2 == 0 else "google",
            "medium": "(none)" if i % 2 == 0 else "organic",
            "adwordsClickInfo": {"page": i % 3},
        }
        hits = [{"page": {"pagePath": "/home"}, "hitNumber": 1}, {"page": {"pagePath": f"/item/{i}"}}]
        rows.append((i, "Direct" if i % 2 == 0 else "Organic Search", traffic, hits, {"browser": "Chrome"}))
    return rows


def statements(engine: str, prefix: str = "", extra: Sequence[str] = ()) -> list[str]:
    """The warehouse's DDL and rows; `extra` statements run after them (`{prefix}` names the schema)."""
    out = []
    start = 0
    for shard in SHARDS_2016 + SHARDS_2017:
        new = shard in SHARDS_2017
        n = 3 if new else 2
        j = JSON_TYPE[engine]
        cols = f"visit_id INTEGER, channel {TEXT_TYPE[engine]}, traffic {j}, hits {j}" + (
            f", device {j}" if new else ""
        )
        out.append(f"CREATE TABLE {prefix}{shard} ({cols})")
        for row in _rows(shard, n, start):
            values = [str(row[0]), f"'{row[1]}'"] + [_json(engine, v) for v in row[2 : 5 if new else 4]]
            if engine == "snowflake":
                out.append(f"INSERT INTO {prefix}{shard} SELECT {', '.join(values)}")
            else:
                out.append(f"INSERT INTO {prefix}{shard} VALUES ({', '.join(values)})")
        start += n
    # a table whose name a glob of the family would match, though it is no shard
    out.append(f"CREATE TABLE {prefix}ga_sessions_notes (note {TEXT_TYPE[engine]})")
    out.append(f"INSERT INTO {prefix}ga_sessions_notes VALUES ('kept apart')")
    out += [e.replace("{prefix}", prefix) for e in extra]
    return out


def _json(engine: str, value: Any) -> str:
    text = "'" + json.dumps(value).replace("'", "''") + "'"
    return f"PARSE_JSON({text})" if engine == "snowflake" else text


@contextlib.contextmanager
def warehouse_url(engine: str, directory: Path, extra: Sequence[str] = ()) -> Iterator[str]:
    if engine == "duckdb":
        import duckdb

        path = directory / "ga.duckdb"
        conn = duckdb.connect(str(path))
        for s in statements(engine, extra=extra):
            conn.execute(s)
        conn.close()
        yield f"duckdb:///{path}"
    elif engine == "sqlite":
        import sqlite3

        path = directory / "ga.sqlite"
        lite = sqlite3.connect(path)
        for s in statements(engine, extra=extra):
            lite.execute(s)
        lite.commit()
        lite.close()
        yield f"sqlite:///{path}"
    elif engine == "postgres":
        with pg_schema(*statements(engine, extra=extra)) as (url, _dsn):
            yield url
    elif engine == "snowflake":
        yield fakesnow_database("GA_", "WEB", lambda prefix: statements(engine, prefix, extra))
    else:
        raise ValueError(engine)
