"""The plan / implement / repair / revise_plan / verify / clarify prompt templates, for MCP clients.

Each template is `prompts/<name>.md`: a front-matter block naming its arguments, then Markdown with
`{param}` placeholders. The MCP server (`flexsql.server.prompts`) renders them through
`render(name, tools=…, **params)`. The built-in agent has its own request layout (agent/manual.md and
each step's instruction: docs/contract.md) and reuses only the `{+tool}` marks (`tool_conditional`).

Template syntax (kept tiny on purpose: no dependency, nothing a prompt author can get wrong quietly):

- `{name}` inserts an argument; values are inserted verbatim and never re-scanned.
- `{#name}…{/name}` keeps its content only when the optional argument `name` is given (non-blank),
  so a missing argument drops its whole section instead of printing "None".
- `{{` and `}}` are literal braces.
- `{+tool}…{/+tool}` is kept only when the reader can call `tool` (a server without the sandbox
  offers no run_python), and `{-tool}…{/-tool}` only when it cannot, so a prompt never names a tool
  its reader lacks.

Front matter::

    ---
    title: Plan
    description: One line for prompts/list.
    arguments:
      question: required | What the argument holds.
      source: optional | …
    ---
"""

from __future__ import annotations

import difflib
import re
from functools import cache
from importlib import resources

from pydantic import BaseModel

from flexsql.errors import InvalidArgument, NotFoundError

__all__ = [
    "PromptArgument",
    "PromptTemplate",
    "get_prompt",
    "list_prompts",
    "prompt_names",
    "render",
    "tool_conditional",
    "tool_sections",
]

_IDENT = r"[a-z][a-z0-9_]*"
_BLOCK = re.compile(r"\{#(" + _IDENT + r")\}\n?(.*?)\{/\1\}\n?", re.DOTALL)
_TOKEN = re.compile(r"\{\{|\}\}|\{(" + _IDENT + r")\}")
_STRAY = re.compile(r"[{}]")
_TOOL = re.compile(r"\{([+-])(" + _IDENT + r")\}(.*?)\{/\1\2\}", re.DOTALL)


def _sections(body: str, tools: frozenset[str] | None, check: bool = False) -> str:
    """The body with its tool sections resolved for a reader who can call `tools` (None: every tool);
    `check` keeps both branches of every section, for checking the template."""

    def keep(m: re.Match[str]) -> str:
        if check:
            return m.group(3)
        offered = tools is None or m.group(2) in tools
        return m.group(3) if offered == (m.group(1) == "+") else ""

    return _TOOL.sub(keep, body)


def tool_conditional(text: str, tools: frozenset[str]) -> str:
    """`text` with its `{+tool}…{/+tool}` / `{-tool}…{/-tool}` sections resolved for a reader who can
    call `tools` (the agent's manual uses the same marks as the templates)."""
    return _TOOL.sub(lambda m: m.group(3) if (m.group(2) in tools) == (m.group(1) == "+") else "", text)


def tool_sections(body: str) -> list[str]:
    """The tools a template's `{+tool}` sections name."""
    return sorted({m.group(2) for m in _TOOL.finditer(body)})


class PromptArgument(BaseModel):
    name: str
    description: str
    required: bool


class PromptTemplate(BaseModel):
    name: str
    title: str
    description: str
    arguments: list[PromptArgument]
    body: str

    @property
    def required(self) -> list[str]:
        return [a.name for a in self.arguments if a.required]

    def signature(self) -> str:
        """`question, plan, source?` — how the arguments read in an error message."""
        return ", ".join(a.name if a.required else f"{a.name}?" for a in self.arguments)

    def render(self, *, tools: frozenset[str] | None = None, **params: object) -> str:
        """The text for a reader who can call `tools` (None: every tool, run_python included)."""
        given = {k: _text(v) for k, v in params.items() if v is not None}
        known = {a.name for a in self.arguments}
        for key in given:
            if key not in known:
                near = difflib.get_close_matches(key, sorted(known), n=1)
                hint = f"; did you mean '{near[0]}'?" if near else ""
                raise InvalidArgument(
                    f"prompt '{self.name}' has no argument '{key}'{hint} Its arguments: {self.signature()}"
                )
        missing = [a for a in self.arguments if a.required and not given.get(a.name, "").strip()]
        if missing:
            what = "; ".join(
                f"'{a.name}' ({a.description.rstrip('.')}){' is empty' if a.name in given else ''}"
                for a in missing
            )
            raise InvalidArgument(
                f"prompt '{self.name}' needs the required argument{'s' if len(missing) > 1 else ''} {what}. "
                f"Its arguments (? = optional): {self.signature()}"
            )
        present = {k for k, v in given.items() if v.strip()}
        body = _sections(self.body, tools)
        text = _BLOCK.sub(lambda m: m.group(2) if m.group(1) in present else "", body)
        text = re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"

        def fill(match: re.Match[str]) -> str:
            token = match.group(0)
            if token in ("{{", "}}"):
                return token[0]
            return given[match.group(1)]

        return _TOKEN.sub(fill, text)


