"""The run notebook (agent/notebook.py): what stages learn, carried bounded to later stages, with
the per-plan stages' entries kept to their own plan."""

from __future__ import annotations

from flexsql.agent.notebook import ENTRY_CHARS, Notebook


def test_findings_values_and_checks_are_carried_and_plans_stay_independent() -> None:
    book = Notebook()
    book.note("classify", ["orders.status stores 'shipped'"])
    book.tool(
        "classify",
        "find_values",
        {"text": "France"},
        "find_values 'France' in shop: 2 column(s) matched\nmain.customers.country = 'France ' (4 rows; exact)",
    )
    book.tool(
        "implement", "run_query", {"sql": "SELECT count(*) FROM orders"}, "r4: 1 rows, 1 cols\nn\n105", 0
    )
    book.note("implement", ["join orders.customer_id = customers.customer_id verified"], branch=1)
    shared = book.render()
    assert shared is not None
    assert "orders.status stores 'shipped'" in shared and "main.customers.country = 'France '" in shared
    assert "find_values" not in shared  # a later stage may not offer it
    assert "r4" not in shared and "verified" not in shared  # plans' own entries are not shared
    plan0 = book.render(branch=0)
    assert plan0 is not None and "r4: 1 rows, 1 cols — SELECT count(*) FROM orders → 105" in plan0
    assert "verified" not in plan0  # plan 1's implementer's finding stays with plan 1


def test_the_notebook_is_bounded_and_keeps_the_newest_and_the_reported_first() -> None:
    book = Notebook(max_chars=1_000)
    book.note("classify", ["the reading that matters"], "reading")
    for i in range(200):
        book.tool("plan", "run_query", {"sql": f"SELECT {i}"}, f"r{i}: 1 rows, 1 cols\nx\n{i}")
    book.note("plan", ["x" * 5_000])
    text = book.render()
    assert text is not None and len(text) <= 1_100
    assert "the reading that matters" in text and "r199" in text and "r0:" not in text
    assert "older notes left out" in text
    assert max(len(line) for line in text.splitlines()) <= ENTRY_CHARS + 20


def test_described_tables_are_kept_once_and_bounded() -> None:
    book = Notebook()
    book.tool("classify", "describe_table", {"table": "orders"}, "main.orders (table)\n- order_id INTEGER")
    book.tool("classify", "describe_table", {"table": "orders"}, "changed")
    book.tool("implement", "describe_table", {"table": "items"}, "main.items", branch=0)
    assert book.described_text() == "main.orders (table)\n- order_id INTEGER"
    for i in range(20):
        book.tool("link", "describe_table", {"table": f"t{i}"}, "y" * 1_000)
    text = book.described_text(max_chars=3_000)
    assert text is not None and len(text) < 3_500 and "also described, columns not shown here: " in text
