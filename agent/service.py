"""The agent as a service: which model answers (an endpoint, else the MCP client through sampling,
else a clear error), conversations (history in, the turn recorded out, role-state diff traced),
clarification through MCP elicitation, progress, traces. `ask` (MCP), `flexsql ask` and
`eval --runner builtin` all come through `ask_question`."""

from __future__ import annotations

import threading
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import anyio
from pydantic import Field

from flexsql.agent import clarify
from flexsql.agent.answer import Answer, Status, Usage
from flexsql.agent.conversation import (
    ConversationStore,
    Turn,
    history,
    principal_directory,
    valid_conversation_id,
)
from flexsql.agent.models.base import ChatModel, ModelUnavailable
from flexsql.agent.models.factory import configured, model_for_stage
from flexsql.agent.models.sampling import SamplingModel, supports_sampling
from flexsql.agent.pipeline import Question, answer
from flexsql.agent.roles import diff_roles, role_state
from flexsql.agent.secrets import question_secrets
from flexsql.agent.trace import Trace, prune_traces
from flexsql.config import Settings
from flexsql.errors import FlexSQLError, NotFoundError, error_text
from flexsql.handles import CONVERSATION_IDS, ELSEWHERE
from flexsql.paths import cache_dir, private_dir
from flexsql.tools.runtime.context import SourceName, ToolContext
from flexsql.tools.runtime.registry import (
    LOCAL,
    NeedsInput,
    Principal,
    ToolArgs,
    ToolEnv,
    python_enabled,
    tool,
)
from flexsql.tools.runtime.render import cell_text


def model_provider(settings: Settings, mcp_context: Any = None) -> Callable[[str], ChatModel]:
    """Stage → model: the configured endpoint (per-stage overrides), else the MCP client's model
    when it declares sampling, else ModelUnavailable saying what to configure."""
    if configured(settings.model):
        return lambda stage: model_for_stage(settings.model, stage)
    if mcp_context is not None and supports_sampling(mcp_context):
        sampler = SamplingModel(mcp_context, max_reply_bytes=settings.model.max_reply_bytes)
        return lambda stage: sampler
    raise ModelUnavailable()


# conversation stores by session context (its result store), then by principal
_CONVERSATIONS: weakref.WeakKeyDictionary[Any, OrderedDict[str, ConversationStore]] = (
    weakref.WeakKeyDictionary()
)
_CONVERSATIONS_LOCK = threading.Lock()
MAX_PRINCIPALS = 64  # stores kept per session context (the stateless one serves every token)


def conversation_store(
    tools: ToolContext, settings: Settings, principal: Principal = LOCAL
) -> ConversationStore:
    """The conversations of one principal (flexsql.server.sessions names them): kept with its
    session's result store (never in the caches the server's sessions share) and, within it, per
    principal, so no client sees or extends another's turns. On disk when [agent]
    conversations_dir is set: the local user's in the folder itself, so `flexsql ask --conversation
    ID` continues across processes; any other principal's in a subfolder of its own."""
    root = Path(settings.agent.conversations_dir).expanduser() if settings.agent.conversations_dir else None
    with _CONVERSATIONS_LOCK:
        stores = _CONVERSATIONS.setdefault(tools.results, OrderedDict())
        store = stores.pop(principal.key, None)
        if store is None:
            directory = (
                None
                if root is None
                else principal_directory(root, None if principal == LOCAL else principal.key)
            )
            store = ConversationStore(directory, max_files=settings.agent.max_conversation_files, root=root)
        stores[principal.key] = store  # the most recently used last
        while len(stores) > MAX_PRINCIPALS:
            del stores[next(iter(stores))]
        return store


def conversation_for(store: ConversationStore, principal: Principal, requested: str) -> str:
    """The id a turn is kept under. A principal that does not issue ids (local, a session) names its
    conversations; on stateless HTTP (`issues_ids`) only an id the server minted continues one, and any
    other name starts a new conversation under a fresh unguessable id, returned with the answer. A
    minted id this principal's store does not hold is an error, never a silent fresh start: another
    server minted it (a replica, or this one before a restart), this one dropped it, or it is another
    client's."""
    valid_conversation_id(requested)
    if not principal.issues_ids or store.exists(requested):
        return requested
    if CONVERSATION_IDS.has_shape(requested):
        if not CONVERSATION_IDS.minted_here(requested):
            raise NotFoundError(
                f"conversation_id {requested!r} {ELSEWHERE}; send this client's requests to the server that "
                "started it, or omit conversation_id to start a new conversation here"
            )
        raise NotFoundError(
            f"conversation_id {requested!r} names no conversation of this client's on this server (the "
            "least recently used are dropped, and another client's are out of reach); omit "
            "conversation_id to start a new conversation"
        )
    return CONVERSATION_IDS.mint()


