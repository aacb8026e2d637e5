"""Role-state extraction as a table: SQL -> the roles a follow-up prompt shows, and role diffs
between consecutive turns."""

from __future__ import annotations

from typing import Any

import pytest

from flexsql.agent.roles import RoleState, diff_roles, role_state


def roles(state: RoleState) -> dict[str, Any]:
    """Every role as plain values; nested queries by kind."""
    out: dict[str, Any] = {
        role: state.role_texts(role)
        for role in ("tables", "select", "filter", "join", "group", "having", "order")
    }
    out.update(
        limit=state.limit,
        distinct=state.distinct,
        set_op=state.set_op,
        nested={n.kind: roles(n.state) for n in state.nested},
    )
    return out


# (case id, SQL, dialect, expected roles; roles not named must be empty / None / False)
CASES: list[tuple[str, str, str | None, dict[str, Any]]] = [
    ("count", "SELECT count(*) FROM singer", "sqlite", {"tables": ["singer"], "select": ["count(*)"]}),
    (
        "filter string literal",
        "SELECT name FROM singer WHERE country = 'France'",
        "sqlite",
        {"tables": ["singer"], "select": ["singer.name"], "filter": ["singer.country = 'France'"]},
    ),
    (
        "filter number, flipped operands",
        "SELECT name FROM song WHERE 2020 < year",
        "duckdb",
        {"tables": ["song"], "select": ["song.name"], "filter": ["song.year > 2020"]},
    ),
    (
        "aggregates over an alias",
        "SELECT avg(t.price), max(t.price) FROM products AS t",
        "postgres",
        {"tables": ["products"], "select": ["avg(products.price)", "max(products.price)"]},
    ),
    (
        "join with aliases resolved (Spider style, mixed case)",
        "SELECT Count(*) ,  T2.FullName  FROM MODEL_LIST AS T1 JOIN CAR_MAKERS AS T2 ON T1.Maker  =  T2.Id "
        "GROUP BY T2.id HAVING count(*) >= 3",
        "sqlite",
        {
            "tables": ["model_list", "car_makers"],
            "select": ["count(*)", "car_makers.fullname"],
            "join": ["model_list.maker = car_makers.id"],
            "group": ["car_makers.id"],
            "having": ["count(*) >= 3"],
        },
    ),
    (
        "order desc and limit",
        "SELECT name FROM singer ORDER BY age DESC LIMIT 3",
        "sqlite",
        {"tables": ["singer"], "select": ["singer.name"], "order": ["singer.age desc"], "limit": "3"},
    ),
    (
        "order by a select alias and by position",
        "SELECT country, count(*) AS n FROM singer GROUP BY 1 ORDER BY n DESC, 1",
        "duckdb",
        {
            "tables": ["singer"],
            "select": ["singer.country", "count(*)"],
            "group": ["singer.country"],
            "order": ["count(*) desc", "singer.country asc"],
        },
    ),
    (
        "distinct",
        "SELECT DISTINCT country FROM singer",
        "sqlite",
        {"tables": ["singer"], "select": ["singer.country"], "distinct": True},
    ),
    (
        "count distinct is a select expression, not DISTINCT",
        "SELECT count(DISTINCT country) FROM singer",
        "sqlite",
        {"tables": ["singer"], "select": ["count(DISTINCT singer.country)"]},
    ),
    (
        "IN list, BETWEEN, LIKE, IS NULL, negations",
        "SELECT id FROM t WHERE a IN (1, 2) AND b BETWEEN 2019 AND 2021 AND c LIKE '%ab%' AND d IS NULL "
        "AND NOT e = 3 AND f NOT IN ('x') AND g NOT LIKE 'z%'",
        "sqlite",
        {
            "tables": ["t"],
            "select": ["t.id"],
            "filter": [
                "t.a in (1, 2)",
                "t.b between 2019 AND 2021",
                "t.c like '%ab%'",
                "t.d is NULL",
                "t.e <> 3",
                "t.f not in ('x')",
                "t.g not like 'z%'",
            ],
        },
    ),
    (
        "OR split into its predicates",
        "SELECT name FROM singer WHERE age < 20 OR (age > 60 AND country = 'UK')",
        "sqlite",
        {
            "tables": ["singer"],
            "select": ["singer.name"],
            "filter": ["singer.age < 20", "singer.age > 60", "singer.country = 'UK'"],
        },
    ),
    (
        "implicit join in WHERE",
        "SELECT t1.a FROM t1, t2 WHERE t1.id = t2.id AND t2.b = 1",
        "sqlite",
        {"tables": ["t1", "t2"], "select": ["t1.a"], "join": ["t1.id = t2.id"], "filter": ["t2.b = 1"]},
    ),
    (
        "left join and USING",
        "SELECT x.a FROM x LEFT JOIN y USING (id) LEFT JOIN z ON z.k = x.k",
        "duckdb",
        {
            "tables": ["x", "y", "z"],
            "select": ["x.a"],
            "join": ["left join: x.id = y.id", "left join: z.k = x.k"],
        },
    ),
    (
        "NOT IN subquery kept apart",
        "SELECT name FROM singer WHERE id NOT IN (SELECT singer_id FROM concert WHERE year > 2014)",
        "sqlite",
        {
            "tables": ["singer"],
            "select": ["singer.name"],
            "filter": ["singer.id not in (subquery 1)"],
            "nested": {
                "subquery 1": {
                    "tables": ["concert"],
                    "select": ["concert.singer_id"],
                    "filter": ["concert.year > 2014"],
                }
            },
        },
    ),
    (
        "scalar subquery in a comparison",
        "SELECT name FROM singer WHERE age > (SELECT avg(age) FROM singer)",
        "sqlite",
        {
            "tables": ["singer"],
            "select": ["singer.name"],
            "filter": ["singer.age > (subquery 1)"],
            "nested": {"subquery 1": {"tables": ["singer"], "select": ["avg(singer.age)"]}},
        },
    ),
    (
        "correlated EXISTS resolves the outer alias",
        "SELECT s.name FROM singer s WHERE NOT EXISTS (SELECT 1 FROM concert c WHERE c.singer_id = s.id)",
        "postgres",
        {
            "tables": ["singer"],
            "select": ["singer.name"],
            "filter": ["not exists (subquery 1)"],
            "nested": {
                "subquery 1": {
                    "tables": ["concert"],
                    "select": ["1"],
                    "join": ["concert.singer_id = singer.id"],
                }
            },
        },
    ),
    (
        "derived table in FROM",
        "SELECT d.c FROM (SELECT country AS c FROM singer) AS d WHERE d.c LIKE 'F%'",
        "sqlite",
        {
            "select": ["d.c"],
            "filter": ["d.c like 'F%'"],
            "nested": {"from d": {"tables": ["singer"], "select": ["singer.country"]}},
        },
    ),
    (
        "CTE",
        "WITH per AS (SELECT country, count(*) AS n FROM singer GROUP BY country) "
        "SELECT country FROM per WHERE n > 2",
        "duckdb",
        {
            "tables": ["per"],
            "select": ["per.country"],
            "filter": ["per.n > 2"],
            "nested": {
                "cte per": {
                    "tables": ["singer"],
                    "select": ["singer.country", "count(*)"],
                    "group": ["singer.country"],
                }
            },
        },
    ),
    (
        "UNION",
        "SELECT name FROM singer WHERE age < 30 UNION SELECT name FROM singer WHERE age > 50",
        "sqlite",
        {
            "tables": ["singer"],
            "select": ["singer.name"],
            "filter": ["singer.age < 30"],
            "set_op": "union",
            "nested": {
                "union": {"tables": ["singer"], "select": ["singer.name"], "filter": ["singer.age > 50"]}
            },
        },
    ),
    (
        "UNION ALL",
        "SELECT a FROM x UNION ALL SELECT b FROM y",
        "postgres",
        {
            "tables": ["x"],
            "select": ["x.a"],
            "set_op": "union all",
            "nested": {"union all": {"tables": ["y"], "select": ["y.b"]}},
        },
    ),
    (
        "INTERSECT (Spider)",
        "SELECT country FROM singer WHERE age > 40 INTERSECT SELECT country FROM singer WHERE age < 30",
        "sqlite",
        {
            "tables": ["singer"],
            "select": ["singer.country"],
            "filter": ["singer.age > 40"],
            "set_op": "intersect",
            "nested": {
                "intersect": {
                    "tables": ["singer"],
                    "select": ["singer.country"],
                    "filter": ["singer.age < 30"],
                }
            },
        },
    ),
    (
        "EXCEPT with ORDER BY / LIMIT of the whole set",
        "SELECT id FROM stadium EXCEPT SELECT stadium_id FROM concert ORDER BY 1 LIMIT 5",
        "sqlite",
        {
            "tables": ["stadium"],
            "select": ["stadium.id"],
            "set_op": "except",
            "order": ["stadium.id asc"],
            "limit": "5",
            "nested": {"except": {"tables": ["concert"], "select": ["concert.stadium_id"]}},
        },
    ),
    (
        "window function: its ORDER BY is not the query's",
        "SELECT name, rank() OVER (PARTITION BY dept ORDER BY salary DESC) AS r FROM emp ORDER BY name",
        "duckdb",
        {
            "tables": ["emp"],
            "select": ["emp.name", "rank() OVER (PARTITION BY emp.dept ORDER BY emp.salary DESC)"],
            "order": ["emp.name asc"],
        },
    ),
    (
        "quoted identifiers keep their case",
        'SELECT "Name" FROM "Singer" AS s WHERE s."Age" >= 30',
        "postgres",
        {"tables": ["Singer"], "select": ["Singer.Name"], "filter": ["Singer.Age >= 30"]},
    ),
    (
        "schema-qualified tables (Snowflake)",
        "SELECT o.total FROM sales.public.orders o WHERE o.status = 'open' LIMIT 10",
        "snowflake",
        {
            "tables": ["sales.public.orders"],
            "select": ["sales.public.orders.total"],
            "filter": ["sales.public.orders.status = 'open'"],
            "limit": "10",
        },
    ),
    (
        "unqualified columns over two tables stay unqualified",
        "SELECT name, title FROM singer JOIN song ON singer.id = song.singer_id",
        "sqlite",
        {"tables": ["singer", "song"], "select": ["name", "title"], "join": ["singer.id = song.singer_id"]},
    ),
    (
        "HAVING on an alias",
        "SELECT dept, sum(salary) AS total FROM emp GROUP BY dept HAVING total > 100",
        "duckdb",
        {
            "tables": ["emp"],
            "select": ["emp.dept", "sum(emp.salary)"],
            "group": ["emp.dept"],
            "having": ["sum(emp.salary) > 100"],
        },
    ),
    (
        "star and table star",
        "SELECT *, s.* FROM singer s",
        "sqlite",
        {"tables": ["singer"], "select": ["*", "singer.*"]},
    ),
    (
        "T-SQL TOP is a limit",
        "SELECT TOP 5 name FROM singer ORDER BY age",
        "tsql",
        {"tables": ["singer"], "select": ["singer.name"], "order": ["singer.age asc"], "limit": "5"},
    ),
]

