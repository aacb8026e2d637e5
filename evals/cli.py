"""`flexsql eval`: Spider 2.0-style evaluation from the command line."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from flexsql.agent.flags import apply_model_flags, model_options
from flexsql.config import load_settings
from flexsql.errors import ConfigError, FlexSQLError, NotFoundError
from flexsql.evals.scoring import SCORERS, Flavor

if TYPE_CHECKING:  # imported where used: `--help` and the other commands do not load them
    from rich.console import Console

    from flexsql.evals.harness import Evaluation, RunOutcome

EPILOG = """
\b
Examples:
\b
  # Spider 2.0-lite: score a submission folder (<id>.sql / <id>.csv) with the official rule
  flexsql eval spider2-lite.jsonl --runner predictions --predictions submission/ \\
      --dbs spider2-localdb/ --gold evaluation_suite/gold --scorer spider2
\b
  # Spider 2.0-snow: one Snowflake database per task, {db} is replaced by the task's db_id
  flexsql eval spider2-snow.jsonl --runner predictions --predictions submission/ \\
      --db "snowflake://me@acct/{db}/PUBLIC?warehouse=WH" --gold gold/ --eval-config gold/spider2snow_eval.jsonl
\b
  # Spider 1.0: replay the gold SQL through flexsql (checks the harness; expect ~100% ex)
  flexsql eval dev.json --runner gold --dbs spider/databases --jobs 2 --out runs/spider-gold
\b
  # CoSQL / SParC dialogues: every turn with gold SQL is scored, the others are counted by type
  flexsql eval cosql_dev.json --runner gold --dbs spider/databases
\b
  # Claude Code as the agent, talking to `flexsql serve` on each task's database
  flexsql eval spider2-lite.jsonl --runner command --dbs spider2-localdb/ --gold gold/ \\
      --external-knowledge documents/ --jobs 4 --timeout 900 \\
      --command 'claude -p "$(cat {question_file})" --mcp-config {mcp_config} --strict-mcp-config \\
                 --allowedTools mcp__flexsql --output-format json \\
                 --append-system-prompt "End your answer with the final SQL in a fenced sql block."'
\b
  # the built-in FlexSQL agent on a vLLM server (gpt-oss), 4 plans per question
  flexsql eval spider2-snow.jsonl --runner builtin --db 'snowflake://me@acct/{db}' \\
      --base-url http://127.0.0.1:8000/v1 --model openai/gpt-oss-120b --plans 4 --jobs 8
