"""What the model reads: one growing conversation per question, laid out for the prefix cache.

Inference servers reuse the longest prefix a request shares with an earlier one (vLLM's automatic
prefix caching, OpenAI's and Anthropic's prompt caching). So every request of a run — and of every
run on the same source — is built in one order, most stable first:

1. the system text: the agent's manual (agent/manual.md: the steps, their JSON, the rules), the
   same for every run with the same tools;
2. the tools: every agent tool in one fixed order, whatever the step (any step may look at data);
3. the opening user message: the source (its dialect and the rules that apply to this source:
   families, nested columns, the dialect's functions), then the conversation's earlier turns as
   user/assistant pairs (agent/conversation.py renders them, unchanged from turn to turn), then the
   question;
4. each step appends its instruction (a user message starting with its tag), the model's tool
   calls and their results, and its final JSON reply. Parallel plans fork the thread after the
   plan step: each shares everything up to its own instruction.

A `Thread` is that list of messages, append-only. Messages alternate user / assistant (with tool
results in between), as strict chat templates require: text for the model that would follow a
user message is merged into it before it is sent. Reasoning is kept on the tool-call turns of
the step that made them (gpt-oss and Qwen3 degrade without it) and dropped from the thread when
the next user message arrives, which is what their chat templates do to it anyway.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from flexsql.config import Settings
from flexsql.prompts import tool_conditional
from flexsql.tools.engines.catalog import Catalog
from flexsql.tools.engines.families import named_families
from flexsql.tools.engines.paths import nested_type
from flexsql.tools.toolbox import TOOLS

# The agent's tools, in the order every request lists them. list_sources and select_result are left
# out: a run has one source, and the pipeline selects among the candidates itself.
AGENT_TOOLS = (
    "search_schema",
    "list_schemas",
    "list_tables",
    "describe_table",
    "find_join_path",
    "sample_rows",
    "profile_column",
    "distinct_values",
    "find_values",
    "run_query",
    "fetch_rows",
    "validate_sql",
    "compare_results",
    "run_python",
)


@cache
def _manual_text() -> str:
    return resources.files(__package__).joinpath("manual.md").read_text(encoding="utf-8").strip()


def manual(tools: frozenset[str]) -> str:
    """The system text for a run whose model may call `tools` (none: MCP sampling without tools)."""
    return tool_conditional(_manual_text(), tools)


def offered_tools(python: bool, tools_enabled: bool = True) -> list[str]:
    """The agent's tools for a run, in their fixed order (run_python only with the sandbox)."""
    if not tools_enabled:
        return []
    available = {t.name for t in TOOLS.available(python, agent=True)}
    return [name for name in AGENT_TOOLS if name in available]


# Arguments the agent's model is not offered: a run reads one source (every call is given it), its
# catalog and value index are fresh for the run, and its time limits are the server's.
HIDDEN_ARGUMENTS = frozenset({"source", "refresh", "timeout_s"})


def tool_definitions(settings: Settings, names: list[str], python: bool) -> list[dict[str, Any]]:
    """OpenAI function definitions of `names`, without the arguments a run sets itself
    (HIDDEN_ARGUMENTS): every request lists them, so each character counts many times."""
    out = []
    for definition in TOOLS.openai_tools(settings, names, python=python):
        function = dict(definition["function"])
        params = dict(function["parameters"])
        props = {k: v for k, v in params.get("properties", {}).items() if k not in HIDDEN_ARGUMENTS}
        params["properties"] = props
        if "required" in params:
            params["required"] = [r for r in params["required"] if r not in HIDDEN_ARGUMENTS]
        function["parameters"] = params
        out.append({"type": "function", "function": function})
    return out


_SLOT = re.compile(r"\{([A-Za-z_]+)\}")


def fill(template: str, **values: str) -> str:
    """`template` with each `{name}` replaced in one pass (a value is never scanned again: a program
    may hold `{error}`)."""
    return _SLOT.sub(lambda m: values.get(m.group(1), m.group(0)), template)


# -- the source block: what this database is, and the rules that apply to it ------------------------

_DIALECT_NOTES = {
    "sqlite": (
        "SQLite has no ILIKE: match text with LOWER(col) LIKE '%…%'. Dates are text: compare them as "
        "'YYYY-MM-DD' strings or use strftime('%Y', col). Integer division truncates: multiply by 1.0 first."
    ),
    "duckdb": (
        "DuckDB: ILIKE matches case-insensitively; strftime(col, '%Y'), date_trunc('month', col) and "
        "date_part('year', col) handle dates."
    ),
    "postgres": (
        "PostgreSQL: ILIKE matches case-insensitively. Integer division truncates: cast to numeric "
        "first. Unquoted identifiers fold to lower case."
    ),
    "snowflake": (
        "Snowflake: ILIKE matches case-insensitively. Unquoted identifiers fold to upper case; quote "
        'names that have lower-case letters ("colName").'
    ),
}
_NESTED_NOTES = {
    "sqlite": "JSON_EXTRACT(col, '$.key') reads a key, and json_each(col) unnests an array.",
    "duckdb": (
        "JSON_EXTRACT_STRING(col, '$.key') reads a JSON key, struct_col.field a STRUCT field, and "
        "UNNEST(col) unnests a list."
    ),
    "postgres": "col->>'key' reads a key, and jsonb_array_elements(col) unnests an array.",
    "snowflake": ("col:key::string reads a VARIANT key, and LATERAL FLATTEN(input => col) unnests an array."),
}
FAMILY_EXAMPLES = 3  # families named in the source block


