"""Rewrite the generated parts of docs/*.md from the code, or list the stale ones.

    python docs/generate.py           # rewrite every generated part
    python docs/generate.py --check   # exit 1 and name each stale part; change nothing

A generated part sits between two marker comments in a document:

    <!-- BEGIN GENERATED: settings (python docs/generate.py) -->
    ...
    <!-- END GENERATED: settings -->

Everything outside the markers is written by hand and left alone. The parts come from the code
itself, so the documents cannot drift from it: the stage contract from the pydantic models and
`output_schema` of agent/contract.py, the settings from the pydantic models of flexsql/config.py,
the CLI from the click commands' own --help.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import annotated_types
import click
from pydantic import BaseModel
from pydantic.fields import FieldInfo

DOCS = Path(__file__).resolve().parent

# --help is rendered at this width whatever the terminal, so the text is the same on every machine.
HELP_WIDTH = 100

MARKER = re.compile(
    r"(?P<begin><!-- BEGIN GENERATED: (?P<name>[\w-]+)[^\n]*-->\n)"
    r"(?P<body>.*?)"
    r"(?P<end><!-- END GENERATED: (?P=name) -->)",
    re.DOTALL,
)


# The tools a stage offers live in its module; this names the module constant per stage (stages that
# share a function share its list, and knowledge offers none).
class GenerationError(Exception):
    """The code cannot be documented as it stands (a field without a description, a schema that
    contradicts its model); the message says what to change."""


# -- types, defaults and ranges as a reader writes them ---------------------------------------------

_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


def type_text(annotation: Any) -> str:
    """A field's type in JSON/TOML words: `string | null`, `list of string`, `Plan`."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:  # the constraints are shown as the range
        return type_text(args[0])
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    if origin is typing.Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_text(a) for a in args)
    if origin is list:
        return f"list of {type_text(args[0])}"
    if origin is dict:
        value = args[1] if len(args) == 2 else Any
        return "table" if value is Any else f"table of {type_text(value)}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation.__name__
    if annotation is Any:
        return "any"
    raise GenerationError(f"docs/generate.py cannot name the type {annotation!r}: teach type_text() about it")


def without_none(annotation: Any) -> Any:
    """`X | None` → X: in the settings an unset value is shown as the default, not as a type."""
    if typing.get_origin(annotation) is typing.Annotated:
        return without_none(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        kept = [without_none(a) for a in typing.get_args(annotation) if a is not type(None)]
        return kept[0] if len(kept) == 1 else annotation
    return annotation


def default_text(field: FieldInfo, none: str = "unset") -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if value is None:
        return none
    return f"`{json.dumps(value)}`"


def compact_json(value: Any, indent: int = 0, width: int = 96) -> str:
    """JSON that keeps a value on one line when it fits: a schema stays readable without one line
    per enum member."""
    flat = json.dumps(value, ensure_ascii=False)
    if len(flat) + indent <= width or not isinstance(value, dict | list) or not value:
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, dict):
        items = [f"{pad}{json.dumps(k)}: {compact_json(v, indent + 2, width)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    items = [pad + compact_json(v, indent + 2, width) for v in value]
    return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"


def range_text(field: FieldInfo) -> str:
    """The Field constraints (gt/ge/lt/le) in symbols, e.g. `> 0, ≤ 600`."""
    symbols = {
        annotated_types.Gt: (">", "gt"),
        annotated_types.Ge: ("≥", "ge"),
        annotated_types.Lt: ("<", "lt"),
        annotated_types.Le: ("≤", "le"),
    }
    parts = []
    for item in [*field.metadata, *_annotated_metadata(field.annotation)]:
        for kind, (symbol, attribute) in symbols.items():
            if isinstance(item, kind):
                parts.append(f"{symbol} {_number(getattr(item, attribute))}")
    return ", ".join(parts)


def _annotated_metadata(annotation: Any) -> list[Any]:
    """Constraints carried inside the type (`Annotated[float, Gt(0)] | None`: a stage override)."""
    found: list[Any] = []
    for arg in [annotation, *typing.get_args(annotation)]:
        if typing.get_origin(arg) is typing.Annotated:
            found += list(typing.get_args(arg)[1:])
    return found


def _number(value: float) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:,}" if abs(value) >= 10_000 else str(value)


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


