"""Code in Markdown fences: models and agents wrap SQL (and Python, and JSON) in ```lang blocks, and
the official Spider 2.0 evaluator reads a prediction's first ```sql block. One reading of fences for
everything that unwraps them: the scorer, run_query's row-order check, the agent's reply parser."""

from __future__ import annotations

import re
from typing import NamedTuple

# the language word, then anything else on the opening line (```sql title="q1"), the body, the close
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)


class Fence(NamedTuple):
    lang: str  # lower case; "" when the block names none
    body: str


def fenced_blocks(text: str) -> list[Fence]:
    """Every fenced block of `text`, in order."""
    return [Fence(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]


def sql_blocks(text: str, *, unnamed: bool = False) -> list[str]:
    """The bodies of the ```sql blocks (``` blocks that name no language too, with `unnamed`)."""
    return [b.body for b in fenced_blocks(text) if b.lang.startswith("sql") or (unnamed and not b.lang)]
