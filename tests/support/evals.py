"""The small Spider-style databases and task files of the evaluation tests, and `flexsql eval` run
in-process."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from flexsql.evals.cli import eval_command

QUESTIONS = [
    ("How many singers are there?", "SELECT count(*) FROM singer"),
    (
        "Names of singers from France, oldest first.",
        "SELECT name FROM singer WHERE country = 'France' ORDER BY age DESC",
    ),
    ("Average age per country.", "SELECT country, avg(age) FROM singer GROUP BY country"),
    ("Concerts per year.", "SELECT year, count(*) FROM concert GROUP BY year"),
    ("Singers with no concert.", "SELECT name FROM singer WHERE id NOT IN (SELECT singer_id FROM concert)"),
]


def make_db(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE singer (id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INTEGER);
        INSERT INTO singer VALUES (1,'Joe Sharp','Netherlands',52),(2,'Timbaland','United States',32),
            (3,'Justin Brown','France',29),(4,'Rose White','France',41),(5,'John Nizinik','France',43),
            (6,'Tribal King','France',25);
        CREATE TABLE concert (id INTEGER PRIMARY KEY, singer_id INTEGER REFERENCES singer(id), year INTEGER);
        INSERT INTO concert VALUES (1,1,2014),(2,2,2014),(3,3,2015),(4,3,2015),(5,4,2014);
    """)
    conn.commit()
    conn.close()
    return path


def run_cli(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(eval_command, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.output


def results(out: Path) -> dict[str, dict]:
    lines = (out / "results.jsonl").read_text().splitlines()
    return {r["instance_id"]: r for r in map(json.loads, lines)}


def write_predictions(folder: Path) -> None:
    folder.mkdir()
    (folder / "0.sql").write_text("```sql\nSELECT count(id) AS n FROM singer\n```\nThis counts the singers.")
    (folder / "1.sql").write_text(
        "SELECT name FROM singer WHERE country = 'France' ORDER BY age"
    )  # wrong order
    (folder / "2.csv").write_text("avg_age,country\n52.0,Netherlands\n32,United States\n34.5,France\n")
    (folder / "3.sql").write_text("SELECT year, count(*) FROM concerts GROUP BY year")  # no such table


def run_eval(*args: str | Path) -> tuple[int, str]:
    from click.testing import CliRunner

    from flexsql.evals.cli import eval_command

    result = CliRunner().invoke(eval_command, [str(a) for a in args])
    return result.exit_code, result.output + (
        f"\n{result.exception!r}" if result.exception and not isinstance(result.exception, SystemExit) else ""
    )


def eval_results(out: Path) -> dict[str, dict]:
    return {r["instance_id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}


def flexsql_eval(
    *args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`flexsql eval …` in a subprocess, as a user runs it: exit code, stdout and stderr."""
    from tests.support.mcp_support import server_env

    return subprocess.run(
        [sys.executable, "-P", "-m", "flexsql.server", "eval", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env=server_env(env),
    )


# An agent for --runner command: answers each task with its gold SQL (a perfect agent), after a pause
# given per task in FLEXSQL_TEST_DELAYS ({"id": seconds}); a task given -1 hangs until it is stopped.
GOLD_AGENT = """
import json, os, pathlib, sys, time
tasks = json.loads(pathlib.Path(sys.argv[1]).read_text())
task = os.environ["FLEXSQL_INSTANCE_ID"]
delay = json.loads(os.environ.get("FLEXSQL_TEST_DELAYS", "{}")).get(task, 0)
pathlib.Path(os.environ["FLEXSQL_TASK_DIR"], "started").write_text(str(os.getpid()))
time.sleep(600 if delay < 0 else delay)
(pathlib.Path(os.environ["FLEXSQL_OUT_DIR"]) / "answer.sql").write_text(tasks[int(task)]["query"])
"""


def gold_agent(folder: Path, tasks: Path) -> str:
    """The --command of GOLD_AGENT for the Spider 1.0 task file `tasks`."""
    script = folder / "gold_agent.py"
    script.write_text(GOLD_AGENT)
    return f"{sys.executable} {script} {tasks}"
