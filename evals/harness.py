"""The evaluation loop: run a runner over the tasks with bounded concurrency, score every answer,
append one line per task to results.jsonl (re-running skips finished tasks), and write the reports
and the official submission folder."""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from flexsql import __version__
from flexsql.errors import ConfigError, FlexSQLError, NotFoundError
from flexsql.evals.dialogue import expected_status, is_status_turn, returned_status, status_record, work_units
from flexsql.evals.execution import (
    DEFAULT_MAX_ROWS,
    ExecutionFailure,
    Executor,
    InProcessExecutor,
    McpExecutor,
)
from flexsql.evals.gold import GoldStore
from flexsql.evals.report import infrastructure_failure, summarize, write_reports
from flexsql.evals.result_diff import side_by_side
from flexsql.evals.reward import Gold, Predicted, verdicts
from flexsql.evals.runners import (
    CommandRunner,
    GoldRunner,
    Prediction,
    PredictionsRunner,
    Runner,
    safe_name,
)
from flexsql.evals.scoring import (
    SCORERS,
    Flavor,
    GoldTable,
    Verdict,
    csv_text,
    failure,
    frame_columns,
    frame_from_result,
    frame_rows,
    read_csv_frame,
)
from flexsql.evals.sqltext import orders_result
from flexsql.evals.tasks import DatabaseLocator, Task, extract_sql, load_tasks
from flexsql.paths import open_private, private_file, write_private
from flexsql.tools.engines import engine_for_url
from flexsql.tools.engines.urls import redact

RESULTS = "results.jsonl"
SUBMISSION = "submission"
STOP_GRACE_S = 8.0  # after Ctrl-C: how long the running tasks get to end (their model requests are cancelled)


class EvalOptions(BaseModel):
    tasks: Path
    runner: str
    dbs: Path | None = None
    db: str | None = None
    gold: Path | None = None
    eval_config: Path | None = None
    predictions: Path | None = None
    prediction_mode: str = "auto"
    scorer: str | None = None  # None: spider2 for Spider 2.0 tasks, ex for the others
    flavor: Flavor | None = None  # None: from the task file (snow JSONL -> snow)
    jobs: int = 4
    timeout: float = 120.0
    out: Path
    external_knowledge: Path | None = None
    command: str | None = None
    via_mcp: bool = False
    limit: int | None = None
    ids: list[str] | None = None
    resume: bool = True
    max_rows: int = DEFAULT_MAX_ROWS
    settings: Any = None  # flexsql Settings for --runner builtin (model endpoint, agent budget)
    plans: int | None = None


class RunOutcome(BaseModel):
    out: Path
    total_tasks: int
    ran: int
    skipped: int
    interrupted: bool
    wall_s: float
    records: list[dict[str, Any]]
    summary: dict[str, Any]


def default_scorer(tasks: list[Task]) -> str:
    return "spider2" if tasks and tasks[0].benchmark.startswith("spider2") else "ex"


