"""Loads for where the business is and who buys from it: regions, stores, customers, addresses."""

from __future__ import annotations

from flexsql.demo_db.literals import lit, lit_list
from flexsql.demo_db.sizes import Sizes
from flexsql.demo_db.words import (
    COUNTRIES,
    CUSTOMER_NOTES,
    FIRST_NAMES,
    LAST_NAMES,
    REGIONS,
    STREET_KINDS,
    STREET_WORDS,
)


def statements(s: Sizes) -> list[tuple[str, str]]:
    """(table, statement) pairs for regions, stores, customers and customer_addresses."""
    return [_regions(), *_stores(s), _customers(s), _addresses()]


def _regions() -> tuple[str, str]:
    return (
        "main.regions",
        "INSERT INTO regions VALUES " + ", ".join(f"({i}, {lit(c)}, {lit(n)})" for i, c, n in REGIONS),
    )


def _stores(s: Sizes) -> list[tuple[str, str]]:
    # store 1 is the online store; physical stores cycle through the countries so every country
    # has stores even at small scales
    first, last = lit_list(FIRST_NAMES), lit_list(LAST_NAMES)
    n_countries = len(COUNTRIES)
    country_list = (
        "["
        + ", ".join(
            "{" + f"'iso2': {lit(c[0])}, 'region': {c[4]}, 'cities': {lit_list(c[5])}" + "}"
            for c in COUNTRIES
        )
        + "]"
    )
    online = (
        "INSERT INTO stores VALUES (1, 'Online Store', 'online', NULL, NULL, NULL, DATE '2015-03-01', NULL, "
        "'Digital Team')"
    )
    physical = f"""
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
        FROM (SELECT *, pick(c.cities, store_id, 'scity') AS city FROM base)"""
    return [("main.stores", online), ("main.stores", physical)]


def _customers(s: Sizes) -> tuple[str, str]:
    first, last = lit_list(FIRST_NAMES), lit_list(LAST_NAMES)
    tiers = "['Gold', 'Silver', 'Silver', 'Bronze', 'Bronze', 'Bronze']"
    statement = f"""
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
               CASE WHEN ru(i, 'cnote') < 0.06 THEN pick({lit_list(CUSTOMER_NOTES)}, i, 'cnt') END
        FROM range(1, {s.customers} + 1) t(i)"""
    return "main.customers", statement


def _addresses() -> tuple[str, str]:
    # Customers mostly live in their home store's country (stores cycle through COUNTRIES, so the
    # store id gives the country index); each has a shipping address (id 2k-1), 40% also a billing
    # address (id 2k).
    n_countries = len(COUNTRIES)
    countries_full = (
        "["
        + ", ".join(
            "{" + f"'country': {lit(c[2])}, 'variants': {lit_list(c[3])}, 'cities': {lit_list(c[5])}" + "}"
            for c in COUNTRIES
        )
        + "]"
    )
    statement = f"""
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
               (1 + rn(customer_id, 'anum', 200))::VARCHAR || ' ' || pick({lit_list(STREET_WORDS)}, customer_id, 'asw')
                   || ' ' || pick({lit_list(STREET_KINDS)}, customer_id, 'ask'),
               CASE WHEN ru(2 * customer_id + k, 'acase') < 0.12 THEN lower(city)
                    WHEN ru(2 * customer_id + k, 'acase') < 0.18 THEN upper(city)
                    ELSE city END,
               CASE WHEN ru(customer_id, 'apost') < 0.04 THEN NULL
                    ELSE lpad(rn(customer_id, 'apc', 99999)::VARCHAR, 5, '0') END,
               CASE WHEN ru(2 * customer_id + k, 'aspell') < 0.7 THEN place.country
                    ELSE pick(place.variants, 2 * customer_id + k, 'avar') END,
               k = 0 OR ru(customer_id, 'adef') < 0.9
        FROM p
        ORDER BY 1"""
    return "main.customer_addresses", statement
