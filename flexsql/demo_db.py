"""The bundled demo database: a small retail business in DuckDB, messy the way real ones are.

`demo_db_path()` builds it on first use into the user's cache directory and reuses it after;
`build_demo_db()` writes one anywhere. Every row is generated in SQL inside DuckDB from
`range()` and `hash(key, seed, salt)`, so the content depends only on (scale, seed, generator
version, DuckDB version) and `scale=100` (10 million order lines) builds in under a minute.

What makes it a fair exercise for an agent, on purpose:
- codes vs names: order status codes ('S', 'P', 'C', 'R') with a code table; ISO country codes
  in `stores` and `suppliers` (ISO-3) but country *names* in `customer_addresses`;
- messy spellings: 'France', 'france', 'FRANCE', 'France ' (trailing space), 'UK' for
  'United Kingdom'; cities in mixed case; payment methods as 'credit_card', 'Credit Card', 'CARD';
- NULLs where real systems leave them (emails, phones, the online store's city, refunds…);
- a date kept as text ('03/15/2024') in `customers.signup_date`;
- a JSON column (`products.attributes`) and free-text notes;
- a family of sharded monthly tables `web.web_events_202401` … `web_events_202412`.
"""

from __future__ import annotations

import contextlib
import math
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from flexsql.errors import InvalidArgument
from flexsql.paths import cache_dir

# Bump whenever the generated content or schema changes: the cached file name carries it, so
# users get a rebuild instead of a stale database.
GENERATOR_VERSION = 1
DEFAULT_SEED = 42
FACT_ROWS_PER_SCALE = 100_000  # order_items rows at scale=1
WEB_EVENT_MONTHS = [f"2024{m:02d}" for m in range(1, 13)]

# -- word lists (deterministic picks by hash index) ----------------------------------------------

