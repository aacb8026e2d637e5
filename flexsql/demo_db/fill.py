"""Every statement that fills the demo database, and the pseudo-random SQL macros they rely on."""

from __future__ import annotations

from flexsql.demo_db import fill_catalogue, fill_customers, fill_sales, fill_web
from flexsql.demo_db.sizes import Sizes


def macros(seed: int) -> list[str]:
    # Temporary macros: the pseudo-random primitives, not persisted into the file.
    return [
        f"CREATE TEMP MACRO rh(k, salt) AS hash(k, {seed}, salt)",
        "CREATE TEMP MACRO ru(k, salt) AS (rh(k, salt) % 1000000)::DOUBLE / 1000000.0",
        "CREATE TEMP MACRO rn(k, salt, n) AS (rh(k, salt) % n)::BIGINT",
        "CREATE TEMP MACRO pick(arr, k, salt) AS arr[1 + (rh(k, salt) % len(arr))::BIGINT]",
    ]


def fill(s: Sizes) -> list[tuple[str, str]]:
    """(table, statement) pairs that load each table, in foreign-key order.

    Randomness is `rh(key, salt)` with a distinct salt per use, so columns stay independent.
    """
    return [
        *fill_customers.statements(s),
        *fill_catalogue.statements(s),
        *fill_sales.statements(s),
        *fill_web.statements(s),
    ]
