"""How the MCP server runs a registry tool: off the event loop with engine-level cancellation, the
result model as compact text plus structured content, errors as `is_error` results that carry the
error's code (in the text's first word and in `_meta["flexsql/error"]`), and progress from
worker threads as notifications."""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable
from typing import Annotated, Any, Union

import anyio
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations

from flexsql.config import Settings
from flexsql.errors import FlexSQLError, error_text
from flexsql.tools.engines import CancelHooks, active_cancel_hooks
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.registry import (
    ERROR_META,
    NeedsInput,
    ToolEnv,
    ToolResult,
    ToolSpec,
    error_payload,
    result_text,
)
from flexsql.tools.runtime.render import bounded_structured

log = logging.getLogger("flexsql.server")

READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


def tool_result(model: ToolResult, settings: Settings) -> CallToolResult:
    structured = model.model_dump(mode="json", by_alias=True)
    cap = settings.limits.structured_kb * 1024
    if (
        len(json.dumps(structured, default=str)) > cap
    ):  # over HTTP a big event breaks clients (SSE 1 MiB limit)
        structured, _ = bounded_structured(structured, cap)
    # a result that reports its own failure (run_python's traceback, a limit hit) is an error result too
    failed = getattr(model, "ok", True) is False
    return CallToolResult(
        content=[TextContent(type="text", text=result_text(model, settings))],
        structured_content=structured,
        is_error=failed,
    )


def error_result(exc: BaseException) -> CallToolResult:
    if not isinstance(exc, FlexSQLError):
        log.error("tool failed", exc_info=exc)
    # The code rides in `_meta`, not structured_content: clients validate structured content against the
    # tool's output schema even on errors (the TypeScript SDK, so Claude Code and the MCP Inspector do).
    return CallToolResult(
        content=[TextContent(type="text", text=error_text(exc))],
        is_error=True,
        meta={ERROR_META: error_payload(exc)},  # sent as `_meta` (the field's alias)
    )


async def run_spec(
    spec: ToolSpec, tc: ToolContext, arguments: dict[str, Any], env: ToolEnv
) -> CallToolResult | InputRequiredResult:
    """Validate and run one call; a cancelled call cancels its query on the engine."""
    hooks = CancelHooks()
    token = active_cancel_hooks.set(hooks)
    try:
        if spec.is_async:
            model = await spec.acall(tc, arguments, env)
        else:
            model = await anyio.to_thread.run_sync(
                lambda: spec.call(tc, arguments, env), abandon_on_cancel=True
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
    spec: ToolSpec, context_for: Callable[[Context], ToolContext], settings: Settings, python: bool
) -> Callable[..., Any]:
    """An MCP tool function for `spec`. Every argument is declared `Any` so that our own argument
    model (not the SDK's) validates and words the errors; the published input schema is replaced by
    the registry's compact one."""

    async def handler(ctx: Context, **arguments: Any) -> CallToolResult | InputRequiredResult:
        env = ToolEnv(
            settings=settings, progress=progress_bridge(ctx), mcp_context=ctx, python_enabled=python
        )
        return await run_spec(spec, context_for(ctx), arguments, env)

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
