"""A real `flexsql eval --runner builtin` run whose report has something to debug: the agent talks to
a real OpenAI-compatible HTTP server (tests/support/openai_stub.py) playing a model that answers some
tasks right, repairs one after an error, answers one wrong, fails to plan one, and calls schema tools
(one call fails). Used by tests/evals/test_report_html.py and benchmarks/report_html.py."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from benchmarks.scripted_endpoint import GoldScript
from flexsql.evals.tasks import load_tasks
from tests.support.evals import make_db, run_eval
from tests.support.openai_stub import OpenAIStub, Reply, StubRequest

HOSTILE = "Which singers? </script><script>window.__pwned=1</script><img src=x onerror=window.__pwned=2>"

TASKS = [
    ("concert_singer", "How many singers are there?", "SELECT count(*) FROM singer"),  # 0: right
    (
        "concert_singer",
        "Names of singers from France, oldest first.",
        "SELECT name FROM singer WHERE country = 'France' ORDER BY age DESC",
    ),  # 1: wrong order
    (
        "concert_singer",
        "Concerts per year.",
        "SELECT year, count(*) FROM concert GROUP BY year",
    ),  # 2: repaired
    (
        "concert_singer",
        "Average age per country.",
        "SELECT country, avg(age) FROM singer GROUP BY country",
    ),  # 3: no plan
    ("shop", "Products and their prices.", "SELECT name, price FROM product"),  # 4: right
    ("shop", "Products under 5.", "SELECT name FROM product WHERE price < 5"),  # 5: one row short
    ("concert_singer", HOSTILE, "SELECT name FROM singer WHERE age > 40"),  # 6: right, hostile text
]
WRONG = {
    "1": "SELECT name FROM singer WHERE country = 'France' ORDER BY age",
    "5": "SELECT name FROM product WHERE price < 3",
}
BROKEN_FIRST = {"2": "SELECT year, count(*) FROM concerts GROUP BY year"}  # no such table: repaired
NO_PLAN = {"3"}


def make_shop(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE product (id INTEGER PRIMARY KEY, name TEXT, price REAL);
        INSERT INTO product VALUES (1,'pen',1.5),(2,'ink',2.25),(3,'pad',4.0),(4,'bag',12.5);
    """)
    conn.commit()
    conn.close()
    return path


def write_tasks(folder: Path, copies: int = 1) -> tuple[Path, Path]:
    """The task file (Spider 1.0 format; `copies` repeats the list) and its --dbs folder."""
    dbs = folder / "dbs"
    make_db(dbs / "concert_singer" / "concert_singer.sqlite")
    make_shop(dbs / "shop" / "shop.sqlite")
    tasks = folder / "tasks.json"
    items = [{"db_id": db, "question": q, "query": sql} for db, q, sql in TASKS] * copies
    tasks.write_text(json.dumps(items))
    return tasks, dbs


class DebugScript(GoldScript):
    """GoldScript (a perfect model) with this module's mistakes, by task id modulo len(TASKS)."""

    def __call__(self, request: StubRequest) -> Any:
        task = self.task(request)
        key = str(int(task.instance_id) % len(TASKS)) if task is not None else ""
        if request.stage == "link" and not request.has_tool_results:
            return Reply(
                tool_calls=[("describe_table", {"table": "singer"}), ("describe_table", {"table": "nosuch"})],
                usage=(900, 30),
            )
        if request.stage == "plan" and key in NO_PLAN:
            return Reply(content="I would rather not plan today.", usage=(800, 12))
        if request.stage == "implement" and key in BROKEN_FIRST:
            return {"language": "sql", "code": BROKEN_FIRST[key]}
        if request.stage in ("implement", "repair") and key in WRONG:
            return {"language": "sql", "code": WRONG[key]}
        return super().__call__(request)


def builtin_run(folder: Path, copies: int = 1, jobs: int = 2) -> Path:
    """Run the evaluation; returns its --out folder."""
    tasks, dbs = write_tasks(folder, copies)
    out = folder / "out"
    with OpenAIStub(DebugScript(load_tasks(tasks)), keep_requests=False) as stub:
        code, output = run_eval(
            tasks, "--runner", "builtin", "--dbs", dbs, "--out", out, "--jobs", str(jobs),
            "--base-url", stub.base_url, "--model", "stub", "--plans", "2", "-q",
        )  # fmt: skip
    if code != 0:
        raise RuntimeError(f"the evaluation failed ({code}): {output}")
    return out
