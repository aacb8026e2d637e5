"""Loads for the sales: order status codes, promotions, orders, order lines, payments and returns."""

from __future__ import annotations

from flexsql.demo_db.literals import lit, lit_list
from flexsql.demo_db.sizes import Sizes
from flexsql.demo_db.words import ORDER_NOTES, RETURN_COMMENTS, STATUS_CODES


def statements(s: Sizes) -> list[tuple[str, str]]:
    """(table, statement) pairs for order_status, promotions, orders, order_items, payments, returns.

    The orders statements leave a temporary table `_orders` (order ids with their line counts)
    that order_items reads; the build drops it.
    """
    return [_order_status(), _promotions(), *_orders(s), _order_items(s), _payments(), _returns()]


def _order_status() -> tuple[str, str]:
    return (
        "main.order_status",
        "INSERT INTO order_status VALUES "
        + ", ".join(f"({lit(c)}, {lit(n)}, {lit(d)})" for c, n, d in STATUS_CODES),
    )


def _promotions() -> tuple[str, str]:
    # one promotion per month over 2023–2024, a week or two long, so windows never overlap
    season_names = (
        "['Winter sale', 'Winter sale', 'Spring sale', 'Spring sale', 'Spring sale', 'Summer sale', "
        "'Summer sale', 'Summer sale', 'Autumn sale', 'Autumn sale', 'Black Friday', 'Christmas']"
    )
    statement = f"""
        INSERT INTO promotions
        WITH m AS (SELECT i, (DATE '2023-01-01' + to_months(i - 1)::INTERVAL)::DATE AS month_start
                   FROM range(1, 25) t(i))
        SELECT i,
               upper(strftime(month_start, '%b%y')) || pick(['SAVE', 'DEAL', 'PROMO', 'SALE'], i, 'prcode')
                   || CASE WHEN i % 5 = 0 THEN 'APP' ELSE '' END,
               {season_names}[month(month_start)] || ' ' || year(month_start)::VARCHAR,
               (5 + 5 * rn(i, 'prpct', 5))::DECIMAL(4,1),
               month_start + rn(i, 'prstart', 10)::INTEGER,
               month_start + rn(i, 'prstart', 10)::INTEGER + 6 + rn(i, 'prlen', 8)::INTEGER,
               CASE WHEN i % 5 = 0 THEN 'app' WHEN i % 7 = 0 THEN 'web' END
        FROM m"""
    return "main.promotions", statement


def _orders(s: Sizes) -> list[tuple[str, str]]:
    # Orders: ids increase with time over 2023–2024 (about 2.5 lines each); candidates are trimmed
    # so that order_items has exactly s.order_items rows.
    span_s = 2 * 365 * 86400
    est_orders = s.order_items / 2.5
    candidates = f"""
        CREATE TEMP TABLE _orders AS
        WITH o AS (
            SELECT i AS order_id, 1 + rn(i, 'olines', 4) AS n_lines FROM range(1, {s.order_candidates} + 1) t(i)),
        w AS (SELECT *, sum(n_lines) OVER (ORDER BY order_id ROWS UNBOUNDED PRECEDING) - n_lines AS first_item
              FROM o)
        SELECT * FROM w WHERE first_item < {s.order_items}"""
    orders = f"""
        INSERT INTO orders
        WITH b AS (
            SELECT o.order_id,
                   1 + least({s.customers} - 1, floor({s.customers} * pow(ru(o.order_id, 'ocust'), 1.3)))::BIGINT
                       AS customer_id,
                   least(TIMESTAMP '2024-12-31 23:59:59',
                         TIMESTAMP '2023-01-01' + to_seconds(
                             (o.order_id / {est_orders!r} * {span_s} + ru(o.order_id, 'ojit') * 3600)::BIGINT))
                       AS ordered_at,
                   CASE WHEN ru(o.order_id, 'ochan') < 0.45 THEN 'store'
                        WHEN ru(o.order_id, 'ochan') < 0.8 THEN 'web' ELSE 'app' END AS channel
            FROM _orders o),
        c AS (
            SELECT b.*, cu.home_store_id,
                   CASE WHEN ordered_at >= TIMESTAMP '2024-12-20' AND ru(order_id, 'opend') < 0.7 THEN 'P'
                        WHEN ru(order_id, 'ostat') < 0.09 THEN 'C'
                        WHEN ru(order_id, 'ostat') < 0.16 THEN 'R'
                        WHEN ru(order_id, 'ostat') < 0.17 THEN 'P'
                        ELSE 'S' END AS status
            FROM b JOIN customers cu USING (customer_id))
        SELECT c.order_id, c.customer_id,
               CASE WHEN c.channel <> 'store' THEN 1
                    WHEN ru(c.order_id, 'ostore') < 0.8 THEN c.home_store_id
                    ELSE 2 + rn(c.order_id, 'ostore2', {s.stores - 1})::INTEGER END,
               c.ordered_at, c.status, c.channel,
               CASE WHEN c.channel <> 'store' THEN 2 * c.customer_id - 1 END,
               CASE WHEN p.promotion_id IS NOT NULL AND ru(c.order_id, 'opromo') < 0.5 THEN p.promotion_id END,
               CASE WHEN c.channel = 'store' THEN NULL
                    WHEN ru(c.order_id, 'oshipfree') < 0.4 THEN 0
                    ELSE pick([3.99, 4.99, 5.99, 9.99], c.order_id, 'oship') END,
               CASE WHEN c.channel <> 'store' AND ru(c.order_id, 'onote') < 0.05
                    THEN pick({lit_list(ORDER_NOTES)}, c.order_id, 'ont') END
        FROM c
        LEFT JOIN promotions p  -- promotion i runs inside month i: an equi-join, not a range join
               ON p.promotion_id = (year(c.ordered_at) - 2023) * 12 + month(c.ordered_at)
              AND c.ordered_at::DATE BETWEEN p.starts_on AND p.ends_on
              AND (p.channel IS NULL OR p.channel = c.channel)
        ORDER BY c.order_id"""
    return [("main.orders", candidates), ("main.orders", orders)]