def _text(value: object) -> str:
    return value if isinstance(value, str) else str(value)


def _parse(name: str, raw: str) -> PromptTemplate:
    """Parse and check one template; every mistake is reported with the file name."""
    where = f"prompts/{name}.md"
    if not raw.startswith("---\n") or "\n---\n" not in raw[4:]:
        raise ValueError(f"{where}: must start with a front-matter block between '---' lines")
    head, body = raw[4:].split("\n---\n", 1)
    meta: dict[str, str] = {}
    arguments: list[PromptArgument] = []
    in_args = False
    for line in head.splitlines():
        if not line.strip():
            continue
        if line.startswith("  ") and in_args:
            key, _, rest = line.strip().partition(":")
            kind, _, desc = rest.partition("|")
            if kind.strip() not in ("required", "optional") or not desc.strip():
                raise ValueError(
                    f"{where}: argument line must read '  name: required | description': {line!r}"
                )
            arguments.append(
                PromptArgument(
                    name=key.strip(), description=desc.strip(), required=kind.strip() == "required"
                )
            )
            continue
        key, _, value = line.partition(":")
        in_args = key.strip() == "arguments"
        if not in_args:
            meta[key.strip()] = value.strip()
    if "description" not in meta:
        raise ValueError(f"{where}: front matter needs a 'description' line")
    template = PromptTemplate(
        name=name,
        title=meta.get("title", name.replace("_", " ").capitalize()),
        description=meta["description"],
        arguments=arguments,
        body=body,
    )
    _check(template, where)
    return template


def _check(t: PromptTemplate, where: str) -> None:
    args = {a.name: a for a in t.arguments}
    used: set[str] = set()
    body = _sections(t.body, None, check=True)
    for match in _BLOCK.finditer(body):
        block = match.group(1)
        if block not in args:
            raise ValueError(f"{where}: block {{#{block}}} names no declared argument")
        if args[block].required:
            raise ValueError(f"{where}: '{block}' is required, so a {{#{block}}} block would always show")
        used.add(block)
        for inner in _TOKEN.finditer(match.group(2)):
            name = inner.group(1)
            if name and name in args and not args[name].required and name != block:
                raise ValueError(
                    f"{where}: optional {{{name}}} sits inside the block of '{block}'; "
                    f"put it in its own {{#{name}}} block"
                )
    outside = _BLOCK.sub("", body)
    for match in _TOKEN.finditer(outside):
        name = match.group(1)
        if name is None:
            continue
        if name not in args:
            raise ValueError(
                f"{where}: {{{name}}} is not a declared argument (write {{{{ for a literal brace)"
            )
        if not args[name].required:
            raise ValueError(f"{where}: optional {{{name}}} must sit inside a {{#{name}}}…{{/{name}}} block")
    for match in _TOKEN.finditer(body):
        if match.group(1):
            used.add(match.group(1))
    leftover = _STRAY.search(_TOKEN.sub("", _BLOCK.sub(lambda m: m.group(2), body)))
    if leftover:
        raise ValueError(
            f"{where}: unmatched brace near {t.body[max(0, leftover.start() - 30) :][:60]!r}; "
            "write {{ and }} for literal braces"
        )
    unused = set(args) - used
    if unused:
        raise ValueError(f"{where}: declared but unused arguments: {', '.join(sorted(unused))}")


def prompt_names() -> list[str]:
    files = resources.files(__name__).iterdir()
    return sorted(f.name[:-3] for f in files if f.name.endswith(".md"))


@cache
def get_prompt(name: str) -> PromptTemplate:
    names = prompt_names()
    if name not in names:
        near = difflib.get_close_matches(name, names, n=1)
        hint = f"did you mean '{near[0]}'? " if near else ""
        raise NotFoundError(f"no prompt named '{name}'; {hint}the prompts are: {', '.join(names)}")
    return _parse(name, resources.files(__name__).joinpath(f"{name}.md").read_text(encoding="utf-8"))


def list_prompts() -> list[PromptTemplate]:
    """Every template, with its arguments and which are required."""
    return [get_prompt(n) for n in prompt_names()]


def render(name: str, *, tools: frozenset[str] | None = None, **params: object) -> str:
    """The text of prompt `name`, naming only `tools`; raises InvalidArgument naming a missing or
    unknown argument."""
    return get_prompt(name).render(tools=tools, **params)
