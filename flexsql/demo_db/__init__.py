"""The bundled demo database: a small retail business in DuckDB, messy the way real ones are.

`cache.demo_db_path()` builds it on first use into the user's cache directory and reuses it
after; `build.build_demo_db()` writes one anywhere. Every row is generated in SQL inside DuckDB
from `range()` and `hash(key, seed, salt)` (`fill` and the `fill_*` modules, picking from
`words`), so the content depends only on (scale, seed, generator version, DuckDB version) and
`scale=100` (10 million order lines) builds in under a minute. `schema` holds the tables and
their comments, `questions` the questions the demo answers.

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
