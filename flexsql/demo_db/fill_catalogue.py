"""Loads for what the business sells: product categories, suppliers and products."""

from __future__ import annotations

from flexsql.demo_db.literals import lit, lit_list
from flexsql.demo_db.sizes import Sizes
from flexsql.demo_db.words import (
    ADJECTIVES,
    COLORS,
    COUNTRIES,
    LEAF_CATEGORIES,
    MATERIALS,
    PARENT_CATEGORIES,
    SUPPLIER_SUFFIXES,
    SUPPLIER_WORDS,
)


def statements(s: Sizes) -> list[tuple[str, str]]:
    """(table, statement) pairs for product_categories, suppliers and products."""
    return [*_categories(), _suppliers(s), _products(s)]


def _categories() -> list[tuple[str, str]]:
    parents = "INSERT INTO product_categories VALUES " + ", ".join(
        f"({i}, {lit(n)}, NULL, {lit(d)})" for i, n, d in PARENT_CATEGORIES
    )
    # a separate statement: DuckDB checks a self-referencing key against rows already stored
    leaves = "INSERT INTO product_categories VALUES " + ", ".join(
        f"({i}, {lit(n)}, {p}, NULL)" for i, p, n, _, _ in LEAF_CATEGORIES
    )
    return [("main.product_categories", parents), ("main.product_categories", leaves)]


def _suppliers(s: Sizes) -> tuple[str, str]:
    statement = f"""
        INSERT INTO suppliers
        SELECT i,
               pick({lit_list(SUPPLIER_WORDS)}, i, 'supw') || ' ' || pick({lit_list(SUPPLIER_SUFFIXES)}, i, 'sups')
                   || CASE WHEN i > 16 THEN ' ' || pick(['Europe', 'International', 'Group', 'Holding'], i, 'supx')
                           ELSE '' END,
               pick({lit_list([c[1] for c in COUNTRIES] + ["CHN", "CHN", "VNM", "TUR", "PRT", "IND"])}, i, 'supc'),
               'orders@' || lower(pick({lit_list(SUPPLIER_WORDS)}, i, 'supw')) || '.example.com',
               5 + rn(i, 'suplt', 55)::INTEGER,
               CASE WHEN ru(i, 'suprn') < 0.2 THEN NULL ELSE round(1 + 4 * ru(i, 'supr'), 1) END
        FROM range(1, {s.suppliers} + 1) t(i)"""
    return "main.suppliers", statement


def _leaf_structs() -> str:
    """The leaf categories as a DuckDB list of structs: one pick() then gives a product its
    category, nouns and typical price together."""
    return (
        "["
        + ", ".join(
            "{" + f"'id': {cid}, 'parent': {parent}, 'nouns': {lit_list(nouns)}, 'price': {price}" + "}"
            for cid, parent, _, nouns, price in LEAF_CATEGORIES
        )
        + "]"
    )


def _products(s: Sizes) -> tuple[str, str]:
    sizes = "['XS', 'S', 'M', 'L', 'XL']"
    statement = f"""
        INSERT INTO products
        WITH b AS (
            SELECT i AS product_id, pick({_leaf_structs()}, i, 'pcat') AS leaf,
                   CASE WHEN ru(i, 'pcolcase') < 0.05 THEN initcap_color ELSE color END AS color
            FROM (SELECT i, pick({lit_list(COLORS)}, i, 'pcol') AS color,
                         upper(pick({lit_list(COLORS)}, i, 'pcol')[1]) || pick({lit_list(COLORS)}, i, 'pcol')[2:]
                             AS initcap_color
                  FROM range(1, {s.products} + 1) t(i))),
        p AS (SELECT *, greatest(0.99, round(leaf.price * (0.6 + 0.8 * ru(product_id, 'pprice'))) - 0.01)
                            AS price FROM b)
        SELECT product_id,
               upper(left(replace(pick(leaf.nouns, product_id, 'pnoun'), ' ', ''), 3)) || '-'
                   || lpad(product_id::VARCHAR, 6, '0'),
               pick({lit_list(ADJECTIVES)}, product_id, 'padj') || ' ' || pick(leaf.nouns, product_id, 'pnoun'),
               leaf.id,
               1 + rn(product_id, 'psup', {s.suppliers})::INTEGER,
               price,
               round(price * (0.35 + 0.3 * ru(product_id, 'pcost')), 2),
               CASE leaf.parent
                   WHEN 1 THEN json_object('color', color, 'size', pick({sizes}, product_id, 'psize'),
                                           'material', pick({lit_list(MATERIALS)}, product_id, 'pmat'))
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
        FROM p"""
    return "main.products", statement