FIRST_NAMES = [
    "Emma",
    "Liam",
    "Olivia",
    "Noah",
    "Ava",
    "Lucas",
    "Mia",
    "Hugo",
    "Chloé",
    "Léa",
    "Louis",
    "Jules",
    "Sofia",
    "Mateo",
    "Lucía",
    "Pablo",
    "Giulia",
    "Marco",
    "Francesca",
    "Luca",
    "Hannah",
    "Felix",
    "Lena",
    "Jonas",
    "Sophie",
    "Max",
    "Anna",
    "Paul",
    "Oliver",
    "Amelia",
    "Harry",
    "Isla",
    "George",
    "James",
    "Charlotte",
    "William",
    "Benjamin",
    "Grace",
    "Daan",
    "Sanne",
    "Ruben",
    "Fleur",
    "Noor",
    "Emily",
    "Jack",
    "Ethan",
    "Chiara",
    "Mohammed",
    "Yasmine",
    "Aiko",
    "Chen",
    "Priya",
    "Arjun",
]
LAST_NAMES = [
    "Martin",
    "Bernard",
    "Dubois",
    "Durand",
    "Lefèvre",
    "Moreau",
    "Laurent",
    "Müller",
    "Schmidt",
    "Schneider",
    "Fischer",
    "Weber",
    "Meyer",
    "Wagner",
    "García",
    "Fernández",
    "López",
    "Martínez",
    "Rossi",
    "Russo",
    "Ferrari",
    "Esposito",
    "Bianchi",
    "Smith",
    "Jones",
    "Taylor",
    "Brown",
    "Williams",
    "Wilson",
    "Johnson",
    "Davies",
    "O'Brien",
    "O'Connor",
    "de Jong",
    "Jansen",
    "de Vries",
    "van den Berg",
    "Peeters",
    "Janssens",
    "Maes",
    "Miller",
    "Davis",
    "Anderson",
    "Thomas",
    "Lee",
    "Nguyen",
    "Kowalski",
    "Novak",
    "Silva",
    "Santos",
    "Khan",
    "Tanaka",
    "Wang",
]
# (ISO-2, ISO-3, name, spelling variants found in hand-typed addresses, region_id, cities)
COUNTRIES = [
    (
        "FR",
        "FRA",
        "France",
        ["france", "FRANCE", "France "],
        1,
        ["Paris", "Lyon", "Marseille", "Toulouse", "Bordeaux", "Lille", "Nantes"],
    ),
    (
        "BE",
        "BEL",
        "Belgium",
        ["belgium", "BELGIUM", "Belgique"],
        1,
        ["Brussels", "Antwerp", "Ghent", "Liège"],
    ),
    (
        "NL",
        "NLD",
        "Netherlands",
        ["netherlands", "The Netherlands", "Holland"],
        1,
        ["Amsterdam", "Rotterdam", "Utrecht", "The Hague", "Eindhoven"],
    ),
    (
        "DE",
        "DEU",
        "Germany",
        ["germany", "GERMANY", "Deutschland"],
        2,
        ["Berlin", "Munich", "Hamburg", "Cologne", "Frankfurt", "Stuttgart", "Düsseldorf"],
    ),
    (
        "ES",
        "ESP",
        "Spain",
        ["spain", "SPAIN", "España"],
        3,
        ["Madrid", "Barcelona", "Valencia", "Seville", "Bilbao"],
    ),
    (
        "IT",
        "ITA",
        "Italy",
        ["italy", "ITALY", "Italia"],
        3,
        ["Rome", "Milan", "Naples", "Turin", "Florence", "Bologna"],
    ),
    (
        "GB",
        "GBR",
        "United Kingdom",
        ["UK", "united kingdom", "Great Britain"],
        4,
        ["London", "Manchester", "Birmingham", "Leeds", "Glasgow", "Bristol", "Edinburgh"],
    ),
    (
        "US",
        "USA",
        "United States",
        ["USA", "united states", "U.S."],
        5,
        ["New York", "Los Angeles", "Chicago", "Houston", "Seattle", "Boston", "Austin", "Denver"],
    ),
]
REGIONS = [
    (1, "WEU", "Western Europe"),
    (2, "CEU", "Central Europe"),
    (3, "SEU", "Southern Europe"),
    (4, "UKI", "UK & Ireland"),
    (5, "NAM", "North America"),
]
STREET_WORDS = [
    "Oak",
    "Maple",
    "Station",
    "Church",
    "Market",
    "Mill",
    "Park",
    "River",
    "King",
    "Queen",
    "Victoria",
    "Harbour",
    "Garden",
    "Bridge",
    "Castle",
    "Lake",
    "Elm",
    "Cedar",
    "High",
    "Bay",
]
STREET_KINDS = ["Street", "Road", "Avenue", "Lane", "Boulevard", "Way", "Place"]
ADJECTIVES = [
    "Classic",
    "Essential",
    "Premium",
    "Everyday",
    "Urban",
    "Vintage",
    "Eco",
    "Ultra",
    "Compact",
    "Deluxe",
    "Sport",
    "Soft",
    "Pro",
    "Lite",
    "Signature",
    "Heritage",
    "Nordic",
    "Coastal",
]
COLORS = ["red", "blue", "black", "white", "green", "grey", "navy", "beige", "pink", "yellow"]
MATERIALS = ["cotton", "wool", "polyester", "linen", "leather", "bamboo", "recycled nylon", "denim"]
# parent categories: (id, name, description)
PARENT_CATEGORIES = [
    (1, "Apparel", "Clothing for women, men and children"),
    (2, "Footwear", "Shoes, boots and sandals"),
    (3, "Home & Kitchen", "Cookware, bedding and decoration"),
    (4, "Electronics", "Audio, phone accessories and smart home devices"),
    (5, "Sports & Outdoors", "Camping, fitness and cycling gear"),
    (6, "Beauty", "Skincare, fragrance and hair care"),
]
# leaf categories: (id, parent id, name, product nouns, typical price)
LEAF_CATEGORIES = [
    (7, 1, "T-Shirts", ["T-Shirt", "Tee", "Polo Shirt"], 25),
    (8, 1, "Jeans", ["Jeans", "Denim Pants", "Slim Jeans"], 70),
    (9, 1, "Jackets", ["Jacket", "Parka", "Windbreaker"], 140),
    (10, 1, "Dresses", ["Dress", "Sundress", "Wrap Dress"], 80),
    (11, 2, "Sneakers", ["Sneakers", "Trainers", "Running Shoes"], 95),
    (12, 2, "Boots", ["Boots", "Chelsea Boots", "Hiking Boots"], 150),
    (13, 2, "Sandals", ["Sandals", "Flip-Flops", "Slides"], 35),
    (14, 3, "Cookware", ["Frying Pan", "Saucepan", "Dutch Oven"], 60),
    (15, 3, "Bedding", ["Duvet Cover", "Pillow", "Sheet Set"], 55),
    (16, 3, "Decor", ["Vase", "Scented Candle", "Picture Frame"], 30),
    (17, 4, "Headphones", ["Headphones", "Earbuds", "Headset"], 120),
    (18, 4, "Phone Accessories", ["Phone Case", "Charger", "Power Bank"], 30),
    (19, 4, "Smart Home", ["Smart Plug", "Smart Bulb", "Doorbell Camera"], 65),
    (20, 5, "Camping", ["Tent", "Sleeping Bag", "Camping Stove"], 110),
    (21, 5, "Fitness", ["Yoga Mat", "Dumbbell Set", "Resistance Bands"], 45),
    (22, 5, "Cycling", ["Bike Helmet", "Bike Light", "Water Bottle"], 40),
    (23, 6, "Skincare", ["Moisturizer", "Serum", "Sunscreen"], 28),
    (24, 6, "Fragrance", ["Eau de Parfum", "Body Mist", "Eau de Toilette"], 75),
    (25, 6, "Hair Care", ["Shampoo", "Conditioner", "Hair Oil"], 18),
]
SUPPLIER_WORDS = [
    "Atlas",
    "Nordwind",
    "Sunrise",
    "Bluebird",
    "Ironwood",
    "Alpine",
    "Meridian",
    "Lumen",
    "Cascade",
    "Orchard",
    "Granite",
    "Silverline",
    "Harbor",
    "Pioneer",
    "Everest",
    "Willow",
]
SUPPLIER_SUFFIXES = ["Trading Co.", "GmbH", "S.A.", "Ltd", "Inc.", "S.r.l.", "B.V.", "Sourcing"]
CUSTOMER_NOTES = [
    "prefers delivery after 6pm",
    "VIP - handle with care",
    "asked not to receive catalogs",
    "address verified by phone",
    "frequent returner",
    "corporate account",
    "gift wrapping requested",
    "duplicate account merged 2023",
    "speaks French only",
    "disputed a charge once",
]
ORDER_NOTES = [
    "leave at the door",
    "call before delivery",
    "gift - no invoice in box",
    "deliver to neighbour if absent",
    "customer requested express",
    "fragile!!",
    "ring twice",
    "back entrance",
    "address corrected by support",
]
RETURN_COMMENTS = [
    "too small",
    "colour not as on the website",
    "arrived broken",
    "changed my mind",
    "ordered twice by mistake",
    "quality lower than expected",
    "too big",
    "late delivery, no longer needed",
    None,
]
STATUS_CODES = [
    ("P", "Pending", "Placed, payment authorised, not yet shipped"),
    ("S", "Shipped", "Left the warehouse or was handed over in store"),
    ("C", "Cancelled", "Cancelled before shipping; no payment captured"),
    ("R", "Returned", "Shipped, then returned in whole or in part"),
]


