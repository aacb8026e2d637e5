"""One stage's conversation with its model: requests, tool calls answered in-process by the tool
registry (the same functions and argument schemas as the MCP tools), bounded in rounds and
characters, and a reply parsed into the stage's contract object — with up to two corrections for
a reply that cannot be used, then a clear ModelError.

Every request carries the stage's schema; the backend decides whether to send it. Guided decoding
and tools do not mix on vLLM (a json_schema constrains the whole output, tool calls included), so
under `response_format = "auto"` the schema rides only on requests without tools — the request
that demands the answer once the tool budget is spent or a reply could not be parsed — while
`"json_schema"` (endpoints that combine both, like OpenAI) sends it with the tools too.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from pydantic import BaseModel

from flexsql.agent.budget import Budget
from flexsql.agent.contract import (
    StageOutputError,
    format_instruction,
    load_json,
    output_schema,
    parse_output,
)
from flexsql.agent.models.base import ChatModel, ChatRequest, ToolCall, assistant_message
from flexsql.agent.notebook import Notebook
from flexsql.agent.trace import Trace
from flexsql.config import Settings
from flexsql.errors import FlexSQLError, ModelError, error_text
from flexsql.tools.engines import CancelHooks, active_cancel_hooks
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.registry import ToolEnv, result_text
from flexsql.tools.toolbox import TOOLS

MAX_FIXES = 2  # corrections of an unusable reply before the stage fails
ECHO_CHARS = (
    20_000  # of an unusable reply sent back with its correction (its end: a 2 MB reply is not resent)
)


@dataclass
class Run:
    """Everything the stages of one question share."""

    run_id: str
    question: str
    tools: ToolContext
    settings: Settings
    model_for: Callable[[str], ChatModel]
    trace: Trace
    budget: Budget
    source: str
    dialect: str
    python: bool = True
    conversation: str | None = None  # earlier turns, rendered (flexsql.agent.conversation)
    external_knowledge: str | None = None
    knowledge: str | None = None  # the condensed document (knowledge stage)
    schema_notes: str | None = None  # what linking found
    on_stage: Callable[[str, str], Awaitable[None] | None] | None = None
    tool_timeout_s: float | None = None
    counters: dict[str, int] = field(default_factory=dict)
    notebook: Notebook = field(default_factory=Notebook)  # what the stages learnt, for later ones

    def notes(self, branch: int | None = None) -> str | None:
        """What a stage of `branch` is told was found so far: the linked tables and the notebook."""
        parts = [self.schema_notes, self.notebook.render(branch)]
        return "\n\n".join(p for p in parts if p) or None

    def offered(self, tools: list[str] | None, stage: str) -> list[str]:
        """Those of a stage's `tools` this run offers (run_python only with the sandbox), in order;
        none when the stage's model takes no tools (MCP sampling without `sampling.tools`), so its
        prompts name none either."""
        if not getattr(self.model_for(stage), "tools_enabled", True):
            return []
        wanted = tools or []
        return [t.name for t in TOOLS.available(self.python, agent=True) if t.name in wanted]

    async def progress(self, stage: str, message: str) -> None:
        self.trace.event("stage", stage=stage, message=message)
        if self.on_stage is not None:
            outcome = self.on_stage(stage, message)
            if inspect.isawaitable(outcome):
                await outcome

    def next_id(self, prefix: str) -> str:
        self.counters[prefix] = self.counters.get(prefix, 0) + 1
        return f"{prefix}{self.counters[prefix]}"


def system_message(
    stage: str, role: str, run: Run, plans: int = 4, tools: list[str] | None = None
) -> dict[str, Any]:
    offered = run.offered(tools, stage)
    parts = [
        role,
        f"The database is the flexsql source `{run.source}` (SQL dialect: {run.dialect}). "
        "Every query is read-only."
        + (f" Tools in this step: {', '.join(offered)}." if offered else " This step has no tools."),
        format_instruction(stage, plans, tools=bool(offered)),
    ]
    return {"role": "system", "content": "\n\n".join(parts)}


def _with_conversation(run: Run, text: str) -> str:
    if run.conversation and run.conversation not in text:
        return f"{text.rstrip()}\n\nEarlier turns of this conversation:\n{run.conversation}\n"
    return text


async def call_tool(
    run: Run, call: ToolCall, allowed: list[str], stage: str = "", branch: int | None = None
) -> str:
    """Run one tool call for the model; every failure becomes text the model can act on. What a
    call establishes goes into the run's notebook (stage `stage`, plan `branch`)."""
    run.budget.tool_call()
    name = call.name.strip()
    if name not in allowed:
        shown = name if len(name) <= 80 else name[:80] + "…"
        text = (
            f"not_found: there is no tool {shown!r} in this step; the tools here are: {', '.join(allowed)}"
            if name not in TOOLS
            else f"unavailable: {name} is not offered in this step; use one of: {', '.join(allowed)}"
        )
        run.trace.event("tool_result", tool=shown, call_id=call.id, error=True, text=text)
        return text
    try:
        if call.problem:
            raise ValueError(call.problem)
        arguments = load_json(call.arguments) if call.arguments.strip() else {}
        if not isinstance(arguments, dict):
            raise ValueError("the arguments must be a JSON object")
    except ValueError as exc:
        text = f'invalid_argument: the arguments of {name} are not a JSON object ({exc}); send e.g. {{"table": "orders"}}'
        run.trace.event("tool_result", tool=name, call_id=call.id, error=True, text=text)
        return text
    spec = TOOLS.get_tool(name)
    if "source" in spec.args.model_fields:
        if not arguments.get("source"):
            arguments["source"] = run.source
    elif arguments.get("source") in (run.source, None, ""):
        # the prompts ask for source= on every call; a tool that reads no source (compare_results
        # works on stored result ids) must not refuse the call for it
        arguments.pop("source", None)
    run.trace.event("tool_call", tool=name, call_id=call.id, arguments=arguments)
    env = ToolEnv(settings=run.settings, python_enabled=run.python)
    hooks = CancelHooks()
    token = active_cancel_hooks.set(hooks)
    try:
        model = await TOOLS.acall(run.tools, name, arguments, env)
        text = result_text(model, run.settings, frozenset(allowed))
        error = False
    except FlexSQLError as exc:
        text, error = error_text(exc), True
    except BaseException:
        hooks.cancel()  # cancelled (or a bug): stop the engine work this call started
        raise
    finally:
        active_cancel_hooks.reset(token)
    cap = run.settings.agent.tool_result_chars
    if len(text) > cap:
        text = text[:cap] + f"\n… cut at {cap:,} characters"
    # a query naming a family (EVENTS_*) ran as the union of its shards: the trace keeps what ran
    expanded = None if error else getattr(model, "expanded_sql", None)
    extra = {"expanded_sql": expanded} if expanded else {}
    run.trace.event("tool_result", tool=name, call_id=call.id, error=error, text=text, **extra)
    if not error:
        run.notebook.tool(stage, name, arguments, text, branch, result=model)
    return text