# -- the stage contract (agent/contract.py) ----------------------------------------------------------


def contract_stages() -> str:
    from flexsql.agent.contract import OUTPUTS, STAGES

    lines = ["| stage (`X-FlexSQL-Stage`) | final JSON object |", "| --- | --- |"]
    for stage in STAGES:
        name = OUTPUTS[stage].__name__
        lines.append(f"| `{stage}` | [{name}](#{name.lower()}) |")
    return "\n".join(lines)


def contract_tools() -> str:
    from flexsql.agent.context import AGENT_TOOLS

    return ", ".join(f"`{t}`" for t in AGENT_TOOLS)


def contract_manual() -> str:
    """The system text of every request (agent/manual.md, with every agent tool offered)."""
    from flexsql.agent.context import AGENT_TOOLS, manual

    return "```markdown\n" + manual(frozenset(AGENT_TOOLS)) + "\n```"


def contract_objects() -> str:
    """Each output object's fields as the parser validates them (pydantic), then the schema flexsql
    sends as `response_format` for each stage that returns it (`output_schema`)."""
    from flexsql.agent.contract import OUTPUTS

    models = list(_output_models(OUTPUTS))
    blocks = []
    for model in models:
        stages = [s for s, m in OUTPUTS.items() if m is model]
        parents = [m.__name__ for m in models if model in _nested(m)]
        said = (["returned by " + ", ".join(f"`{s}`" for s in stages)] if stages else []) + [
            f"an item of [{p}](#{p.lower()})" for p in parents
        ]
        sentence = " — ".join(said) or "unused"
        blocks += [f"### {model.__name__}", sentence[0].upper() + sentence[1:] + "."]
        rows = ["| field | type | when left out of a reply |", "| --- | --- | --- |"]
        for name, field in model.model_fields.items():
            absent = "refused (required)" if field.is_required() else default_text(field, none="`null`")
            rows.append(f"| `{name}` | {cell(type_text(field.annotation))} | {absent} |")
        blocks.append("\n".join(rows))
        blocks += _schema_blocks(model, stages)
    return "\n\n".join(blocks)


def _schema_blocks(model: type[BaseModel], stages: list[str]) -> list[str]:
    """The response_format schema of each stage returning `model`; stages sending the same schema
    share one block."""
    from flexsql.agent.contract import output_schema
    from flexsql.config import AgentConfig

    plans = AgentConfig.model_fields["plans"].default  # the plan schema depends on K: show the default
    shown: dict[str, list[str]] = {}
    for stage in stages:
        schema = output_schema(stage, plans)
        _check_schema_covers(model, schema, stage)
        shown.setdefault(compact_json(schema), []).append(stage)
    blocks = []
    for text, same in shown.items():
        note = f" (K = {plans}: `minItems` = `maxItems` = K)" if "plan" in same else ""
        names = " and ".join(f"`{s}`" for s in same)
        blocks += [f"`response_format` schema of {names}{note}:", f"```json\n{text}\n```"]
    return blocks


def _nested(model: type[BaseModel]) -> list[type[BaseModel]]:
    return [m for field in model.model_fields.values() for m in _models_in(field.annotation)]


def _output_models(outputs: dict[str, type[BaseModel]]) -> Iterator[type[BaseModel]]:
    """The output models and the models nested in them, each once, in stage order."""
    seen: list[type[BaseModel]] = []

    def visit(model: type[BaseModel]) -> None:
        if model in seen:
            return
        seen.append(model)
        for inner in _nested(model):
            visit(inner)

    for model in outputs.values():
        visit(model)
    yield from seen


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in typing.get_args(annotation) for m in _models_in(a)]


