"""The agent's answer to one question: what `ask`, `flexsql ask --json` and evals return."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from flexsql.agent.budget import Spent
from flexsql.tools.runtime.registry import ToolResult
from flexsql.tools.runtime.render import TextBudget, table_text
from flexsql.tools.select import GroupScore, Verdict

Usage = Spent  # what a question spent, under the name the answer (and the service) use

Status = Literal["answered", "needs_clarification", "unanswerable", "reply", "failed"]


class PlanOut(BaseModel):
    index: int
    reading: str
    text: str
    tables: list[str] = []
    rank: int | None = None  # its reading's rank: 1 = the most likely reading
    revised_from: int | None = None  # the plan this one revises (evaluator said "plan")


class ReadingOut(BaseModel):
    """One reading of the question and the candidates (and results) that answer it."""

    reading: str
    rank: int | None = None  # 1 = the most likely
    candidates: list[str] = []  # candidate ids that ran
    result_ids: list[str] = []  # their groups' results
    chosen: bool = False  # the chosen candidate answers this reading


class CandidateOut(BaseModel):
    candidate_id: str
    plan_index: int
    language: Literal["sql", "python"]
    code: str
    result_id: str | None = None
    rows: int | None = None
    error: str | None = None
    verdicts: list[Verdict] = []
    feedback: list[str] = []
    repaired_from: str | None = None


class Answer(ToolResult):
    status: Status
    question: str
    standalone_question: str | None = None  # the question restated on its own (in a conversation)
    sql: str | None = None  # the chosen program when it is SQL
    code: str | None = None  # the chosen program (SQL or Python)
    language: str | None = None
    result_id: str | None = None
    columns: list[str] = []
    rows: list[list[Any]] = []  # a preview of the chosen result
    total_rows: int | None = None
    clarifying_question: str | None = None
    readings: list[str] = []
    reason: str | None = None  # why unanswerable / failed / how the choice was made
    reply: str | None = None
    plans: list[PlanOut] = []
    by_reading: list[ReadingOut] = []  # each reading (most likely first) with its candidates
    candidates: list[CandidateOut] = []
    groups: list[GroupScore] = []
    budget_exhausted: str | None = None  # what ran out ("80 model calls"); the answer is the best so far
    findings: list[str] = []  # what the run's tool calls established (stored spellings, join keys)
    remembered: str | None = None  # `flexsql ask --remember`: the SQL stored as verified (or why not)
    usage: Usage = Usage()
    run_id: str = ""
    trace: str | None = None  # path of the JSONL trace, when written
    conversation_id: str | None = None

    @property
    def ok(self) -> bool:
        """False for a failed question: the MCP `ask` result is then an error result."""
        return self.status != "failed"

    def reading_lines(self) -> list[str]:
        """The readings of an answered question, most likely first, each with the candidates that
        answer it ("if you meant this: …"); nothing when the question had one reading."""
        if self.status != "answered" or len(self.by_reading) <= 1:
            return []
        answered = {rid for r in self.by_reading if r.chosen for rid in r.result_ids}
        lines = ["readings:"]
        for r in self.by_reading:
            which = (
                f"candidates {', '.join(r.candidates)} (results {', '.join(r.result_ids)})"
                if r.candidates
                else "no candidate ran"
            )
            if r.chosen:
                lead = "answered above"
            elif r.result_ids and set(r.result_ids) <= answered:
                lead = "the same result"  # the readings differ, the data does not tell them apart
            else:
                lead = "if you meant this"
            lines.append(f"  {f'{r.rank}.' if r.rank else '-'} {r.reading} — {lead}: {which}")
        return lines

    def to_text(self, budget: TextBudget = TextBudget()) -> str:
        max_chars, cell_chars = budget.max_chars, budget.cell_chars
        lines = [
            f"status: {self.status}"
            + (f" (budget spent: {self.budget_exhausted}; best so far)" if self.budget_exhausted else "")
        ]
        if self.conversation_id:
            lines.append(f"conversation_id: {self.conversation_id} (pass it to continue this conversation)")
        if self.clarifying_question:
            lines.append(f"question for the user: {self.clarifying_question}")
            lines += [f"  reading: {r}" for r in self.readings]
        if self.reply:
            lines.append(f"reply: {self.reply}")
        if self.reason and self.status != "answered":
            lines.append(f"reason: {self.reason}")
        if self.code:
            lines.append(f"{self.language}:\n{self.code}")
        if self.columns:
            table, shown = table_text(
                self.columns, self.rows, cell_chars=cell_chars, max_chars=max_chars // 2
            )
            lines.append(
                f"{self.result_id}: {self.total_rows} rows"
                + (f" (first {shown} shown)" if shown < (self.total_rows or 0) else "")
            )
            lines.append(table)
        lines += self.reading_lines()
        if self.candidates:
            ran = sum(1 for c in self.candidates if c.result_id)
            lines.append(
                f"candidates: {len(self.candidates)} ({ran} ran) in {len(self.groups)} groups; "
                + "; ".join(f"[{', '.join(g.members)}] score {g.score:.2f}" for g in self.groups[:4])
            )
        if self.reason and self.status == "answered":
            lines.append(f"why: {self.reason}")
        if self.remembered:
            lines.append(self.remembered)
        u = self.usage
        lines.append(
            f"model calls {u.model_calls}, tool calls {u.tool_calls}, tokens {u.usage_text()}, {u.seconds:g} s"
            + (f"; trace {self.trace}" if self.trace else "")
        )
        return "\n".join(lines)
