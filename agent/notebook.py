"""The run notebook: what the stages of one question learnt, carried compactly to every later stage.

A real model re-did earlier stages' work when it could not see it: link re-described the tables
classify had described, implementers re-grounded values the plan stage had grounded, evaluators
recomputed what a sibling had computed. The notebook keeps, per question:

- the findings a stage reports in its JSON object (`findings`, optional in the contract);
- what its tool calls established, recorded as they run: the stored spellings that find_values /
  distinct_values showed, join paths, checks (`run_query`: result id, rows, the SQL's start);
- the readings (classify's list, the plan stage's intent and readings);
- the tables described, with their descriptions, for link (so it does not describe them again):
  whole while they fit, else every table's columns with their types and keys only.

Every later stage reads it, bounded (NOTEBOOK_CHARS; the newest entries of each kind win, a
stage's own reported findings before what its tool calls showed). Stages that run once per plan
(implement, repair, evaluate, revise_plan) write to their plan's branch: an implementer reads the
shared entries and its own branch's, never a sibling's, so implementations stay independent.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any, Literal

NOTEBOOK_CHARS = 4_000  # of notebook text in one request
DESCRIBED_CHARS = 6_000  # of carried table descriptions (link's request)
COMPACT_CHARS = 10_000  # of carried column lists when the descriptions do not fit (3 tables of 100 columns)
DESCRIPTION_CHARS = 2_500  # of one table's description (cut at a line end)
ENTRY_CHARS = 300  # of one entry
READING_CHARS = 700  # of one reading or intent entry (the plan stage's intent runs to five lines)
JOIN_CHARS = 700  # of one join path: its conditions, each a pair of qualified columns

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


def _was_cut(text: str) -> bool:
    """A description the notebook or the tool cut: some of its columns are not in it."""
    return bool(re.search(r"\(… \d+ more lines\)$|… truncated: true|names only:", text))


def _columns_line(result: Any) -> str | None:
    """A describe_table result as one entry: the table, its size, and every column by type, in
    the order of first appearance, with its declared keys ("BIGINT: id PK, customer_id
    FK→customers.customer_id; VARCHAR: name"): three 90-column tables fit in one request."""
    columns = getattr(result, "columns", None)
    table = getattr(result, "table", None)
    if not columns or not table:
        return None
    by_type: dict[str, list[str]] = {}
    for c in columns:
        cell = str(c.name)
        if getattr(c, "primary_key", False):
            cell += " PK"
        if getattr(c, "references", None):
            cell += f" FK→{c.references}"
        by_type.setdefault(str(c.type), []).append(cell)
    rows = getattr(result, "row_estimate", None)
    size = f", ~{rows} rows" if rows is not None else ""
    total = getattr(result, "total_columns", len(columns))
    more = f"; … {total - len(columns)} more columns" if total > len(columns) else ""
    groups = "; ".join(f"{kind}: {', '.join(names)}" for kind, names in by_type.items())
    return f"{table} ({len(columns)} columns{size}) — {groups}{more}"


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
    # table -> its columns in one line (name, type, keys), from the tool's structured result: what
    # link reads when the descriptions do not all fit, or one was cut before the model saw it all
    compact: dict[str, str] = field(default_factory=dict)
    max_chars: int = NOTEBOOK_CHARS
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def note(self, stage: str, texts: list[str], kind: Kind = "finding", branch: int | None = None) -> None:
        """Record what a stage reports (its `findings`, readings, intent)."""
        with self._lock:
            known = {(e.kind, e.text, e.branch) for e in self.entries}
            for text in texts:
                limit = {"reading": READING_CHARS, "join": JOIN_CHARS}.get(kind, ENTRY_CHARS)
                entry = Entry(stage, kind, _cut(" ".join(str(text).split()), limit), branch)
                if entry.text and (entry.kind, entry.text, entry.branch) not in known:
                    self.entries.append(entry)
                    known.add((entry.kind, entry.text, entry.branch))

    def tool(
        self,
        stage: str,
        name: str,
        arguments: dict[str, Any],
        text: str,
        branch: int | None = None,
        result: Any = None,
    ) -> None:
        """Record what a successful tool call established (`result`: its structured result)."""
        if name == "describe_table":
            table = str(arguments.get("table") or "").strip()
            if table and branch is None:
                with self._lock:
                    if table not in self.described:
                        self.described[table] = _cut_lines(text, DESCRIPTION_CHARS)
                        if (line := _columns_line(result)) is not None:
                            self.compact[table] = line
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
        elif name == "find_join_path":  # every condition; the FROM/JOIN skeleton only repeats them
            summary = "; ".join(
                line for line in lines if not line.startswith(("FROM ", "JOIN ", "LEFT JOIN "))
            )
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

    def described_text(
        self, max_chars: int = DESCRIBED_CHARS, compact_chars: int = COMPACT_CHARS
    ) -> str | None:
        """The tables described so far, bounded: each description whole when all of them fit
        uncut; else each table's columns in one line (every column, types and keys); past the
        bound by name only, said so (a table cut mid-description under "do not describe it
        again" left link without the columns it needed)."""
        with self._lock:
            items = list(self.described.items())
            compact = dict(self.compact)
        if not items:
            return None
        whole = [text for _, text in items]
        if sum(len(t) + 1 for t in whole) <= max_chars and not any(_was_cut(t) for t in whole):
            return "\n".join(whole)
        parts: list[str] = []
        used = 0
        names_only: list[str] = []
        for table, text in items:
            entry = compact.get(table) or text
            if used + len(entry) > (compact_chars if table in compact else max_chars):
                names_only.append(table)
                continue
            parts.append(entry)
            used += len(entry) + 1
        if names_only:
            parts.append(
                "(also described, columns not shown here: "
                + ", ".join(names_only)
                + " — describe again if needed)"
            )
        return "\n".join(parts)
