"""The demo database's schema: tables, columns, keys and comments, and the DDL that creates them.

A change here changes the generated file: bump `cache.GENERATOR_VERSION` with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from flexsql.demo_db.literals import lit

# the sharded family web.web_events_YYYYMM: one table per month, identical columns
WEB_EVENT_MONTHS = [f"2024{m:02d}" for m in range(1, 13)]


@dataclass(frozen=True)
class Table:
    name: str  # schema-qualified
    comment: str | None
    columns: list[tuple[str, str, str | None]]  # (name, type with inline constraints, comment)
    constraints: tuple[str, ...] = ()


def _web_events_table(month: str) -> Table:
    label = f"{month[:4]}-{month[4:]}"
    return Table(
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


SCHEMA: list[Table] = [
    Table(
        "main.regions",
        "Sales regions that group the countries stores operate in",
        [
            ("region_id", "INTEGER PRIMARY KEY", "Region id"),
            ("region_code", "VARCHAR NOT NULL", "Three-letter internal code"),
            ("region_name", "VARCHAR NOT NULL", "Region name"),
        ],
    ),
    Table(
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
    Table(
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
    Table(
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
    Table(
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
    Table(
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
    Table(
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
    Table(
        "main.order_status",
        "Code table for orders.status",
        [
            ("status_code", "VARCHAR PRIMARY KEY", "One-letter code stored in orders.status"),
            ("status_name", "VARCHAR NOT NULL", "Readable name"),
            ("description", "VARCHAR", None),
        ],
    ),
    Table(
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
    Table(
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
    Table(
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
    Table(
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
    Table(
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


def ddl(table: Table) -> tuple[list[str], list[str]]:
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
        before.append(f"COMMENT ON TABLE {table.name} IS {lit(table.comment)}")
    for name, _, comment in table.columns:
        if comment:
            before.append(f"COMMENT ON COLUMN {table.name}.{name} IS {lit(comment)}")
    after = [f"ALTER TABLE {table.name} ADD PRIMARY KEY ({', '.join(pk)})"] if defer else []
    return before, after