def _check_schema_covers(model: type[BaseModel], schema: dict[str, Any], stage: str) -> None:
    """output_schema is written by hand beside the models: a field one has and the other lacks
    would make this document contradict itself, so generation stops and says which."""
    fields, properties = set(model.model_fields), set(schema.get("properties", {}))
    if fields != properties:
        raise GenerationError(
            f"agent/contract.py: output_schema({stage!r}) has the properties {sorted(properties)} but "
            f"{model.__name__} has the fields {sorted(fields)}; make them agree, then run docs/generate.py"
        )


# -- settings (flexsql/config.py) --------------------------------------------------------------------

# A table of sections keyed by a free name names its keys here (the placeholder and the allowed keys).
KEYED_SECTIONS: dict[str, tuple[str, str]] = {"stages": ("stage", "flexsql.config:STAGES")}


@dataclass
class Section:
    """One TOML table of the reference."""

    model: type[BaseModel]
    path: list[str]  # its TOML key path, e.g. ["model", "stages", "<stage>"]
    title: str
    lead: str
    env: str | None  # the prefix of its keys' variables; None: its keys have none of their own


def settings_reference() -> str:
    from flexsql.config import Settings

    return "\n\n".join(_section_blocks(Section(Settings, [], "Top level", "", "FLEXSQL_")))


