"""The prompt templates the tests expect, and arguments to render them with (tests/prompts, and the
same prompts served over MCP in tests/server/test_prompts.py)."""

from __future__ import annotations

import re

from flexsql import prompts

EXPECTED = {"plan", "implement", "repair", "revise_plan", "verify", "clarify"}

# what a rendered prompt must never contain: an unfilled placeholder, a block marker, a Python None
LEFTOVER = re.compile(r"\{#?/?[a-z_]+\}|\bNone\b")


def required_only(t: prompts.PromptTemplate) -> dict[str, str]:
    return {a.name: f"<{a.name.upper()} VALUE>" for a in t.arguments if a.required}


def every_argument(t: prompts.PromptTemplate) -> dict[str, str]:
    return {a.name: f"<{a.name.upper()} VALUE>" for a in t.arguments}
