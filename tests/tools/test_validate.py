"""validate_sql (tools/validate.py): issue kinds, a hint for single quotes, and good SQL accepted
without running it."""

from __future__ import annotations

import pytest

from flexsql.tools import validate
from flexsql.tools.validate import ValidateSql


@pytest.mark.parametrize(
    "sql, kind, expected",
    [
        ("SELECT nam FROM customer", "unknown_column", "customer.name"),
        ("SELECT * FROM customr", "unknown_table", "customer"),
        ("SELECT * FROM customer WHERE", "syntax", None),
        ("DELETE FROM customer", "refused", None),
        ('SELECT * FROM customer WHERE name = "Ann"', "unknown_column", None),
    ],
)
def test_validate_sql_reports_issue_kinds(warehouse, sql, kind, expected):
    result = validate.validate_sql(warehouse, ValidateSql(sql=sql))
    assert not result.valid and result.issues[0].kind == kind
    assert result.issues[0].message  # every issue says what is wrong
    if expected is not None:  # the suggestion a user would take
        assert expected in " ".join(result.issues[0].suggestions)
    if kind == "refused":
        assert "DELETE" in result.issues[0].message


def test_validate_sql_hints_single_quotes(warehouse):
    result = validate.validate_sql(warehouse, ValidateSql(sql='SELECT * FROM customer WHERE name = "Ann"'))
    assert any("single quotes" in h for h in result.hints)


def test_validate_sql_accepts_good_sql_without_running_it(warehouse):
    result = validate.validate_sql(
        warehouse,
        ValidateSql(
            sql="SELECT c.name, sum(i.total) FROM customer c JOIN invoice i ON i.customer_id = c.id GROUP BY 1"
        ),
    )
    assert result.valid and "engine EXPLAIN" in result.checked_by


def test_prose_is_a_syntax_issue_said_once(warehouse):
    """Was: `- refused: refused: HELLO is not allowed — this server is read-only`."""
    result = validate.validate_sql(warehouse, ValidateSql(sql="HELLO world"))
    assert not result.valid and result.issues[0].kind == "syntax"
    assert "read-only" not in result.to_text() and "refused: refused" not in result.to_text()
    delete = validate.validate_sql(warehouse, ValidateSql(sql="DELETE FROM customer")).to_text()
    assert "refused: DELETE is not allowed" in delete and "refused: refused" not in delete