EMPTY: dict[str, Any] = {
    "tables": [],
    "select": [],
    "filter": [],
    "join": [],
    "group": [],
    "having": [],
    "order": [],
    "limit": None,
    "distinct": False,
    "set_op": None,
    "nested": {},
}


def full(expected: dict[str, Any]) -> dict[str, Any]:
    out = {**EMPTY, **expected}
    out["nested"] = {k: full(v) for k, v in expected.get("nested", {}).items()}
    return out


@pytest.mark.parametrize(("sql", "dialect", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_role_state_table(sql: str, dialect: str | None, expected: dict[str, Any]) -> None:
    state = role_state(sql, dialect)
    assert state.error is None
    assert roles(state) == full(expected)


@pytest.mark.parametrize(
    "sql",
    [
        "SELEC name FROM singer",
        "SELECT name FROM singer WHERE (",
        "",
        "SELECT 1; SELECT 2",
        "DELETE FROM singer",
    ],
)
def test_sql_that_is_not_one_query_gives_an_empty_state_with_the_reason(sql: str) -> None:
    state = role_state(sql, "sqlite")
    assert state.error and state.empty
    assert "no role-state" in state.summary()


def test_summary_is_compact_and_shows_nested_queries() -> None:
    state = role_state(
        "SELECT T2.name, count(*) FROM concert AS T1 JOIN stadium AS T2 ON T1.stadium_id = T2.stadium_id "
        "WHERE T1.year >= 2014 AND T2.stadium_id NOT IN (SELECT stadium_id FROM closed) "
        "GROUP BY T2.name ORDER BY count(*) DESC LIMIT 1",
        "sqlite",
    )
    text = state.summary()
    assert text.splitlines()[0] == (
        "tables: concert, stadium; select: stadium.name, count(*); filter: concert.year >= 2014, "
        "stadium.stadium_id not in (subquery 1); join: concert.stadium_id = stadium.stadium_id; "
        "group: stadium.name; order: count(*) desc; limit: 1"
    )
    assert text.splitlines()[1] == "  [subquery 1] tables: closed; select: closed.stadium_id"
    assert len(text) < 400
    assert len(state.summary(max_chars=80)) == 80 and state.summary(max_chars=80).endswith("…")


BASE = "SELECT store, sum(amount) FROM sales WHERE year = 2024 GROUP BY store ORDER BY 2 DESC"


def test_diff_only_the_online_ones_adds_a_filter() -> None:
    online = BASE.replace("WHERE year = 2024", "WHERE year = 2024 AND channel = 'online'")
    diff = diff_roles(role_state(BASE, "duckdb"), role_state(online, "duckdb"))
    assert diff.added == {"filter": ["sales.channel = 'online'"]} and not diff.removed and not diff.literals
    assert diff.summary() == "filter +sales.channel = 'online'"


def test_diff_and_in_2023_changes_a_literal() -> None:
    diff = diff_roles(role_state(BASE, "duckdb"), role_state(BASE.replace("2024", "2023"), "duckdb"))
    assert not diff.added and not diff.removed
    assert [(c.column, c.op, c.old, c.new) for c in diff.literals] == [("sales.year", "=", "2024", "2023")]
    assert diff.summary() == "filter sales.year = 2024 → 2023"


def test_diff_of_structure_limit_and_nested_queries() -> None:
    prev = role_state(
        "SELECT T1.model FROM model_list AS T1 GROUP BY T1.maker ORDER BY count(*) DESC LIMIT 1", "sqlite"
    )
    cur = role_state("SELECT T1.model FROM model_list AS T1 GROUP BY T1.maker ORDER BY count(*)", "sqlite")
    diff = diff_roles(prev, cur)
    assert diff.added == {"order": ["count(*) asc"]} and diff.removed == {"order": ["count(*) desc"]}
    assert diff.changed == {"limit": ("1", None)}
    nested = diff_roles(
        role_state("SELECT a FROM x", "sqlite"),
        role_state("SELECT a FROM x WHERE a IN (SELECT b FROM y)", "sqlite"),
    )
    assert "+subquery 1" in nested.nested and nested.added == {"filter": ["x.a in (subquery 1)"]}
    same = diff_roles(role_state("select A from X", "sqlite"), role_state("SELECT a FROM x", "sqlite"))
    assert same.empty and same.summary() == "no change in roles"
