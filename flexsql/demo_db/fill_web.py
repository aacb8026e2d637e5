"""Loads for the website's analytics events, one sharded table per month of 2024."""

from __future__ import annotations

from flexsql.demo_db.schema import WEB_EVENT_MONTHS
from flexsql.demo_db.sizes import Sizes

# weights by repetition: page views are the most common event, purchases the rarest
_EVENT_TYPES = (
    "['page_view', 'page_view', 'page_view', 'page_view', 'search', 'product_view', 'product_view', "
    "'product_view', 'add_to_cart', 'add_to_cart', 'checkout', 'purchase']"
)


def statements(s: Sizes) -> list[tuple[str, str]]:
    """(table, statement) pairs for web.web_events_YYYYMM, one per month."""
    return [_month(s, month) for month in WEB_EVENT_MONTHS]


def _month(s: Sizes, month: str) -> tuple[str, str]:
    """Events spread evenly over the month; six events make a session, which keys the visitor,
    device and referrer so they agree within it."""
    start = f"TIMESTAMP '{month[:4]}-{month[4:]}-01'"
    key = f"({month}::BIGINT * 10000000 + i)"
    statement = f"""
        INSERT INTO web.web_events_{month}
        WITH e AS (
            SELECT i, {key} AS k, i // 6 AS sess,
                   pick({_EVENT_TYPES}, {key}, 'etype') AS event_type,
                   1 + least({s.products} - 1, floor({s.products} * pow(ru({key}, 'eprod'), 1.6)))::INTEGER AS prod
            FROM range({s.events_per_month}) t(i))
        SELECT i + 1,
               {start} + to_seconds(
                   ((i::DOUBLE / {s.events_per_month}) * (({start} + INTERVAL 1 MONTH)::DATE - {start}::DATE)
                    * 86400)::BIGINT),
               lower(printf('%016x', rh({month}::BIGINT * 10000000 + sess, 'esess'))),
               CASE WHEN ru({month}::BIGINT * 10000000 + sess, 'eanon') < 0.4 THEN NULL
                    ELSE 1 + rn({month}::BIGINT * 10000000 + sess, 'ecust', {s.customers}) END,
               event_type,
               CASE event_type WHEN 'page_view' THEN pick(['/', '/sale', '/new', '/stores', '/help'], k, 'epage')
                               WHEN 'search' THEN '/search'
                               WHEN 'product_view' THEN '/products/' || prod::VARCHAR
                               WHEN 'add_to_cart' THEN '/cart'
                               WHEN 'checkout' THEN '/checkout'
                               ELSE '/checkout/confirmation' END,
               CASE WHEN event_type IN ('product_view', 'add_to_cart') THEN prod END,
               pick(['desktop', 'mobile', 'mobile', 'tablet'], {month}::BIGINT * 10000000 + sess, 'edev'),
               CASE WHEN event_type = 'search'
                    THEN json_object('query', pick(['red dress', 'sneakers', 'tent', 'headphones', 'gift',
                                                    'yoga mat', 'boots', 'serum'], k, 'eq'))
                    WHEN i % 6 = 0
                    THEN json_object('referrer', pick(['google', 'instagram', 'newsletter', 'direct', 'bing'],
                                                      {month}::BIGINT * 10000000 + sess, 'eref'))
               END
        FROM e
        ORDER BY i"""
    return f"web.web_events_{month}", statement
