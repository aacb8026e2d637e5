"""One step's exchange with its model, on the run's growing thread (agent/context.py): the step's
instruction is appended, tool calls are answered in-process by the tool registry (the same functions
and argument schemas as the MCP tools), bounded in rounds and characters, and the reply is parsed
into the step's contract object — with up to two corrections for a reply that cannot be used, then
a clear ModelError. Everything the exchange adds stays on the thread for the later steps.

Every request lists every agent tool, in one order, so that its prefix is the same as the earlier
requests'. When the step's tool budget is spent, the answer is demanded with `tool_choice: "none"`
— the tools stay listed (a request without them would share nothing with the ones before).

Every request carries the step's schema; the backend decides whether to send it. Guided decoding
and tools do not mix on vLLM (a json_schema constrains the whole output, tool calls included), so
under `response_format = "auto"` the schema rides only on requests that allow no tool call — the
request that demands the answer — while `"json_schema"` (endpoints that combine both, like
OpenAI) sends it with every request.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from pydantic import BaseModel

from flexsql.agent.budget import Budget
from flexsql.agent.context import (
    HIDDEN_ARGUMENTS,
    PrefixMeter,
    Thread,
    flat,
    manual,
    offered_tools,
    source_block,
    tool_definitions,
)
from flexsql.agent.contract import StageOutputError, load_json, output_schema, parse_output
from flexsql.agent.models.base import ChatModel, ChatRequest, ToolCall, assistant_message
from flexsql.agent.notebook import Notebook
from flexsql.agent.trace import Trace
from flexsql.config import Settings
from flexsql.errors import FlexSQLError, ModelError, error_text
from flexsql.tools.engines import CancelHooks, active_cancel_hooks
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.registry import ToolEnv, result_text
from flexsql.tools.toolbox import TOOLS

MAX_FIXES = 2  # corrections of an unusable reply before the step fails
ECHO_CHARS = 20_000  # of an unusable reply kept on the thread with its correction (its end)


@dataclass
class Run:
    """Everything the steps of one question share."""

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
    # earlier turns of the conversation as user/assistant messages (agent/conversation.py), and what
    # this turn's classify step is told about them (a pending clarification, the last SQL's roles)
    history: list[dict[str, Any]] = field(default_factory=list)
    turn_note: str | None = None
    external_knowledge: str | None = None
    knowledge: str | None = None  # the condensed document (knowledge step)
    recalled: str | None = None  # verified queries and passages of the source's knowledge store
    on_stage: Callable[[str, str], Awaitable[None] | None] | None = None
    tool_timeout_s: float | None = None
    counters: dict[str, int] = field(default_factory=dict)
    notebook: Notebook = field(default_factory=Notebook)  # what tool calls established, for the next turn
    meter: PrefixMeter = field(default_factory=PrefixMeter)
    tool_names: list[str] = field(default_factory=list)
    tool_defs: list[dict[str, Any]] = field(default_factory=list)
    system: str = ""
    opening: str = ""  # the source block that opens the first user message

    def prepare(self) -> None:
        """The run's fixed prefix: its tools, the system text and the source block."""
        enabled = getattr(self.model_for("classify"), "tools_enabled", True)
        self.tool_names = offered_tools(self.python, enabled)
        self.tool_defs = (
            tool_definitions(self.settings, self.tool_names, self.python) if self.tool_names else []
        )
        offered = frozenset(self.tool_names)
        self.system = manual(offered)
        catalog = self.tools.source(self.source).catalog()
        self.opening = catalog.derived(
            f"agent.source_block:{self.source}:{self.python}:{','.join(self.tool_names)}",
            lambda: source_block(self.source, self.dialect, catalog, self.python, offered),
        )
        self.trace.event("prefix", system=self.system, tools=self.tool_names, opening=self.opening)

    def thread(self, question_text: str | None = None) -> Thread:
        """A new thread: the earlier turns, then this turn's question (`question_text`: the question
        block as the trunk states it)."""
        messages = [dict(m) for m in self.history]
        text = question_text if question_text is not None else self.question_block()
        if messages:
            messages[0] = {**messages[0], "content": f"{self.opening}\n\n{messages[0]['content']}"}
            thread = Thread(messages)
            thread.say(text)
        else:
            thread = Thread([{"role": "user", "content": f"{self.opening}\n\n{text}"}])
        return thread

    def question_block(self) -> str:
        text = f"Question: {self.question}"
        if self.recalled:  # before the summary: the knowledge step's side thread shares it too
            text += f"\n\n{self.recalled}"
        if self.knowledge:
            text += f"\n\nExternal knowledge (a summary; where it defines a term or formula, it wins):\n{self.knowledge}"
        return text

    async def progress(self, stage: str, message: str) -> None:
        self.trace.event("stage", stage=stage, message=message)
        if self.on_stage is not None:
            outcome = self.on_stage(stage, message)
            if inspect.isawaitable(outcome):
                await outcome

    def next_id(self, prefix: str) -> str:
        self.counters[prefix] = self.counters.get(prefix, 0) + 1
        return f"{prefix}{self.counters[prefix]}"


