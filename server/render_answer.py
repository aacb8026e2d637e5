"""`flexsql ask`'s terminal output: status, the chosen program, a result table, what was considered."""

from __future__ import annotations

from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table

from flexsql.agent.answer import Answer
from flexsql.tools.runtime.render import cell_text


def print_answer(answer: Answer, console: Console | None = None) -> None:
    console = console or Console()
    style = {"answered": "green", "failed": "red"}.get(answer.status, "yellow")
    head = f"[bold {style}]{answer.status}[/]"
    if answer.budget_exhausted:
        head += f" [yellow](budget spent: {answer.budget_exhausted}; best candidate so far)[/]"
    console.print(head)
    if answer.clarifying_question:
        console.print(f"[bold]question for you:[/] {answer.clarifying_question}", markup=True)
        for reading in answer.readings:
            console.print(f"  - {reading}", markup=False)
    for label, text in (
        ("reply", answer.reply),
        ("reason", answer.reason if answer.status != "answered" else None),
        ("knowledge store", answer.remembered),
    ):
        if text:
            console.print(f"{label}: {text}", markup=False)
    if answer.code and console.is_terminal:
        console.print(Syntax(answer.code, "sql" if answer.language == "sql" else "python", word_wrap=True))
    elif answer.code:  # piped: the program as it is (Syntax pads every line to the console's width)
        console.print(answer.code, markup=False, highlight=False)
    if answer.columns:
        console.print(f"{answer.result_id}: {answer.total_rows} rows", markup=False)
        table = Table()
        for column in answer.columns:
            table.add_column(column, overflow="fold")
        for row in answer.rows:
            table.add_row(*(cell_text(v, 60) for v in row))
        console.print(table)
    for line in answer.reading_lines():
        console.print(line, markup=False, highlight=False)
    if answer.candidates:
        considered = Table(title="candidates", title_justify="left")
        for column in ("id", "plan", "lang", "rows", "verdicts", "outcome"):
            considered.add_column(column)
        # only an answered question has a chosen candidate: a failed one's first group holds failures
        chosen = next(
            (
                c.candidate_id
                for c in answer.candidates
                if answer.status == "answered" and answer.result_id and c.result_id == answer.result_id
            ),
            None,
        )
        for c in answer.candidates:
            outcome = (
                "chosen" if c.candidate_id == chosen else (c.error.splitlines()[0][:60] if c.error else "")
            )
            considered.add_row(
                c.candidate_id,
                str(c.plan_index + 1),
                c.language,
                "" if c.rows is None else str(c.rows),
                ",".join(c.verdicts),
                outcome,
            )
        console.print(considered)
    u = answer.usage
    console.print(
        f"model calls {u.model_calls}, tool calls {u.tool_calls}, tokens {u.usage_text()}, {u.seconds:g} s"
        + (f"; trace {answer.trace}" if answer.trace else ""),
        style="dim",
        markup=False,
    )
