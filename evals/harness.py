"""The evaluation loop: run a runner over the tasks with bounded concurrency, score every answer,
append one line per task to results.jsonl (re-running skips finished tasks), and write the reports
and the official submission folder."""

from __future__ import annotations

import json
import logging
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
from flexsql.plural import plural
from flexsql.tools.engines import engine_for_url
from flexsql.tools.engines.urls import file_path_of, is_file_url, redact

log = logging.getLogger("flexsql.evals")

RESULTS = "results.jsonl"
REJECTED = "results.rejected.jsonl"  # lines of results.jsonl that could not be read, kept rather than dropped
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
        self._check_databases()
        self.set_aside: Path | None = None  # where a --new-run moved the earlier run's files
        self.run_info: dict[str, Any] = {}  # run.json as written by this run
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

    def _needs_database(self, task: Task) -> bool:
        """Whether the task runs SQL on its database: the gold SQL, or a predicted SQL answer."""
        o = self.options
        if o.runner == "gold":
            return task.scored
        if o.runner != "predictions" or o.predictions is None:
            return True  # an agent (builtin, command) answers on the task's database
        folder = Path(o.predictions)
        predicted_sql = (
            o.prediction_mode in ("auto", "sql") and (folder / f"{task.instance_id}.sql").is_file()
        )
        predicted_csv = (
            o.prediction_mode in ("auto", "csv") and (folder / f"{task.instance_id}.csv").is_file()
        )
        if predicted_sql:
            return True
        gold_csv = task.benchmark.startswith("spider2") and bool(self.gold.csv_paths(task.instance_id))
        return predicted_csv and task.scored and not gold_csv

    def _check_databases(self) -> None:
        """Every task's database is found before the first task runs: a missing one would otherwise be
        scored task after task (as "no gold" or a setup failure) and the run would still exit 0."""
        needing = [t for t in self.tasks if self._needs_database(t)]
        if not needing:
            return
        why = (
            f"the {self.options.runner} runner runs SQL on each task's database"
            if self.options.runner != "predictions"
            else "their gold or predicted SQL runs on the task's database"
        )
        if self.locator is None:
            raise ConfigError(
                f"{len(needing)} of {plural(len(self.tasks), 'task')} need a database ({why}); pass --dbs DIR "
                "(a folder of SQLite/DuckDB files) or --db URL. Nothing was run."
            )
        problems: dict[str | None, str] = {}
        affected: dict[str | None, list[str]] = {}
        checked: set[str | None] = set()
        for task in needing:
            if task.db in problems:
                affected[task.db].append(task.instance_id)
                continue
            if task.db in checked:
                continue
            checked.add(task.db)
            try:
                url = self.locator.url_for(task.db)
            except FlexSQLError as exc:
                problems[task.db] = str(exc)
            else:
                if (
                    is_file_url(url)
                    and file_path_of(url) != ":memory:"
                    and not Path(file_path_of(url)).is_file()
                ):
                    problems[task.db] = f"no database file at {file_path_of(url)} (from --db {url})"
            if task.db in problems:
                affected[task.db] = [task.instance_id]
        if not problems:
            return
        tasks_hit = sum(len(ids) for ids in affected.values())
        listed = "; ".join(
            f"{problems[db]} (task{'s' if len(ids) > 1 else ''} {', '.join(ids[:5])}{' …' if len(ids) > 5 else ''})"
            for db, ids in list(affected.items())[:5]
        )
        more = f"; and {len(problems) - 5} more databases" if len(problems) > 5 else ""
        raise ConfigError(
            f"the database of {tasks_hit} of {plural(len(self.tasks), 'task')} is missing: {listed}{more}. "
            "Nothing was run: pass --dbs / --db where they are, or leave those tasks out with --ids"
        )

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
                self._submit(sub / f"{name}.sql", sql + "\n")
                url = self._url(task)
                result = self.executor.execute(url, sql, self.options.timeout)
                self._submit(sub / f"{name}.csv", csv_text(result.columns, result.rows))
                pred = Predicted(
                    columns=result.columns, rows=result.rows, empty_cloud=not result.rows and _cloud(url)
                )
            else:
                assert prediction.csv_path is not None
                if Path(prediction.csv_path).resolve() != (sub / f"{name}.csv").resolve():
                    self._submit(sub / f"{name}.csv", Path(prediction.csv_path))
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
        except (
            _SubmissionUnwritable
        ) as exc:  # the harness's own failure, not the model's: run again on resume
            timings["exec_s"] = round(time.perf_counter() - t0, 4)
            return {s: failure(s, "runner_error", str(exc)) for s in SCORERS}, _gold_view(gold, str(exc))
        except Exception as exc:  # the model's CSV: empty file, bad quoting, not UTF-8
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

    def _submit(self, path: Path, content: str | Path) -> None:
        """Write (or copy) one file of the submission folder."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, Path):
                shutil.copyfile(content, private_file(path))
            else:
                write_private(path, content)
        except OSError as exc:
            raise _SubmissionUnwritable(
                f"the harness could not write {path}: {exc.strerror or exc} (check the disk and --out)"
            ) from None

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
        results_path = self.out / RESULTS
        # first what an earlier run left (a --new-run moves it aside), then this run's folders: created
        # before, the submission folder this run writes into would be moved aside with the old one
        previous = self._previous(results_path)
        try:
            self.out.mkdir(parents=True, exist_ok=True)
            (self.out / SUBMISSION).mkdir(exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"cannot write the results to {self.out}: {exc.strerror or exc}; "
                "pass --out a folder you can create and write"
            ) from None
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
        self._write_in_task_order(results_path)
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
            settings=run_settings(self.run_info),
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
            info = self._read_run_info(info_path)
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
            changed = _changed_settings(earlier, now) if isinstance(earlier, dict) else []
            if changed:
                raise ConfigError(
                    f"{self.out} holds results of other model settings ({', '.join(changed)}); resuming would "
                    "mix them into one accuracy. Rerun with the earlier settings to resume, use another --out, "
                    f"or --new-run to start over (the old results are moved to {self.out}/previous/)"
                )
        records: dict[str, dict[str, Any]] = {}
        if results_path.exists():
            for record in self._read_results(results_path):
                if not infrastructure_failure(record):  # e.g. a wrong --dbs last time: run it again
                    records[record["instance_id"]] = record
        return records

    def _read_run_info(self, path: Path) -> dict[str, Any]:
        """run.json of the run in --out: what a resume compares its settings with."""
        try:
            info = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            problem = exc.strerror if isinstance(exc, OSError) else f"not valid JSON: {type(exc).__name__}"
            info = None
        else:
            problem = "not a JSON object"
        if isinstance(info, dict):
            return info
        raise ConfigError(
            f"{path} cannot be read ({problem}): it records the settings of the run in {self.out}, without "
            "which a resume could mix two runs. Use --new-run to start over (the earlier files are moved to "
            f"{self.out}/previous/), or another --out"
        )

    def _read_results(self, results_path: Path) -> list[dict[str, Any]]:
        """The records of results.jsonl. A line that is not a record (cut by a crash, or damaged) is moved
        to results.rejected.jsonl rather than dropped, and the file is rewritten without it, so appending
        continues a valid JSONL file; its task runs again."""
        raw = results_path.read_bytes()
        lines = raw.decode("utf-8", errors="replace").splitlines()
        kept: list[dict[str, Any]] = []
        kept_lines: list[str] = []
        rejected: list[str] = []
        for line in lines:
            if not line.strip():
                continue
            record = _record_of(line)
            if record is None:
                rejected.append(line)
                continue
            kept.append(record)
            kept_lines.append(line)
        if rejected or len(kept_lines) != len(lines) or (raw and not raw.endswith(b"\n")):
            if rejected:
                with open_private(self.out / REJECTED, "a") as sink:
                    sink.writelines(line + "\n" for line in rejected)
                log.warning(
                    "%s: %s could not be read (cut by a crash, or damaged); moved to %s, and %s again",
                    results_path,
                    plural(len(rejected), "line"),
                    self.out / REJECTED,
                    "its task runs" if len(rejected) == 1 else "their tasks run",
                )
            repaired = results_path.with_name(RESULTS + ".repaired")
            write_private(repaired, "".join(line + "\n" for line in kept_lines))
            os.replace(repaired, results_path)
        return kept

    def _write_in_task_order(self, results_path: Path) -> None:
        """results.jsonl in the task file's order (lines are appended as tasks finish): one line per task,
        the latest when a task ran again; lines of tasks outside this run's selection are kept."""
        if not results_path.exists():
            return
        latest: dict[str, str] = {}
        for line in results_path.read_text(encoding="utf-8", errors="replace").splitlines():
            record = _record_of(line)
            if record is not None:
                latest.pop(record["instance_id"], None)  # re-inserted: keeps the file order of the rest
                latest[record["instance_id"]] = line
        order = {t.instance_id: i for i, t in enumerate(self.tasks)}
        ids = sorted(latest, key=lambda i: (0, order[i]) if i in order else (1, 0))
        text = "".join(latest[i] + "\n" for i in ids)
        if text != results_path.read_text(encoding="utf-8", errors="replace"):
            ordered = results_path.with_name(RESULTS + ".ordered")
            write_private(ordered, text)
            os.replace(ordered, results_path)

    def _set_aside(self) -> None:
        """Starting over in a folder that holds a run: its files are moved to OUT/previous/<time>/,
        never deleted or overwritten silently."""
        names = [
            RESULTS,
            REJECTED,
            "run.json",
            "summary.json",
            "report.md",
            "report.html",
            SUBMISSION,
            "tasks",
        ]
        present = [n for n in names if (self.out / n).exists()]
        if RESULTS not in present and "run.json" not in present:
            return
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        target = self.out / "previous" / stamp
        n = 1
        while target.exists():  # two new runs within a second
            n += 1
            target = self.out / "previous" / f"{stamp}-{n}"
        try:
            target.mkdir(parents=True)
            for name in present:
                shutil.move(str(self.out / name), str(target / name))
        except OSError as exc:
            raise ConfigError(
                f"cannot move the earlier run in {self.out} to {target}: {exc.strerror or exc}; "
                "pass --out a folder you can write"
            ) from None
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
            except (ValueError, RecursionError):
                earlier = {}
            if not isinstance(earlier, dict):
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
        self.run_info = info
        write_private(path, json.dumps(info, indent=2) + "\n")


