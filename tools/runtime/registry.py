"""Tools: each declared once, beside its function; and `Tools`, an ordered set of them.

A tool is a function `fn(ctx, args)` (or `fn(ctx, args, env)`, when it reports progress or talks to
the client) decorated with `@tool(describe)`. Its argument model (a `ToolArgs`) is the only place
for the parameters' names, defaults, ranges and descriptions; its return annotation (a
`ToolResult`) is the structured result; `describe(settings)` is the description, rendered from the
configured limits and the model's defaults, so "20 rows", "4,000 characters" or "50 per page" are
never stale. Everything that offers or calls tools reads the declaration:

- the MCP server registers each tool of its `Tools` (flexsql.server.app);
- `flexsql call` validates its key=value arguments with the same argument models;
- the agent calls tools in-process and shows them to its model as OpenAI function definitions;
- skills, commands and prompts are checked against the tools by the tests.

Input schemas are compact JSON schemas generated from the argument models (no titles, no
`anyOf: [T, null]`): the client pays for `tools/list` on every turn.
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any, ParamSpec, Protocol, TypeVar, cast, get_type_hints

import anyio
from pydantic import BaseModel, ConfigDict, ValidationError

from flexsql.config import Settings
from flexsql.errors import InvalidArgument, NotFoundError, UnavailableError, error_code, error_text
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.render import TextBudget
from flexsql.tools.runtime.schema import compact_schema

Progress = Callable[[float, float, str], None]
Describe = Callable[[Settings], str]


class ToolArgs(BaseModel):
    """Base of every argument model: unknown arguments are errors (a misspelt `tabel=` must not be
    ignored silently), and numbers given for text parameters stay text (`find_values text=1234`)."""

    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True, populate_by_name=True)

    @classmethod
    def default(cls, name: str) -> Any:
        """A parameter's declared default, for descriptions that state it."""
        return cls.model_fields[name].default


class ToolResult(BaseModel):
    """Base of every tool's result: the structured form for programs, `to_text` for the model."""

    def to_text(self, budget: TextBudget = TextBudget()) -> str:
        """The compact text a model reads, within `budget` (characters in all, per cell)."""
        raise NotImplementedError


class NeedsInput(Exception):  # noqa: N818 - a signal, not an error
    """Raised by an async tool that needs the client's input before it can answer (MCP 2026-07-28
    `InputRequiredResult`): `requests` by key, and the opaque `state` the client sends back."""

    def __init__(self, requests: dict[str, Any], state: str) -> None:
        super().__init__("the client must answer input requests first")
        self.requests = requests
        self.state = state


@dataclass(frozen=True)
class Principal:
    """Who calls, for the state a tool keeps across calls for one client (the agent's conversations
    and pending clarifications): the server names one per transport (flexsql.server.sessions);
    direct calls, the CLI and stdio are LOCAL, the one local user."""

    key: str
    """Unique within the server and never shown: "local", "session:<id>", "token:<identity>", "anonymous"."""
    issues_ids: bool = False
    """Stateless HTTP: a conversation is continued only with an id the server minted and returned,
    so a name another client also chose reaches nothing of theirs."""


LOCAL = Principal("local")


@dataclass
class ToolEnv:
    """What a call may use besides its arguments: progress reporting, who is calling and, for tools
    that talk back to the client (`ask`: sampling, elicitation), the MCP request context."""

    settings: Settings = field(default_factory=Settings)
    progress: Progress | None = None
    mcp_context: Any = None
    python_enabled: bool = True
    principal: Principal = LOCAL


NO_ENV = ToolEnv()
"""The env of a direct call (a test, a script): no progress, no client, default settings."""