# -- the questions the demo answers ------------------------------------------------------------


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


# -- schema: tables, columns, keys and comments ------------------------------------------------


@dataclass(frozen=True)
class _Table:
    name: str  # schema-qualified
    comment: str | None
    columns: list[tuple[str, str, str | None]]  # (name, type with inline constraints, comment)
    constraints: tuple[str, ...] = ()


def _web_events_table(month: str) -> _Table:
    label = f"{month[:4]}-{month[4:]}"
    return _Table(
        f"web.web_events_{month}",
        f"Website and app analytics events for {label} (one table per month, identical columns)",
        [
            ("event_id", "BIGINT NOT NULL", "Event id, unique within the month"),
            ("event_ts", "TIMESTAMP NOT NULL", "When the event happened (UTC)"),
            ("session_id", "VARCHAR NOT NULL", "Browser session (hex)"),
            ("customer_id", "BIGINT", "Logged-in customer; NULL for anonymous visitors"),
            (
                "event_type",
                "VARCHAR NOT NULL",
                "page_view, search, product_view, add_to_cart, checkout or purchase",
            ),
            ("page_url", "VARCHAR", "Path of the page"),
            ("product_id", "INTEGER", "Product shown or added, when there is one"),
            ("device", "VARCHAR", "desktop, mobile or tablet"),
            ("properties", "JSON", "Extra event properties (referrer, search terms, campaign) as JSON"),
        ],
    )


