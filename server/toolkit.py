"""How the MCP server runs a registry tool: off the event loop with engine-level cancellation, the
result model as compact text plus structured content, errors as `is_error` results that carry the
error's code (in the text's first word and in `_meta["flexsql/error"]`), and progress from
worker threads as notifications."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Annotated, Any, Union

import anyio
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations

from flexsql.config import Settings
from flexsql.errors import BusyError, FlexSQLError, UnavailableError, error_text
from flexsql.server.health import CALLS_IN_FLIGHT
from flexsql.surrogates import replace_surrogates
from flexsql.tools.engines import CancelHooks, active_cancel_hooks, statement_owner
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.registry import (
    ERROR_META,
    LOCAL,
    NeedsInput,
    Principal,
    ToolEnv,
    ToolResult,
    ToolSpec,
    error_payload,
    result_text,
)
from flexsql.tools.runtime.render import StructuredTooLarge, bounded_structured, wire_size

log = logging.getLogger("flexsql.server")

READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
# remember: adds to flexsql's own knowledge store (never to a database); the same call twice stores once
WRITES_STORE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


ENVELOPE_BYTES = 1024
"""What wraps a tool result on the wire, kept free within [limits] structured_kb: the JSON-RPC
response around it (`{"jsonrpc":"2.0","id":…,"result":…}`) and the SSE event's `event:`, `id:` and
`data:` lines (a client counts them all against its event limit)."""
NOTE_CHARS = 400  # the longest note on a cut structured result the text carries


def tool_result(model: ToolResult, settings: Settings) -> CallToolResult:
    """The result as sent: the compact text and the structured content, together within
    [limits] structured_kb as the SDK writes them (render.wire_size). Structured content that does not
    fit is cut to the rows and values that fit (render.bounded_structured: still the tool's output
    schema, `truncated` set) and the text says so; the text itself is cut when it alone would fill
    half the room."""
    # a result that reports its own failure (run_python's traceback, a limit hit, ask's failed
    # answer) is an error result too, its structured content kept
    failed = getattr(model, "ok", True) is False
    # a lone surrogate (a model's reply, a Python program's output) cannot be written as UTF-8
    structured = replace_surrogates(model.model_dump(mode="json", by_alias=True))
    text = replace_surrogates(result_text(model, settings))
    cap = settings.limits.structured_kb * 1024 - ENVELOPE_BYTES
    # the text with room for a note (each '…' of it is 6 bytes escaped), measured in its message
    around = _message_bytes(text + "\n" + "\u2026" * NOTE_CHARS, failed)
    while around > cap // 2 and len(text) > 200:  # an escaped text of many non-ASCII characters
        text = text[: len(text) * 3 // 4 - 1] + "…"
        around = _message_bytes(text + "\n" + "\u2026" * NOTE_CHARS, failed)
    try:
        structured, cut = bounded_structured(structured, cap - around + 2)  # the 2: `{}` in `around`
    except StructuredTooLarge as exc:
        return error_result(
            UnavailableError(f"{exc}: the result has too many fields to send; ask for less (limit, columns)")
        )
    if cut is not None:
        offset = structured.get("offset")
        note = cut.note(structured.get("result_id"), offset if isinstance(offset, int) else 0)
        text = _with_note(text, note[:NOTE_CHARS], settings.limits.output_chars)
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=structured, is_error=failed
    )


def _message_bytes(text: str, failed: bool) -> int:
    """Bytes of a result holding `text` and an empty structured content, as either transport writes
    it (the 2026 one drops None fields, the SSE sessions unset ones)."""
    empty = CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content={}, is_error=failed
    )
    return max(
        wire_size(empty.model_dump(mode="json", by_alias=True, exclude_none=True)),
        wire_size(empty.model_dump(mode="json", by_alias=True, exclude_unset=True)),
    )


def _with_note(text: str, note: str, max_chars: int) -> str:
    """`text` and the note on its last line, within `max_chars` (the text cut to make room)."""
    room = max(max_chars - len(note) - 1, 0)
    return (text if len(text) <= room else text[: max(room - 1, 0)] + "…") + "\n" + note


def error_result(exc: BaseException) -> CallToolResult:
    if not isinstance(exc, FlexSQLError):
        log.error("tool failed", exc_info=exc)
    # The code rides in `_meta`, not structured_content: clients validate structured content against the
    # tool's output schema even on errors (the TypeScript SDK, so Claude Code and the MCP Inspector do).
    return CallToolResult(
        content=[TextContent(type="text", text=replace_surrogates(error_text(exc)))],
        is_error=True,
        meta={ERROR_META: replace_surrogates(error_payload(exc))},  # sent as `_meta` (the field's alias)
    )


async def run_spec(
    spec: ToolSpec, tc: ToolContext, arguments: dict[str, Any], env: ToolEnv
) -> CallToolResult | InputRequiredResult:
    """Validate and run one call; a cancelled call cancels its query on the engine."""
    hooks = CancelHooks()
    token = active_cancel_hooks.set(hooks)
    # one client holds at most half of the statement slots; the one local client (stdio) may hold all
    owner = statement_owner.set(None if env.principal == LOCAL else env.principal.key)
    try:
        if spec.is_async:
            with CALLS_IN_FLIGHT:
                model = await spec.acall(tc, arguments, env)
        else:  # counted until the worker returns, even after the caller was cancelled (GET /healthz)
            model = await anyio.to_thread.run_sync(
                CALLS_IN_FLIGHT.counted(lambda: spec.call(tc, arguments, env)), abandon_on_cancel=True
            )
    except anyio.get_cancelled_exc_class():
        hooks.cancel()
        raise
    except NeedsInput as need:  # the client asks its user, then calls again with the answers
        return InputRequiredResult(input_requests=need.requests, request_state=need.state)
    except Exception as exc:
        return error_result(exc)
    finally:
        active_cancel_hooks.reset(token)
        statement_owner.reset(owner)
    return tool_result(model, env.settings)


def progress_bridge(ctx: Context | None) -> Callable[[float, float, str], None] | None:
    """A callback for worker threads that forwards progress to the client as notifications."""
    if ctx is None:
        return None

    def report(done: float, total: float, message: str) -> None:
        try:
            anyio.from_thread.run(ctx.report_progress, done, total, message)
        except Exception:  # progress is best effort: a client without a token just ignores it
            pass

    return report


def mcp_handler(
    spec: ToolSpec,
    context_for: Callable[[Context], ToolContext],
    settings: Settings,
    python: bool,
    principal_for: Callable[[Context], Principal] = lambda ctx: LOCAL,
    slot: Callable[[], AbstractAsyncContextManager[None]] | None = None,
) -> Callable[..., Any]:
    """An MCP tool function for `spec`. Every argument is declared `Any` so that our own argument
    model (not the SDK's) validates and words the errors; the published input schema is replaced by
    the registry's compact one. `principal_for` names who calls (server/sessions.py); `slot`, when
    given, is held for the whole call (a server-wide ceiling: its BusyError is the call's error)."""

    async def handler(ctx: Context, **arguments: Any) -> CallToolResult | InputRequiredResult:
        env = ToolEnv(
            settings=settings,
            progress=progress_bridge(ctx),
            mcp_context=ctx,
            python_enabled=python,
            principal=principal_for(ctx),
        )
        try:
            tc = context_for(ctx)
            if slot is None:
                return await run_spec(spec, tc, arguments, env)
            async with slot():
                return await run_spec(spec, tc, arguments, env)
        except BusyError as exc:
            return error_result(exc)

    params = [inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)]
    annotations: dict[str, Any] = {"ctx": Context}
    for name, info in spec.args.model_fields.items():
        key = info.alias or name
        params.append(inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Any))
        annotations[key] = Any
    returns: Any = Annotated[CallToolResult, spec.result]
    if spec.is_async:  # tools that may need the client's input first (ask: a clarifying question)
        returns = Union[returns, InputRequiredResult]  # noqa: UP007 - a runtime union of an Annotated type
    # inspect.signature(), so the SDK, reads a function's __signature__ before its code
    handler.__signature__ = inspect.Signature(params, return_annotation=returns)  # type: ignore[attr-defined]
    annotations["return"] = returns
    handler.__annotations__ = annotations
    handler.__name__ = spec.name
    return handler