\b
Command runner: placeholders {question_file} {question} {db_url} {db} {mcp_config} {out_dir}
{task_dir} {instance_id} {external_knowledge_file} are replaced by shell-quoted values (do not
quote them again); the same values are in FLEXSQL_QUESTION_FILE, FLEXSQL_DB_URL, FLEXSQL_MCP_CONFIG,
FLEXSQL_OUT_DIR, … . The program writes <id>.sql / answer.sql or <id>.csv / result.csv into
{out_dir} (optionally usage.json with token counts); Claude Code's --output-format json on stdout
is read for token usage and, when no file was written, a fenced ```sql block in its final answer.
\b
Outputs in --out: results.jsonl (one line per task), report.md, report.html, summary.json,
submission/ (the official submission folder). Re-running the same command resumes: finished tasks
are skipped; a resume with other model settings (--model, --base-url, --plans, the runner's
command) is refused (exit 2): use another --out or --new-run. Every line names its model.
Exit codes: 0 the evaluation ran, whatever the accuracy; 1 a runtime error; 2 a usage or
configuration error; 130 interrupted (Ctrl-C or SIGTERM: the reports are still written).
"""


@click.command("eval", epilog=EPILOG, context_settings={"max_content_width": 110})
@click.argument("tasks", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--runner",
    type=click.Choice(["gold", "predictions", "command", "builtin"]),
    required=True,
    help="Where answers come from: gold SQL replayed, a predictions folder, an external command per "
    "task, or the built-in agent.",
)
@click.option(
    "--dbs",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Folder of SQLite/DuckDB files: <db>.sqlite or <db>/<db>.sqlite (names match case-insensitively).",
)
@click.option(
    "--db",
    "db_url",
    metavar="URL",
    help="One source URL for every task (sqlite:///…, duckdb:///…, postgresql://…, snowflake://…); "
    "{db} in it becomes the task's database name.",
)
@click.option(
    "--gold",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Gold folder: exec_result/ CSVs (or the CSVs directly) and optionally sql/<id>.sql.",
)
@click.option(
    "--eval-config",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The spider2*_eval.jsonl (condition_cols, ignore_order); found in --gold when omitted.",
)
@click.option(
    "--predictions",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Folder of <id>.sql / <id>.csv for --runner predictions.",
)
@click.option(
    "--prediction-mode",
    type=click.Choice(["auto", "sql", "csv"]),
    default="auto",
    show_default=True,
    help="With both <id>.sql and <id>.csv present, auto uses the SQL (the official default mode).",
)
@click.option(
    "--scorer",
    type=click.Choice(SCORERS),
    help="The score reported as `score` (all four are recorded; rex also records a similarity). Default: "
    "spider2 for Spider 2.0 tasks, ex otherwise.",
)
@click.option(
    "--flavor",
    type=click.Choice(["lite", "snow"]),
    help="Which official evaluator's condition_cols quirk to reproduce. Default: from the task file.",
)
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(1, 256),
    default=4,
    show_default=True,
    help="Tasks run at the same time.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(0.1),
    default=120.0,
    show_default=True,
    help="Seconds per task: for the command, and for each SQL execution.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Output folder. Default: ./flexsql-eval/<tasks file>-<runner>.",
)
@click.option(
    "--external-knowledge",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Folder of the external-knowledge documents Spider 2.0 tasks name.",
)
@click.option(
    "--command",
    "command",
    metavar='"CMD …"',
    help="For --runner command: the program to run per task (see placeholders below).",
)
@click.option(
    "--via-mcp",
    is_flag=True,
    help="Run SQL through `flexsql serve` subprocesses over MCP stdio instead of in-process.",
)
@click.option("--limit", type=click.IntRange(1), help="Only the first N tasks.")
@click.option("--ids", help="Only these instance ids (comma-separated).")
@click.option(
    "--resume/--no-resume",
    default=True,
    show_default=True,
    help="Skip tasks already in results.jsonl (--no-resume starts over).",
)
@click.option(
    "--max-rows",
    type=click.IntRange(1),
    default=1_000_000,
    show_default=True,
    help="Largest result fetched; a bigger one scores 0 as too large.",
)
@click.option(
    "--new-run",
    is_flag=True,
    help="Start over in --out even when it holds a run (its files are moved to OUT/previous/<time>/).",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout (progress stays on stderr)."
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    help="flexsql.toml with [model] / [agent] for --runner builtin",
)
@model_options
def eval_command(
    tasks: Path,
    runner: str,
    dbs: Path | None,
    db_url: str | None,
    gold: Path | None,
    eval_config: Path | None,
    predictions: Path | None,
    prediction_mode: str,
    scorer: str | None,
    flavor: Flavor | None,
    jobs: int,
    timeout: float,
    out: Path | None,
    external_knowledge: Path | None,
    command: str | None,
    via_mcp: bool,
    limit: int | None,
    ids: str | None,
    resume: bool,
    max_rows: int,
    new_run: bool,
    quiet: bool,
    as_json: bool,
    config_file: str | None,
    base_url: str | None,
    model_name: str | None,
    api_key_env: str | None,
    plans: int | None,
) -> None:
    """Evaluate an agent on TASKS: a Spider 2.0 JSONL (lite or snow), a Spider 1.0 JSON, or a
    CoSQL/SParC dialogue JSON (the format is detected).

    Every answer is scored with spider2 (the official Spider 2.0 verdict), spider2-strict and ex;
    --scorer picks the one reported as `score`."""
    from rich.console import Console

    from flexsql.evals.harness import EvalOptions, Evaluation

    console = Console(stderr=True, soft_wrap=True)
    if dbs and db_url:
        raise click.UsageError("give --dbs DIR or --db URL, not both")
    out = out or Path("flexsql-eval") / f"{tasks.stem}-{runner}"
    options = EvalOptions(
        tasks=tasks,
        runner=runner,
        dbs=dbs,
        db=db_url,
        gold=gold,
        eval_config=eval_config,
        predictions=predictions,
        prediction_mode=prediction_mode,
        scorer=scorer,
        flavor=flavor,
        jobs=jobs,
        timeout=timeout,
        out=out,
        external_knowledge=external_knowledge,
        command=command,
        via_mcp=via_mcp,
        limit=limit,
        ids=[i.strip() for i in ids.split(",") if i.strip()] if ids else None,
        resume=resume and not new_run,
        max_rows=max_rows,
        plans=plans,
    )
    try:
        if runner == "builtin":
            options.settings = apply_model_flags(
                load_settings(config_file), base_url, model_name, api_key_env, plans
            )
        evaluation = Evaluation(options)
    except NotFoundError as exc:  # --ids naming no task: a usage error (exit 2)
        raise click.BadParameter(str(exc).removeprefix("--ids: "), param_hint="'--ids'") from None
    except ConfigError as exc:  # a flag, file or setting: exit 2 (docs/cli.md, exit codes)
        raise UsageFailure(str(exc)) from None
    except FlexSQLError as exc:
        raise click.ClickException(str(exc)) from None
    evaluation.on_stopping = lambda: console.print(
        "[yellow]interrupted[/]: stopping the running tasks and writing the reports "
        "(Ctrl-C again to leave at once)"
    )
    try:
        with terminate_as_interrupt():
            outcome = _run(evaluation, console, quiet)
    except ConfigError as exc:
        raise UsageFailure(str(exc)) from None
    except FlexSQLError as exc:
        raise click.ClickException(str(exc)) from None
    if evaluation.set_aside is not None:
        console.print(f"the earlier run's files were moved to {evaluation.set_aside}", markup=False)
    s = outcome.summary
    if as_json:
        click.echo(json.dumps(s, indent=2, default=str))
    console.print(
        f"[bold]{s['scorer']}[/]: {_pct(s['accuracy_evaluated'])} of evaluated ({s['passed']}/{s['evaluated']}), "
        f"{_pct(s['accuracy_all'])} of all ({s['passed']}/{s['scored_tasks']}); "
        + " ".join(
            f"{k} {_pct(v['accuracy_evaluated'])}" for k, v in s["scorers"].items() if k != s["scorer"]
        )
        + "".join(
            f"; {k} mean similarity {v['mean_similarity_evaluated']:.4f}"
            for k, v in s["scorers"].items()
            if v.get("mean_similarity_evaluated") is not None
        )
    )
    if outcome.skipped:
        console.print(
            f"{outcome.skipped} task(s) already in {outcome.out / 'results.jsonl'} were skipped "
            "(--no-resume to run them again)"
        )
    if s.get("tasks_per_s"):
        console.print(f"{outcome.ran} tasks in {outcome.wall_s:.2f} s ({s['tasks_per_s']} tasks/s)")
    if s.get("model"):
        console.print(f"model: {s['model']}", markup=False)
    console.print(f"report: {outcome.out / 'report.html'}  results: {outcome.out / 'results.jsonl'}")
    if outcome.interrupted:
        console.print(
            f"[yellow]interrupted[/]: {outcome.ran} task(s) finished this time; "
            "run the same command again to resume"
        )
        exit_interrupted()


class UsageFailure(click.ClickException):
    """A configuration or usage error found after parsing (a bad --out, a mismatched resume): exit 2."""

    exit_code = 2


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM ends the run the way Ctrl-C does: running tasks stopped, reports written, exit 130."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def exit_interrupted() -> None:
    """Exit 130. Worker threads still stuck past the grace period (a query the engine cannot cancel)
    would hold the interpreter's exit, and a second Ctrl-C there prints a threading traceback: the
    reports are written, so leave at once."""
    stuck = [t for t in threading.enumerate() if t.name.startswith("flexsql-eval") and t.is_alive()]
    if stuck and threading.current_thread() is threading.main_thread():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    sys.exit(130)


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}%"


def _run(evaluation: Evaluation, console: Console, quiet: bool) -> RunOutcome:
    todo_hint = len(evaluation.tasks)
    if quiet or not console.is_terminal:
        return evaluation.run()
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    counts = {"passed": 0, "evaluated": 0}
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[accuracy]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    ) as progress:
        bar = progress.add_task(f"{evaluation.runner.name}", total=todo_hint, accuracy="")

        def on_progress(record: dict[str, Any], done: int, total: int) -> None:
            if record.get("evaluated"):
                counts["evaluated"] += 1
                counts["passed"] += int(record.get("score", 0))
            acc = (100.0 * counts["passed"] / counts["evaluated"]) if counts["evaluated"] else 0.0
            progress.update(
                bar,
                completed=done,
                total=total,
                accuracy=f"{evaluation.scorer} {acc:.1f}% ({counts['passed']}/{counts['evaluated']})",
            )

        return evaluation.run(on_progress)


def main() -> None:  # pragma: no cover - `python -m flexsql.evals.cli`
    eval_command()


if __name__ == "__main__":  # pragma: no cover
    main()
