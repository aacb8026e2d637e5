"""A source's knowledge store: a folder of plain files a team keeps under version control and reviews.

    <store>/
      README.md          what the files are (written when the store is created)
      queries.yaml       verified question/SQL pairs: who verified them and when, the tables and columns
                         they read, where they came from; `status: stale` when they no longer fit the schema
      facts.yaml         what queries show about the data: join conditions, filters and literal spellings,
                         each with how many queries used it and from which origin (a log, history, the
                         verified queries, a semantic model)
      schema.yaml        synonyms and descriptions of tables and columns (a Cortex Analyst semantic model)
      documents/*.md     documents as given (definitions, glossaries, external-knowledge files)

Every file is written in one stable order (queries by question, facts by name), one key per line and SQL
as a block, so a change reads as a small diff; the same import twice writes the same bytes. Writes go to a
temporary file and replace the old one, under a lock shared by processes: a failed import writes nothing.

Where it lives: the source's `knowledge` setting ([[sources]] in flexsql.toml), else
`<data dir>/knowledge/<source name>-<hash of its URL>` (the data dir: $FLEXSQL_DATA_DIR, else the user
data folder).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import platformdirs
import yaml
from filelock import FileLock
from pydantic import BaseModel, Field, ValidationError

from flexsql.errors import ConfigError
from flexsql.tools.engines import Source

QUERIES = "queries.yaml"
FACTS = "facts.yaml"
SCHEMA = "schema.yaml"
DOCUMENTS = "documents"
VERIFIED_ORIGIN = "verified queries"  # the origin of facts read from the store's own verified queries

README = """\
# flexsql knowledge store

What flexsql knows about this database beyond its schema. Review changes like code.

- `queries.yaml`: verified question/SQL pairs (`flexsql learn`, the `remember` tool). `status: stale`
  marks one that no longer fits the schema: kept for review, never offered as verified.
- `facts.yaml`: join conditions, filters and literal spellings seen in queries, with counts per origin.
- `schema.yaml`: synonyms and descriptions of tables and columns.
- `documents/`: definitions and glossaries, as given.

Edit by hand or with `flexsql learn FILE --db URL`; the same import twice changes nothing.
"""


class VerifiedQuery(BaseModel):
    """A question and the SQL someone confirmed answers it."""

    id: str  # a hash of the question and SQL: the same pair imported twice is one entry
    question: str
    sql: str
    tables: list[str] = []  # qualified names, as the catalog spells them
    columns: list[str] = []  # table.column the SQL reads (checked against the schema at recall)
    status: Literal["verified", "stale"] = "verified"
    stale_reason: str | None = None
    verified_by: str | None = None
    verified_at: str | None = None
    origin: str | None = None  # the file (and item) it was imported from, or "remember"
    evidence: str | None = None  # what the question's words mean here (BIRD's evidence)
    result_columns: list[str] = []  # the result's shape when it was confirmed (remember)
    result_rows: int | None = None


# Each fact says how often it was seen (`count`), and by which origin (`by`: a log file,
# `pg_stat_statements`, the verified queries, a semantic model's relationships).


class JoinFact(BaseModel):
    left: str  # table.column (the smaller of the two sides first)
    right: str
    count: int = 0
    by: dict[str, int] = {}


class FilterFact(BaseModel):
    condition: str  # as written, columns qualified by their table: `singer.country = 'France'`
    tables: list[str] = []
    count: int = 0
    by: dict[str, int] = {}


class LiteralFact(BaseModel):
    column: str  # table.column
    value: str  # the spelling stored in the data, as queries wrote it
    count: int = 0
    by: dict[str, int] = {}


class Facts(BaseModel):
    joins: list[JoinFact] = []
    filters: list[FilterFact] = []
    literals: list[LiteralFact] = []


class ColumnNote(BaseModel):
    synonyms: list[str] = []
    description: str | None = None


class TableNote(BaseModel):
    synonyms: list[str] = []
    description: str | None = None
    columns: dict[str, ColumnNote] = {}


class SchemaNotes(BaseModel):
    tables: dict[str, TableNote] = {}  # by qualified table name


class Queries(BaseModel):
    queries: list[VerifiedQuery] = []


class Knowledge(BaseModel):
    """Everything a store holds, as read from its folder."""

    queries: list[VerifiedQuery] = []
    facts: Facts = Field(default_factory=Facts)
    schema_notes: SchemaNotes = Field(default_factory=SchemaNotes)
    documents: dict[str, str] = {}  # file name -> text

    def is_empty(self) -> bool:
        return not (
            self.queries
            or self.documents
            or self.schema_notes.tables
            or self.facts.joins
            or self.facts.filters
            or self.facts.literals
        )


# -- where a store lives -----------------------------------------------------------------------------


def data_dir() -> Path:
    """Where flexsql keeps what must outlive its caches: $FLEXSQL_DATA_DIR, else the user data folder."""
    override = os.environ.get("FLEXSQL_DATA_DIR")
    return Path(override) if override else Path(platformdirs.user_data_dir("flexsql"))


def store_dir(source: Source) -> Path:
    """The folder of `source`'s knowledge store (it need not exist yet)."""
    configured = getattr(source, "knowledge_dir", None)
    if configured:
        return Path(configured).expanduser()
    # secrets stay out of the hash input as they stay out of everything else: the redacted URL
    digest = hashlib.sha256(source.display_url.encode()).hexdigest()[:8]
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", source.name) or "source"
    return data_dir() / "knowledge" / f"{safe}-{digest}"