SCHEMA: list[_Table] = [
    _Table(
        "main.regions",
        "Sales regions that group the countries stores operate in",
        [
            ("region_id", "INTEGER PRIMARY KEY", "Region id"),
            ("region_code", "VARCHAR NOT NULL", "Three-letter internal code"),
            ("region_name", "VARCHAR NOT NULL", "Region name"),
        ],
    ),
    _Table(
        "main.stores",
        "Physical stores plus the single online store (store_type 'online')",
        [
            ("store_id", "INTEGER PRIMARY KEY", "Store id"),
            ("store_name", "VARCHAR NOT NULL", "Display name"),
            ("store_type", "VARCHAR NOT NULL", "flagship, mall, outlet or online"),
            ("city", "VARCHAR", "City; NULL for the online store"),
            (
                "country_code",
                "VARCHAR",
                "ISO 3166-1 alpha-2 country code ('FR', 'DE', …); NULL for the online store",
            ),
            ("region_id", "INTEGER REFERENCES main.regions(region_id)", "Sales region"),
            ("opened_on", "DATE", "Opening date"),
            ("square_meters", "INTEGER", "Sales floor area; NULL for the online store"),
            ("manager_name", "VARCHAR", None),
        ],
    ),
    _Table(
        "main.customers",
        "Customer accounts",
        [
            ("customer_id", "BIGINT PRIMARY KEY", "Customer id"),
            ("first_name", "VARCHAR NOT NULL", None),
            ("last_name", "VARCHAR NOT NULL", None),
            ("email", "VARCHAR", "Contact email; not always given, case as typed"),
            ("phone", "VARCHAR", "Phone number as typed"),
            ("signup_date", "VARCHAR", "Sign-up date as text in MM/DD/YYYY form (legacy CRM export)"),
            ("birth_year", "INTEGER", "Year of birth, if the customer gave it"),
            ("loyalty_tier", "VARCHAR", "Gold, Silver or Bronze; NULL when not a loyalty member"),
            (
                "home_store_id",
                "INTEGER REFERENCES main.stores(store_id)",
                "Store the customer signed up at or shops at most",
            ),
            ("marketing_opt_in", "BOOLEAN", "Agreed to receive marketing email"),
            ("notes", "VARCHAR", "Free-text notes by customer service"),
        ],
    ),
    _Table(
        "main.customer_addresses",
        "Shipping and billing addresses, typed in by customers",
        [
            ("address_id", "BIGINT PRIMARY KEY", "Address id"),
            ("customer_id", "BIGINT NOT NULL REFERENCES main.customers(customer_id)", "Owner of the address"),
            ("address_type", "VARCHAR NOT NULL", "shipping or billing"),
            ("street", "VARCHAR", "Street line"),
            ("city", "VARCHAR", "City as typed (case varies)"),
            ("postal_code", "VARCHAR", "Postal code as typed"),
            (
                "country",
                "VARCHAR",
                "Country name as typed: spelling and case vary ('France', 'FRANCE', 'UK', …)",
            ),
            ("is_default", "BOOLEAN", "Default address of its type"),
        ],
    ),
    _Table(
        "main.product_categories",
        "Two-level product category tree",
        [
            ("category_id", "INTEGER PRIMARY KEY", "Category id"),
            ("category_name", "VARCHAR NOT NULL", "Category name"),
            (
                "parent_category_id",
                "INTEGER REFERENCES main.product_categories(category_id)",
                "Parent category; NULL for top-level categories",
            ),
            ("description", "VARCHAR", None),
        ],
    ),
    _Table(
        "main.suppliers",
        "Vendors the products are bought from",
        [
            ("supplier_id", "INTEGER PRIMARY KEY", "Supplier id"),
            ("supplier_name", "VARCHAR NOT NULL", "Legal name"),
            ("country_iso3", "VARCHAR", "ISO 3166-1 alpha-3 country code of the supplier ('FRA', 'DEU', …)"),
            ("contact_email", "VARCHAR", None),
            ("lead_time_days", "INTEGER", "Typical days from purchase order to delivery"),
            ("rating", "DECIMAL(2,1)", "Buyer rating 1.0–5.0; NULL when not yet rated"),
        ],
    ),
    _Table(
        "main.products",
        "Product catalogue (leaf categories only)",
        [
            ("product_id", "INTEGER PRIMARY KEY", "Product id"),
            ("sku", "VARCHAR NOT NULL", "Stock keeping unit"),
            ("product_name", "VARCHAR NOT NULL", "Display name"),
            (
                "category_id",
                "INTEGER NOT NULL REFERENCES main.product_categories(category_id)",
                "Leaf category",
            ),
            ("supplier_id", "INTEGER REFERENCES main.suppliers(supplier_id)", "Supplier"),
            ("list_price", "DECIMAL(10,2) NOT NULL", "Current list price in EUR"),
            ("unit_cost", "DECIMAL(10,2)", "Purchase cost per unit in EUR"),
            (
                "attributes",
                "JSON",
                "Product attributes as JSON: color, size, material, … (keys depend on the category)",
            ),
            ("launched_on", "DATE", "Date the product went on sale"),
            ("is_discontinued", "BOOLEAN", "No longer sold"),
        ],
    ),
    _Table(
        "main.order_status",
        "Code table for orders.status",
        [
            ("status_code", "VARCHAR PRIMARY KEY", "One-letter code stored in orders.status"),
            ("status_name", "VARCHAR NOT NULL", "Readable name"),
            ("description", "VARCHAR", None),
        ],
    ),
    _Table(
        "main.promotions",
        "Marketing promotions; an order carries at most one",
        [
            ("promotion_id", "INTEGER PRIMARY KEY", "Promotion id"),
            ("promo_code", "VARCHAR NOT NULL", "Code customers type at checkout"),
            ("promo_name", "VARCHAR", None),
            ("discount_pct", "DECIMAL(4,1) NOT NULL", "Percent off every line of the order"),
            ("starts_on", "DATE NOT NULL", "First day (inclusive)"),
            ("ends_on", "DATE NOT NULL", "Last day (inclusive)"),
            ("channel", "VARCHAR", "web or app when limited to one channel; NULL for every channel"),
        ],
    ),
    _Table(
        "main.orders",
        "Customer orders, one row per order (2023–2024)",
        [
            ("order_id", "BIGINT PRIMARY KEY", "Order id (increases with time)"),
            (
                "customer_id",
                "BIGINT NOT NULL REFERENCES main.customers(customer_id)",
                "Customer who placed it",
            ),
            (
                "store_id",
                "INTEGER NOT NULL REFERENCES main.stores(store_id)",
                "Store that sold it; web and app orders belong to the online store",
            ),
            ("ordered_at", "TIMESTAMP NOT NULL", "When the order was placed"),
            (
                "status",
                "VARCHAR NOT NULL REFERENCES main.order_status(status_code)",
                "Status code, see order_status",
            ),
            ("channel", "VARCHAR NOT NULL", "store, web or app"),
            (
                "ship_address_id",
                "BIGINT REFERENCES main.customer_addresses(address_id)",
                "Delivery address; NULL for in-store purchases",
            ),
            ("promotion_id", "INTEGER REFERENCES main.promotions(promotion_id)", "Promotion applied, if any"),
            ("shipping_cost", "DECIMAL(8,2)", "Shipping charged to the customer in EUR"),
            ("notes", "VARCHAR", "Delivery instructions typed by the customer"),
        ],
    ),
    _Table(
        "main.order_items",
        "Order lines: the sales fact table",
        [
            ("order_item_id", "BIGINT PRIMARY KEY", "Order line id"),
            ("order_id", "BIGINT NOT NULL REFERENCES main.orders(order_id)", "Order"),
            ("line_number", "INTEGER NOT NULL", "Line number within the order, from 1"),
            ("product_id", "INTEGER NOT NULL REFERENCES main.products(product_id)", "Product sold"),
            ("quantity", "INTEGER NOT NULL", "Units"),
            ("unit_price", "DECIMAL(10,2) NOT NULL", "Price per unit before discount, in EUR"),
            (
                "discount_amount",
                "DECIMAL(10,2) NOT NULL",
                "Discount on the whole line in EUR; net line revenue = quantity * unit_price - discount_amount",
            ),
        ],
    ),
    _Table(
        "main.payments",
        "Payments captured for orders (split payments give two rows)",
        [
            ("payment_id", "BIGINT PRIMARY KEY", "Payment id"),
            ("order_id", "BIGINT NOT NULL REFERENCES main.orders(order_id)", "Order paid"),
            ("payment_method", "VARCHAR", "Method as recorded by each payment provider (spelling varies)"),
            ("amount", "DECIMAL(12,2) NOT NULL", "Amount captured in EUR"),
            ("paid_at", "TIMESTAMP", "Capture time"),
            ("card_last4", "VARCHAR", "Last four digits for card payments"),
        ],
    ),
    _Table(
        "main.returns",
        "Returned order lines",
        [
            ("return_id", "BIGINT PRIMARY KEY", "Return id"),
            (
                "order_item_id",
                "BIGINT NOT NULL REFERENCES main.order_items(order_item_id)",
                "Order line returned",
            ),
            ("returned_on", "DATE NOT NULL", "Date the parcel came back"),
            (
                "reason_code",
                "VARCHAR NOT NULL",
                "DAMAGED, WRONG_SIZE, NOT_AS_DESCRIBED, CHANGED_MIND or LATE",
            ),
            ("customer_comment", "VARCHAR", "What the customer wrote, if anything"),
            ("refund_amount", "DECIMAL(10,2)", "Amount refunded in EUR; NULL while pending"),
        ],
    ),
    *[_web_events_table(m) for m in WEB_EVENT_MONTHS],
]