MAX_TRACES = 500  # traces the MCP `ask` tool keeps in the user cache; the oldest go first


def default_trace_path(run_id: str, settings: Settings) -> Path:
    """Where the MCP `ask` tool writes a trace: the user cache, the oldest pruned first (by count
    and by [agent] traces_bytes, leaving room for this one's trace_bytes)."""
    folder = private_dir(cache_dir() / "traces")
    agent = settings.agent
    prune_traces(folder, keep=MAX_TRACES, max_bytes=agent.traces_bytes, room=agent.trace_bytes)
    return folder / f"{run_id}.jsonl"


SUMMARY_CHARS = 600  # of a turn's result in the conversation's history
SUMMARY_ROWS = 10


def _summary(result: Answer) -> str | None:
    """The chosen result for the history: its size, then whole rows (never one cut mid-value) while
    they fit, and how many more there are."""
    if result.status != "answered" or not result.columns:
        return None
    total = result.total_rows if result.total_rows is not None else len(result.rows)
    head = f"{total} row{'s' if total != 1 else ''} ({', '.join(result.columns)})"
    rows: list[str] = []
    used = len(head)
    for row in result.rows[:SUMMARY_ROWS]:
        text = ", ".join(cell_text(v, 80) for v in row)
        if used + len(text) + 3 > SUMMARY_CHARS:
            break
        rows.append(text)
        used += len(text) + 3
    more = total - len(rows)
    return head + (": " + " / ".join(rows) if rows else "") + (f" (+{more} more)" if more > 0 else "")


async def ask_question(
    tools: ToolContext,
    settings: Settings,
    question: str,
    *,
    source: str | None = None,
    conversation_id: str | None = None,
    external_knowledge: str | None = None,
    plans: int | None = None,
    trace_path: str | Path | None = None,
    model_for: Callable[[str], ChatModel] | None = None,
    mcp_context: Any = None,
    on_stage: Callable[[str, str], Any] | None = None,
    python: bool | None = None,
    run_id: str | None = None,
    conversations: ConversationStore | None = None,
    elicit: bool = True,
    remember: str | None = None,
) -> Answer:
    """`python`: whether the agent may offer and run run_python; None: [sandbox] enabled, else on
    (the local user's default, as for stdio). `conversations`: the store of the caller's principal
    (default: the local user's). `remember`: who accepts the answer ("flexsql ask --remember"): an
    answered question's SQL is stored in the source's knowledge store as verified by them, under the
    question as it stands alone (a follow-up's standalone restatement)."""
    model_for = model_for or model_provider(settings, mcp_context)
    python = python_enabled(settings, True) if python is None else python
    run_id = run_id or uuid.uuid4().hex[:12]
    store = conv = None
    earlier: list[dict[str, str]] = []
    note = None
    if conversation_id:
        store = conversations or conversation_store(tools, settings)
        conv = store.get(conversation_id)
        earlier, note = history(conv)
    trace = Trace(
        run_id, trace_path, secrets=question_secrets(settings), max_bytes=settings.agent.trace_bytes
    )
    try:
        q = Question(
            question=question,
            source=source,
            history=earlier,
            turn_note=note,
            external_knowledge=external_knowledge,
            plans=plans,
            run_id=run_id,
        )
        result = await answer(tools, settings, model_for, q, trace=trace, on_stage=on_stage, python=python)
        if result.status == "needs_clarification" and mcp_context is not None and elicit:
            reply = None
            # legacy sessions: over the back-channel, bounded like the run (a client that never
            # answers must not hold a run slot for ever)
            with anyio.move_on_after(settings.agent.max_seconds):
                reply = await clarify.ask_now(mcp_context, result)
            if reply:
                trace.event("elicitation", question=result.clarifying_question, answer=reply)
                clarified = clarify.clarified(question, result.clarifying_question, reply)
                asked = result.usage
                result = await answer(
                    tools,
                    settings,
                    model_for,
                    q.model_copy(update={"question": clarified}),
                    trace=trace,
                    on_stage=on_stage,
                    python=python,
                )
                result.question = question
                # the answer's cost includes the run that asked the question
                result.usage = Usage(
                    **{k: v + getattr(asked, k) for k, v in result.usage.model_dump().items()}
                )
        if store is not None and conv is not None and conversation_id:
            dialect = tools.source(source).dialect
            previous = conv.last_sql_turn()
            turn = Turn(
                question=question,
                standalone=result.standalone_question,
                findings=result.findings,
                type=_turn_type(result),
                status=result.status,
                sql=result.sql,
                dialect=dialect,
                result_summary=_summary(result),
                clarifying_question=result.clarifying_question,
                readings=result.readings,
                reply=result.reply,
                reason=result.reason if result.status != "answered" else None,
            )
            if previous is not None and previous.role_state is not None and result.sql:
                diff = diff_roles(previous.role_state, turn.role_state or role_state(result.sql, dialect))
                trace.event("role_diff", diff=diff.model_dump(), text=diff.summary())
            store.append(conversation_id, turn)
            result.conversation_id = conversation_id
        if remember and result.status == "answered" and result.sql:
            result.remembered = _remember(tools, result, source, remember)
            trace.event("remembered", text=result.remembered)
        return result
    finally:
        trace.close()


