"""`python -m flexsql.server …` is the `flexsql` command (used where no console script is on PATH)."""

from flexsql.server.entry import run

run()