def _section_blocks(section: Section) -> Iterator[str]:
    """The section's table of plain keys, then its subsections (nested models are TOML tables)."""
    rows = [
        "| key | environment variable | type | default | range | description |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    subsections = []
    for name, field in section.model.model_fields.items():
        _require_description(section.model, name, field)
        sub = _subsection(section, name, field)
        if sub is not None:
            subsections.append(sub)
            continue
        variable = f"`{section.env}{name.upper()}`" if section.env is not None else "—"
        rows.append(
            f"| `{name}` | {variable} | {cell(type_text(without_none(field.annotation)))} "
            f"| {default_text(field)} | {range_text(field)} | {cell(field.description or '')} |"
        )
    if len(rows) > 2:
        yield f"## {section.title}\n\n" + (f"{section.lead}\n\n" if section.lead else "") + "\n".join(rows)
    for sub in subsections:
        yield from _section_blocks(sub)


def _subsection(parent: Section, name: str, field: FieldInfo) -> Section | None:
    """The section a field opens: a model is `[name]`, a list of models `[[name]]`, and a table of
    models `[name.<key>]`; None for a plain key."""
    inner = without_none(field.annotation)
    origin, args = typing.get_origin(inner), typing.get_args(inner)
    path = [*parent.path, name]
    env = f"{parent.env}{name.upper()}__" if parent.env is not None else None
    if _is_model(inner):
        return Section(inner, path, f"[{'.'.join(path)}]", _lead(inner, field), env)
    if origin is list and _is_model(args[0]):
        # the items have no variables of their own: the whole list is one JSON variable
        return Section(args[0], path, f"[[{'.'.join(path)}]]", _lead(args[0], field), None)
    if origin is dict and _is_model(args[1]):
        placeholder, keys = KEYED_SECTIONS[name]
        path.append(f"<{placeholder}>")
        allowed = ", ".join(f"`{k}`" for k in _import(keys))
        lead = _lead(args[1], field) + f" `<{placeholder}>` is one of {allowed}."
        env = f"{env}<{placeholder.upper()}>__" if env is not None else None
        return Section(args[1], path, f"[{'.'.join(path)}]", lead, env)
    return None


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _lead(model: type[BaseModel], field: FieldInfo) -> str:
    """A section's first line: the class docstring's first paragraph, else the field's description."""
    doc = (model.__doc__ or "").strip().split("\n\n")[0]
    text = " ".join(doc.split()) if doc else (field.description or "")
    return text if text.endswith(".") else text + "."


def _require_description(model: type[BaseModel], name: str, field: FieldInfo) -> None:
    if not field.description:
        raise GenerationError(
            f"flexsql/config.py: {model.__name__}.{name} has no description; add description=... to its "
            "Field so the settings reference can say what it does"
        )


def _import(where: str) -> Any:
    module, name = where.split(":")
    return getattr(importlib.import_module(module), name)


# -- the command line (the click commands' --help) ---------------------------------------------------


def cli_reference() -> str:
    from flexsql.server.cli import main

    return "\n\n".join(_help_blocks(main, "flexsql", None))


def _help_blocks(command: click.Command, name: str, parent: click.Context | None) -> Iterator[str]:
    # resilient_parsing: build the context without running callbacks or demanding arguments
    ctx = command.make_context(name, [], parent=parent, resilient_parsing=True, terminal_width=HELP_WIDTH)
    text = "\n".join(line.rstrip() for line in command.get_help(ctx).splitlines())
    # a four-backtick fence: a help line may itself hold ``` (the eval epilog does)
    yield f"## {ctx.command_path}\n\n````text\n{text}\n````"
    if isinstance(command, click.Group):
        for sub in command.list_commands(ctx):
            subcommand = command.get_command(ctx, sub)
            if subcommand is not None and not subcommand.hidden:
                yield from _help_blocks(subcommand, sub, ctx)


# -- the documents -----------------------------------------------------------------------------------

PARTS: dict[str, Callable[[], str]] = {
    "contract-stages": contract_stages,
    "contract-objects": contract_objects,
    "contract-tools": contract_tools,
    "contract-manual": contract_manual,
    "settings": settings_reference,
    "cli": cli_reference,
}


def regenerate(text: str, rendered: dict[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        if match["name"] not in rendered:  # a marker naming no part: left as it is, --check reports it
            return match.group(0)
        return match["begin"] + rendered[match["name"]].rstrip("\n") + "\n" + match["end"]

    return MARKER.sub(replace, text)


def documents() -> dict[Path, str]:
    return {path: path.read_text(encoding="utf-8") for path in sorted(DOCS.glob("*.md"))}


def stale_parts() -> list[str]:
    """`docs/x.md: part` for every generated part that differs from what the code gives now,
    plus every part no document holds and every marker that names no part."""
    docs = documents()
    found = {m["name"]: path for path, text in docs.items() for m in MARKER.finditer(text)}
    problems = [
        f"docs/{found[n].name}: marker names no generated part {n!r}" for n in found if n not in PARTS
    ]
    problems += [f"docs/: no document holds the generated part {n!r}" for n in PARTS if n not in found]
    rendered = {name: PARTS[name]() for name in PARTS if name in found}
    for path, text in docs.items():
        for match in MARKER.finditer(text):
            name = match["name"]
            if name in rendered and match["body"] != rendered[name].rstrip("\n") + "\n":
                problems.append(f"docs/{path.name}: {name}")
    return problems


def write_all() -> list[Path]:
    docs = documents()
    names = {m["name"] for text in docs.values() for m in MARKER.finditer(text)}
    rendered = {name: PARTS[name]() for name in PARTS if name in names}
    changed = []
    for path, text in docs.items():
        new = regenerate(text, rendered)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Rewrite (or --check) the generated parts of docs/*.md.")
    parser.add_argument("--check", action="store_true", help="list stale parts and exit 1; write nothing")
    args = parser.parse_args(argv)
    try:
        return _check() if args.check else _write()
    except GenerationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _check() -> int:
    problems = stale_parts()
    for problem in problems:
        print(f"stale: {problem}", file=sys.stderr)
    if problems:
        print("run `python docs/generate.py` to rewrite them", file=sys.stderr)
    return 1 if problems else 0


def _write() -> int:
    for path in write_all():
        print(f"rewrote {path.relative_to(DOCS.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