def _order_items(s: Sizes) -> tuple[str, str]:
    statement = f"""
        INSERT INTO order_items
        WITH l AS (
            SELECT o.order_id, o.first_item + line AS order_item_id, line + 1 AS line_number, pr.discount_pct
            FROM (SELECT o.*, unnest(range(o.n_lines)) AS line FROM _orders o) o
            JOIN orders od USING (order_id)
            LEFT JOIN promotions pr ON pr.promotion_id = od.promotion_id
            WHERE o.first_item + line < {s.order_items}),
        q AS (
            SELECT l.*,
                   1 + least({s.products} - 1, floor({s.products} * pow(ru(order_item_id, 'iprod'), 1.6)))::INTEGER
                       AS product_id,
                   CASE WHEN ru(order_item_id, 'iqty') < 0.7 THEN 1
                        ELSE 2 + rn(order_item_id, 'iqty2', 4)::INTEGER END AS quantity
            FROM l)
        SELECT q.order_item_id + 1, q.order_id, q.line_number, q.product_id, q.quantity,
               CASE WHEN ru(q.order_item_id, 'iprice') < 0.1 THEN round(p.list_price * 0.8, 2)
                    ELSE p.list_price END AS unit_price,
               coalesce(round(q.quantity * unit_price * q.discount_pct / 100, 2), 0)
        FROM q JOIN products p USING (product_id)
        ORDER BY q.order_item_id"""
    return "main.order_items", statement


def _payments() -> tuple[str, str]:
    methods_online = "['credit_card', 'credit_card', 'Credit Card', 'CARD', 'paypal', 'PayPal', 'apple_pay']"
    statement = f"""
        INSERT INTO payments
        WITH t AS (
            SELECT o.order_id, o.channel, o.ordered_at,
                   sum(i.quantity * i.unit_price - i.discount_amount) + coalesce(o.shipping_cost, 0) AS total
            FROM orders o JOIN order_items i USING (order_id)
            WHERE o.status <> 'C'
            GROUP BY o.order_id, o.channel, o.ordered_at, o.shipping_cost),
        s AS (
            SELECT t.*, k, ru(order_id, 'paysplit') < 0.05 AS split
            FROM t, range(2) r(k)),
        m AS (
            SELECT s.*,
                   CASE WHEN split AND k = 0 THEN pick(['gift_card', 'Gift Card'], order_id, 'pgc')
                        WHEN channel = 'store' THEN pick(['cash', 'CARD', 'card', 'Credit Card'], order_id, 'pms')
                        ELSE pick({methods_online}, order_id, 'pmo') END AS method
            FROM s
            WHERE k = 0 OR split)
        SELECT row_number() OVER (ORDER BY order_id, k),
               order_id,
               method,
               CASE WHEN NOT split THEN total
                    WHEN k = 0 THEN round(total * 0.3, 2)
                    ELSE total - round(total * 0.3, 2) END,
               ordered_at + to_seconds(CASE WHEN channel = 'store' THEN 0 ELSE 5 + rn(order_id, 'ppaid', 600) END),
               CASE WHEN lower(method) IN ('credit_card', 'credit card', 'card') AND ru(order_id, 'pl4') < 0.9
                    THEN lpad(rn(2 * order_id + k, 'plast4', 10000)::VARCHAR, 4, '0') END
        FROM m
        ORDER BY order_id, k"""
    return "main.payments", statement


def _returns() -> tuple[str, str]:
    statement = f"""
        INSERT INTO returns
        WITH r AS (
            SELECT i.order_item_id, i.quantity * i.unit_price - i.discount_amount AS net, o.ordered_at
            FROM order_items i JOIN orders o USING (order_id)
            WHERE o.status = 'R' AND (i.line_number = 1 OR ru(i.order_item_id, 'rline') < 0.4))
        SELECT row_number() OVER (ORDER BY order_item_id),
               order_item_id,
               (ordered_at + to_days(5 + rn(order_item_id, 'rdays', 30)::INTEGER))::DATE,
               pick(['DAMAGED', 'WRONG_SIZE', 'WRONG_SIZE', 'NOT_AS_DESCRIBED', 'CHANGED_MIND', 'CHANGED_MIND', 'LATE'],
                    order_item_id, 'rreason'),
               pick({lit_list(RETURN_COMMENTS)}, order_item_id, 'rcomment'),
               CASE WHEN ru(order_item_id, 'rpend') < 0.05 THEN NULL ELSE net END
        FROM r
        ORDER BY order_item_id"""
    return "main.returns", statement
