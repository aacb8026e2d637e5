"""Code in Markdown fences: models and agents wrap SQL (and Python, and JSON) in ```lang blocks, and
the official Spider 2.0 evaluator reads a prediction's first ```sql block. One reading of fences for
everything that unwraps them: the scorer, run_query's row-order check, the agent's reply parser."""

from __future__ import annotations

import re
from typing import NamedTuple

# the language word after the opening ``` (then anything else on that line: ```sql title="q1")
_LANG = re.compile(r"[ \t]*([A-Za-z0-9_+-]*)")


class Fence(NamedTuple):
    lang: str  # lower case; "" when the block names none
    body: str


def fenced_blocks(text: str) -> list[Fence]:
    """Every fenced block of `text`, in order: ``` and a language word, the rest of that line, the
    body up to the next ```. One pass (the text may be a model's, thousands of ``` long): an
    opening with no line end or no closing after it means no later one has either."""
    blocks: list[Fence] = []
    at = text.find("```")
    while at >= 0:
        line_end = text.find("\n", at + 3)
        if line_end < 0:
            break
        close = text.find("```", line_end + 1)
        if close < 0:
            break
        lang = _LANG.match(text, at + 3, line_end)
        blocks.append(Fence((lang.group(1) if lang else "").lower(), text[line_end + 1 : close]))
        at = text.find("```", close + 3)
    return blocks


def sql_blocks(text: str, *, unnamed: bool = False) -> list[str]:
    """The bodies of the ```sql blocks (``` blocks that name no language too, with `unnamed`)."""
    return [b.body for b in fenced_blocks(text) if b.lang.startswith("sql") or (unnamed and not b.lang)]
