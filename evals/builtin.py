"""`--runner builtin`: the flexsql agent answers each task in-process, with the model flags of
`flexsql ask`. Each task gets a fresh result store on its database's source; each dialogue keeps one
conversation (its turns run in order, each seeing the earlier ones); each task's trace is kept in
`OUT/tasks/<id>/trace.jsonl`."""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from flexsql.agent.answer import Answer
from flexsql.agent.conversation import ConversationStore
from flexsql.agent.models.base import ModelUnavailable
from flexsql.agent.models.factory import configured
from flexsql.agent.service import ask_question
from flexsql.config import Settings
from flexsql.errors import ConfigError, FlexSQLError, error_code, error_text
from flexsql.evals.runners import Prediction, Runner, RunnerStopped, safe_name
from flexsql.evals.tasks import DatabaseLocator, Task, find_external_knowledge
from flexsql.paths import private_file
from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.engines.urls import redact
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.results import ResultStore


class BuiltinRunner(Runner):
    name = "builtin"

    def __init__(
        self,
        settings: Settings,
        locator: DatabaseLocator | None,
        out_dir: Path,
        external_knowledge: Path | None = None,
        timeout_s: float = 600.0,
        plans: int | None = None,
    ) -> None:
        if locator is None:
            raise ConfigError("--runner builtin answers on the task databases: pass --dbs DIR or --db URL")
        if not configured(settings.model):
            raise ModelUnavailable()
        self.settings = settings.model_copy(
            update={
                "agent": settings.agent.model_copy(
                    update={"max_seconds": min(settings.agent.max_seconds, timeout_s)}
                )
            }
        )
        self.locator = locator
        self.out_dir = Path(out_dir)
        self.external_knowledge = external_knowledge
        self.plans = plans
        self.conversations = ConversationStore()  # dialogues, in memory: one conversation per dialogue
        self._sources: dict[str, SourceRegistry] = {}
        self._caches: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()  # Ctrl-C / SIGTERM: cancel the model requests in flight

    def _context(self, url: str) -> ToolContext:
        with self._lock:
            registry = self._sources.get(url)
            if registry is None:
                registry = self._sources[url] = SourceRegistry()
                registry.add(open_source(url, name="db", limits=self.settings.limits))
                self._caches[url] = {}
        limits = self.settings.limits
        return ToolContext(
            sources=registry,
            limits=limits,
            sandbox=self.settings.sandbox,
            results=ResultStore(max_bytes=limits.store_mb * 1024 * 1024),
            caches=self._caches[url],
        )

    def _document(self, task: Task) -> str | None:
        doc = find_external_knowledge(task, self.external_knowledge)
        if doc is not None:
            return doc.read_text(encoding="utf-8", errors="replace")
        if task.external_knowledge and task.benchmark == "spider":  # BIRD-style inline evidence
            return task.external_knowledge
        return None

    def predict(self, task: Task) -> Prediction:
        started = time.perf_counter()
        task_dir = self.out_dir / "tasks" / safe_name(task.instance_id)
        task_dir.mkdir(parents=True, exist_ok=True)
        trace = task_dir / "trace.jsonl"
        conversation = f"dialogue-{task.dialogue_index}" if task.dialogue_index is not None else None
        try:
            if self._stopped.is_set():
                raise RunnerStopped()
            tools = self._context(self.locator.url_for(task.db))
            result = anyio.run(
                self._until_stopped,
                lambda: ask_question(
                    tools,
                    self.settings,
                    task.question,
                    conversation_id=conversation,
                    external_knowledge=self._document(task),
                    plans=self.plans,
                    trace_path=trace,
                    run_id=safe_name(task.instance_id),
                    conversations=self.conversations,
                ),
            )
        except RunnerStopped as exc:  # a runner_error: a resumed run does this task again
            return Prediction(
                error=str(exc),
                error_category="runner_error",
                runner_s=time.perf_counter() - started,
                trace=str(trace),
            )
        except FlexSQLError as exc:
            return Prediction(
                error=error_text(exc),
                error_category=error_code(exc),
                runner_s=time.perf_counter() - started,
                trace=str(trace),
            )
        usage = result.usage
        prediction = Prediction(
            sql=result.sql,
            origin="builtin agent",
            status=result.status,
            runner_s=time.perf_counter() - started,
            answer_text=result.clarifying_question
            or result.reply
            or (result.reason if result.status != "answered" else None),
            tokens={
                "prompt": usage.prompt_tokens,
                "completion": usage.completion_tokens,
                "cached": usage.cached_prompt_tokens,  # of prompt, served from the endpoint's prefix cache
            },
            model_calls=usage.model_calls,
            tool_calls=usage.tool_calls,
            trace=str(trace),
            note=f"budget spent: {result.budget_exhausted}" if result.budget_exhausted else None,
        )
        if (
            result.status == "answered" and result.sql is None and result.code
        ):  # a Python answer: its result as CSV
            csv_path = task_dir / "answer.csv"
            stored = tools.results.get(result.result_id or "")
            import pandas as pd

            frame = pd.DataFrame([list(r) for r in stored.rows], columns=stored.columns)
            frame.to_csv(private_file(csv_path), index=False)
            prediction.csv_path = str(csv_path)
        if result.status == "failed":
            prediction.error = result.reason
            prediction.error_category = "agent_failed"
        return prediction

    async def _until_stopped(self, work: Callable[[], Awaitable[Answer]]) -> Answer:
        """Run `work`, cancelled (its open model requests closed) as soon as stop() is called."""
        outcome: list[Answer] = []
        async with anyio.create_task_group() as group:

            async def watch() -> None:
                while not self._stopped.is_set():
                    await anyio.sleep(0.05)
                group.cancel_scope.cancel()

            group.start_soon(watch)
            outcome.append(await work())
            group.cancel_scope.cancel()
        if not outcome:
            raise RunnerStopped()
        return outcome[0]

    def stop(self) -> None:
        self._stopped.set()

    def provenance(self) -> dict[str, Any]:
        model = self.settings.model
        return {
            "model": model.model,
            "base_url": redact(model.base_url) if model.base_url else None,
            "plans": self.plans,
            "temperature": model.temperature,
            "reasoning_effort": model.reasoning_effort,
        }

    def close(self) -> None:
        for registry in self._sources.values():
            registry.close()