def _line_cut(text: str, limit: int, what: str) -> str:
    """`text` within `limit` characters, cut at a line end and said so."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    cut = head.rfind("\n")
    head = head[:cut] if cut > limit // 2 else head
    return f"{head.rstrip()}\n… {what} cut at {len(head):,} of {len(text):,} characters"


async def call_tool(run: Run, call: ToolCall, stage: str = "", branch: int | None = None) -> str:
    """Run one tool call for the model; every failure becomes text the model can act on. What a
    call establishes goes into the run's notebook (step `stage`, plan `branch`)."""
    run.budget.tool_call()
    name = call.name.strip()
    allowed = run.tool_names
    if name not in allowed:
        shown = name if len(name) <= 80 else name[:80] + "…"
        text = f"not_found: there is no tool {shown!r}; the tools are: {', '.join(allowed)}"
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
    for hidden in HIDDEN_ARGUMENTS:  # not offered to the model (a model may still send them)
        arguments.pop(hidden, None)
    if "source" in spec.args.model_fields:
        arguments["source"] = run.source  # a run reads its one source
    run.trace.event("tool_call", tool=name, call_id=call.id, arguments=arguments)
    env = ToolEnv(settings=run.settings, python_enabled=run.python)
    hooks = CancelHooks()
    token = active_cancel_hooks.set(hooks)
    cap = run.settings.agent.tool_result_chars
    try:
        model = await TOOLS.acall(run.tools, name, arguments, env)
        text = result_text(model, run.settings, frozenset(allowed), max_chars=cap)
        error = False
    except FlexSQLError as exc:
        text, error = _line_cut(error_text(exc), cap, "error text"), True
    except BaseException:
        hooks.cancel()  # cancelled (or a bug): stop the engine work this call started
        raise
    finally:
        active_cancel_hooks.reset(token)
    # a query naming a family (EVENTS_*) ran as the union of its shards: the trace keeps what ran
    expanded = None if error else getattr(model, "expanded_sql", None)
    extra = {"expanded_sql": expanded} if expanded else {}
    run.trace.event("tool_result", tool=name, call_id=call.id, error=error, text=text, **extra)
    if not error:
        run.notebook.tool(stage, name, arguments, text, branch)
    return text


def _parsed(stage: str, reply: Any, plans: int) -> BaseModel:
    """The step's object from the reply's content — or, when the content is empty, from its
    reasoning: Qwen3 behind vLLM's reasoning parser can leave the whole answer there (vllm#53284).
    Run in a worker thread: parsing is bounded (flexsql.agent.contract) but a long reply still takes
    a while, and other sessions must not wait for it."""
    try:
        return parse_output(stage, reply.content, plans)
    except StageOutputError:
        if (reply.content or "").strip() or not (reply.reasoning or "").strip():
            raise
        return parse_output(stage, reply.reasoning, plans)


def _kept(message: dict[str, Any], limit: int) -> dict[str, Any]:
    """An assistant message as the thread keeps it: its reasoning's end, at most `limit` characters
    (a 3 MB reasoning would otherwise ride on every later request of the step)."""
    for key in ("reasoning", "reasoning_content"):
        value = message.get(key)
        if isinstance(value, str) and len(value) > limit:
            message[key] = f"[… {len(value) - limit:,} characters of reasoning left out]" + value[-limit:]
    return message