def _remember(tools: ToolContext, result: Answer, source: str | None, verified_by: str) -> str:
    """Store the answer's SQL as verified; what happened, as one line (a refusal is said, not raised:
    the answer itself stands)."""
    from flexsql.tools.knowledge.learn import remember_query

    question = result.standalone_question or result.question
    try:
        stored = remember_query(tools, question, result.sql or "", source=source, verified_by=verified_by)
    except FlexSQLError as exc:
        return f"not remembered: {error_text(exc)}"
    return stored.to_text()


TurnType = Literal["answerable", "ambiguous", "unanswerable", "improper"]
_TURN_TYPES: dict[Status, TurnType] = {
    "needs_clarification": "ambiguous",
    "unanswerable": "unanswerable",
    "reply": "improper",
    "answered": "answerable",
    "failed": "answerable",
}


def _turn_type(result: Answer) -> TurnType | None:
    return _TURN_TYPES.get(result.status)


class Ask(ToolArgs):
    question: str
    source: SourceName = None
    conversation_id: str | None = None  # the answer says which id continues it (minted on stateless HTTP)
    external_knowledge: str | None = Field(None, description="a document defining its terms")


@tool(
    lambda s: (
        f"Answer a question with the FlexSQL agent ({s.agent.plans} plans, repair, selection by execution). "
        "Needs [model] or client sampling."
    ),
    agent_tool=False,
)
async def ask(tools: ToolContext, args: Ask, env: ToolEnv) -> Answer:
    """The agent as a tool (MCP `ask`): progress notifications per stage, cancellable, the caller's
    model when the client offers sampling and no endpoint is configured. A remote client (any but the
    local one) is told its trace's file name only: the folder is the server's (its user's cache)."""
    result = await _ask(tools, args, env)
    if env.principal != LOCAL and result.trace:
        result.trace = Path(result.trace).name
    return result


async def _ask(tools: ToolContext, args: Ask, env: ToolEnv) -> Answer:
    ctx = env.mcp_context
    stages = ["classify", "knowledge", "link", "plan", "run", "repair", "evaluate", "revise_plan", "select"]
    count = {"n": 0}

    async def on_stage(stage: str, message: str) -> None:
        count["n"] += 1
        if ctx is not None:
            try:
                await ctx.report_progress(
                    float(count["n"]), float(max(count["n"], len(stages))), f"{stage}: {message}"
                )
            except Exception:  # progress is best effort (a client without a progress token ignores it)
                pass

    run_id = uuid.uuid4().hex[:12]
    principal = env.principal
    store = conversation_store(tools, env.settings, principal)
    pending = clarify.take(tools, principal, getattr(ctx, "request_state", None)) if ctx is not None else None
    if pending is not None:  # the conversation the question was asked in (its minted id, if any)
        conversation_id = pending.conversation_id
    elif args.conversation_id:
        conversation_id = conversation_for(store, principal, args.conversation_id)
    else:
        conversation_id = None
    common = {
        "source": args.source,
        "conversation_id": conversation_id,
        "conversations": store,
        "external_knowledge": args.external_knowledge,
        "mcp_context": ctx,
        "on_stage": on_stage,
        "python": env.python_enabled,
        "run_id": run_id,
        "trace_path": default_trace_path(run_id, env.settings),
    }
    if pending is not None:  # 2026-07-28: the client asked the user and called again with the answer
        reply = clarify.reply_from(getattr(ctx, "input_responses", None), pending.answer)
        if reply is None:  # declined or cancelled: the question stands
            return pending.answer
        question = clarify.clarified(pending.question, pending.answer.clarifying_question, reply)
        result = await ask_question(tools, env.settings, question, **common, elicit=False)
        result.question = pending.question
        asked = pending.answer.usage  # the answer's cost includes the call that asked the question
        result.usage = Usage(**{k: v + getattr(asked, k) for k, v in result.usage.model_dump().items()})
        return result
    result = await ask_question(tools, env.settings, args.question, **common)
    if (
        result.status == "needs_clarification"
        and ctx is not None
        and clarify.can_elicit(ctx)
        and not clarify.has_back_channel(ctx)
    ):
        token = clarify.remember(
            tools,
            principal,
            clarify.Pending(
                question=args.question,
                source=args.source,
                conversation_id=conversation_id,
                external_knowledge=args.external_knowledge,
                answer=result,
            ),
        )
        raise NeedsInput(clarify.input_requests(result), token)
    return result
