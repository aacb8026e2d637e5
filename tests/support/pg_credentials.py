"""PostgreSQL catalogs that hold credentials, reached for in every spelling: the guard refuses each
(tests/tools/sql/test_guard.py) and the engine layer alone refuses the first twelve
(tests/tools/engines/test_postgres_source.py)."""

from __future__ import annotations

CREDENTIAL_QUERIES = [
    "SELECT rolname, rolpassword FROM pg_authid",
    "SELECT a.rolpassword FROM pg_authid AS a",
    "SELECT rolpassword FROM pg_catalog.pg_authid",
    'SELECT rolpassword FROM "pg_authid"',
    'SELECT rolpassword FROM pg_catalog."pg_authid"',
    "SELECT rolpassword FROM PG_AUTHID",
    "WITH r AS (SELECT * FROM pg_authid) SELECT rolpassword FROM r",
    "SELECT x FROM (SELECT rolpassword AS x FROM pg_authid) s",
    "SELECT 1 WHERE EXISTS (SELECT 1 FROM pg_authid WHERE rolpassword LIKE 'SCRAM%')",
    "SELECT (SELECT rolpassword FROM pg_authid LIMIT 1)",
    "SELECT c.oid FROM pg_class c JOIN pg_authid a ON a.oid = c.relowner",
    "SELECT * FROM pg_roles UNION ALL SELECT * FROM pg_authid",
    "SELECT passwd FROM pg_shadow",
    "SELECT umoptions FROM pg_user_mapping",
    "SELECT umoptions FROM pg_user_mappings",
    "SELECT subconninfo FROM pg_subscription",
    "SELECT stavalues1 FROM pg_statistic",
    "SELECT data FROM pg_largeobject",
    "SELECT setconfig FROM pg_db_role_setting",
    "EXPLAIN SELECT * FROM pg_authid",
    "SELECT /* c */ rolpassword FROM\npg_catalog . pg_authid",
]
