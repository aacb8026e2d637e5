"""One question through the FlexSQL pipeline:

    knowledge? → classify → link → plan ×K → per plan, concurrently (bounded):
        implement → run → repair ≤ code_repairs (execution errors)
                  → evaluate → revise_plan (verdict "plan") or repair (verdict "implementation"),
                    ≤ plan_revisions rounds
    → select (execution-grounded, no model)

Every program that ran, or failed, is a candidate — a repair adds one and keeps the one it
repaired (an evaluator can be wrong). The budget (model calls, tokens, seconds) is checked before
every model call; when it runs out no new work starts and the best candidate so far is answered,
marked `budget_exhausted`. Cancelling the caller cancels model calls and engine queries.

The model reads one growing thread per question (flexsql.agent.context): classify, link and plan
extend the trunk, and each plan works on a fork of it, so everything a stage found is read by every
later stage once, and a server's prefix cache serves what earlier requests already sent. Implementers
stay independent (a branch never sees a sibling's); evaluators are told the sibling candidates that
ran (result ids, readings, first rows). The answer lists the readings and which candidates answer each.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from typing import Any

import anyio
from pydantic import BaseModel

from flexsql.agent.answer import Answer, CandidateOut, PlanOut, ReadingOut, Status
from flexsql.agent.budget import Budget
from flexsql.agent.context import Thread
from flexsql.agent.contract import Plan, Program
from flexsql.agent.models.base import ChatModel
from flexsql.agent.recalled import recalled_examples
from flexsql.agent.secrets import question_secrets
from flexsql.agent.stages.chat import Run
from flexsql.agent.stages.classify import classify
from flexsql.agent.stages.evaluate import evaluate
from flexsql.agent.stages.implement import implement, repair
from flexsql.agent.stages.knowledge import knowledge
from flexsql.agent.stages.link import link, search_hits
from flexsql.agent.stages.plan import make_plans, revise_plan
from flexsql.agent.trace import Trace
from flexsql.config import Settings
from flexsql.errors import BudgetExceeded, FlexSQLError, error_text
from flexsql.tools.engines import CancelHooks, active_cancel_hooks
from flexsql.tools.python_tool import PythonResult
from flexsql.tools.query import QueryOutput
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.registry import ToolEnv, expect, result_text
from flexsql.tools.runtime.render import cell_text
from flexsql.tools.select import CandidateIn, select_candidates
from flexsql.tools.toolbox import TOOLS

_RESULT_REF = re.compile(r"""dfs\[\s*['"]([A-Za-z0-9_-]+)['"]\s*\]""")


class Question(BaseModel):
    question: str
    source: str | None = None
    # earlier turns of the conversation as user/assistant messages (agent/conversation.py), and what
    # this turn's classify step is told about them
    history: list[dict[str, str]] = []
    turn_note: str | None = None
    external_knowledge: str | None = None
    plans: int | None = None  # K; default [agent] plans
    run_id: str | None = None


SIBLING_CHARS = 2_500  # of the sibling candidates shown to one evaluator
SIBLING_ROWS = 3
SIBLING_COLUMNS = 8  # column names shown per sibling; more are counted


class _State:
    def __init__(self) -> None:
        self.plans: list[PlanOut] = []
        self.candidates: list[CandidateOut] = []
        self.errors: list[str] = []
        self.readings: list[str] = []  # the plan stage's readings, most likely first

    def plan(self, index: int) -> PlanOut | None:
        return next((p for p in self.plans if p.index == index), None)


def _siblings(run: Run, state: _State, current: str) -> str | None:
    """The other candidates that ran, for an evaluator: result id, plan and reading, shape, first
    rows — what compare_results needs, bounded; not their verdicts. Rows are shown whole or not at all ("+n more");
    a column list already shown is referred to; past the bound every remaining candidate keeps its
    result id and shape."""
    lines: list[str] = []
    used = 0
    seen_columns: dict[tuple[str, ...], str] = {}
    mine = next((c for c in state.candidates if c.candidate_id == current), None)
    if mine is not None and mine.result_id is not None:
        try:
            seen_columns[tuple(run.tools.results.get(mine.result_id).columns)] = "this candidate"
        except FlexSQLError:
            pass
    compact: list[str] = []
    for cand in state.candidates:
        if cand.candidate_id == current or cand.result_id is None:
            continue
        plan = state.plan(cand.plan_index)
        reading = ""
        if plan is not None:
            reading = f", reading: {plan.reading}" + (f" (rank {plan.rank})" if plan.rank else "")
        try:
            stored = run.tools.results.get(cand.result_id)
        except FlexSQLError:
            continue
        columns = tuple(stored.columns)
        size = f"{stored.total_rows} rows × {len(columns)} cols"
        if columns in seen_columns:
            named = f"same columns as {seen_columns[columns]}"
        else:
            named = ", ".join(columns[:SIBLING_COLUMNS]) + (
                f", … {len(columns) - SIBLING_COLUMNS} more" if len(columns) > SIBLING_COLUMNS else ""
            )
        # no verdicts: each evaluation stays independent (an "ok" on a sibling would bias this one)
        head = f"- {cand.candidate_id} (plan {cand.plan_index + 1}{reading}): result_id {cand.result_id}, {size} ({named})"
        kept: list[str] = []
        for row in stored.rows[:SIBLING_ROWS]:
            text = ", ".join(cell_text(v, 40) for v in row)
            if used + len(head) + len(" / ".join([*kept, text])) + 30 > SIBLING_CHARS:
                break
            kept.append(text)
        line = head
        if kept:
            more = stored.total_rows - len(kept)
            line += "; first rows: " + " / ".join(kept) + (f" (+{more} more)" if more > 0 else "")
        if compact or used + len(line) > SIBLING_CHARS:
            compact.append(
                f"{cand.candidate_id} (plan {cand.plan_index + 1}): result_id {cand.result_id}, {size}"
            )
            continue
        seen_columns.setdefault(columns, cand.candidate_id)
        lines.append(line)
        used += len(line) + 1
    if compact:
        lines.append("- also (readings and rows left out): " + "; ".join(compact))
    return "\n".join(lines) or None


async def _execute(run: Run, program: Program) -> tuple[str | None, int | None, str | None, str]:
    """Run a program once: (result_id, rows, error, preview text for the evaluator). A cancelled
    run interrupts the query on the engine (the worker thread inherits the hooks), not just the wait."""
    hooks = CancelHooks()
    token = active_cancel_hooks.set(hooks)
    try:
        return await _run_program(run, program)
    except BaseException:
        hooks.cancel()
        raise
    finally:
        active_cancel_hooks.reset(token)


async def _run_program(run: Run, program: Program) -> tuple[str | None, int | None, str | None, str]:
    env = ToolEnv(settings=run.settings, python_enabled=run.python)
    offered = frozenset(run.tool_names)
    cap = run.settings.agent.tool_result_chars
    try:
        if program.language == "sql":
            query = expect(
                await TOOLS.acall(run.tools, "run_query", {"sql": program.code, "source": run.source}, env),
                QueryOutput,
            )
            if query.expanded_sql:  # a family reference (EVENTS_*): the trace keeps the union that ran
                run.trace.event(
                    "expanded_sql", result_id=query.result_id, families=query.families, sql=query.expanded_sql
                )
            return query.result_id, query.total_rows, None, result_text(query, run.settings, offered, cap)
        known = [rid for rid in dict.fromkeys(_RESULT_REF.findall(program.code))]
        out = expect(
            await TOOLS.acall(
                run.tools, "run_python", {"code": program.code, "result_ids": known or None}, env
            ),
            PythonResult,
        )
        text = result_text(out, run.settings, offered, cap)
        if out.error:
            return None, None, f"the Python program failed:\n{text}", text
        if not out.result_id:
            return (
                None,
                None,
                (
                    "the Python program's last expression must be a pandas DataFrame (the answer "
                    f"table); it was {out.value_type or 'nothing'}"
                ),
                text,
            )
        return out.result_id, out.total_rows, None, text
    except FlexSQLError as exc:
        return None, None, error_text(exc), error_text(exc)


async def _work_plan(run: Run, index: int, plan: Plan, state: _State, thread: Thread, k: int) -> None:
    """Plan `index` on its own branch of the thread: implement, run, repair, evaluate, revise."""
    cfg = run.settings.agent
    number = index + 1  # as the instructions name it ("plan 2 of 4")
    program = await implement(run, thread, plan, number, k, branch=index)
    repaired_from: str | None = None
    repairs = revisions = 0
    plan_index = index
    while True:
        result_id, rows, error, preview = await _execute(run, program)
        cand = CandidateOut(
            candidate_id=run.next_id("c"),
            plan_index=plan_index,
            language=program.language,
            code=program.code,
            result_id=result_id,
            rows=rows,
            error=error,
            repaired_from=repaired_from,
        )
        state.candidates.append(cand)
        run.trace.event("candidate", **cand.model_dump())
        await run.progress(
            "run",
            f"plan {plan_index + 1}: candidate {cand.candidate_id} "
            + (f"failed: {error.splitlines()[0][:120]}" if error else f"{rows} rows"),
        )
        if error:
            if repairs >= cfg.code_repairs:
                return
            repairs += 1
            await run.progress(
                "repair",
                f"plan {plan_index + 1}: repairing {cand.candidate_id} ({repairs}/{cfg.code_repairs})",
            )
            program = await repair(run, thread, program, error, number if k > 1 else None, index)
            repaired_from = cand.candidate_id
            continue
        if not cfg.evaluate:
            return
        await run.progress("evaluate", f"plan {plan_index + 1}: evaluating {cand.candidate_id}")
        siblings = _siblings(run, state, cand.candidate_id)
        verdict = await evaluate(run, thread, program, preview, number if k > 1 else None, index, siblings)
        cand.verdicts.append(verdict.verdict)
        cand.feedback.append(verdict.feedback)
        run.trace.event(
            "verdict", candidate=cand.candidate_id, verdict=verdict.verdict, feedback=verdict.feedback
        )
        # "alternative": right for its reading; it stays a candidate for "if you meant …"
        if verdict.verdict in ("ok", "alternative") or revisions >= cfg.plan_revisions:
            return
        revisions += 1
        if verdict.verdict == "plan":
            await run.progress(
                "revise_plan", f"plan {plan_index + 1}: revising after the evaluator's feedback"
            )
            revised = await revise_plan(run, thread, plan, number if k > 1 else None, index)
            new_index = len(state.plans)
            state.plans.append(
                PlanOut(
                    index=new_index,
                    reading=revised.reading,
                    text=revised.text,
                    tables=revised.tables,
                    rank=revised.rank,
                    revised_from=plan_index,
                )
            )
            plan, plan_index, repaired_from = revised, new_index, None
            program = await implement(run, thread, plan, number, k, branch=index, revised=True)
        else:
            await run.progress(
                "repair",
                f"plan {plan_index + 1}: repairing {cand.candidate_id} after the evaluator's feedback",
            )
            program = await repair(run, thread, program, None, number if k > 1 else None, index)
            repaired_from = cand.candidate_id


async def _guarded_plan(
    run: Run, index: int, plan: Plan, state: _State, limiter: anyio.CapacityLimiter, thread: Thread, k: int
) -> None:
    async with limiter:
        try:
            await _work_plan(run, index, plan, state, thread, k)
        except FlexSQLError as exc:  # this plan stops; the others go on
            state.errors.append(f"plan {index + 1}: {error_text(exc)}")
            run.trace.event("plan_failed", plan=index, error=error_text(exc))


def _answer_for(run: Run, status: Status, **fields: Any) -> Answer:
    """The answer, with no secret of the model endpoints in it (one echoed by a model could have
    reached a plan, the SQL, a reason, the rows)."""
    spent = run.budget.snapshot()
    answer = Answer(
        status=status,
        question=run.question,
        run_id=run.run_id,
        usage=spent,
        findings=run.notebook.carried(),
        budget_exhausted=run.budget.exhausted,
        trace=str(run.trace.path) if run.trace.path else None,
        **fields,
    )
    return run.trace.scrubbed(answer)


def _selected(run: Run, state: _State, standalone: str | None = None) -> Answer:
    inputs = [
        CandidateIn(
            candidate_id=c.candidate_id,
            result_id=c.result_id,
            language=c.language,
            code=c.code,
            error=c.error,
            verdicts=c.verdicts,
            plan_index=c.plan_index,
            repaired_from=c.repaired_from,
            reading_rank=(state.plan(c.plan_index) or PlanOut(index=-1, reading="", text="")).rank,
        )
        for c in state.candidates
    ]
    common: dict[str, Any] = {
        "plans": state.plans,
        "candidates": state.candidates,
        "standalone_question": standalone,
    }
    if not inputs:
        reason = "; ".join(state.errors) or "no plan produced a program"
        return _answer_for(run, "failed", reason=reason, **common)
    selection = select_candidates(run.tools, inputs, run.question)
    run.trace.event("selection", **selection.model_dump())
    chosen = next((c for c in state.candidates if c.candidate_id == selection.chosen), None)
    by_reading = _by_reading(state, selection.groups, selection.chosen)
    common["by_reading"] = by_reading
    common["readings"] = [r.reading for r in by_reading]
    if chosen is None or chosen.result_id is None:
        errors = [c.error for c in state.candidates if c.error] + state.errors
        return _answer_for(
            run,
            "failed",
            reason=selection.reason + ("; last error: " + errors[-1] if errors else ""),
            groups=selection.groups,
            **common,
        )
    stored = run.tools.results.get(chosen.result_id)
    preview = expect(
        TOOLS.call(
            run.tools,
            "fetch_rows",
            {"result_id": chosen.result_id, "offset": 0, "limit": run.settings.limits.preview_rows},
        ),
        QueryOutput,
    )
    return _answer_for(
        run,
        "answered",
        sql=chosen.code if chosen.language == "sql" else None,
        code=chosen.code,
        language=chosen.language,
        result_id=chosen.result_id,
        columns=list(stored.columns),
        rows=preview.rows,
        total_rows=stored.total_rows,
        reason=selection.reason,
        groups=selection.groups,
        **common,
    )


KNOWLEDGE_FALLBACK_CHARS = 8_000  # of the raw document, when the knowledge stage fails


async def _condensed(run: Run, document: str) -> str:
    """The knowledge stage's summary; when it fails, the document's start (the question goes on)."""
    try:
        return (await knowledge(run, document)).summary
    except BudgetExceeded:
        raise
    except FlexSQLError as exc:
        run.trace.event("knowledge_failed", error=error_text(exc))
        if len(document) <= KNOWLEDGE_FALLBACK_CHARS:
            return document
        head = document[:KNOWLEDGE_FALLBACK_CHARS].rsplit("\n", 1)[0]  # at a line end
        return head + f"\n… (the document's first {len(head):,} of {len(document):,} characters)"


async def answer(
    tools: ToolContext,
    settings: Settings,
    model_for: Callable[[str], ChatModel],
    q: Question,
    trace: Trace | None = None,
    on_stage: Callable[[str, str], Any] | None = None,
    python: bool = True,
) -> Answer:
    """Answer one question. Model failures end in a `failed` answer that says why; only
    cancellation (and bugs) raise."""
    cfg = settings.agent
    run_id = q.run_id or uuid.uuid4().hex[:12]
    source = tools.source(q.source)
    run = Run(
        run_id=run_id,
        question=q.question,
        tools=tools,
        settings=settings,
        model_for=model_for,
        trace=trace or Trace(run_id, secrets=question_secrets(settings), max_bytes=cfg.trace_bytes),
        budget=Budget(cfg.max_model_calls, cfg.max_tokens, cfg.max_seconds),
        source=source.name,
        dialect=source.dialect,
        python=python,
        history=[dict(m) for m in q.history],
        turn_note=q.turn_note,
        external_knowledge=q.external_knowledge,
        on_stage=on_stage,
    )
    k = q.plans or cfg.plans
    run.trace.event(
        "question",
        question=q.question,
        source=source.name,
        dialect=source.dialect,
        plans=k,
        turns=len(q.history) // 2,
    )
    state = _State()
    standalone: str | None = None
    try:
        with anyio.move_on_after(max(0.0, run.budget.seconds_left)) as scope:
            run.prepare()
            run.recalled = await anyio.to_thread.run_sync(recalled_examples, tools, run.source, q.question)
            if run.recalled:
                run.trace.event("recalled", text=run.recalled)
            if q.external_knowledge:  # first: classify and every later stage read the summary
                await run.progress("knowledge", "condensing the external knowledge")
                run.knowledge = await _condensed(run, q.external_knowledge)
            trunk = run.thread()
            hits, ranked = search_hits(run)
            await run.progress("classify", "reading the question")
            try:
                kind = await classify(run, trunk, hits)
            except BudgetExceeded:
                raise
            except FlexSQLError as exc:  # a broken intake step must not sink an answerable question
                run.trace.event("classify_failed", error=error_text(exc))
                kind = None
            if kind is not None:
                standalone = kind.standalone
                if kind.type != "answerable":
                    return _classified(run, kind)
            await run.progress("link", "finding the tables")
            _, unknown = await link(run, trunk, ranked)
            await run.progress("plan", f"writing {k} plans")
            planned = await make_plans(run, trunk, k, unknown)
            plans = planned.plans
            state.readings = list(planned.readings)
            state.plans = [
                PlanOut(index=i, reading=p.reading, text=p.text, tables=p.tables, rank=p.rank)
                for i, p in enumerate(plans)
            ]
            limiter = anyio.CapacityLimiter(cfg.plan_concurrency)
            async with anyio.create_task_group() as group:
                for i, plan in enumerate(plans):  # each plan on its own fork of the trunk
                    group.start_soon(_guarded_plan, run, i, plan, state, limiter, trunk.fork(), len(plans))
        if scope.cancelled_caught:
            run.budget.exhausted = run.budget.exhausted or f"{cfg.max_seconds:g} s"
            run.trace.event("budget", exhausted=run.budget.exhausted)
    except BudgetExceeded as exc:
        state.errors.append(error_text(exc))
        run.trace.event("budget", exhausted=run.budget.exhausted)
    except FlexSQLError as exc:  # link or plan failed: nothing to implement
        state.errors.append(error_text(exc))
        run.trace.event("failed", error=error_text(exc))
    await run.progress("select", f"choosing among {len(state.candidates)} candidates")
    result = _selected(run, state, standalone)
    run.trace.event(
        "answer",
        status=result.status,
        result_id=result.result_id,
        code=result.code,
        usage=result.usage.model_dump(),
        budget_exhausted=result.budget_exhausted,
    )
    return result


def _by_reading(state: _State, groups: list[Any], chosen: str | None) -> list[ReadingOut]:
    """Each reading of the question (most likely first) and the candidates that answer it: the
    ones that ran, with the result of the best group each is in."""
    rank_of = {" ".join(r.lower().split()): i for i, r in enumerate(state.readings, 1)}
    result_of = {m: g.result_id for g in groups for m in g.members if g.result_id}
    out: dict[str, ReadingOut] = {}
    for reading in state.readings:
        key = " ".join(reading.lower().split())
        out[key] = ReadingOut(reading=reading, rank=rank_of[key])
    for plan in state.plans:
        key = " ".join(plan.reading.lower().split())
        item = out.setdefault(key, ReadingOut(reading=plan.reading, rank=plan.rank))
        if item.rank is None:
            item.rank = plan.rank
        for cand in state.candidates:
            if cand.plan_index == plan.index and cand.result_id and cand.candidate_id not in item.candidates:
                item.candidates.append(cand.candidate_id)
                rid = result_of.get(cand.candidate_id)
                if rid and rid not in item.result_ids:
                    item.result_ids.append(rid)
                item.chosen = item.chosen or cand.candidate_id == chosen
    return sorted(out.values(), key=lambda r: (r.rank is None, r.rank or 0))


def _classified(run: Run, kind: Any) -> Answer:
    if kind.type == "ambiguous":
        return _answer_for(
            run,
            "needs_clarification",
            standalone_question=kind.standalone,
            clarifying_question=kind.clarifying_question or "Which reading of the question do you mean?",
            readings=list(kind.readings),
            reason=kind.reason,
        )
    if kind.type == "unanswerable":
        return _answer_for(
            run,
            "unanswerable",
            reason=kind.reason or "the database does not hold what the question needs",
            standalone_question=kind.standalone,
        )
    return _answer_for(run, "reply", reply=kind.reply or "Ask me a question about the data.")
