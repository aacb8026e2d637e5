"""A sharded family whose first shard holds only empty arrays, on every engine (issue 27).

`events_20240101` … `events_20240104`: `items` is an array of objects and `ecommerce` an object (JSON,
JSONB, VARIANT; TEXT on SQLite). The first shard's FIRST_ROWS rows (more than any "first rows" sample)
all hold `[]` and `{}`; purchases in the second and third shards hold items (`item_name`, `quantity`,
and `item_brand` only in the third) and an order (`transaction_id`, `purchase_revenue`); the last shard
is empty again. A `payload` object with WIDE_KEYS keys sits in the second shard, its most telling key
sorting last. `tally_20240101`/`tally_20240102` are a family with a text column holding JSON.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support.engines import statements_database

JSON_TYPE = {"duckdb": "JSON", "sqlite": "TEXT", "postgres": "JSONB", "snowflake": "VARIANT"}
TEXT_TYPE = {"duckdb": "VARCHAR", "sqlite": "TEXT", "postgres": "TEXT", "snowflake": "VARCHAR"}
SHARDS = ["events_20240101", "events_20240102", "events_20240103", "events_20240104"]
FIRST_ROWS = 60
WIDE_KEYS = 60
LAST_KEY = "zz_shipping_tier"  # the payload key a question names, past any first-N-keys cut
ITEM_KEYS = {"item_name", "quantity", "price", "item_brand"}


def _rows() -> dict[str, list[tuple[Any, ...]]]:
    wide = {f"k{i:02d}": f"v{i}" for i in range(WIDE_KEYS - 1)} | {LAST_KEY: "express"}
    empty: list[tuple[Any, ...]] = [(i, "page_view", [], {}, {}) for i in range(FIRST_ROWS)]
    return {
        SHARDS[0]: empty,
        SHARDS[1]: [
            (100, "page_view", [], {}, wide),
            (
                101,
                "purchase",
                [{"item_name": "Navy Tee", "quantity": 2, "price": 9.5}, {"item_name": "Cap", "quantity": 1}],
                {"transaction_id": "T-101", "purchase_revenue": 28.0},
                {},
            ),
        ],
        SHARDS[2]: [
            (
                200,
                "purchase",
                [{"item_name": "Mug", "quantity": 3, "item_brand": "Acme"}],
                {"transaction_id": "T-200", "purchase_revenue": 12.0},
                {},
            )
        ],
        SHARDS[3]: [(300, "page_view", [], {}, {})],
    }


def _json(engine: str, value: Any) -> str:
    text = "'" + json.dumps(value).replace("'", "''") + "'"
    return f"PARSE_JSON({text})" if engine == "snowflake" else text


def statements(engine: str, prefix: str = "") -> list[str]:
    j, t = JSON_TYPE[engine], TEXT_TYPE[engine]
    out = []
    for shard, rows in _rows().items():
        out.append(
            f"CREATE TABLE {prefix}{shard} (event_id INTEGER, event_name {t}, items {j}, ecommerce {j}, payload {j})"
        )
        for row in rows:
            values = [str(row[0]), f"'{row[1]}'"] + [_json(engine, v) for v in row[2:]]
            if engine == "snowflake":
                out.append(f"INSERT INTO {prefix}{shard} SELECT {', '.join(values)}")
            else:
                out.append(f"INSERT INTO {prefix}{shard} VALUES ({', '.join(values)})")
    for day, doc in (("20240101", {"region": "north", "units": 4}), ("20240102", {"region": "south"})):
        out.append(f"CREATE TABLE {prefix}tally_{day} (note {t}, body {t})")
        out.append(f"INSERT INTO {prefix}tally_{day} VALUES ('n', {_json('text', doc)})")
    return out


@contextlib.contextmanager
def nested_family_url(engine: str, directory: Path) -> Iterator[str]:
    """The URL of a database holding the events family (and the tally family) on `engine`."""
    with statements_database(engine, directory, "events", statements, snowflake=("EV_", "WEB")) as url:
        yield url