def _parsed(stage: str, reply: Any, plans: int) -> BaseModel:
    """The stage's object from the reply's content — or, when the content is empty, from its
    reasoning: Qwen3 behind vLLM's reasoning parser can leave the whole answer there (vllm#53284).
    Run in a worker thread: parsing is bounded (flexsql.agent.contract) but a long reply still takes
    a while, and other sessions must not wait for it."""
    try:
        return parse_output(stage, reply.content, plans)
    except StageOutputError:
        if (reply.content or "").strip() or not (reply.reasoning or "").strip():
            raise
        return parse_output(stage, reply.reasoning, plans)


async def converse(
    run: Run,
    stage: str,
    system: dict[str, Any],
    user: str,
    tools: list[str] | None = None,
    plans: int = 4,
    branch: int | None = None,
) -> BaseModel:
    """Talk to the stage's model until it answers with the stage's object; its `findings` go into
    the run's notebook (plan `branch` for the per-plan stages)."""
    cfg = run.settings.agent
    model = run.model_for(stage)
    allowed = run.offered(tools, stage)
    offered = TOOLS.openai_tools(run.settings, allowed, python=run.python) if allowed else None
    messages: list[dict[str, Any]] = [system, {"role": "user", "content": _with_conversation(run, user)}]
    schema = output_schema(stage, plans)
    rounds = tool_chars = fixes = 0
    seen: dict[tuple[str, str], str] = {}
    demand_answer = False
    sent = 0
    while True:
        run.budget.start_call()
        use_tools = (
            bool(offered)
            and not demand_answer
            and rounds < cfg.tool_rounds
            and tool_chars < cfg.stage_tool_chars
        )
        if offered and not use_tools and not demand_answer:
            demand_answer = True
            messages.append(
                {
                    "role": "user",
                    "content": "The tool budget of this step is spent: answer now with the JSON object.",
                }
            )
        request = ChatRequest(
            stage=stage,
            run_id=run.run_id,
            messages=messages,
            tools=offered if use_tools else None,
            response_schema=schema,
            schema_name=stage,
        )
        # concurrent plans interleave their events: `call` pairs each reply with its request
        call_id = run.next_id("m")
        run.trace.event(
            "request",
            call=call_id,
            stage=stage,
            model=model.name,
            new_messages=messages[sent:],
            tools=allowed if use_tools else [],
            schema=not use_tools,
        )
        sent = len(messages)
        try:
            reply = await model.complete(request)
        except BaseException:
            run.budget.release()
            raise
        run.budget.charge(reply.usage.prompt_tokens, reply.usage.completion_tokens)
        run.trace.event(
            "reply",
            call=call_id,
            stage=stage,
            content=reply.content,
            reasoning=reply.reasoning,
            tool_calls=[c.model_dump() for c in reply.tool_calls],
            usage=reply.usage.model_dump(),
            finish_reason=reply.finish_reason,
            elapsed_s=round(reply.elapsed_s, 4),
        )
        if reply.tool_calls and use_tools:
            messages.append(assistant_message(reply))
            skipped = 0
            for index, call in enumerate(reply.tool_calls):
                # Every call gets its tool message (the protocol requires one per id), but one reply
                # runs at most tool_calls_per_reply of them, and none past the stage's tool text.
                if index >= cfg.tool_calls_per_reply:
                    text = (
                        f"not run: limit of {cfg.tool_calls_per_reply} tool calls per reply "
                        "([agent] tool_calls_per_reply); make fewer calls at a time"
                    )
                    skipped += 1
                elif tool_chars >= cfg.stage_tool_chars:
                    text = (
                        f"not run: limit of {cfg.stage_tool_chars:,} characters of tool text in this step "
                        "([agent] stage_tool_chars) reached; answer with what you have"
                    )
                    skipped += 1
                else:
                    key = (call.name, call.arguments.strip())
                    if key in seen:
                        text = "(the same call as before; its result is above — use it or try something else)"
                    else:
                        text = seen[key] = await call_tool(run, call, allowed, stage, branch)
                    tool_chars += len(text)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
            if skipped:
                run.trace.event(
                    "tool_calls_not_run",
                    call=call_id,
                    stage=stage,
                    count=skipped,
                    limit=cfg.tool_calls_per_reply,
                    of=len(reply.tool_calls),
                )
            rounds += 1
            continue
        try:
            out = await anyio.to_thread.run_sync(_parsed, stage, reply, plans)
            findings = getattr(out, "findings", None)
            if findings:
                run.notebook.note(stage, list(findings), branch=branch)
            return out
        except StageOutputError as exc:
            fixes += 1
            run.trace.event("unusable_reply", call=call_id, stage=stage, problem=str(exc), attempt=fixes)
            if fixes > MAX_FIXES:
                raise ModelError(
                    f"stage {stage}: the model's reply could not be used after {fixes} tries ({exc}); "
                    "check that the model follows the JSON contract, or enable json_schema "
                    "([model] response_format)"
                ) from None
            answer = assistant_message(reply)
            answer.pop(
                "tool_calls", None
            )  # tools are off for the correction; a dangling call would be invalid
            content = answer.get("content") or ""
            if len(content) > ECHO_CHARS:
                content = (
                    f"[… the first {len(content) - ECHO_CHARS:,} characters cut]" + content[-ECHO_CHARS:]
                )
            answer["content"] = content
            for thought in ("reasoning", "reasoning_content"):
                if len(answer.get(thought) or "") > ECHO_CHARS:
                    answer[thought] = answer[thought][-ECHO_CHARS:]
            messages.append(answer)
            messages.append({"role": "user", "content": f"Your reply could not be used: {exc}"})
            demand_answer = True