Run = Callable[[ToolContext, Any, ToolEnv], "ToolResult | Awaitable[ToolResult]"]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    args: type[ToolArgs]
    result: type[ToolResult]
    run: Run
    describe: Describe
    is_async: bool = False  # `run` is a coroutine function (it awaits a model or the client)
    needs_python: bool = False  # offered only where run_python's sandbox is enabled
    agent_tool: bool = True  # offered to the built-in agent's stages
    writes: bool = (
        False  # changes something of flexsql's own (remember: the knowledge store), never a database
    )

    def parse(self, arguments: Mapping[str, Any] | None) -> ToolArgs:
        """Validate arguments with the tool's model; a clear InvalidArgument otherwise. `None`
        values mean "not given" (MCP clients send explicit nulls for optional parameters)."""
        given = {k: v for k, v in (arguments or {}).items() if v is not None}
        try:
            return self.args.model_validate(given)
        except ValidationError as exc:
            raise InvalidArgument(
                f"{self.name}: {_validation_text(exc, self.args)}; it takes {self.signature()}"
            ) from None

    def signature(self) -> str:
        parts = []
        for name, info in self.args.model_fields.items():
            required = ", required" if info.is_required() else ""
            parts.append(f"{info.alias or name} ({_type_name(info.annotation)}{required})")
        return ", ".join(parts) or "no arguments"

    def input_schema(self) -> dict[str, Any]:
        return copy.deepcopy(_input_schema(self.args))

    def output_schema(self) -> dict[str, Any]:
        return copy.deepcopy(_output_schema(self.result))

    def _prepared(self, arguments: Mapping[str, Any] | None, env: ToolEnv | None) -> tuple[ToolArgs, ToolEnv]:
        env = env or ToolEnv()
        if self.needs_python and not env.python_enabled:
            raise UnavailableError(
                f"{self.name} is disabled on this server ([sandbox] enabled = false or --no-python); "
                "use run_query instead, or start the server with --python"
            )
        return self.parse(arguments), env

    def call(
        self, ctx: ToolContext, arguments: Mapping[str, Any] | None = None, env: ToolEnv | None = None
    ) -> ToolResult:
        """Validate, check the tool is enabled, run. Raises FlexSQLError."""
        args, env = self._prepared(arguments, env)
        if self.is_async:
            raise InvalidArgument(f"{self.name} is asynchronous: use acall")
        return self._run_sync(ctx, args, env)

    async def acall(
        self, ctx: ToolContext, arguments: Mapping[str, Any] | None = None, env: ToolEnv | None = None
    ) -> ToolResult:
        """The same from async code; a synchronous tool runs in a worker thread."""
        args, env = self._prepared(arguments, env)
        if self.is_async:
            result = self.run(ctx, args, env)
            return await result if inspect.isawaitable(result) else result
        return await anyio.to_thread.run_sync(
            functools.partial(self._run_sync, ctx, args, env), abandon_on_cancel=True
        )

    def _run_sync(self, ctx: ToolContext, args: ToolArgs, env: ToolEnv) -> ToolResult:
        result = self.run(ctx, args, env)
        if inspect.isawaitable(result):  # a plain function that returns a coroutine: is_async missed it
            raise TypeError(f"tool {self.name} returned an awaitable from a plain function; make it async")
        return result


P = ParamSpec("P")
R = TypeVar("R", bound="ToolResult | Awaitable[ToolResult]")
R_co = TypeVar("R_co", bound="ToolResult | Awaitable[ToolResult]", covariant=True)


class ToolFunction(Protocol[P, R_co]):
    """A function declared with @tool: called as before, with its declaration attached."""

    tool_spec: ToolSpec
    __name__: str

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R_co: ...


def tool(
    describe: str | Describe, *, needs_python: bool = False, agent_tool: bool = True, writes: bool = False
) -> Callable[[Callable[P, R]], ToolFunction[P, R]]:
    """Declare the decorated function a tool named after it. Its second parameter's annotation is
    the argument model and its return annotation the result model; a third parameter, when it has
    one, receives the ToolEnv. The function stays a plain function (`fn(ctx, Args(...))`)."""

    def declare(fn: Callable[P, R]) -> ToolFunction[P, R]:
        hints = get_type_hints(fn)
        params = list(inspect.signature(fn).parameters)
        if len(params) not in (2, 3):
            raise TypeError(f"tool {fn.__name__} must take (ctx, args) or (ctx, args, env)")
        args, result = hints[params[1]], hints.get("return")
        if not (isinstance(args, type) and issubclass(args, ToolArgs)):
            raise TypeError(f"tool {fn.__name__}: its args parameter must be annotated with a ToolArgs model")
        if not (isinstance(result, type) and issubclass(result, ToolResult)):
            raise TypeError(f"tool {fn.__name__}: its return annotation must be a ToolResult model")
        # the parameters were checked above, at run time: (ctx, args) or (ctx, args, env)
        checked = cast(Callable[..., R], fn)
        run: Run = checked if len(params) == 3 else (lambda ctx, a, env: checked(ctx, a))
        # the same function object, from here on carrying its declaration
        declared = cast(ToolFunction[P, R], fn)
        declared.tool_spec = ToolSpec(
            name=fn.__name__,
            args=args,
            result=result,
            run=run,
            describe=describe if callable(describe) else _fixed_text(describe),
            is_async=inspect.iscoroutinefunction(fn),
            needs_python=needs_python,
            agent_tool=agent_tool,
            writes=writes,
        )
        return declared

    return declare


