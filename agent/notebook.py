"""What a question's tool calls established about the data, carried to the conversation's next turn.

Within a question nothing needs carrying: every step reads the run's one thread (agent/context.py).
Across turns the thread is not kept, only each turn's summary (agent/conversation.py); the facts a
turn looked up — the stored spelling of a value, a join path — go with it, so the next turn does
not look them up again. Entries are kept whole (a fact cut mid-value is a wrong fact): one that does
not fit is left out, never shortened.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

FACTS = 8  # carried per turn
FACT_CHARS = 240  # of one fact; a longer one is not carried


def _values(name: str, arguments: dict[str, Any], lines: list[str]) -> list[str]:
    """The stored spellings a value tool showed, as `table.column = 'value'` facts."""
    if name == "find_values":
        return [line for line in lines[1:] if " = " in line][:3]
    table, column = arguments.get("table"), arguments.get("column")
    if not table or not column or len(lines) < 3:
        return []
    values = [line.split(" | ")[0].strip() for line in lines[2:7]]
    return [f"{table}.{column} values: {', '.join(values)}"]


def _joins(lines: list[str]) -> list[str]:
    """find_join_path's conditions (its FROM/JOIN skeleton only repeats them)."""
    skeleton = ("FROM ", "JOIN ", "LEFT JOIN ", "via: ")
    return [line for line in lines if " = " in line and not line.startswith(skeleton)][:3]


@dataclass
class Notebook:
    facts: list[str] = field(default_factory=list)
    described: list[str] = field(
        default_factory=list
    )  # tables describe_table showed (link ranks their schemas first)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def tool(
        self,
        stage: str,
        name: str,
        arguments: dict[str, Any],
        text: str,
        branch: int | None = None,
    ) -> None:
        """Record what a successful tool call established (value spellings, join conditions)."""
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if name == "describe_table":
            table = str(arguments.get("table") or "").strip()
            with self._lock:
                if table and table not in self.described:
                    self.described.append(table)
            return
        if name in ("find_values", "distinct_values"):
            found = _values(name, arguments, lines)
        elif name == "find_join_path":
            found = _joins(lines)
        else:
            return
        with self._lock:
            for fact in found:
                fact = " ".join(fact.split())
                if fact and len(fact) <= FACT_CHARS and fact not in self.facts:
                    self.facts.append(fact)

    def carried(self) -> list[str]:
        """The facts the next turn receives: the first ones found (the question's own values come
        first: classify and link look them up before the plans branch out)."""
        with self._lock:
            return self.facts[:FACTS]
