"""Runners: where a task's predicted answer comes from.

- `gold`: the gold SQL itself, run through the same tools as any prediction (proves the harness).
- `predictions`: a folder in the official submission layout, `<id>.sql` and/or `<id>.csv`.
- `command`: an external program per task (Claude Code, another agent) given the question, the
  database URL and an MCP config that starts `flexsql serve` on the task's database; it writes
  `<id>.sql` / `<id>.csv` (or `answer.sql` / `result.csv`) into its output folder.
- `builtin`: the flexsql agent, in-process (evals/builtin.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from flexsql.errors import ConfigError, FlexSQLError
from flexsql.evals.dialogue import read_status
from flexsql.evals.execution import flexsql_command
from flexsql.evals.gold import GoldStore
from flexsql.evals.tasks import DatabaseLocator, Task, extract_sql, find_external_knowledge
from flexsql.paths import open_private, write_private
from flexsql.tools.engines.urls import split_password

RUNNERS = ("gold", "predictions", "command", "builtin")
PLACEHOLDERS = (
    "question_file",
    "question",
    "db_url",
    "db",
    "mcp_config",
    "out_dir",
    "task_dir",
    "instance_id",
    "external_knowledge_file",
)


class Prediction(BaseModel):
    """What a runner produced for one task. No `sql` and no `csv_path` means no prediction."""

    sql: str | None = None
    csv_path: str | None = None
    origin: str = ""  # where it came from: "gold SQL", "predictions/3.sql", "command: answer.sql", …
    answer_text: str | None = None  # free text an agent answered with (clarifications, refusals)
    # answered / needs_clarification / unanswerable / reply / failed; dialogue turns are scored on it
    # (evals/dialogue.py). None: read from whether there is a prediction.
    status: str | None = None
    error: str | None = None
    error_category: str | None = None  # timeout / runner_error / no_prediction
    note: str | None = None
    runner_s: float = 0.0
    tokens: dict[str, int] | None = None
    cost_usd: float | None = None
    model_calls: int | None = None  # the builtin agent's usage (other runners may report it too)
    tool_calls: int | None = None
    trace: str | None = None  # path of the task's JSONL trace

    @property
    def present(self) -> bool:
        return bool(self.sql and self.sql.strip()) or self.csv_path is not None


class RunnerStopped(FlexSQLError):
    """The evaluation was interrupted while this task ran: it is run again on resume."""

    def __init__(self) -> None:
        super().__init__("stopped: the evaluation was interrupted while this task ran")


class Runner:
    name = "runner"

    def provenance(self) -> dict[str, Any]:
        """Who answered: recorded in run.json and every record; a resume with other values is refused."""
        return {"model": None}

    def predict(self, task: Task) -> Prediction:  # pragma: no cover - interface
        raise NotImplementedError

    def stop(self) -> None:
        """Stop whatever is running (Ctrl-C)."""

    def kill(self) -> None:
        """Stop at once whatever is still running (a second Ctrl-C): no waiting."""


class GoldRunner(Runner):
    name = "gold"

    def __init__(self, gold: GoldStore) -> None:
        self.gold = gold

    def predict(self, task: Task) -> Prediction:
        sql = task.gold_sql or self.gold.sql(task.instance_id)
        if not sql:
            return Prediction(error="no gold SQL to replay for this task", error_category="no_prediction")
        return Prediction(sql=sql, origin="gold SQL")

    def provenance(self) -> dict[str, Any]:
        return {"model": "gold SQL"}


class PredictionsRunner(Runner):
    """Reads `<id>.sql` (executed; a fenced ```sql block inside is used when present) or `<id>.csv`."""

    name = "predictions"

    def __init__(self, folder: Path, mode: str = "auto") -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise ConfigError(
                f"--predictions {self.folder} is not a folder; give the folder holding <id>.sql or <id>.csv"
            )
        self.mode = mode

    def provenance(self) -> dict[str, Any]:
        return {"model": f"predictions {self.folder.resolve()}", "prediction_mode": self.mode}

    def predict(self, task: Task) -> Prediction:
        sql_path = self.folder / f"{task.instance_id}.sql"
        csv_path = self.folder / f"{task.instance_id}.csv"
        if self.mode in ("auto", "sql") and sql_path.is_file():
            return Prediction(
                sql=sql_path.read_text(encoding="utf-8", errors="replace"), origin=str(sql_path)
            )
        if self.mode in ("auto", "csv") and csv_path.is_file():
            return Prediction(csv_path=str(csv_path), origin=str(csv_path))
        wanted = {"auto": ".sql or .csv", "sql": ".sql", "csv": ".csv"}[self.mode]
        return Prediction(
            error=f"no {task.instance_id}{wanted} in {self.folder}", error_category="no_prediction"
        )


class CommandRunner(Runner):
    """Runs `template` once per task in a task folder (see `prepare`) and reads back its answer."""

    name = "command"

    def __init__(
        self,
        template: str,
        locator: DatabaseLocator | None,
        out_dir: Path,
        external_knowledge: Path | None = None,
        timeout_s: float = 600.0,
    ) -> None:
        if not template or not template.strip():
            raise ConfigError('--runner command needs --command "CMD …" (the program to run per task)')
        self.template = template
        self.locator = locator
        self.out_dir = Path(out_dir)
        self.external_knowledge = external_knowledge
        self.timeout_s = timeout_s
        self._running: dict[int, subprocess.Popen[bytes]] = {}
        self._lock = threading.Lock()
        self._stopped = False
        self._secret_env: dict[str, dict[str, str]] = {}

    def provenance(self) -> dict[str, Any]:
        return {"model": f"command: {self.template}"}

    def prepare(self, task: Task) -> dict[str, str]:
        """Write the task folder: question.txt, task.json, mcp.json, history.json (dialogues), the
        external-knowledge document; an empty output/ folder. Returns the placeholder values."""
        task_dir = (self.out_dir / "tasks" / safe_name(task.instance_id)).resolve()
        out = task_dir / "output"
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        # The password travels in the child's environment (PGPASSWORD…), never in a file or argv.
        db_url, secret_env = split_password(self.locator.url_for(task.db)) if self.locator else ("", {})
        self._secret_env[task.instance_id] = secret_env
        (task_dir / "question.txt").write_text(task.question + "\n", encoding="utf-8")
        server: dict[str, Any] = {
            "command": flexsql_command()[0],
            "args": [*flexsql_command()[1:], "serve", "--db", db_url],
        }
        if secret_env:  # MCP clients such as Claude Code expand ${VAR} from their own environment
            server["env"] = {name: "${" + name + "}" for name in secret_env}
        write_private(task_dir / "mcp.json", json.dumps({"mcpServers": {"flexsql": server}}, indent=2))
        ek_file = ""
        doc = find_external_knowledge(task, self.external_knowledge)
        if doc is not None:
            target = task_dir / doc.name
            shutil.copyfile(doc, target)
            ek_file = str(target)
        elif task.external_knowledge and task.benchmark == "spider":  # BIRD evidence is inline text
            target = task_dir / "evidence.txt"
            target.write_text(task.external_knowledge + "\n", encoding="utf-8")
            ek_file = str(target)
        if task.history:  # the earlier questions only: their gold SQL and turn labels are the answers
            (task_dir / "history.json").write_text(
                json.dumps([{"question": t.question} for t in task.history], indent=2), encoding="utf-8"
            )
        info = {
            "instance_id": task.instance_id,
            "db": task.db,
            "db_url": db_url,
            "question": task.question,
            "external_knowledge_file": ek_file or None,
            "dialogue_index": task.dialogue_index,
            "turn_index": task.turn_index,
            "history_file": str(task_dir / "history.json") if task.history else None,
        }
        write_private(task_dir / "task.json", json.dumps(info, indent=2))
        return {
            "question_file": str(task_dir / "question.txt"),
            "question": task.question,
            "db_url": db_url,
            "db": task.db or "",
            "mcp_config": str(task_dir / "mcp.json"),
            "out_dir": str(out),
            "task_dir": str(task_dir),
            "instance_id": task.instance_id,
            "external_knowledge_file": ek_file,
        }

    def command_line(self, values: dict[str, str]) -> str:
        line = self.template
        for key in PLACEHOLDERS:
            line = line.replace("{" + key + "}", shlex.quote(values.get(key, "")))
        return line

    def predict(self, task: Task) -> Prediction:
        if self._stopped:
            return Prediction(error=str(RunnerStopped()), error_category="runner_error")
        values = self.prepare(task)
        task_dir, out = Path(values["task_dir"]), Path(values["out_dir"])
        env = {
            **os.environ,
            **{f"FLEXSQL_{k.upper()}": v for k, v in values.items()},
            **self._secret_env.pop(task.instance_id, {}),
        }
        started = time.perf_counter()
        note = None
        with (
            open_private(task_dir / "stdout.txt", "wb") as stdout,
            open_private(task_dir / "stderr.txt", "wb") as stderr,
        ):
            proc = subprocess.Popen(
                self.command_line(values),
                shell=True,
                cwd=task_dir,
                env=env,
                stdout=stdout,
                stderr=stderr,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            with self._lock:
                self._running[proc.pid] = proc
            try:
                code = proc.wait(timeout=self.timeout_s)
                if code != 0:
                    note = f"the command exited with status {code} (see {task_dir / 'stderr.txt'})"
            except subprocess.TimeoutExpired:
                _kill(proc)
                note = f"the command ran past --timeout {self.timeout_s:g} s and was stopped"
            finally:
                with self._lock:
                    self._running.pop(proc.pid, None)
        elapsed = time.perf_counter() - started
        if self._stopped:  # killed by the interruption: not this command's answer
            return Prediction(error=str(RunnerStopped()), error_category="runner_error", runner_s=elapsed)
        prediction = read_answer(out, task.instance_id, task_dir / "stdout.txt")
        prediction.status = read_status(out, task_dir / "stdout.txt")
        prediction.runner_s = elapsed
        prediction.note = note
        if not prediction.present and prediction.error is None:
            timed_out = note is not None and "timeout" in note
            prediction.error = (
                note or f"the command wrote no {task.instance_id}.sql/.csv, answer.sql or result.csv in {out}"
            )
            prediction.error_category = "timeout" if timed_out else "no_prediction"
        return prediction

    def stop(self) -> None:
        self._stopped = True
        with self._lock:
            running = list(self._running.values())
        for proc in running:
            _kill(proc)

    def kill(self) -> None:
        self._stopped = True
        with self._lock:
            running = list(self._running.values())
        for proc in running:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=3)
    except (ProcessLookupError, PermissionError):
        pass


def safe_name(name: str) -> str:
    """A file name for an instance id (ids are normally already safe)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "task"


def read_answer(out: Path, instance_id: str, stdout_path: Path | None = None) -> Prediction:
    """An agent's answer: `<id>.sql`, `answer.sql`, `<id>.csv`, `result.csv` in `out`; token usage
    from `usage.json` or from Claude Code's `--output-format json` on stdout, whose final text may
    also carry the SQL in a fenced block."""
    prediction = Prediction()
    stdout_json = _stdout_json(stdout_path)
    usage = _read_json(out / "usage.json") or (stdout_json or {}).get("usage")
    if isinstance(usage, dict):
        prediction.tokens = {
            k: int(v) for k, v in usage.items() if isinstance(v, int | float) and not isinstance(v, bool)
        }
    cost = (stdout_json or {}).get("total_cost_usd")
    if isinstance(cost, int | float):
        prediction.cost_usd = float(cost)
    for name in (f"{instance_id}.sql", "answer.sql"):
        path = out / name
        if path.is_file() and path.read_text(encoding="utf-8", errors="replace").strip():
            prediction.sql = path.read_text(encoding="utf-8", errors="replace")
            prediction.origin = f"command: {name}"
            break
    else:
        for name in (f"{instance_id}.csv", "result.csv"):
            path = out / name
            if path.is_file():
                prediction.csv_path = str(path)
                prediction.origin = f"command: {name}"
                break
    answer = _read_text(out / "answer.txt")
    final_text = (
        (stdout_json or {}).get("result") if isinstance((stdout_json or {}).get("result"), str) else None
    )
    prediction.answer_text = answer or final_text
    if not prediction.present and final_text and "```" in final_text:
        sql = extract_sql(final_text, last=True)
        if sql and sql != final_text.strip():
            prediction.sql = sql
            prediction.origin = "command: fenced SQL in the final answer"
    return prediction


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _read_text(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip()
        return text or None
    except OSError:
        return None


def _stdout_json(path: Path | None) -> dict[str, Any] | None:
    """The last JSON object printed on stdout (Claude Code prints one with --output-format json)."""
    if path is None:
        return None
    text = _read_text(path)
    if not text:
        return None
    try:
        data = json.loads(text)
        return data if isinstance(data, dict) else None
    except ValueError:
        pass
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                data = json.loads(line)
                if isinstance(data, dict):
                    return data
            except ValueError:
                continue
    return None
