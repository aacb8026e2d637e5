"""How many rows each table gets at a given scale."""

from __future__ import annotations

import math
from dataclasses import dataclass

from flexsql.errors import InvalidArgument

FACT_ROWS_PER_SCALE = 100_000  # order_items rows at scale=1


def check_scale(scale: float) -> float:
    """`scale` as a float, refused with a hint unless it is a positive finite number: it names the
    cached file and sizes every table, so a bool, NaN or string must not slip through."""
    if (
        not isinstance(scale, int | float)
        or isinstance(scale, bool)
        or not math.isfinite(scale)
        or scale <= 0
    ):
        raise InvalidArgument(
            f"demo database scale must be a positive number, got {scale!r}; "
            "use 1 for the default (100,000 order lines) or e.g. 0.1 / 10 / 100"
        )
    return float(scale)


@dataclass(frozen=True)
class Sizes:
    order_items: int
    order_candidates: int  # orders generated before trimming to exactly `order_items` lines
    customers: int
    products: int
    stores: int
    suppliers: int
    events_per_month: int


def sizes_for(scale: float) -> Sizes:
    items = max(10, round(FACT_ROWS_PER_SCALE * scale))
    return Sizes(
        order_items=items,
        # lines per order are uniform on 1..4 (mean 2.5); 3% spare orders put running short more
        # than 13 standard deviations away at every scale (and the build checks the count)
        order_candidates=math.ceil(items / 2.5 * 1.03) + 20,
        customers=max(50, round(5_000 * scale)),
        products=max(60, round(500 * math.sqrt(scale))),
        stores=max(17, round(40 * scale**0.25)),
        suppliers=40,
        events_per_month=max(50, round(2_000 * scale)),
    )
