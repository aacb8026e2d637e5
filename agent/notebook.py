"""The run notebook: what the stages of one question learnt, carried compactly to every later stage.

A real model re-did earlier stages' work when it could not see it: link re-described the tables
classify had described, implementers re-grounded values the plan stage had grounded, evaluators
recomputed what a sibling had computed. The notebook keeps, per question:

- the findings a stage reports in its JSON object (`findings`, optional in the contract);
- what its tool calls established, recorded as they run: the stored spellings that find_values /
  distinct_values showed, join paths, checks (`run_query`: result id, rows, the SQL's start);
- the readings (classify's list, the plan stage's intent and readings);
- the tables described, with their descriptions, for link (so it does not describe them again).

Every later stage reads it, bounded (NOTEBOOK_CHARS; the newest entries of each kind win, a
stage's own reported findings before what its tool calls showed). Stages that run once per plan
(implement, repair, evaluate, revise_plan) write to their plan's branch: an implementer reads the
shared entries and its own branch's, never a sibling's, so implementations stay independent.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Literal

NOTEBOOK_CHARS = 4_000  # of notebook text in one request
DESCRIBED_CHARS = 6_000  # of carried table descriptions (link's request)
DESCRIPTION_CHARS = 2_500  # of one table's description (cut at a line end)
ENTRY_CHARS = 300  # of one entry
READING_CHARS = 700  # of one reading or intent entry (the plan stage's intent runs to five lines)

Kind = Literal["reading", "finding", "value", "join", "check"]
_HEADINGS: dict[Kind, str] = {
    "reading": "Readings",
    "finding": "Findings",
    "value": "Stored values (as the tools showed them)",
    "join": "Join paths",
    "check": "Checks run (result ids are stored)",
}
# what a tool's result says that later stages should not look up again
_TOOL_KINDS: dict[str, Kind] = {
    "find_values": "value",
    "distinct_values": "value",
    "find_join_path": "join",
    "run_query": "check",
    "sample_rows": "check",
}


def _cut(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _cut_lines(text: str, limit: int) -> str:
    """Whole lines of `text` up to `limit` characters, saying how many were left out."""
    lines = text.strip().splitlines()
    kept: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) + 1 > limit and kept:
            break
        kept.append(line[:limit])
        used += len(line) + 1
    left = len(lines) - len(kept)
    return "\n".join(kept) + (f"\n(… {left} more lines)" if left else "")


@dataclass
class Entry:
    stage: str
    kind: Kind
    text: str
    branch: int | None = None  # a plan's index for the per-plan stages; None: shared


@dataclass
class Notebook:
    entries: list[Entry] = field(default_factory=list)
    described: dict[str, str] = field(default_factory=dict)  # table -> its describe_table text
    max_chars: int = NOTEBOOK_CHARS
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def note(self, stage: str, texts: list[str], kind: Kind = "finding", branch: int | None = None) -> None:
        """Record what a stage reports (its `findings`, readings, intent)."""
        with self._lock:
            known = {(e.kind, e.text, e.branch) for e in self.entries}
            for text in texts:
                limit = READING_CHARS if kind == "reading" else ENTRY_CHARS
                entry = Entry(stage, kind, _cut(" ".join(str(text).split()), limit), branch)
                if entry.text and (entry.kind, entry.text, entry.branch) not in known:
                    self.entries.append(entry)
                    known.add((entry.kind, entry.text, entry.branch))

    def tool(
        self, stage: str, name: str, arguments: dict[str, Any], text: str, branch: int | None = None
    ) -> None:
        """Record what a successful tool call established."""
        if name == "describe_table":
            table = str(arguments.get("table") or "").strip()
            if table and branch is None:
                with self._lock:
                    self.described.setdefault(table, _cut_lines(text, DESCRIPTION_CHARS))
            return
        kind = _TOOL_KINDS.get(name)
        if kind is None:
            return
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if not lines:
            return
        if name == "run_query":
            sql = " ".join(str(arguments.get("sql") or "").split())
            first_row = lines[2] if len(lines) > 2 else ""
            summary = f"{lines[0]} — {_cut(sql, 140)}" + (f" → {first_row}" if first_row else "")
        elif name == "sample_rows":  # a code table's rows, often: keep them
            table = str(arguments.get("table") or "")
            summary = f"{table} sample {lines[0]}: " + "; ".join(lines[1:8])
        elif name == "find_values":  # its head names the tool; a later stage may not offer it
            head = lines[0].removeprefix("find_values ")
            summary = "; ".join([head, *[line for line in lines[1:] if " = " in line][:4]])
        elif name == "distinct_values":  # the head, then the values (not the 'value | count' header)
            summary = lines[0] + ": " + "; ".join(line for line in lines[2:12])
        else:
            summary = "; ".join(lines[:5])
        self.note(stage, [summary], kind, branch)

    def render(self, branch: int | None = None, max_chars: int | None = None) -> str | None:
        """The notebook as a stage of `branch` reads it (shared entries and its own), bounded."""
        budget = self.max_chars if max_chars is None else max_chars
        with self._lock:
            visible = [e for e in self.entries if e.branch is None or e.branch == branch]
        # newest first within the budget, readings and reported findings before tool records
        order: list[Kind] = ["reading", "finding", "value", "join", "check"]
        kept: dict[Kind, list[Entry]] = {k: [] for k in order}
        used = 0
        for kind in order:
            for entry in reversed([e for e in visible if e.kind == kind]):
                line = f"- [{entry.stage}] {entry.text}"
                if used + len(line) + 1 > budget:
                    break
                kept[kind].insert(0, entry)
                used += len(line) + 1
        blocks = [
            f"{_HEADINGS[kind]}:\n" + "\n".join(f"- [{e.stage}] {e.text}" for e in kept[kind])
            for kind in order
            if kept[kind]
        ]
        left = len(visible) - sum(len(v) for v in kept.values())
        if left > 0:
            blocks.append(f"({left} older notes left out)")
        return "\n".join(blocks) if blocks else None

    def described_text(self, max_chars: int = DESCRIBED_CHARS) -> str | None:
        """The tables described so far, each with its description, bounded (whole ones first)."""
        with self._lock:
            items = list(self.described.items())
        parts: list[str] = []
        used = 0
        names_only: list[str] = []
        for table, text in items:
            if used + len(text) > max_chars:
                names_only.append(table)
                continue
            parts.append(text)
            used += len(text) + 1
        if names_only:
            parts.append("(also described, not repeated here: " + ", ".join(names_only) + ")")
        return "\n".join(parts) if parts else None