async def converse(
    run: Run,
    stage: str,
    thread: Thread,
    instruction: str,
    plans: int = 4,
    branch: int | None = None,
) -> BaseModel:
    """Append the step's `instruction` to `thread` and talk to the step's model until it answers
    with the step's object; the whole exchange stays on the thread."""
    cfg = run.settings.agent
    model = run.model_for(stage)
    offered = run.tool_defs if getattr(model, "tools_enabled", True) and run.tool_defs else None
    schema = output_schema(stage, plans)
    thread.say(instruction)
    rounds = tool_chars = fixes = 0
    seen: dict[tuple[str, str], str] = {}
    demand_answer = False
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
            thread.say("The tool budget of this step is spent: answer now with the step's JSON object.")
        messages = [{"role": "system", "content": run.system}, *thread.messages]
        text = flat(run.system, offered, thread.messages)
        # what is sent: the prompt's text and the reasoning sent back with it (not part of the prompt)
        size = len(text) + sum(
            len(m.get("reasoning") or "") + len(m.get("reasoning_content") or "") for m in thread.messages
        )
        if size > cfg.request_chars:
            run.budget.release()
            raise ModelError(
                f"stage {stage}: the request grew to {size:,} characters, past [agent] request_chars "
                f"({cfg.request_chars:,}); lower [agent] tool_rounds or stage_tool_chars, or raise request_chars"
            )
        request = ChatRequest(
            stage=stage,
            run_id=run.run_id,
            messages=messages,
            tools=offered,
            tool_choice="auto" if use_tools else "none",
            response_schema=schema,
            schema_name=stage,
        )
        # concurrent plans interleave their events: `call` pairs each reply with its request, `after`
        # names the request this one extends (its messages are that one's and `new_messages`)
        call_id = run.next_id("m")
        run.trace.event(
            "request",
            call=call_id,
            stage=stage,
            model=model.name,
            after=thread.last_call,
            new_messages=thread.messages[thread.sent :],
            tools=run.tool_names if offered else [],
            tool_choice=request.tool_choice if offered else None,
            chars=len(text),
            shared_chars=run.meter.measure(call_id, text, thread.last_call),
        )
        thread.sent, thread.last_call = len(thread.messages), call_id
        try:
            reply = await model.complete(request)
        except BaseException:
            run.budget.release()
            raise
        run.budget.charge(reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.usage.cached_tokens)
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
            # A reply may hold more calls than run (a model looping, or a hostile one sending 3,000):
            # the thread keeps the ones that run, each with its tool message as the protocol requires,
            # and the last of them says how many more were not run — the bulk does not ride on
            # every later request.
            limit = cfg.tool_calls_per_reply
            running = reply.tool_calls[:limit]
            thread.add(
                _kept(
                    assistant_message(reply.model_copy(update={"tool_calls": running})), cfg.reasoning_chars
                )
            )
            for index, call in enumerate(running):
                if tool_chars >= cfg.stage_tool_chars:
                    result = (
                        f"not run: limit of {cfg.stage_tool_chars:,} characters of tool text in this step "
                        "([agent] stage_tool_chars) reached; answer with what you have"
                    )
                else:
                    key = (call.name, call.arguments.strip())
                    if key in seen:
                        result = (
                            "(the same call as before; its result is above — use it or try something else)"
                        )
                    else:
                        result = seen[key] = await call_tool(run, call, stage, branch)
                    tool_chars += len(result)
                if index == len(running) - 1 and len(reply.tool_calls) > limit:
                    result += (
                        f"\n(not run: {len(reply.tool_calls) - limit:,} more tool calls of this reply, past the limit "
                        f"of {limit} per reply ([agent] tool_calls_per_reply); make fewer calls at a time)"
                    )
                thread.add({"role": "tool", "tool_call_id": call.id, "content": result})
            if len(reply.tool_calls) > limit:
                run.trace.event(
                    "tool_calls_not_run",
                    call=call_id,
                    stage=stage,
                    count=len(reply.tool_calls) - limit,
                    limit=limit,
                    of=len(reply.tool_calls),
                )
            rounds += 1
            continue
        answer = assistant_message(reply)
        answer.pop("tool_calls", None)  # a call in a reply that may not call tools is not answered
        try:
            out = await anyio.to_thread.run_sync(_parsed, stage, reply, plans)
        except StageOutputError as exc:
            fixes += 1
            run.trace.event("unusable_reply", call=call_id, stage=stage, problem=str(exc), attempt=fixes)
            if fixes > MAX_FIXES:
                raise ModelError(
                    f"stage {stage}: the model's reply could not be used after {fixes} tries ({exc}); "
                    "check that the model follows the JSON contract, or enable json_schema "
                    "([model] response_format)"
                ) from None
            content = answer.get("content") or ""
            if len(content) > ECHO_CHARS:
                content = (
                    f"[… the first {len(content) - ECHO_CHARS:,} characters cut]" + content[-ECHO_CHARS:]
                )
            answer["content"] = content
            thread.add(_kept(answer, min(cfg.reasoning_chars, ECHO_CHARS)))
            thread.say(f"Your reply could not be used: {exc}")
            demand_answer = True
            continue
        if not (answer.get("content") or "").strip():
            # answered in its reasoning only: the thread keeps the object, so later steps see it
            answer["content"] = out.model_dump_json(exclude_defaults=True)
        thread.add(_kept(answer, cfg.reasoning_chars))
        return out
