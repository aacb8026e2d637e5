"""The tool registry: one declaration per tool, read by everything that offers or calls tools.

- the MCP server registers its tools by looping over `TOOLS` (flexsql.server.app);
- `flexsql call` validates its key=value arguments with the same argument models (`parse_arguments`);
- the agent calls tools in-process through `call` and shows them to its model as OpenAI function
  definitions (`openai_tools`);
- skills, commands and prompts are checked against `TOOLS` by the tests.

Descriptions are rendered from the configured limits (`describe(settings)`), so "20 rows",
"4,000 characters" or "30 s" are never stale. Input schemas are compact JSON schemas generated from
the argument models (no titles, no `anyOf: [T, null]`): the client pays for `tools/list` on every
turn. The declarations themselves live in `flexsql.tools.declarations`.
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from flexsql.config import Settings
from flexsql.errors import InvalidArgument, NotFoundError, UnavailableError, error_code, error_text
from flexsql.tools.runtime.context import ToolContext

Progress = Callable[[float, float, str], None]


class ToolArgs(BaseModel):
    """Base of every argument model: unknown arguments are errors (a misspelt `tabel=` must not be
    ignored silently), and numbers given for text parameters stay text (`find_values text=1234`)."""

    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)


class NeedsInput(Exception):  # noqa: N818 - a signal, not an error
    """Raised by an async tool that needs the client's input before it can answer (MCP 2026-07-28
    `InputRequiredResult`): `requests` by key, and the opaque `state` the client sends back."""

    def __init__(self, requests: dict[str, Any], state: str) -> None:
        super().__init__("the client must answer input requests first")
        self.requests = requests
        self.state = state


@dataclass
class ToolEnv:
    """What a call may use besides its arguments: progress reporting and, for tools that talk back
    to the client (`ask`: sampling, elicitation), the MCP request context."""

    settings: Settings = field(default_factory=Settings)
    progress: Progress | None = None
    mcp_context: Any = None
    python_enabled: bool = True


@dataclass(frozen=True)
class ToolSpec:
    name: str
    args: type[ToolArgs]
    result: type[BaseModel]
    run: Callable[[ToolContext, Any, ToolEnv], BaseModel | Awaitable[BaseModel]]
    describe: Callable[[Settings], str]
    is_async: bool = False  # `run` is a coroutine function (it awaits a model or the client)
    needs_python: bool = False  # offered only where run_python's sandbox is enabled
    agent_tool: bool = True  # offered to the built-in agent's stages

    def parse(self, arguments: Mapping[str, Any] | None) -> ToolArgs:
        """Validate arguments with the tool's model; a clear InvalidArgument otherwise. `None`
        values mean "not given" (MCP clients send explicit nulls for optional parameters)."""
        given = {k: v for k, v in (arguments or {}).items() if v is not None}
        try:
            return self.args.model_validate(given)
        except ValidationError as exc:
            raise InvalidArgument(
                f"{self.name}: {_validation_text(exc)}; it takes {self.signature()}"
            ) from None

    def signature(self) -> str:
        parts = []
        for name, info in self.args.model_fields.items():
            parts.append(
                f"{name} ({_type_name(info.annotation)}{', required' if info.is_required() else ''})"
            )
        return ", ".join(parts) or "no arguments"

    def input_schema(self) -> dict[str, Any]:
        return copy.deepcopy(_input_schema(self.args))

    def output_schema(self) -> dict[str, Any]:
        return copy.deepcopy(_output_schema(self.result))


@functools.cache
def _input_schema(args: type[BaseModel]) -> dict[str, Any]:
    """Computed once per model: every stage request of the agent sends the schemas."""
    schema = compact_schema(args.model_json_schema())
    schema.pop("additionalProperties", None)  # extras are refused by validation; saying so costs tokens
    return schema


@functools.cache
def _output_schema(result: type[BaseModel]) -> dict[str, Any]:
    return compact_schema(result.model_json_schema(mode="serialization"), nullable=True)


def _validation_text(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        if err["type"] == "extra_forbidden":
            problems.append(f"unknown argument {where!r}")
        elif err["type"] == "missing":
            problems.append(f"{where} is required")
        else:
            got = err.get("input")
            shown = repr(got) if len(repr(got)) <= 60 else repr(got)[:57] + "..."
            problems.append(f"{where}: {err['msg'].lower()} (got {shown})")
    return "; ".join(problems)


def _type_name(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) or str(annotation)
    return str(annotation).replace("typing.", "").replace(" | None", "") if "[" in str(annotation) else text


# -- compact JSON schemas ------------------------------------------------------------------------


def compact_schema(schema: dict[str, Any], nullable: bool = False) -> dict[str, Any]:
    """A JSON schema without what a model does not need: titles, null defaults, `anyOf: [T, null]`
    wrappers — dropped for arguments (null means "not given"), `"type": [T, "null"]` for results
    (`nullable`), where a null really is sent. `$defs` are kept (nested result models), also compacted."""

    def clean(node: Any) -> Any:
        if isinstance(node, list):
            return [clean(n) for n in node]
        if not isinstance(node, dict):
            return node
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "title" and isinstance(value, str):
                continue
            if key == "default" and value is None:
                continue
            out[key] = clean(value) if key != "properties" else {k: clean(v) for k, v in value.items()}
        variants = out.get("anyOf")
        if isinstance(variants, list):
            kept = [v for v in variants if v != {"type": "null"}]
            if len(kept) == 1 and len(kept) < len(variants):
                out.pop("anyOf")
                only = dict(kept[0])
                if nullable:
                    if isinstance(only.get("type"), str):
                        only["type"] = [only["type"], "null"]
                    else:  # a $ref or a composite: keep the null alternative explicit
                        only = {"anyOf": [only, {"type": "null"}]}
                out = {**only, **out}
        return out

    return clean(schema)


# -- the registry --------------------------------------------------------------------------------


def _load() -> dict[str, ToolSpec]:
    from flexsql.tools.declarations import DECLARATIONS

    return {spec.name: spec for spec in DECLARATIONS}


class _Tools(Mapping[str, ToolSpec]):
    """`TOOLS[name]`, in declaration order; loaded on first use (the declarations import every tool)."""

    _specs: dict[str, ToolSpec] | None = None

    def _all(self) -> dict[str, ToolSpec]:
        if self._specs is None:
            self._specs = _load()
        return self._specs

    def __getitem__(self, name: str) -> ToolSpec:
        return self._all()[name]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


TOOLS = _Tools()


def get(name: str) -> ToolSpec:
    try:
        return TOOLS[name]
    except KeyError:
        raise NotFoundError(f"unknown tool {name!r}; tools: {', '.join(TOOLS)}") from None


def python_enabled(settings: Settings, transport_default: bool = True) -> bool:
    """run_python's switch: `[sandbox] enabled` when set, else the transport's default (on for
    stdio, loopback HTTP and in-process callers; off when HTTP binds elsewhere)."""
    return transport_default if settings.sandbox.enabled is None else bool(settings.sandbox.enabled)


def available(settings: Settings, python: bool = True, *, agent: bool = False) -> list[ToolSpec]:
    """The tools offered under these settings, in declaration order."""
    return [
        spec
        for spec in TOOLS.values()
        if (python or not spec.needs_python) and (not agent or spec.agent_tool)
    ]


def _checked(spec: ToolSpec, env: ToolEnv) -> None:
    if spec.needs_python and not env.python_enabled:
        raise UnavailableError(
            f"{spec.name} is disabled on this server ([sandbox] enabled = false or --no-python); "
            "use run_query instead, or start the server with --python"
        )


def _prepared(
    name: str, arguments: Mapping[str, Any] | None, env: ToolEnv | None
) -> tuple[ToolSpec, ToolArgs, ToolEnv]:
    spec = get(name)
    env = env or ToolEnv()
    _checked(spec, env)
    return spec, spec.parse(arguments), env


def call(
    ctx: ToolContext, name: str, arguments: Mapping[str, Any] | None = None, env: ToolEnv | None = None
) -> BaseModel:
    """Call a synchronous tool in-process: validate, check it is enabled, run. Raises FlexSQLError."""
    spec, args, env = _prepared(name, arguments, env)
    if spec.is_async:
        raise InvalidArgument(f"{name} is asynchronous: use acall")
    return spec.run(ctx, args, env)  # type: ignore[return-value]


async def acall(
    ctx: ToolContext, name: str, arguments: Mapping[str, Any] | None = None, env: ToolEnv | None = None
) -> BaseModel:
    """Call any tool from async code; synchronous tools run in a worker thread."""
    import anyio

    spec, args, env = _prepared(name, arguments, env)
    if spec.is_async:
        return await spec.run(ctx, args, env)  # type: ignore[misc]
    return await anyio.to_thread.run_sync(lambda: spec.run(ctx, args, env), abandon_on_cancel=True)  # type: ignore[arg-type, return-value]


def result_text(model: BaseModel, settings: Settings) -> str:
    """The compact text a model reads, at most `limits.output_chars` characters (cut with a note)."""
    to_text = model.to_text  # type: ignore[attr-defined]
    params = inspect.signature(to_text).parameters
    kwargs: dict[str, Any] = {}
    if "max_chars" in params:
        kwargs["max_chars"] = settings.limits.output_chars
    if "cell_chars" in params:
        kwargs["cell_chars"] = settings.limits.cell_chars
    text = to_text(**kwargs)
    cap = settings.limits.output_chars
    if len(text) > cap:
        note = f"\n… truncated: true — text cut at {cap:,} of {len(text):,} characters; ask for less (limit, columns)"
        text = text[: max(0, cap - len(note))].rstrip() + note
    return text


ERROR_META = "flexsql/error"  # the `_meta` key of an MCP error result that carries the code


def error_payload(exc: BaseException) -> dict[str, Any]:
    return {"code": error_code(exc), "message": error_text(exc)}


# -- exports for model endpoints ----------------------------------------------------------------


def openai_tools(
    settings: Settings | None = None, names: Iterable[str] | None = None, python: bool = True
) -> list[dict[str, Any]]:
    """OpenAI function definitions (Chat Completions `tools`) for a subset of the agent's tools."""
    settings = settings or Settings()
    offered = {s.name: s for s in available(settings, python, agent=True)}
    chosen = list(offered) if names is None else [n for n in names if n in offered]
    return [
        {
            "type": "function",
            "function": {
                "name": n,
                "description": offered[n].describe(settings),
                "parameters": offered[n].input_schema(),
            },
        }
        for n in chosen
    ]


def list_size(settings: Settings | None = None) -> int:
    """Characters a model reads for the whole tool list (name + description + input schema)."""
    settings = settings or Settings()
    return sum(
        len(s.name) + len(s.describe(settings)) + len(json.dumps(s.input_schema())) for s in TOOLS.values()
    )