# -- reading -----------------------------------------------------------------------------------------


def stamp(folder: Path) -> tuple[tuple[str, int, int], ...]:
    """What changes when any file of the store changes: names, sizes and modification times."""
    out: list[tuple[str, int, int]] = []
    for path in (folder / QUERIES, folder / FACTS, folder / SCHEMA):
        with contextlib.suppress(OSError):
            st = path.stat()
            out.append((path.name, st.st_size, st.st_mtime_ns))
    docs = folder / DOCUMENTS
    if docs.is_dir():
        for path in sorted(docs.iterdir()):
            with contextlib.suppress(OSError):
                st = path.stat()
                out.append((f"{DOCUMENTS}/{path.name}", st.st_size, st.st_mtime_ns))
    return tuple(out)


def _read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise ConfigError(
            f"the knowledge file {path} is not valid YAML ({_yaml_problem(exc)}); fix it by hand "
            "(it is plain text under version control) or restore it"
        ) from None


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return where + str(getattr(exc, "problem", None) or exc).strip()


def _validated(model: type[BaseModel], data: Any, path: Path) -> Any:
    try:
        return model.model_validate(data or {})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(
            f"the knowledge file {path} has an entry flexsql cannot read ({where}: {first['msg']}); "
            "fix it by hand or restore it"
        ) from None


def read_store(folder: Path) -> Knowledge:
    """The store in `folder` (empty when it does not exist). Raises ConfigError for a damaged file."""
    queries = _validated(Queries, _read_yaml(folder / QUERIES), folder / QUERIES).queries
    facts = _validated(Facts, _read_yaml(folder / FACTS), folder / FACTS)
    notes = _validated(SchemaNotes, _read_yaml(folder / SCHEMA), folder / SCHEMA)
    documents: dict[str, str] = {}
    docs = folder / DOCUMENTS
    if docs.is_dir():
        for path in sorted(docs.iterdir()):
            if path.is_file() and path.suffix.lower() in (".md", ".txt"):
                documents[path.name] = path.read_text(encoding="utf-8", errors="replace")
    return Knowledge(queries=queries, facts=facts, schema_notes=notes, documents=documents)


_CACHE: dict[Path, tuple[tuple[tuple[str, int, int], ...], Knowledge]] = {}
_CACHE_LOCK = threading.Lock()


def load(source: Source) -> tuple[Knowledge, tuple[tuple[str, int, int], ...]]:
    """The source's store and its stamp, read again only when a file changed (another process's import)."""
    folder = store_dir(source)
    current = stamp(folder)
    with _CACHE_LOCK:
        cached = _CACHE.get(folder)
        if cached is not None and cached[0] == current:
            return cached[1], current
    knowledge = read_store(folder)
    with _CACHE_LOCK:
        _CACHE[folder] = (current, knowledge)
    return knowledge, current


def schema_notes(source: Source) -> tuple[object, dict[str, TableNote]]:
    """(a stamp that changes with the store, the table notes by lower-case qualified name): what
    search_schema adds to the tables' and columns' texts. Cheap when there is no store."""
    folder = store_dir(source)
    if not (folder / SCHEMA).exists():
        return (), {}
    knowledge, current = load(source)
    return current, {name.lower(): note for name, note in knowledge.schema_notes.tables.items()}


def noted_text(comment: str | None, synonyms: list[str], description: str | None) -> str | None:
    """A comment with a store's synonyms and description added (search reads comments)."""
    parts = [p for p in (comment, description) if p]
    if synonyms:
        parts.append("also called " + ", ".join(synonyms))
    return ". ".join(parts) if parts else None