# -- sizes -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Sizes:
    order_items: int
    order_candidates: int  # orders generated before trimming to exactly `order_items` lines
    customers: int
    products: int
    stores: int
    suppliers: int
    events_per_month: int


def _sizes(scale: float) -> _Sizes:
    items = max(10, round(FACT_ROWS_PER_SCALE * scale))
    return _Sizes(
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


# -- SQL helpers -------------------------------------------------------------------------------


def _lit(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def _list(values: list) -> str:
    return "[" + ", ".join(_lit(v) for v in values) + "]"


def _macros(seed: int) -> list[str]:
    # Temporary macros: the pseudo-random primitives, not persisted into the file.
    return [
        f"CREATE TEMP MACRO rh(k, salt) AS hash(k, {seed}, salt)",
        "CREATE TEMP MACRO ru(k, salt) AS (rh(k, salt) % 1000000)::DOUBLE / 1000000.0",
        "CREATE TEMP MACRO rn(k, salt, n) AS (rh(k, salt) % n)::BIGINT",
        "CREATE TEMP MACRO pick(arr, k, salt) AS arr[1 + (rh(k, salt) % len(arr))::BIGINT]",
    ]


def _ddl(table: _Table) -> tuple[list[str], list[str]]:
    """(statements before loading, statements after loading) for one table.

    A primary key is added after the rows are in: building the index in one pass is cheaper than
    checking it row by row. A table whose key a column of its own references keeps it inline.
    """
    self_referenced = any(f"REFERENCES {table.name}(" in typ for _, typ, _ in table.columns)
    pk = [name for name, typ, _ in table.columns if "PRIMARY KEY" in typ]
    defer = bool(pk) and not self_referenced
    cols = [
        f"{name} {typ.replace('PRIMARY KEY', 'NOT NULL') if defer else typ}" for name, typ, _ in table.columns
    ]
    before = [f"CREATE TABLE {table.name} ({', '.join(cols + list(table.constraints))})"]
    if table.comment:
        before.append(f"COMMENT ON TABLE {table.name} IS {_lit(table.comment)}")
    for name, _, comment in table.columns:
        if comment:
            before.append(f"COMMENT ON COLUMN {table.name}.{name} IS {_lit(comment)}")
    after = [f"ALTER TABLE {table.name} ADD PRIMARY KEY ({', '.join(pk)})"] if defer else []
    return before, after


def _leaf_structs() -> str:
    return (
        "["
        + ", ".join(
            "{" + f"'id': {cid}, 'parent': {parent}, 'nouns': {_list(nouns)}, 'price': {price}" + "}"
            for cid, parent, _, nouns, price in LEAF_CATEGORIES
        )
        + "]"
    )


def _fill(s: _Sizes) -> list[tuple[str, str]]:
    """(table, statement) pairs that load each table, in foreign-key order.

    Randomness is `rh(key, salt)` with a distinct salt per use, so columns stay independent.
    """
    first, last = _list(FIRST_NAMES), _list(LAST_NAMES)
    sql: list[tuple[str, str]] = []

    def add(table: str, statement: str) -> None:
        sql.append((table, statement))

    add(
        "main.regions",
        "INSERT INTO regions VALUES " + ", ".join(f"({i}, {_lit(c)}, {_lit(n)})" for i, c, n in REGIONS),
    )

    # store 1 is the online store; physical stores cycle through the countries so every country
    # has stores even at small scales
    n_countries = len(COUNTRIES)
    country_list = (
        "["
        + ", ".join(
            "{" + f"'iso2': {_lit(c[0])}, 'region': {c[4]}, 'cities': {_list(c[5])}" + "}" for c in COUNTRIES
        )
        + "]"
    )
    add(
        "main.stores",
        "INSERT INTO stores VALUES (1, 'Online Store', 'online', NULL, NULL, NULL, DATE '2015-03-01', NULL, "
        "'Digital Team')",
    )
    add(
        "main.stores",
        f"""
        INSERT INTO stores
        WITH base AS (
            SELECT i AS store_id, {country_list}[1 + ((i - 2) % {n_countries})] AS c
            FROM range(2, {s.stores} + 1) t(i))
        SELECT store_id,
               city || ' ' || pick(['Centre', 'Central', 'Mall', 'Station', 'Old Town', 'Park', 'Outlet Village'],
                                   store_id, 'sname') || CASE WHEN store_id > {n_countries * 3}
                                                              THEN ' ' || store_id::VARCHAR ELSE '' END,
               CASE WHEN store_id <= {n_countries + 1} THEN 'flagship'
                    ELSE pick(['mall', 'mall', 'outlet', 'flagship'], store_id, 'stype') END,
               city, c.iso2, c.region,
               DATE '2008-01-01' + rn(store_id, 'sopen', 5000)::INTEGER,
               300 + rn(store_id, 'sqm', 40) * 50,
               pick({first}, store_id, 'smf') || ' ' || pick({last}, store_id, 'sml')
        FROM (SELECT *, pick(c.cities, store_id, 'scity') AS city FROM base)""",
    )

    tiers = "['Gold', 'Silver', 'Silver', 'Bronze', 'Bronze', 'Bronze']"
    add(
        "main.customers",
        f"""
        INSERT INTO customers
        SELECT i AS customer_id,
               pick({first}, i, 'cf') AS fn,
               pick({last}, i, 'cl') AS ln,
               CASE WHEN ru(i, 'cemail') < 0.08 THEN NULL
                    WHEN ru(i, 'cecase') < 0.05 THEN upper(fn || '.' || replace(ln, ' ', '') || '@' ||
                         pick(['gmail.com', 'outlook.com', 'yahoo.fr', 'web.de', 'icloud.com'], i, 'cdom'))
                    ELSE lower(replace(fn, ' ', '') || '.' || replace(replace(ln, ' ', ''), '''', '')
                         || rn(i, 'cenum', 100)::VARCHAR || '@' ||
                         pick(['gmail.com', 'outlook.com', 'yahoo.fr', 'web.de', 'icloud.com'], i, 'cdom')) END,
               CASE WHEN ru(i, 'cphone') < 0.3 THEN NULL
                    ELSE '+' || (10 + rn(i, 'cpcc', 80))::VARCHAR || ' ' || (100000000 + rn(i, 'cpn', 899999999))::VARCHAR
               END,
               strftime(DATE '2019-01-01' + rn(i, 'csign', 2192)::INTEGER, '%m/%d/%Y'),
               CASE WHEN ru(i, 'cbirth') < 0.15 THEN NULL ELSE 1945 + rn(i, 'cby', 60)::INTEGER END,
               CASE WHEN ru(i, 'ctier') < 0.45 THEN NULL ELSE pick({tiers}, i, 'ctn') END,
               2 + rn(i, 'chome', {s.stores - 1})::INTEGER,
               ru(i, 'copt') < 0.55,
               CASE WHEN ru(i, 'cnote') < 0.06 THEN pick({_list(CUSTOMER_NOTES)}, i, 'cnt') END
        FROM range(1, {s.customers} + 1) t(i)""",
    )

    # Customers mostly live in their home store's country (stores cycle through COUNTRIES, so the
    # store id gives the country index); each has a shipping address (id 2k-1), 40% also a billing
    # address (id 2k).
    countries_full = (
        "["
        + ", ".join(
            "{" + f"'country': {_lit(c[2])}, 'variants': {_list(c[3])}, 'cities': {_list(c[5])}" + "}"
            for c in COUNTRIES
        )
        + "]"
    )
    add(
        "main.customer_addresses",
        f"""
        INSERT INTO customer_addresses
        WITH g AS (
            SELECT customer_id, k,
                   {countries_full}[CASE WHEN ru(customer_id, 'acountry') < 0.85
                                         THEN 1 + (home_store_id - 2) % {n_countries}
                                         ELSE 1 + rn(customer_id, 'acountry2', {n_countries}) END] AS place
            FROM customers, range(2) r(k)
            WHERE k = 0 OR ru(customer_id, 'abill') < 0.4),
        p AS (SELECT *, pick(place.cities, customer_id, 'acity') AS city FROM g)
        SELECT 2 * customer_id - 1 + k,
               customer_id,
               CASE WHEN k = 0 THEN 'shipping' ELSE 'billing' END,
               (1 + rn(customer_id, 'anum', 200))::VARCHAR || ' ' || pick({_list(STREET_WORDS)}, customer_id, 'asw')
                   || ' ' || pick({_list(STREET_KINDS)}, customer_id, 'ask'),
               CASE WHEN ru(2 * customer_id + k, 'acase') < 0.12 THEN lower(city)
                    WHEN ru(2 * customer_id + k, 'acase') < 0.18 THEN upper(city)
                    ELSE city END,
               CASE WHEN ru(customer_id, 'apost') < 0.04 THEN NULL
                    ELSE lpad(rn(customer_id, 'apc', 99999)::VARCHAR, 5, '0') END,
               CASE WHEN ru(2 * customer_id + k, 'aspell') < 0.7 THEN place.country
                    ELSE pick(place.variants, 2 * customer_id + k, 'avar') END,
               k = 0 OR ru(customer_id, 'adef') < 0.9
        FROM p
        ORDER BY 1""",
    )

    add(
        "main.product_categories",
        "INSERT INTO product_categories VALUES "
        + ", ".join(f"({i}, {_lit(n)}, NULL, {_lit(d)})" for i, n, d in PARENT_CATEGORIES),
    )
    # a separate statement: DuckDB checks a self-referencing key against rows already stored
    add(
        "main.product_categories",
        "INSERT INTO product_categories VALUES "
        + ", ".join(f"({i}, {_lit(n)}, {p}, NULL)" for i, p, n, _, _ in LEAF_CATEGORIES),
    )

    add(
        "main.suppliers",
        f"""
        INSERT INTO suppliers
        SELECT i,
               pick({_list(SUPPLIER_WORDS)}, i, 'supw') || ' ' || pick({_list(SUPPLIER_SUFFIXES)}, i, 'sups')
                   || CASE WHEN i > 16 THEN ' ' || pick(['Europe', 'International', 'Group', 'Holding'], i, 'supx')
                           ELSE '' END,
               pick({_list([c[1] for c in COUNTRIES] + ["CHN", "CHN", "VNM", "TUR", "PRT", "IND"])}, i, 'supc'),
               'orders@' || lower(pick({_list(SUPPLIER_WORDS)}, i, 'supw')) || '.example.com',
               5 + rn(i, 'suplt', 55)::INTEGER,
               CASE WHEN ru(i, 'suprn') < 0.2 THEN NULL ELSE round(1 + 4 * ru(i, 'supr'), 1) END
        FROM range(1, {s.suppliers} + 1) t(i)""",
    )

    sizes = "['XS', 'S', 'M', 'L', 'XL']"
    add(
        "main.products",
        f"""
        INSERT INTO products
        WITH b AS (
            SELECT i AS product_id, pick({_leaf_structs()}, i, 'pcat') AS leaf,
                   CASE WHEN ru(i, 'pcolcase') < 0.05 THEN initcap_color ELSE color END AS color
            FROM (SELECT i, pick({_list(COLORS)}, i, 'pcol') AS color,
                         upper(pick({_list(COLORS)}, i, 'pcol')[1]) || pick({_list(COLORS)}, i, 'pcol')[2:]
                             AS initcap_color
                  FROM range(1, {s.products} + 1) t(i))),
        p AS (SELECT *, greatest(0.99, round(leaf.price * (0.6 + 0.8 * ru(product_id, 'pprice'))) - 0.01)
                            AS price FROM b)
        SELECT product_id,
               upper(left(replace(pick(leaf.nouns, product_id, 'pnoun'), ' ', ''), 3)) || '-'
                   || lpad(product_id::VARCHAR, 6, '0'),
               pick({_list(ADJECTIVES)}, product_id, 'padj') || ' ' || pick(leaf.nouns, product_id, 'pnoun'),
               leaf.id,
               1 + rn(product_id, 'psup', {s.suppliers})::INTEGER,
               price,
               round(price * (0.35 + 0.3 * ru(product_id, 'pcost')), 2),
               CASE leaf.parent
                   WHEN 1 THEN json_object('color', color, 'size', pick({sizes}, product_id, 'psize'),
                                           'material', pick({_list(MATERIALS)}, product_id, 'pmat'))
                   WHEN 2 THEN json_object('color', color, 'size', 36 + rn(product_id, 'pshoe', 11),
                                           'waterproof', ru(product_id, 'pwp') < 0.3)
                   WHEN 3 THEN json_object('color', color, 'material',
                                           pick(['ceramic', 'cast iron', 'cotton', 'glass', 'steel'], product_id, 'phm'))
                   WHEN 4 THEN json_object('color', color, 'wireless', ru(product_id, 'pwl') < 0.6,
                                           'battery_hours', CASE WHEN ru(product_id, 'pbat') < 0.4 THEN NULL
                                                                 ELSE 4 + rn(product_id, 'pbh', 40) END)
                   WHEN 5 THEN json_object('color', color, 'weight_kg', round(0.2 + 8 * ru(product_id, 'pkg'), 1))
                   ELSE json_object('volume_ml', pick([30, 50, 100, 200, 250, 500], product_id, 'pml'),
                                    'scent', pick(['unscented', 'citrus', 'lavender', 'vanilla', 'cedar'],
                                                  product_id, 'pscent'))
               END,
               DATE '2018-01-01' + rn(product_id, 'plaunch', 2400)::INTEGER,
               ru(product_id, 'pdisc') < 0.07
        FROM p""",
    )

    add(
        "main.order_status",
        "INSERT INTO order_status VALUES "
        + ", ".join(f"({_lit(c)}, {_lit(n)}, {_lit(d)})" for c, n, d in STATUS_CODES),
    )

    # one promotion per month over 2023–2024, a week or two long, so windows never overlap
    season_names = (
        "['Winter sale', 'Winter sale', 'Spring sale', 'Spring sale', 'Spring sale', 'Summer sale', "
        "'Summer sale', 'Summer sale', 'Autumn sale', 'Autumn sale', 'Black Friday', 'Christmas']"
    )
    add(
        "main.promotions",
        f"""
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
        FROM m""",
    )

    # Orders: ids increase with time over 2023–2024 (about 2.5 lines each); candidates are trimmed
    # so that order_items has exactly s.order_items rows.
    span_s = 2 * 365 * 86400
    est_orders = s.order_items / 2.5
    add(
        "main.orders",
        f"""
        CREATE TEMP TABLE _orders AS
        WITH o AS (
            SELECT i AS order_id, 1 + rn(i, 'olines', 4) AS n_lines FROM range(1, {s.order_candidates} + 1) t(i)),
        w AS (SELECT *, sum(n_lines) OVER (ORDER BY order_id ROWS UNBOUNDED PRECEDING) - n_lines AS first_item
              FROM o)
        SELECT * FROM w WHERE first_item < {s.order_items}""",
    )
    add(
        "main.orders",
        f"""
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
                    THEN pick({_list(ORDER_NOTES)}, c.order_id, 'ont') END
        FROM c
        LEFT JOIN promotions p  -- promotion i runs inside month i: an equi-join, not a range join
               ON p.promotion_id = (year(c.ordered_at) - 2023) * 12 + month(c.ordered_at)
              AND c.ordered_at::DATE BETWEEN p.starts_on AND p.ends_on
              AND (p.channel IS NULL OR p.channel = c.channel)
        ORDER BY c.order_id""",
    )

    add(
        "main.order_items",
        f"""
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
        ORDER BY q.order_item_id""",
    )

    methods_online = "['credit_card', 'credit_card', 'Credit Card', 'CARD', 'paypal', 'PayPal', 'apple_pay']"
    add(
        "main.payments",
        f"""
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
        ORDER BY order_id, k""",
    )

    add(
        "main.returns",
        f"""
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
               pick({_list(RETURN_COMMENTS)}, order_item_id, 'rcomment'),
               CASE WHEN ru(order_item_id, 'rpend') < 0.05 THEN NULL ELSE net END
        FROM r
        ORDER BY order_item_id""",
    )

    event_types = (
        "['page_view', 'page_view', 'page_view', 'page_view', 'search', 'product_view', 'product_view', "
        "'product_view', 'add_to_cart', 'add_to_cart', 'checkout', 'purchase']"
    )
    for month in WEB_EVENT_MONTHS:
        start = f"TIMESTAMP '{month[:4]}-{month[4:]}-01'"
        key = f"({month}::BIGINT * 10000000 + i)"
        add(
            f"web.web_events_{month}",
            f"""
            INSERT INTO web.web_events_{month}
            WITH e AS (
                SELECT i, {key} AS k, i // 6 AS sess,
                       pick({event_types}, {key}, 'etype') AS event_type,
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
            ORDER BY i""",
        )
    return sql


# -- building ----------------------------------------------------------------------------------


def _check_scale(scale: float) -> float:
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


def _remove(path: Path) -> None:
    for p in (path, Path(str(path) + ".wal")):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


def build_demo_db(path: Path, scale: float = 1.0, seed: int = DEFAULT_SEED) -> Path:
    """Write the demo database to `path` (replacing any file there) and return `path`.

    The file is built under a temporary name in the same directory and renamed into place only
    once complete, so readers never see a half-written database.
    """
    import duckdb

    scale = _check_scale(scale)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InvalidArgument(f"demo database seed must be an integer, got {seed!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    sizes = _sizes(scale)
    try:
        conn = duckdb.connect(
            str(tmp), config={"autoinstall_known_extensions": False, "autoload_known_extensions": False}
        )
        try:
            conn.execute("SET enable_progress_bar = false")
            for statement in _macros(seed):
                conn.execute(statement)
            conn.execute("CREATE SCHEMA web")
            loads: dict[str, list[str]] = {}
            for table_name, statement in _fill(sizes):
                loads.setdefault(table_name, []).append(statement)
            # table by table: a referenced table has its key before any table that points at it
            for table in SCHEMA:
                before, after = _ddl(table)
                for statement in [*before, *loads.pop(table.name, []), *after]:
                    conn.execute(statement)
            if loads:
                raise RuntimeError(f"demo generator loads tables missing from SCHEMA: {sorted(loads)}")
            conn.execute("DROP TABLE _orders")
            (lines,) = conn.execute("SELECT count(*) FROM order_items").fetchone()
            if lines != sizes.order_items:  # cannot happen with the spare orders; never ship a wrong size
                raise RuntimeError(f"demo generator made {lines} order lines instead of {sizes.order_items}")
            conn.execute("CHECKPOINT")
        finally:
            conn.close()
        os.replace(tmp, path)
        with contextlib.suppress(FileNotFoundError):
            Path(str(tmp) + ".wal").unlink()
    except BaseException:
        _remove(tmp)
        raise
    return path


def _scale_label(scale: float) -> str:
    return f"{scale:.12g}".replace("+", "")


def demo_db_file_name(scale: float = 1.0) -> str:
    """The cache file name: generator version and DuckDB version are part of it, because a newer
    generator must rebuild and a file from another DuckDB version may not open."""
    import duckdb

    return f"demo-v{GENERATOR_VERSION}-scale{_scale_label(_check_scale(scale))}-duckdb{duckdb.__version__}.duckdb"


@contextlib.contextmanager
def _exclusive_lock(lock_path: Path) -> Iterator[None]:
    """A lock between processes building the same file; the atomic rename keeps a file whole even
    without it, the lock only avoids building it twice."""
    with open(lock_path, "a+b") as handle:
        try:
            import fcntl
        except ImportError:  # Windows
            import msvcrt

            handle.seek(0)
            while True:
                try:
                    msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)
                    break
                except OSError:  # LK_LOCK gives up after ~10 s; keep waiting for a long build
                    continue
            try:
                yield
            finally:
                handle.seek(0)
                msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)
            return
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def demo_db_path(scale: float = 1.0) -> Path:
    """The demo database in the cache directory, built on first use (seed 42) and reused after."""
    path = cache_dir() / demo_db_file_name(scale)
    if path.exists():
        return path
    with _exclusive_lock(path.with_name(path.name + ".lock")):
        if path.exists():  # another process built it while we waited
            return path
        # temporary files left by a build that crashed (we hold the lock: nobody else is building)
        for stale in path.parent.glob(f".{path.name}.*.tmp*"):
            with contextlib.suppress(OSError):
                stale.unlink()
        return build_demo_db(path, scale=scale, seed=DEFAULT_SEED)


def demo_url(scale: float = 1.0) -> str:
    """`duckdb:///…` URL of the cached demo database (built on first use)."""
    # the URL parser unquotes the path, so a literal '%' in the cache path must be escaped
    path = demo_db_path(scale).resolve().as_posix().replace("%", "%25")
    return "duckdb:///" + path.lstrip("/")
