"""The run notebook (agent/notebook.py): the facts a question's tool calls established — stored
spellings, join conditions — carried whole to the conversation's next turn, bounded."""

from __future__ import annotations

from flexsql.agent.notebook import FACT_CHARS, FACTS, Notebook

FIND = (
    "find_values 'France' in shop: 2 column(s) matched\n"
    "main.customers.country = 'France ' (4 rows; exact)\n"
    "main.suppliers.country = 'FRANCE' (2 rows; case)\n"
    "(searched 4 tables)"
)
DISTINCT = "main.orders.status (VARCHAR): 3 distinct values\nvalue | count\nshipped | 105\npending | 99\ncancelled | 96"
JOIN = (
    "main.orders.customer_id = main.customers.customer_id  [declared]\n"
    "FROM main.orders\nJOIN main.customers ON main.orders.customer_id = main.customers.customer_id"
)


def test_stored_spellings_and_join_conditions_are_carried_and_nothing_else() -> None:
    book = Notebook()
    book.tool("classify", "find_values", {"text": "France"}, FIND)
    book.tool("plan", "distinct_values", {"table": "orders", "column": "status"}, DISTINCT)
    book.tool("implement", "find_join_path", {"tables": ["orders", "customers"]}, JOIN, branch=1)
    book.tool("implement", "run_query", {"sql": "SELECT 1"}, "r1: 1 rows, 1 cols\n1\n1", branch=0)
    book.tool("classify", "find_values", {"text": "France"}, FIND)  # again: kept once
    assert book.carried() == [
        "main.customers.country = 'France ' (4 rows; exact)",
        "main.suppliers.country = 'FRANCE' (2 rows; case)",
        "orders.status values: shipped, pending, cancelled",
        "main.orders.customer_id = main.customers.customer_id [declared]",
    ]


def test_facts_are_kept_whole_or_left_out_and_bounded_in_number() -> None:
    book = Notebook()
    long_value = "x" * (FACT_CHARS + 10)
    book.tool(
        "classify", "find_values", {"text": "x"}, f"find_values 'x': 1\nmain.t.c = '{long_value}' (1 rows)"
    )
    assert book.carried() == []  # a fact cut mid-value would be a wrong fact: it is not carried
    for i in range(FACTS + 5):
        book.tool(
            "plan", "find_values", {"text": f"v{i}"}, f"find_values 'v{i}': 1\nmain.t.c = 'v{i}' (1 rows)"
        )
    carried = book.carried()
    assert len(carried) == FACTS and carried[0] == "main.t.c = 'v0' (1 rows)"


def test_described_tables_are_named_once() -> None:
    book = Notebook()
    for table in ("orders", "customers", "orders"):
        book.tool("classify", "describe_table", {"table": table}, f"main.{table} (table)")
    assert book.described == ["orders", "customers"]