# -- writing -----------------------------------------------------------------------------------------


class _Loader(yaml.CSafeLoader if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader):  # type: ignore[misc]
    pass


class _Dumper(yaml.SafeDumper):
    pass


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    # SQL and long texts as literal blocks: readable, and a changed line is a changed line in the diff
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _text)


def dump_yaml(data: Any, header: str) -> str:
    body = yaml.dump(
        data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=1_000_000
    )  # a line per value
    return f"# {header}\n{body}"


def _compact(model: BaseModel) -> dict[str, Any]:
    """A model as YAML: fields in declaration order, empty ones left out."""
    out: dict[str, Any] = {}
    for key, value in model.model_dump(mode="json").items():
        if value is None or value == [] or value == {}:
            continue
        if key == "status" and value == "verified":
            continue
        out[key] = value
    return out


def render(knowledge: Knowledge) -> dict[str, str]:
    """File path (relative) -> text, for everything the store holds."""
    files: dict[str, str] = {"README.md": README}
    queries = sorted(knowledge.queries, key=lambda q: (q.question.casefold(), q.id))
    files[QUERIES] = dump_yaml(
        {"queries": [_compact(q) for q in queries]},
        "verified question/SQL pairs (flexsql learn, remember); sorted by question",
    )
    facts = knowledge.facts
    files[FACTS] = dump_yaml(
        {
            "joins": [_compact(j) for j in sorted(facts.joins, key=lambda j: (j.left, j.right))],
            "filters": [_compact(f) for f in sorted(facts.filters, key=lambda f: f.condition)],
            "literals": [_compact(x) for x in sorted(facts.literals, key=lambda x: (x.column, x.value))],
        },
        "facts mined from queries: how often each was used, by origin",
    )
    tables = {
        name: {
            **_compact(note.model_copy(update={"columns": {}})),
            **(
                {"columns": {c: _compact(n) for c, n in sorted(note.columns.items())}} if note.columns else {}
            ),
        }
        for name, note in sorted(knowledge.schema_notes.tables.items())
    }
    files[SCHEMA] = dump_yaml({"tables": tables}, "synonyms and descriptions of tables and columns")
    for name, text in sorted(knowledge.documents.items()):
        files[f"{DOCUMENTS}/{name}"] = text if text.endswith("\n") else text + "\n"
    return files


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """One writer at a time per store, across processes (the lock file lives in the cache folder, never
    beside what is reviewed and committed)."""
    from flexsql.paths import cache_dir, private_dir

    name = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:16]
    with FileLock(str(private_dir(cache_dir() / "locks") / f"knowledge-{name}.lock"), timeout=60):
        yield


def write_store(folder: Path, knowledge: Knowledge) -> list[str]:
    """Write the files that changed (each replaced whole, atomically); the names written. Documents no
    longer held are removed. Call under `locked(folder)`."""
    files = render(knowledge)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / DOCUMENTS).mkdir(exist_ok=True)
    changed: list[str] = []
    staged: list[tuple[Path, Path]] = []
    try:
        for rel, text in files.items():
            path = folder / rel
            if rel == "README.md" and path.exists():
                continue  # the team's own notes may have grown there
            with contextlib.suppress(FileNotFoundError):
                if path.read_text(encoding="utf-8") == text:
                    continue
            fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.chmod(name, 0o644)  # files a team reviews and commits, like its other sources
            staged.append((Path(name), path))
            changed.append(rel)
    except BaseException:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise
    for tmp, path in staged:  # every file is written before any replaces its old version
        os.replace(tmp, path)
    for path in (folder / DOCUMENTS).iterdir():
        if path.is_file() and path.name not in knowledge.documents and path.suffix.lower() in (".md", ".txt"):
            path.unlink()
            changed.append(f"{DOCUMENTS}/{path.name}")
    return changed


def query_id(question: str, sql: str) -> str:
    """The same question and SQL (up to case and spacing) always get the same id."""
    norm = " ".join(question.casefold().split()) + "\x00" + " ".join(sql.split()).rstrip(";").casefold()
    return "q" + hashlib.sha256(norm.encode()).hexdigest()[:10]


__all__ = [
    "ColumnNote",
    "Facts",
    "FilterFact",
    "JoinFact",
    "Knowledge",
    "LiteralFact",
    "SchemaNotes",
    "TableNote",
    "VerifiedQuery",
    "data_dir",
    "load",
    "locked",
    "query_id",
    "noted_text",
    "read_store",
    "schema_notes",
    "store_dir",
    "write_store",
]
