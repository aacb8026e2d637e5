"""The questions the demo answers, each with a reference SQL and the grounding it needs."""

from __future__ import annotations

from pydantic import BaseModel

from flexsql.demo_db.schema import WEB_EVENT_MONTHS


class DemoQuestion(BaseModel):
    """A natural-language question answerable on the demo database, with a reference SQL."""

    id: str
    question: str
    sql: str
    grounding: str  # the literals that must be resolved with the value tools, and why


DEMO_QUESTIONS: list[DemoQuestion] = [
    DemoQuestion(
        id="france_top_categories",
        question=(
            "Which 5 product categories had the highest net revenue from shipped orders delivered "
            "to addresses in France in 2024?"
        ),
        sql="""SELECT pc.category_name,
       ROUND(SUM(oi.quantity * oi.unit_price - oi.discount_amount), 2) AS net_revenue
FROM orders AS o
JOIN customer_addresses AS a ON a.address_id = o.ship_address_id
JOIN order_items AS oi ON oi.order_id = o.order_id
JOIN products AS p ON p.product_id = oi.product_id
JOIN product_categories AS pc ON pc.category_id = p.category_id
WHERE o.status = 'S'
  AND LOWER(TRIM(a.country)) = 'france'
  AND o.ordered_at >= TIMESTAMP '2024-01-01' AND o.ordered_at < TIMESTAMP '2025-01-01'
GROUP BY pc.category_name
ORDER BY net_revenue DESC
LIMIT 5""",
        grounding=(
            "'shipped' is the status code 'S' (order_status); France is spelled 'France', 'france', "
            "'FRANCE' and 'France ' in customer_addresses.country"
        ),
    ),
    DemoQuestion(
        id="germany_cancellations",
        question="Which 3 stores in Germany had the most cancelled orders in 2024?",
        sql="""SELECT s.store_name, COUNT(*) AS cancelled_orders
FROM orders AS o
JOIN stores AS s ON s.store_id = o.store_id
WHERE s.country_code = 'DE'
  AND o.status = 'C'
  AND o.ordered_at >= TIMESTAMP '2024-01-01' AND o.ordered_at < TIMESTAMP '2025-01-01'
GROUP BY s.store_name
ORDER BY cancelled_orders DESC, s.store_name
LIMIT 3""",
        grounding="stores keep ISO codes: Germany is 'DE'; 'cancelled' is the status code 'C'",
    ),
    DemoQuestion(
        id="signups_2024_by_month",
        question="How many customers signed up in each month of 2024?",
        sql="""SELECT STRFTIME(STRPTIME(signup_date, '%m/%d/%Y'), '%Y-%m') AS signup_month,
       COUNT(*) AS customers
FROM customers
WHERE STRPTIME(signup_date, '%m/%d/%Y') >= TIMESTAMP '2024-01-01'
  AND STRPTIME(signup_date, '%m/%d/%Y') < TIMESTAMP '2025-01-01'
GROUP BY signup_month
ORDER BY signup_month""",
        grounding="customers.signup_date is text in MM/DD/YYYY form and must be parsed before comparing",
    ),
    DemoQuestion(
        id="red_bestsellers",
        question="What were the 5 best-selling red products by units sold in 2024, excluding cancelled orders?",
        sql="""SELECT p.product_name, SUM(oi.quantity) AS units
FROM order_items AS oi
JOIN orders AS o ON o.order_id = oi.order_id
JOIN products AS p ON p.product_id = oi.product_id
WHERE LOWER(p.attributes ->> 'color') = 'red'
  AND o.status <> 'C'
  AND o.ordered_at >= TIMESTAMP '2024-01-01' AND o.ordered_at < TIMESTAMP '2025-01-01'
GROUP BY p.product_id, p.product_name
ORDER BY units DESC, p.product_name
LIMIT 5""",
        grounding="the colour lives in the JSON column products.attributes, as 'red' and sometimes 'Red'",
    ),
    DemoQuestion(
        id="web_purchases_by_month",
        question="How many purchase events did the website record in each month of 2024?",
        sql="\nUNION ALL\n".join(
            f"SELECT '{m[:4]}-{m[4:]}' AS month, COUNT(*) AS purchases FROM web.web_events_{m} "
            "WHERE event_type = 'purchase'"
            for m in WEB_EVENT_MONTHS
        )
        + "\nORDER BY month",
        grounding="web events are sharded into one table per month (web.web_events_YYYYMM); all twelve are needed",
    ),
]
