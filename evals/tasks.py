"""Benchmark tasks: loading Spider 2.0, Spider 1.0 and dialogue files, and finding their databases
and external-knowledge documents.

Formats (detected from the content, not the file name):
- Spider 2.0-lite JSONL: `instance_id`, `db`, `question`, `external_knowledge` (a file name or null).
- Spider 2.0-snow JSONL: `instance_id`, `instruction`, `db_id`, `external_knowledge`.
- Spider 1.0 JSON: a list of `db_id`, `question`, `query` (BIRD's `SQL` and `evidence` work too);
  tasks are numbered 0, 1, … in file order.
- Dialogues (CoSQL / SParC as in QDA-SQL): a list of `{db_name, turns: [{isUser, text, type?},
  {isUser: false, query}, …]}`; every user turn becomes a task `<dialogue>-<turn>`, scored when the
  system turn after it carries SQL.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from flexsql.errors import ConfigError, NotFoundError
from flexsql.tools.engines import engine_for_path
from flexsql.tools.sql.fences import sql_blocks

Benchmark = Literal["spider2-lite", "spider2-snow", "spider", "dialogue"]


class Turn(BaseModel):
    """An earlier turn of a dialogue, as the agent may see it."""

    question: str
    type: str | None = None
    gold_sql: str | None = None


class Task(BaseModel):
    instance_id: str
    benchmark: Benchmark
    db: str | None = None
    question: str
    external_knowledge: str | None = None  # a document name (Spider 2.0) or the text itself (BIRD evidence)
    gold_sql: str | None = None
    # dialogues
    dialogue_index: int | None = None
    turn_index: int | None = None
    turn_type: str | None = None  # answerable / ambiguous / unanswerable / improper (CoSQL labels)
    history: list[Turn] = []
    scored: bool = True  # False for dialogue turns whose gold has no SQL

    @property
    def flavor(self) -> Literal["lite", "snow"]:
        return "snow" if self.benchmark == "spider2-snow" else "lite"


MAX_ID_BYTES = 200  # ids name files (<id>.sql, <id>.csv, tasks/<id>/): a file name holds 255 bytes


def load_tasks(path: Path) -> list[Task]:
    """Load a task file of any supported format (see the module docstring); every instance id must be
    usable as a file name, since the submission folder names its files by id."""
    tasks = _load(path)
    seen: set[str] = set()
    for n, task in enumerate(tasks):
        problem = _id_problem(task.instance_id)
        if problem:
            shown = task.instance_id[:40] + ("…" if len(task.instance_id) > 40 else "")
            raise ConfigError(
                f"{path}: task {n} (counting from 0) has the instance_id {shown!r}, which {problem}: ids name "
                "the submission's files (<id>.sql, <id>.csv). Shorten or rename it in the task file"
            )
        if task.instance_id in seen:
            raise ConfigError(
                f"{path}: the instance_id {task.instance_id!r} is given to more than one task; ids must be unique"
            )
        seen.add(task.instance_id)
    return tasks


def _id_problem(instance_id: str) -> str | None:
    size = len(instance_id.encode("utf-8", errors="surrogatepass"))
    if not instance_id.strip():
        return "is empty"
    if size > MAX_ID_BYTES:
        return f"is {size} bytes long (at most {MAX_ID_BYTES})"
    if any(c in instance_id for c in "/\\\0") or instance_id in (".", ".."):
        return "holds a path separator or NUL"
    return None


def _load(path: Path) -> list[Task]:
    path = Path(path)
    if not path.exists():
        raise ConfigError(
            f"task file not found: {path}; give a Spider 2.0 JSONL, a Spider 1.0 JSON or a dialogue JSON"
        )
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if not stripped:
        raise ConfigError(f"task file {path} is empty")
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"task file {path} is not valid JSON: {exc}") from None
        return _from_json_list(data, path)
    items = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            items.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{path}:{n} is not a JSON object ({exc}); a Spider 2.0 task file has one task per line"
            ) from None
    return [_spider2_task(item, path, n) for n, item in enumerate(items)]


def _spider2_task(item: dict[str, Any], path: Path, n: int) -> Task:
    if "instance_id" not in item:
        raise ConfigError(f"{path}: task {n} has no instance_id; Spider 2.0 JSONL lines need instance_id")
    snow = "instruction" in item and "question" not in item
    question = item.get("instruction") if snow else item.get("question")
    if question is None:
        raise ConfigError(
            f"{path}: task {item['instance_id']} has neither 'question' (lite) nor 'instruction' (snow)"
        )
    return Task(
        instance_id=str(item["instance_id"]),
        benchmark="spider2-snow" if snow else "spider2-lite",
        db=item.get("db_id") if snow else item.get("db", item.get("db_id")),
        question=question,
        external_knowledge=item.get("external_knowledge") or None,
    )


def _from_json_list(data: Any, path: Path) -> list[Task]:
    if not isinstance(data, list):
        raise ConfigError(f"{path}: expected a JSON list of tasks or dialogues")
    if not data:
        return []
    first = data[0]
    if isinstance(first, dict) and "turns" in first:
        return _dialogue_tasks(data)
    if isinstance(first, dict) and "question" in first:
        tasks = []
        for n, item in enumerate(data):
            if not isinstance(item, dict) or not isinstance(item.get("question"), str):
                got = sorted(item) if isinstance(item, dict) else type(item).__name__
                raise ConfigError(
                    f"{path}: task {n} (counting from 0) has no 'question' text (it has {got}); every "
                    "Spider 1.0 item needs db_id, question and query"
                )
            gold = item.get("query", item.get("SQL"))
            tasks.append(
                Task(
                    instance_id=str(item["instance_id"]) if "instance_id" in item else str(n),
                    benchmark="spider",
                    db=item.get("db_id"),
                    question=item["question"],
                    gold_sql=gold,
                    external_knowledge=item.get("evidence") or None,
                )
            )
        return tasks
    keys = sorted(first) if isinstance(first, dict) else type(first).__name__
    raise ConfigError(
        f"{path}: unknown task format (first item has {keys}); expected Spider 1.0 items "
        "(db_id, question, query) or dialogues (db_name, turns)"
    )


def _dialogue_tasks(dialogues: list[dict[str, Any]]) -> list[Task]:
    tasks: list[Task] = []
    for d_index, dialogue in enumerate(dialogues):
        db = dialogue.get("db_name", dialogue.get("db_id"))
        history: list[Turn] = []
        pending: Task | None = None
        turn_index = 0

        def close(task: Task | None, history: list[Turn] = history) -> None:
            if task is None:
                return
            tasks.append(task)
            history.append(Turn(question=task.question, type=task.turn_type, gold_sql=task.gold_sql))

        for turn in dialogue.get("turns", []):
            if turn.get("isUser"):
                close(pending)
                pending = Task(
                    instance_id=f"{d_index}-{turn_index}",
                    benchmark="dialogue",
                    db=db,
                    question=(turn.get("text") or "").strip(),
                    dialogue_index=d_index,
                    turn_index=turn_index,
                    turn_type=turn.get("type") or None,
                    history=list(history),
                    scored=False,
                )
                turn_index += 1
            elif pending is not None:
                sql = (turn.get("query") or "").strip()
                if sql:
                    pending.gold_sql = sql
                    pending.scored = True
                close(pending)
                pending = None
        close(pending)
    return tasks


# -- databases -------------------------------------------------------------------------------------


class DatabaseLocator:
    """Finds the source URL of a task's database: in a folder of SQLite/DuckDB files (`<db>.sqlite`
    or `<db>/<db>.sqlite`, names matched case-insensitively), or from a URL (`{db}` in the URL is
    replaced by the task's database name)."""

    def __init__(self, dbs_dir: Path | None = None, db_url: str | None = None) -> None:
        if dbs_dir is None and db_url is None:
            raise ConfigError("no databases given: pass --dbs DIR (SQLite/DuckDB files) or --db URL")
        self.dbs_dir = Path(dbs_dir) if dbs_dir else None
        self.db_url = db_url
        self._index: dict[str, Path] | None = None

    def _files(self) -> dict[str, Path]:
        if self._index is None:
            assert self.dbs_dir is not None
            if not self.dbs_dir.is_dir():
                raise ConfigError(
                    f"--dbs {self.dbs_dir} is not a folder; give the folder holding <db>.sqlite or <db>/<db>.sqlite"
                )
            index: dict[str, Path] = {}
            for entry in sorted(self.dbs_dir.iterdir()):
                if entry.is_file() and engine_for_path(entry.name) is not None:
                    index.setdefault(entry.stem.lower(), entry)
                elif entry.is_dir():
                    files = [
                        f
                        for f in sorted(entry.iterdir())
                        if f.is_file() and engine_for_path(f.name) is not None
                    ]
                    same = [f for f in files if f.stem.lower() == entry.name.lower()]
                    if same or len(files) == 1:
                        index.setdefault(entry.name.lower(), (same or files)[0])
            self._index = index
        return self._index

    def url_for(self, db: str | None) -> str:
        if self.db_url is not None:
            if "{db}" in self.db_url:
                if not db:
                    raise NotFoundError("this task names no database, but --db has a {db} placeholder")
                return self.db_url.replace("{db}", db)
            return self.db_url
        if not db:
            raise NotFoundError(
                "this task names no database; pass --db URL to use one database for every task"
            )
        files = self._files()
        path = files.get(db.lower())
        if path is None:
            import difflib

            close = difflib.get_close_matches(db.lower(), list(files), n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise NotFoundError(
                f"database {db!r} not found under {self.dbs_dir} "
                f"(looked for {db}.sqlite/.db/.duckdb or {db}/{db}.sqlite){hint}"
            )
        engine = engine_for_path(path.name)
        assert engine is not None  # _files() keeps only files an engine opens
        return f"{engine.url_schemes[0]}:///{path.resolve()}"


def find_external_knowledge(task: Task, folder: Path | None) -> Path | None:
    """The document a Spider 2.0 task names in `external_knowledge`, looked up case-insensitively."""
    name = task.external_knowledge
    if not name or folder is None or task.benchmark not in ("spider2-lite", "spider2-snow"):
        return None
    folder = Path(folder)
    direct = folder / name
    if direct.is_file():
        return direct
    lowered = name.lower()
    for candidate in folder.rglob("*"):
        if candidate.is_file() and candidate.name.lower() == lowered:
            return candidate
    return None


def extract_sql(text: str, last: bool = False) -> str:
    """The SQL of a prediction file: the first fenced ```sql block when there is one (as the official
    evaluator does; `last` takes the last one, for an agent's final answer), else the whole text."""
    blocks = sql_blocks(text)
    if not blocks:
        return text.strip()
    return (blocks[-1] if last else blocks[0]).strip()