class _SubmissionUnwritable(Exception):
    """A file of the submission folder could not be written."""


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


def run_settings(info: dict[str, Any]) -> dict[str, Any]:
    """What the reports state about how the run was made: the runner's effective model settings (K,
    temperature, reasoning effort for the builtin agent) and the harness's own."""
    options = info.get("options") or {}
    return {
        **(info.get("provenance") or {}),
        "jobs": info.get("jobs"),
        "timeout_s": info.get("timeout"),
        "max_rows": options.get("max_rows"),
        "executor": info.get("executor"),
        "flexsql_version": info.get("flexsql_version"),
        "started_at": info.get("started_at"),
        "resumed_at": info.get("resumed_at") or [],
    }


def _record_of(line: str) -> dict[str, Any] | None:
    """One line of results.jsonl as a record, or None when it is not one: not JSON (a line cut by a
    crash), nested too deep to parse, or without the fields the reports read."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("instance_id"), str):
        return None
    for key in ("scores", "reasons", "categories", "timings"):
        if not isinstance(record.get(key, {}), dict):
            return None
    if not isinstance(record.get("tokens") or {}, dict) or not isinstance(
        record.get("score", 0), int | float
    ):
        return None
    return record


def _changed_settings(earlier: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """The settings a resume would change, as `key old -> new`. Runs recorded before effective values
    were recorded have `plans: null` for the default."""
    from flexsql.config import AgentConfig

    defaults = {"plans": AgentConfig().plans}
    changed = []
    for key in sorted(set(earlier) | set(now)):
        before = earlier.get(key)
        if before is None and key in defaults:
            before = defaults[key]
        if before != now.get(key):
            changed.append(f"{key} {earlier.get(key)!r} -> {now.get(key)!r}")
    return changed


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
