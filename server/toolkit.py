"""What every MCP tool wrapper uses: running a tool function off the event loop with engine-level
cancellation, turning its model into text plus structured content, errors into ToolError, and
progress from worker threads into notifications."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Annotated, TypeVar

import anyio
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from flexsql.errors import FlexSQLError
from flexsql.tools.sources.base import CancelHooks, active_cancel_hooks

log = logging.getLogger("flexsql.server")
T = TypeVar("T", bound=BaseModel)

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


def _result(model: BaseModel) -> CallToolResult:
    text = model.to_text()  # type: ignore[attr-defined]
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=model.model_dump(mode="json", by_alias=True))


async def run_tool(func: Callable[[], T]) -> CallToolResult:
    """Run a blocking tool function in a thread; cancel its engine work if the call is cancelled."""
    hooks = CancelHooks()
    token = active_cancel_hooks.set(hooks)
    try:
        model = await anyio.to_thread.run_sync(func, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        hooks.cancel()
        raise
    except FlexSQLError as exc:
        raise ToolError(str(exc)) from None
    except ToolError:
        raise
    except Exception as exc:  # a bug: say what it was instead of an empty error
        log.exception("tool failed")
        raise ToolError(f"internal error ({type(exc).__name__}): {exc}. This is a flexsql bug; "
                        "the call changed nothing, retry or rephrase") from None
    finally:
        active_cancel_hooks.reset(token)
    return _result(model)


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


SourceArg = Annotated[str | None, Field(description="source name from list_sources; default: the first source")]