def source_block(source: str, dialect: str, catalog: Catalog, python: bool, tools: frozenset[str]) -> str:
    """The opening of every request on this source: its name, size and dialect, and only the rules
    that apply here (a 3-table SQLite file gets no word about sharded families or VARIANT paths)."""
    schemas = catalog.schemas()
    tables = len(catalog.tables)
    size = f"{tables} table{'s' if tables != 1 else ''}" + (
        f" in {len(schemas)} schemas" if len(schemas) > 1 else ""
    )
    lines = [
        f"Database: the flexsql source `{source}` ({dialect}, {size}). Every query is read-only.",
    ]
    note = _DIALECT_NOTES.get(dialect)
    if note:
        lines.append(note)
    families = _families(catalog)
    if families:
        shown = ", ".join(families[:FAMILY_EXAMPLES])
        more = f" and {len(families) - FAMILY_EXAMPLES} more" if len(families) > FAMILY_EXAMPLES else ""
        lines.append(
            f"Sharded tables: families of tables with the same columns, such as {shown}{more}. Name a "
            "family with `*` (`FROM events_*`, or a narrower prefix such as `FROM events_202401*`) in "
            "SQL and in every tool: flexsql reads it as the union of its shards. Read every shard in "
            "the question's window, not one shard."
        )
    if any(nested_type(c.type) for t in catalog.tables for c in t.columns):
        paths = "describe_table lists their keys as paths (`traffic.source`, `hits[].page` for arrays). "
        lines.append(
            "Nested columns (JSON, VARIANT, STRUCT) hold keys: "
            + (paths if "describe_table" in tools else "")
            + "A path with `[]` names an array's elements and is not SQL. "
            + _NESTED_NOTES.get(dialect, "")
        )
    if python and "run_python" in tools:
        lines.append(
            "Python: run_python runs pandas over stored results (`dfs['r1']`); use it when the logic is "
            "procedural or awkward in SQL. A Python program's last expression is its answer table."
        )
    return "\n".join(lines)


def _families(catalog: Catalog) -> list[str]:
    """Each sharded family once, by the name that reads all of it (`ANALYTICS_1.EVENTS_*`, 114
    tables), largest first — not its column sets, which list_tables and describe_table show."""
    tables = catalog.tables
    sizes: dict[str, int] = {}
    for family in named_families(tables):
        first = tables[family.group_members[0]]
        name = ".".join(p for p in (first.database, first.schema_name, family.group) if p)
        sizes[name] = len(family.group_members)
    return [f"{name} ({n} tables)" for name, n in sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0]))]


# -- the thread ----------------------------------------------------------------------------------


@dataclass
class Thread:
    """The messages after the system text, append-only; `fork()` gives a branch its own copy that
    shares every message so far (the dicts themselves are never changed once sent)."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    sent: int = 0  # messages the last request on this thread (or its parent's) carried
    last_call: str | None = None  # the call id of that request (the trace's `after`)

    def say(self, text: str) -> None:
        """Add user text: a new message, or, after another user message, the same message."""
        last = self.messages[-1] if self.messages else None
        if last is not None and last.get("role") == "user":
            self.messages[-1] = {"role": "user", "content": f"{last['content']}\n\n{text}"}
        else:
            self._drop_reasoning()
            self.messages.append({"role": "user", "content": text})

    def add(self, message: dict[str, Any]) -> None:
        self.messages.append(message)

    def fork(self) -> Thread:
        return Thread(list(self.messages), self.sent, self.last_call)

    def _drop_reasoning(self) -> None:
        """Earlier reasoning leaves the thread at a new user message (chat templates drop it there)."""
        for i, message in enumerate(self.messages):
            if message.get("role") == "assistant" and (
                "reasoning" in message or "reasoning_content" in message
            ):
                self.messages[i] = {
                    k: v for k, v in message.items() if k not in ("reasoning", "reasoning_content")
                }


# -- measuring the prefix (the trace's `chars` and `shared_chars`) -----------------------------------

CACHE_BLOCK = 64  # characters a server caches at a time (vLLM: 16 tokens a block, ~4 characters a token)


def flat(system: str, tools: list[dict[str, Any]] | None, messages: list[dict[str, Any]]) -> str:
    """A request laid out as chat templates render it: the system text, the tools, the messages."""
    parts = ["S:" + system, "T:" + json.dumps(tools or [], sort_keys=True)]
    for m in messages:
        calls = json.dumps(m.get("tool_calls") or "", sort_keys=True)
        parts.append(str(m.get("role", "?"))[:1].upper() + ":" + str(m.get("content") or "") + calls)
    return "\n".join(parts)


CHUNK = 4096


def common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix: chunk by chunk (one C comparison each), then a
    binary search inside the first chunk that differs."""
    n = min(len(a), len(b))
    start = 0
    while start < n and a[start : start + CHUNK] == b[start : start + CHUNK]:
        start += CHUNK
    if start >= n:
        return n
    lo, hi = start, min(start + CHUNK, n)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[start:mid] == b[start:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class PrefixMeter:
    """How much of each request of a run repeats an earlier request's start (what a server's prefix
    cache could serve), in whole cache blocks. A request extends the one its thread sent last, or
    shares the start of a sibling's latest: those are the ones compared (comparing with every
    earlier request cost 40 ms a question at K=8 and found nothing longer)."""

    RECENT = 4  # the latest requests of the run compared besides the thread's own last one

    def __init__(self) -> None:
        self._sent: dict[str, str] = {}  # call id -> the request's flat text
        self._recent: list[str] = []

    def measure(self, call_id: str, text: str, after: str | None) -> int:
        earlier = [*self._recent[-self.RECENT :], *([self._sent[after]] if after in self._sent else [])]
        shared = max((common_prefix(text, t) for t in earlier), default=0)
        self._sent[call_id] = text
        self._recent.append(text)
        return shared // CACHE_BLOCK * CACHE_BLOCK