class Evaluation:
    """Everything one evaluation run needs; `run()` does the work."""

    def __init__(self, options: EvalOptions) -> None:
        self.options = options
        tasks = load_tasks(options.tasks)
        if options.ids:
            wanted = set(options.ids)
            unknown = [i for i in dict.fromkeys(options.ids) if i not in {t.instance_id for t in tasks}]
            if unknown:
                sample = ", ".join(t.instance_id for t in tasks[:3]) + (" …" if len(tasks) > 3 else "")
                raise NotFoundError(
                    f"--ids: no task in {options.tasks} has the id {', '.join(unknown)} "
                    f"(its {len(tasks)} ids look like {sample or 'nothing: the file has no tasks'})"
                )
            tasks = [t for t in tasks if t.instance_id in wanted]
        if options.limit is not None:
            tasks = tasks[: options.limit]
        self.tasks = tasks
        self.scorer = options.scorer or default_scorer(tasks)
        self.out = Path(options.out)
        self.gold = GoldStore(options.gold, options.eval_config)
        self.locator = DatabaseLocator(options.dbs, options.db) if (options.dbs or options.db) else None
        self.executor: Executor = (
            McpExecutor(max_rows=options.max_rows, log_dir=self.out / "mcp-logs")
            if options.via_mcp
            else InProcessExecutor(max_rows=options.max_rows)
        )
        self.runner = self._make_runner()
        self.set_aside: Path | None = None  # where a --new-run moved the earlier run's files
        self.on_stopping: Callable[[], None] | None = None  # called at the first Ctrl-C (the CLI says so)

    def _make_runner(self) -> Runner:
        o = self.options
        if o.runner == "builtin":
            from flexsql.config import Settings
            from flexsql.evals.builtin import BuiltinRunner

            return BuiltinRunner(
                o.settings or Settings(), self.locator, self.out, o.external_knowledge, o.timeout, o.plans
            )
        if o.runner == "gold":
            if self.locator is None:
                raise ConfigError(
                    "--runner gold replays gold SQL on the databases: pass --dbs DIR or --db URL"
                )
            return GoldRunner(self.gold)
        if o.runner == "predictions":
            if o.predictions is None:
                raise ConfigError(
                    "--runner predictions needs --predictions DIR (a folder of <id>.sql / <id>.csv)"
                )
            return PredictionsRunner(o.predictions, o.prediction_mode)
        if o.runner == "command":
            return CommandRunner(o.command or "", self.locator, self.out, o.external_knowledge, o.timeout)
        raise ConfigError(f"unknown runner {o.runner!r}; use gold, predictions, command or builtin")

    # -- one task ----------------------------------------------------------------------------------
    def evaluate(self, task: Task) -> dict[str, Any]:
        started = time.perf_counter()
        timings: dict[str, float] = {}
        record: dict[str, Any] = {
            "instance_id": task.instance_id,
            "db": task.db,
            "benchmark": task.benchmark,
            "question": task.question,
            "runner": self.runner.name,
            **self.runner.provenance(),
            "scorer": self.scorer,
        }
        if task.turn_type is not None or task.dialogue_index is not None:
            record.update(
                turn_type=task.turn_type, dialogue_index=task.dialogue_index, turn_index=task.turn_index
            )
        gold_sql = task.gold_sql or self.gold.sql(task.instance_id)
        if gold_sql:
            record["gold_sql"] = gold_sql
        if not task.scored and isinstance(self.runner, GoldRunner):
            return self._finish(
                record,
                "not_scored",
                None,
                timings,
                started,
                reason=f"{task.turn_type or 'this'} turn has no gold SQL: recorded, not scored",
            )
        try:
            prediction = self.runner.predict(task)
        except FlexSQLError as exc:
            prediction = Prediction(error=str(exc), error_category="runner_error")
        except Exception as exc:  # a runner bug must not stop the whole evaluation
            prediction = Prediction(error=f"{type(exc).__name__}: {exc}", error_category="runner_error")
        timings["runner_s"] = round(prediction.runner_s, 4)
        record.update(
            sql=extract_sql(prediction.sql) if prediction.sql else None,
            prediction_origin=prediction.origin or None,
            tokens=prediction.tokens,
            cost_usd=prediction.cost_usd,
            runner_note=prediction.note,
            answer_text=prediction.answer_text,
        )
        if self.runner.name == "builtin":
            # docs/scoring.md: builtin lines carry the agent's `status`; `outcome` is the evaluation's
            record.update(
                agent_status=prediction.status,
                model_calls=prediction.model_calls,
                tool_calls=prediction.tool_calls,
                trace=prediction.trace,
            )
        if task.benchmark == "dialogue":
            record.update(
                expected_status=expected_status(task),
                returned_status=returned_status(prediction.status, prediction.present, prediction.error),
            )
        if is_status_turn(task):  # ambiguous / unanswerable / improper: scored by status (evals/dialogue.py)
            fields = status_record(task, prediction.status, prediction.present, prediction.error)
            record.update(
                expected_status=fields["expected_status"], returned_status=fields["returned_status"]
            )
            verdict = Verdict(
                scorer=self.scorer,
                score=fields["score"],
                reason=fields["reason"],
                category=fields["category"],
            )
            return self._finish(record, "scored", {self.scorer: verdict}, timings, started)
        if not task.scored:
            return self._finish(
                record,
                "not_scored",
                None,
                timings,
                started,
                reason=f"{task.turn_type or 'this'} turn has no gold SQL: answer recorded, not scored",
            )
        if not prediction.present:
            return self._finish(
                record,
                "no_prediction",
                None,
                timings,
                started,
                reason=prediction.error or "no prediction",
                category=prediction.error_category,
            )
        try:
            gold = self._gold(task, timings)
        except ExecutionFailure as exc:
            return self._finish(
                record,
                "gold_error",
                None,
                timings,
                started,
                reason=f"the gold SQL failed ({exc.category}): {exc}",
                category="no_gold",
            )
        if gold is None:
            return self._finish(
                record,
                "no_gold",
                None,
                timings,
                started,
                reason="no gold for this task: neither a gold CSV under --gold nor gold SQL",
                category="no_gold",
            )
        scored, record["results"] = self._score(task, prediction, gold, timings)
        return self._finish(record, "scored", scored, timings, started)

    def _gold(self, task: Task, timings: dict[str, float]) -> Gold | None:
        t0 = time.perf_counter()
        try:
            tables = self.gold.tables(task.instance_id) if task.benchmark.startswith("spider2") else []
            if tables:
                config = self.gold.config(task.instance_id)
                for t in tables:
                    t.ordered = not config.ignore_order
                return Gold(
                    tables=tables, condition_cols=config.condition_cols, ignore_order=config.ignore_order
                )
            sql = task.gold_sql or self.gold.sql(task.instance_id)
            if not sql:
                return None
            url = self._url(task)
            result = self.executor.execute(url, extract_sql(sql), self.options.timeout)
            ordered = orders_result(sql, _dialect(url))
            frame = frame_from_result(result.columns, result.rows)
            config = self.gold.config(task.instance_id)
            return Gold(
                tables=[GoldTable(name="gold SQL", frame=frame, ordered=ordered)],
                raw=[("gold SQL", result.columns, result.rows, ordered)],
                condition_cols=config.condition_cols,
                ignore_order=config.ignore_order if task.instance_id in self.gold.configs else not ordered,
            )
        finally:
            timings["gold_s"] = round(time.perf_counter() - t0, 4)

    def _url(self, task: Task) -> str:
        # "no_database" is an infrastructure failure: a resume runs the task again (INFRASTRUCTURE)
        if self.locator is None:
            raise ExecutionFailure("no_database", "no database to run SQL on: pass --dbs DIR or --db URL")
        try:
            return self.locator.url_for(task.db)
        except FlexSQLError as exc:
            raise ExecutionFailure("no_database", str(exc)) from None

    def _score(
        self, task: Task, prediction: Prediction, gold: Gold, timings: dict[str, float]
    ) -> tuple[dict[str, Verdict], dict[str, Any] | None]:
        """Every scorer's verdict, and the two results side by side (evals/result_diff.py)."""
        flavor = self.options.flavor or task.flavor
        t0 = time.perf_counter()
        sub = self.out / SUBMISSION
        name = safe_name(task.instance_id)
        try:
            if prediction.sql:
                sql = extract_sql(prediction.sql)
                write_private(sub / f"{name}.sql", sql + "\n")
                url = self._url(task)
                result = self.executor.execute(url, sql, self.options.timeout)
                text = csv_text(result.columns, result.rows)
                write_private(sub / f"{name}.csv", text)
                pred = Predicted(
                    columns=result.columns, rows=result.rows, empty_cloud=not result.rows and _cloud(url)
                )
            else:
                assert prediction.csv_path is not None
                if Path(prediction.csv_path).resolve() != (sub / f"{name}.csv").resolve():
                    shutil.copyfile(prediction.csv_path, private_file(sub / f"{name}.csv"))
                pred_frame = read_csv_frame(prediction.csv_path)
                pred = Predicted(
                    columns=frame_columns(pred_frame), rows=frame_rows(pred_frame), frame=pred_frame
                )
        except ExecutionFailure as exc:
            timings["exec_s"] = round(time.perf_counter() - t0, 4)
            reason = (
                f"execution error: {exc}" if exc.category == "execution_error" else f"{exc.category}: {exc}"
            )
            return {s: failure(s, exc.category, reason) for s in SCORERS}, _gold_view(gold, reason)
        except Exception as exc:  # unreadable CSV (empty file, bad quoting)
            timings["exec_s"] = round(time.perf_counter() - t0, 4)
            reason = f"the prediction CSV could not be read: {type(exc).__name__}: {exc}"
            return {s: failure(s, "unreadable_prediction", reason) for s in SCORERS}, _gold_view(gold, reason)
        timings["exec_s"] = round(time.perf_counter() - t0, 4)
        t1 = time.perf_counter()
        scored = verdicts(pred, gold, flavor)
        timings["score_s"] = round(time.perf_counter() - t1, 4)
        view = None
        if scored.rex is not None:
            match, gold_columns, gold_rows = scored.rex
            view = side_by_side(gold_columns, gold_rows, pred.columns, pred.rows, match)
        return scored.verdicts, view

    def _finish(
        self,
        record: dict[str, Any],
        status: str,
        verdicts: dict[str, Verdict] | None,
        timings: dict[str, float],
        started: float,
        *,
        reason: str = "",
        category: str | None = None,
    ) -> dict[str, Any]:
        timings["total_s"] = round(time.perf_counter() - started, 4)
        record["outcome"] = status  # scored / no_prediction / not_scored / gold_error / no_gold
        record["status"] = record.pop("agent_status", None) or status
        record["evaluated"] = status == "scored"
        if verdicts:
            main = verdicts[self.scorer]
            record.update(
                score=main.score,
                reason=main.reason,
                category=main.category,
                variant=main.variant,
                scores={k: v.score for k, v in verdicts.items()},
                similarities={k: v.similarity for k, v in verdicts.items() if v.similarity is not None},
                reasons={k: v.reason for k, v in verdicts.items() if v.score == 0},
                categories={k: v.category for k, v in verdicts.items()},
            )
        else:
            record.update(
                score=0, reason=reason, category=category or status, scores={}, reasons={}, categories={}
            )
        record["timings"] = timings
        record["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
        return record

    # -- the whole run -----------------------------------------------------------------------------
    def run(self, on_progress: Callable[[dict[str, Any], int, int], None] | None = None) -> RunOutcome:
        try:
            self.out.mkdir(parents=True, exist_ok=True)
            (self.out / SUBMISSION).mkdir(exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"cannot write the results to {self.out}: {exc.strerror or exc}; "
                "pass --out a folder you can create and write"
            ) from None
        results_path = self.out / RESULTS
        previous = self._previous(results_path)
        # A dialogue is one unit, its turns in order (evals/dialogue.py); any other task is its own.
        units = work_units(self.tasks, set(previous))
        todo = [t for unit in units for t in unit]
        self._write_run_info(len(todo), resumed=bool(previous))
        started = time.perf_counter()
        new_records: list[dict[str, Any]] = []
        interrupted = False
        stop = threading.Event()

        def work(unit: list[Task]) -> list[dict[str, Any]]:
            done = []
            for task in unit:
                if stop.is_set():
                    break
                record = self.evaluate(task)
                if stop.is_set() and record.get("category") == "runner_error":
                    break  # cut short by the interruption: "not run yet", run again on resume
                done.append(record)
            return done

        if self.options.via_mcp and self.locator is not None and todo:
            urls = []
            for task in todo:
                try:
                    urls.append(self.locator.url_for(task.db))
                except FlexSQLError:
                    continue  # the task reports it
            self.executor.warm(urls)
        pool = ThreadPoolExecutor(max_workers=max(1, self.options.jobs), thread_name_prefix="flexsql-eval")
        pending: set[Future[list[dict[str, Any]]]] = set()
        with open_private(results_path, "a") as sink:

            def collect(done: set[Future[list[dict[str, Any]]]]) -> None:
                for future in done:
                    if future.cancelled():
                        continue
                    for record in future.result():
                        sink.write(json.dumps(record, default=str, ensure_ascii=False) + "\n")
                        sink.flush()
                        new_records.append(record)
                        if on_progress:
                            on_progress(record, len(new_records), len(todo))

            try:
                queue = iter(units)
                # Submit a bounded window so Ctrl-C leaves little queued work behind.
                for unit in queue:
                    pending.add(pool.submit(work, unit))
                    if len(pending) >= self.options.jobs * 2:
                        break
                while pending:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    collect(done)
                    nxt = next(queue, None)
                    if nxt is not None:
                        pending.add(pool.submit(work, nxt))
            except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (the CLI turns it into one)
                interrupted = True
                stop.set()
                try:
                    if self.on_stopping is not None:
                        self.on_stopping()
                    self.runner.stop()  # kills commands, cancels the agent's model requests
                    for future in pending:
                        future.cancel()
                    # the tasks that were running end within moments; keep what they finished
                    done, pending = wait(pending, timeout=STOP_GRACE_S)
                    collect(done)
                except KeyboardInterrupt:  # a second Ctrl-C: stop waiting; the reports are still written
                    self.runner.kill()
                    _ignore_sigint()
            finally:
                pool.shutdown(wait=False, cancel_futures=True)
                self.executor.close()
        wall = time.perf_counter() - started
        records = self._merge(previous, new_records)
        summary = summarize(
            records,
            self.tasks,
            self.scorer,
            ran=len(new_records),
            wall_s=wall,
            runner=self.runner.name,
            executor=self.executor.name,
            interrupted=interrupted,
            provenance=self.runner.provenance(),
        )
        write_reports(self.out, summary, records)
        return RunOutcome(
            out=self.out,
            total_tasks=len(self.tasks),
            ran=len(new_records),
            skipped=len(self.tasks) - len(todo),
            interrupted=interrupted,
            wall_s=wall,
            records=records,
            summary=summary,
        )

    def _previous(self, results_path: Path) -> dict[str, dict[str, Any]]:
        if not self.options.resume:
            self._set_aside()
            return {}
        info_path = self.out / "run.json"
        if info_path.exists() and results_path.exists():
            info = json.loads(info_path.read_text(encoding="utf-8"))
            same = info.get("runner") == self.runner.name and info.get("tasks") == str(
                Path(self.options.tasks).resolve()
            )
            if not same:
                raise ConfigError(
                    f"{self.out} holds results of another run (runner {info.get('runner')}, tasks {info.get('tasks')}); "
                    "use another --out, or --new-run to start over (the old results are kept aside)"
                )
            earlier = info.get("provenance")
            now = self._provenance()
            if earlier is not None and earlier != now:
                changed = ", ".join(
                    f"{key} {earlier.get(key)!r} -> {now.get(key)!r}"
                    for key in sorted(set(earlier) | set(now))
                    if earlier.get(key) != now.get(key)
                )
                raise ConfigError(
                    f"{self.out} holds results of other model settings ({changed}); resuming would mix "
                    "them into one accuracy. Rerun with the earlier settings to resume, use another --out, "
                    f"or --new-run to start over (the old results are moved to {self.out}/previous/)"
                )
        records: dict[str, dict[str, Any]] = {}
        if results_path.exists():
            raw = results_path.read_bytes()
            lines = raw.decode("utf-8", errors="replace").splitlines()
            kept_lines: list[str] = []
            for line in lines:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue  # a line cut short by a crash: dropped below, and that task runs again
                if not isinstance(record, dict):
                    continue
                kept_lines.append(line)
                if not infrastructure_failure(record):  # e.g. a wrong --dbs last time: run it again
                    records[str(record.get("instance_id"))] = record
            if len(kept_lines) != len(lines) or (raw and not raw.endswith(b"\n")):
                # rewritten without the broken lines, so appending continues a valid JSONL file
                repaired = results_path.with_name(RESULTS + ".repaired")
                write_private(repaired, "".join(line + "\n" for line in kept_lines))
                os.replace(repaired, results_path)
        return records

    def _set_aside(self) -> None:
        """Starting over in a folder that holds a run: its files are moved to OUT/previous/<time>/,
        never deleted or overwritten silently."""
        names = [RESULTS, "run.json", "summary.json", "report.md", "report.html", SUBMISSION]
        present = [n for n in names if (self.out / n).exists()]
        if RESULTS not in present and "run.json" not in present:
            return
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        target = self.out / "previous" / stamp
        target.mkdir(parents=True, exist_ok=True)
        for name in present:
            shutil.move(str(self.out / name), str(target / name))
        self.set_aside = target

    def _provenance(self) -> dict[str, Any]:
        return {"runner": self.runner.name, **self.runner.provenance()}

    def _merge(self, previous: dict[str, dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
        by_id = dict(previous)
        for record in new:
            by_id[record["instance_id"]] = record
        order = {t.instance_id: i for i, t in enumerate(self.tasks)}
        kept = [r for r in by_id.values() if r["instance_id"] in order]
        for r in kept:  # the primary score follows --scorer, also for records of earlier runs
            if self.scorer in r.get("scores", {}):
                r["score"] = r["scores"][self.scorer]
                r["scorer"] = self.scorer
        return sorted(kept, key=lambda r: order[r["instance_id"]])

    def _write_run_info(self, todo: int, resumed: bool = False) -> None:
        now = datetime.now(UTC).isoformat(timespec="seconds")
        path = self.out / "run.json"
        earlier: dict[str, Any] = {}
        if resumed and path.exists():
            try:
                earlier = json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                earlier = {}
        info = {
            "tasks": str(Path(self.options.tasks).resolve()),
            "runner": self.runner.name,
            "provenance": self._provenance(),
            "flexsql_version": __version__,
            "scorer": self.scorer,
            "executor": self.executor.name,
            "jobs": self.options.jobs,
            "timeout": self.options.timeout,
            # a resumed run keeps when the run started, and lists when it was resumed
            "started_at": earlier.get("started_at", now),
            "resumed_at": [*earlier.get("resumed_at", []), now] if earlier else [],
            "tasks_to_run": todo,
            "options": json.loads(self.options.model_dump_json(exclude={"settings"})),
        }
        if info["options"].get("db"):
            info["options"]["db"] = redact(info["options"]["db"])
        write_private(path, json.dumps(info, indent=2))


def _gold_view(gold: Gold, error: str) -> dict[str, Any] | None:
    """The gold result beside a prediction that gave none."""
    table = gold.raw[0] if gold.raw else None
    if table is not None:
        return side_by_side(table[1], table[2], None, None, None, error=error, ordered=table[3])
    if gold.tables:
        first = gold.tables[0]
        return side_by_side(
            frame_columns(first.frame), first.rows(None), None, None, None, error=error, ordered=first.ordered
        )
    return None


def _ignore_sigint() -> None:
    """After a second Ctrl-C: further ones are ignored while the reports are written (a few ms)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _dialect(url: str) -> str:
    engine = engine_for_url(url)
    return engine.dialect if engine else url.split("://", 1)[0].lower()


def _cloud(url: str) -> bool:
    engine = engine_for_url(url)
    return engine is not None and engine.cloud