M = TypeVar("M", bound=ToolResult)


def expect(result: ToolResult, model: type[M]) -> M:
    """A result of a call by name (typed as the base ToolResult) as the tool's declared result model."""
    if not isinstance(result, model):
        raise TypeError(f"expected a {model.__name__} result, got {type(result).__name__}")
    return result


def _fixed_text(text: str) -> Describe:
    def describe(_settings: Settings) -> str:
        return text

    return describe


def spec_of(fn: Callable[..., Any]) -> ToolSpec:
    spec = getattr(fn, "tool_spec", None)
    if not isinstance(spec, ToolSpec):
        raise TypeError(f"{getattr(fn, '__name__', fn)!r} is not declared with @tool")
    return spec


class Tools(Mapping[str, ToolSpec]):
    """An ordered set of tools: what a server offers, what the agent's stages may call."""

    def __init__(self, specs: Iterable[ToolSpec]) -> None:
        self._specs: dict[str, ToolSpec] = {}
        for spec in specs:
            if spec.name in self._specs:
                raise ValueError(f"two tools are named {spec.name!r}")
            self._specs[spec.name] = spec

    @classmethod
    def from_modules(cls, *modules: ModuleType) -> Tools:
        """The tools declared in `modules`, module by module, each in definition order."""
        return cls(
            v.tool_spec
            for m in modules
            for v in vars(m).values()
            if isinstance(getattr(v, "tool_spec", None), ToolSpec)
        )

    def with_tools(self, *fns: Callable[..., Any]) -> Tools:
        """These tools and more (functions declared with @tool), appended in order."""
        return Tools([*self._specs.values(), *(spec_of(fn) for fn in fns)])

    def __getitem__(self, name: str) -> ToolSpec:
        return self._specs[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    def get_tool(self, name: str) -> ToolSpec:
        """The tool named `name`, or a NotFoundError listing the tools."""
        try:
            return self._specs[name]
        except KeyError:
            raise NotFoundError(f"unknown tool {name!r}; tools: {', '.join(self._specs)}") from None

    def available(self, python: bool = True, *, agent: bool = False) -> list[ToolSpec]:
        """The tools offered with or without the sandbox, to a client or (`agent`) to the agent."""
        return [
            s for s in self._specs.values() if (python or not s.needs_python) and (not agent or s.agent_tool)
        ]

    def call(
        self,
        ctx: ToolContext,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        env: ToolEnv | None = None,
    ) -> ToolResult:
        return self.get_tool(name).call(ctx, arguments, env)

    async def acall(
        self,
        ctx: ToolContext,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        env: ToolEnv | None = None,
    ) -> ToolResult:
        return await self.get_tool(name).acall(ctx, arguments, env)

    def openai_tools(
        self, settings: Settings, names: Iterable[str] | None = None, python: bool = True
    ) -> list[dict[str, Any]]:
        """OpenAI function definitions (Chat Completions `tools`) for a subset of the agent's tools."""
        offered = {s.name: s for s in self.available(python, agent=True)}
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

    def list_size(self, settings: Settings) -> int:
        """Characters a client reads for the whole tool list (name + description + input schema)."""
        return sum(
            len(s.name) + len(s.describe(settings)) + len(json.dumps(s.input_schema()))
            for s in self._specs.values()
        )


def python_enabled(settings: Settings, transport_default: bool = True) -> bool:
    """run_python's switch: `[sandbox] enabled` when set, else the transport's default (on for
    stdio, loopback HTTP and in-process callers; off when HTTP binds elsewhere)."""
    return transport_default if settings.sandbox.enabled is None else bool(settings.sandbox.enabled)


def result_text(
    model: ToolResult, settings: Settings, tools: frozenset[str] | None = None, max_chars: int | None = None
) -> str:
    """The compact text a model reads, at most `limits.output_chars` characters (or `max_chars`, when
    smaller): the result renders itself within it (whole rows, "first n of m"); text that still runs
    over is cut at a line end, with a note. Its hints name only `tools` (None: every tool)."""
    cap = settings.limits.output_chars if max_chars is None else min(max_chars, settings.limits.output_chars)
    budget = TextBudget.of(settings.limits, tools)
    text = model.to_text(replace(budget, max_chars=cap))
    if len(text) > cap:
        note = f"\n… truncated: true — text cut at {cap:,} of {len(text):,} characters; ask for less (fewer rows, columns or tables)"
        room = max(0, cap - len(note))
        head = text[:room]
        cut = head.rfind("\n")
        text = (head[:cut] if cut > room // 2 else head).rstrip() + note
    return text


ERROR_META = "flexsql/error"  # the `_meta` key of an MCP error result that carries the code


def error_payload(exc: BaseException) -> dict[str, Any]:
    return {"code": error_code(exc), "message": error_text(exc)}


@functools.cache
def _input_schema(args: type[BaseModel]) -> dict[str, Any]:
    """Computed once per model: every stage request of the agent sends the schemas."""
    schema = compact_schema(args.model_json_schema())
    schema.pop("additionalProperties", None)  # extras are refused by validation; saying so costs tokens
    return schema


@functools.cache
def _output_schema(result: type[BaseModel]) -> dict[str, Any]:
    return compact_schema(result.model_json_schema(mode="serialization"), nullable=True)


_RANGE_ERRORS = {"greater_than_equal", "less_than_equal", "greater_than", "less_than"}


def _validation_text(exc: ValidationError, model: type[BaseModel]) -> str:
    problems = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        got = err.get("input")
        if err["type"] == "extra_forbidden":
            problems.append(f"unknown argument {where!r}")
        elif err["type"] == "missing":
            problems.append(f"{where} is required")
        elif err["type"] in _RANGE_ERRORS:
            problems.append(f"{where}={got} is out of range: {_range_text(model, str(err['loc'][0]))}")
        elif err["type"] in ("too_short", "too_long", "string_too_short", "string_too_long"):
            problems.append(_length_text(where, err.get("ctx") or {}, got))
        else:
            shown = repr(got) if len(repr(got)) <= 60 else repr(got)[:57] + "..."
            problems.append(f"{where}: {err['msg'].lower()} (got {shown})")
    return "; ".join(problems)


def _length_text(where: str, bounds: Mapping[str, Any], got: Any) -> str:
    """How many items (or characters) a list (or text) argument takes, and how many it had."""
    unit = "character" if isinstance(got, str) else "item"
    size = len(got) if isinstance(got, str | list | tuple) else bounds.get("actual_length")
    if "min_length" in bounds:
        least = bounds["min_length"]
        return f"{where} needs at least {least} {unit}{'s' if least != 1 else ''} (got {size})"
    return f"{where} takes at most {bounds.get('max_length')} {unit}s (got {size})"


def _range_text(model: type[BaseModel], name: str) -> str:
    """The allowed range in words, from the field's declared bounds."""
    info = model.model_fields.get(name) or next(
        (f for f in model.model_fields.values() if f.alias == name), None
    )
    low = high = None
    for bound in info.metadata if info is not None else ():
        low = getattr(bound, "ge", getattr(bound, "gt", low))
        high = getattr(bound, "le", getattr(bound, "lt", high))
    if low is not None and high is not None:
        return f"use a value from {low} to {high}"
    return f"use a value of at least {low}" if low is not None else f"use a value of at most {high}"


def _type_name(annotation: Any) -> str:
    """`list[str]`, `int`: the type as a reader writes it (None means "not given", so it is not shown)."""
    text = str(annotation) if "[" in str(annotation) or "|" in str(annotation) else annotation.__name__
    return text.replace("typing.", "").replace(" | None", "")
