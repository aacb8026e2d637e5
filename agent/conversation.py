"""Conversations: the turns of one `conversation_id` and what a prompt shows of them.

Each turn keeps its question, its type (as classified), its status, the chosen SQL, a short result
summary and the SQL's role-state (`agent/roles.py`, derived with sqlglot). A `ConversationStore`
keeps conversations in memory for a server session and, with a `directory`, as one JSON file per id
so that a later process (`flexsql ask --conversation ID`) continues where the last one stopped.

Bounds: a conversation keeps its last `max_turns` turns and at most `max_chars` characters of turns
(long fields are cut when a turn is stored); older turns are dropped and survive only as one short
line each in `summary`, itself bounded. So a 200-turn conversation costs what a 20-turn one does, in
memory, on disk and in the prompt (`history_text` has its own `max_chars`).

Folders: a store writes `<directory>/<id>.json`. The local user (`flexsql ask`, a stdio server) uses
[agent] conversations_dir itself; every other principal of a server (an HTTP session, a token, the
anonymous stateless clients) gets its own subfolder `p-<hmac>` named by a keyed hash of the principal
(`principal_directory`; the key is `.principal-key` in the folder, 0600), so neither a token nor a
session id is ever written, and one principal's files are not found by another. At most
`max_files` conversation files are kept under the folder, all subfolders together: writing a new
one beyond that removes the least recently written.

Concurrency: every read and write of the store holds one lock; `get` returns a copy, so callers can
keep it while other threads append. Between processes the file is the truth: a store reloads a file
another process rewrote (by modification time), and writes are atomic (a temporary file renamed
over the old one), so a reader never sees half a file. Two processes appending to the same id at
the same instant: the later write wins.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import secrets
import tempfile
import threading
from collections import OrderedDict
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from filelock import FileLock
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from flexsql.agent.roles import RoleState, role_state
from flexsql.errors import ConfigError, InvalidArgument

__all__ = [
    "Conversation",
    "ConversationStore",
    "Turn",
    "TurnStatus",
    "TurnType",
    "history",
    "pending_clarification",
    "principal_directory",
    "valid_conversation_id",
]

TurnType = Literal["answerable", "ambiguous", "unanswerable", "improper"]
TurnStatus = Literal["answered", "needs_clarification", "unanswerable", "reply", "failed"]

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
# Per-field caps applied when a turn is stored: one pasted log must not make a conversation huge.
_CAPS = {
    "question": 2000,
    "sql": 8000,
    "result_summary": 800,
    "standalone": 2000,
    "clarifying_question": 500,
    "reply": 1000,
    "reason": 1000,
}
_SUMMARY_LINE = 160


def _cut(text: str | None, limit: int) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Turn(BaseModel):
    """One turn: the user's question and what the agent did with it."""

    question: str
    standalone: str | None = None  # the question restated on its own (classify), when it differs
    type: TurnType | None = None
    status: TurnStatus = "answered"
    sql: str | None = None
    dialect: str | None = None  # of `sql`; the role-state is derived with it
    result_summary: str | None = None  # short: "3 rows: (Fiat, 12), …"
    role_state: RoleState | None = None
    clarifying_question: str | None = None  # status needs_clarification: the one question asked
    readings: list[str] = Field(default_factory=list)  # the readings the question was ambiguous between
    reply: str | None = None  # status reply: the short answer to an improper turn
    reason: str | None = None  # status unanswerable / failed: what the schema lacks, what went wrong
    # what the turn's tool calls established (stored spellings, join keys): the next turn builds on it
    findings: list[str] = Field(default_factory=list)
    at: str = Field(default_factory=_now)

    @field_validator("readings")
    @classmethod
    def _few_readings(cls, value: list[str]) -> list[str]:
        return [_cut(r, 300) or "" for r in value[:8]]

    @field_validator("findings")
    @classmethod
    def _few_findings(cls, value: list[str]) -> list[str]:
        return [f for f in value if len(f) <= 300][:8]  # whole facts only: a cut one would be wrong

    @model_validator(mode="after")
    def _bounded_and_derived(self) -> Turn:
        for name, limit in _CAPS.items():
            value = getattr(self, name)
            if value and len(value) > limit:
                setattr(self, name, _cut(value, limit))
        if self.sql and self.role_state is None:
            self.role_state = role_state(self.sql, self.dialect)
        return self

    def line(self) -> str:
        """The turn in one short line (what survives of a dropped turn)."""
        text = f"{_cut(self.question.replace(chr(10), ' '), 90)} → {self.status}"
        if self.sql:
            text += f": {_cut(' '.join(self.sql.split()), 60)}"
        return _cut(text, _SUMMARY_LINE) or ""


class Conversation(BaseModel):
    id: str
    turns: list[Turn] = Field(default_factory=list)
    dropped: int = 0  # turns dropped to keep the bounds
    summary: list[str] = Field(default_factory=list)  # one line per dropped turn, the latest kept
    created_at: str = Field(default_factory=_now)
    updated_at: str = Field(default_factory=_now)

    @property
    def last(self) -> Turn | None:
        return self.turns[-1] if self.turns else None

    def last_sql_turn(self) -> Turn | None:
        """The latest turn that chose SQL (the query a follow-up edits)."""
        return next((t for t in reversed(self.turns) if t.sql), None)


def valid_conversation_id(conversation_id: str) -> str:
    """The id itself when it is safe as a file name; InvalidArgument otherwise."""
    if not isinstance(conversation_id, str) or not _ID.fullmatch(conversation_id):
        shown = repr(conversation_id)[:60]
        raise InvalidArgument(
            f"conversation id {shown} is not allowed: use 1-128 letters, digits, '.', '_' or '-', starting with "
            "a letter or digit (no '/', no '..'), e.g. 'sales-2024' or a UUID"
        )
    return conversation_id


class ConversationStore:
    """Conversations by id, bounded, thread-safe, optionally persisted in `directory`."""

    def __init__(
        self,
        directory: Path | None = None,
        max_turns: int = 20,
        max_chars: int = 30_000,
        max_conversations: int = 1000,
        max_files: int | None = None,
        root: Path | None = None,
    ) -> None:
        """`max_files`: conversation files kept under `root` (default: `directory`) and its
        principals' subfolders together; the least recently written beyond it are removed."""
        if max_turns < 1 or max_chars < 1000:
            raise InvalidArgument(
                f"max_turns must be ≥ 1 and max_chars ≥ 1000 (got {max_turns}, {max_chars})"
            )
        self.directory = Path(directory).expanduser() if directory is not None else None
        self.root = Path(root).expanduser() if root is not None else self.directory
        self.max_files = max_files
        self.max_turns = max_turns
        self.max_chars = max_chars
        # In memory, the least recently used conversations beyond this count are forgotten (they
        # are on disk when there is a directory).
        self.max_conversations = max_conversations
        self._lock = threading.RLock()
        self._cache: OrderedDict[str, tuple[Conversation, int | None]] = (
            OrderedDict()
        )  # id -> (conv, file mtime)
        if self.directory is not None:
            self._make_directory()

    def _make_directory(self) -> None:
        assert self.directory is not None
        try:
            if not self.directory.exists():
                self.directory.mkdir(mode=0o700, parents=True)
                os.chmod(self.directory, 0o700)  # mkdir's mode is filtered by the umask
        except OSError as exc:
            raise ConfigError(
                f"cannot create the conversations folder {self.directory}: {exc.strerror}; "
                "set [agent] conversations_dir to a folder you can write"
            ) from None
        if not self.directory.is_dir():
            raise ConfigError(
                f"conversations folder {self.directory} is not a folder; set [agent] "
                "conversations_dir to a folder"
            )

    def path(self, conversation_id: str) -> Path | None:
        valid_conversation_id(conversation_id)
        return None if self.directory is None else self.directory / f"{conversation_id}.json"

    # -- reading -----------------------------------------------------------------------------------
    def get(self, conversation_id: str) -> Conversation:
        """The conversation (a copy), new and empty if the id is unknown."""
        with self._lock:
            return self._load(conversation_id).model_copy(deep=True)

    def exists(self, conversation_id: str) -> bool:
        """Whether this store holds a conversation with turns under this id (in memory or on disk)."""
        with self._lock:
            path = self.path(conversation_id)
            if path is not None and path.exists():
                return True
            cached = self._cache.get(conversation_id)
            return cached is not None and bool(cached[0].turns) and path is None

    def ids(self) -> list[str]:
        with self._lock:
            found = set(self._cache)
            if self.directory is not None:
                found.update(p.stem for p in self.directory.glob("*.json") if _ID.fullmatch(p.stem))
            return sorted(found)

    def _load(self, conversation_id: str) -> Conversation:
        path = self.path(conversation_id)
        cached = self._cache.get(conversation_id)
        mtime = _mtime(path)
        if cached is not None and (path is None or cached[1] == mtime):
            self._cache.move_to_end(conversation_id)
            return cached[0]
        if path is not None and mtime is not None:
            try:
                conv = Conversation.model_validate_json(path.read_bytes())
            except (OSError, ValidationError, ValueError) as exc:
                first = str(exc).splitlines()[0]
                raise ConfigError(
                    f"conversation file {path} cannot be read ({first}); move it away or delete it "
                    "to start this conversation over"
                ) from None
            if conv.id != conversation_id:
                raise ConfigError(
                    f"conversation file {path} holds conversation {conv.id!r}, not {conversation_id!r}; "
                    "it was renamed by hand: rename it back or delete it"
                )
        else:
            conv = Conversation(id=conversation_id)
        self._remember(conversation_id, conv, mtime)
        return conv

    def _remember(self, conversation_id: str, conv: Conversation, mtime: int | None) -> None:
        self._cache[conversation_id] = (conv, mtime)
        self._cache.move_to_end(conversation_id)
        while len(self._cache) > self.max_conversations:
            self._cache.popitem(last=False)

    # -- writing -----------------------------------------------------------------------------------
    def append(self, conversation_id: str, turn: Turn) -> Conversation:
        """Add a turn (kept bounded), persist it, and return the conversation (a copy)."""
        self.path(conversation_id)  # an id that could leave the folder is refused before any lock file
        with self._lock, self._between_processes():
            conv = self._load(conversation_id).model_copy(deep=True)
            conv.turns.append(Turn.model_validate(turn.model_dump()))  # a copy, with the field caps applied
            self._bound(conv)
            conv.updated_at = _now()
            mtime = self._write(conv)
            self._remember(conversation_id, conv, mtime)
            return conv.model_copy(deep=True)

    def _between_processes(self) -> contextlib.AbstractContextManager[object]:
        """A lock on the folder, so a stdio server and `flexsql ask --conversation` appending to one
        conversation each add their turn (without it, the last writer's file would drop the other's)."""
        if self.directory is None:
            return contextlib.nullcontext()
        return FileLock(self.directory / ".lock", mode=0o600)

    def delete(self, conversation_id: str) -> None:
        with self._lock:
            path = self.path(conversation_id)
            self._cache.pop(conversation_id, None)
            if path is not None:
                path.unlink(missing_ok=True)

    def _bound(self, conv: Conversation) -> None:
        sizes = [len(t.model_dump_json()) for t in conv.turns]
        total = sum(sizes)
        drop = 0
        while len(conv.turns) - drop > 1 and (
            len(conv.turns) - drop > self.max_turns or total > self.max_chars
        ):
            total -= sizes[drop]
            drop += 1
        if drop:
            conv.summary.extend(t.line() for t in conv.turns[:drop])
            conv.turns = conv.turns[drop:]
            conv.dropped += drop
            keep = max(
                1, (self.max_chars // 6) // _SUMMARY_LINE
            )  # the summary gets about a sixth of the budget
            conv.summary = conv.summary[-keep:]

    def _write(self, conv: Conversation) -> int | None:
        path = self.path(conv.id)
        if path is None:
            return None
        assert self.directory is not None
        new_file = not path.exists()
        data = conv.model_dump_json(indent=1).encode("utf-8")
        # mkstemp creates the file 0600; the rename is atomic on one file system.
        fd, tmp = tempfile.mkstemp(prefix=f".{conv.id}.", suffix=".tmp", dir=self.directory)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            Path(tmp).unlink(missing_ok=True)
            raise ConfigError(
                f"cannot write conversation file {path}: {exc.strerror}; check that "
                f"{self.directory} is writable and not full"
            ) from None
        if new_file and self.max_files is not None:
            self._prune(keep=path)
        return _mtime(path)

    def _prune(self, keep: Path) -> None:
        """Remove the least recently written conversation files beyond `max_files` (under `root`
        and its principals' subfolders); another process may prune at the same time."""
        assert self.root is not None and self.max_files is not None
        files = [*self.root.glob("*.json"), *self.root.glob("p-*/*.json")]
        if len(files) <= self.max_files:
            return
        dated = []
        for file in files:
            with contextlib.suppress(OSError):
                dated.append((file.stat().st_mtime_ns, str(file), file))
        dated.sort()
        for _, _, old in dated[: max(0, len(dated) - self.max_files)]:
            if old != keep:
                with contextlib.suppress(OSError):
                    old.unlink()


def principal_directory(root: Path, principal: str | None) -> Path:
    """The conversations folder of a server's principal: `root` itself for the local user (None),
    else `root/p-<hmac>` — a keyed hash of the principal, so the folder name reveals neither a
    token nor a session id and cannot be computed without the key file `root/.principal-key`."""
    if principal is None:
        return root
    digest = hmac.new(_principal_key(root), principal.encode("utf-8"), hashlib.sha256).hexdigest()
    return root / f"p-{digest[:32]}"


def _principal_key(root: Path) -> bytes:
    """The folder's random key (created 0600 once, by whichever process comes first)."""
    path = root / ".principal-key"
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            for _ in range(50):  # another process is writing it
                key = path.read_bytes()
                if len(key) >= 32:
                    return key
                threading.Event().wait(0.01)
            raise ConfigError(f"{path} is not a conversations key (32 random bytes): delete it") from None
        key = secrets.token_bytes(32)
        with os.fdopen(fd, "wb") as fh:
            fh.write(key)
        return key
    except OSError as exc:
        raise ConfigError(
            f"cannot read or create {path}: {exc.strerror}; set [agent] conversations_dir to a folder you can write"
        ) from None


def _mtime(path: Path | None) -> int | None:
    if path is None:
        return None
    try:
        return path.stat().st_mtime_ns
    except FileNotFoundError:
        return None


# -- prompts ---------------------------------------------------------------------------------------


def pending_clarification(conv: Conversation) -> Turn | None:
    """The last turn when it asked a clarifying question (the next turn is read as its answer)."""
    last = conv.last
    return last if last is not None and last.status == "needs_clarification" else None


HISTORY_CHARS = 12_000  # of earlier turns in a request; the oldest whole turns go first


def account(turn: Turn) -> str:
    """What the agent did with a turn, as the assistant's message in the history: the same text on
    every later turn (a server's prefix cache keeps serving it). Facts whole or not at all."""
    if turn.status == "needs_clarification":
        text = f"I asked: {turn.clarifying_question or '(no question)'}"
        if turn.readings:
            text += "\nReadings: " + " | ".join(turn.readings)
        return text
    if turn.status == "reply":
        return f"Replied: {turn.reply or ''}"
    if turn.status in ("unanswerable", "failed"):
        lead = "Not answerable here" if turn.status == "unanswerable" else "Failed"
        return f"{lead}: {turn.reason or '(no reason given)'}"
    lines = ["Answered."]
    if turn.standalone and turn.standalone.strip() != turn.question.strip():
        lines.append(f"Read as: {turn.standalone}")
    if turn.sql:
        lines.append(f"SQL: {turn.sql}")
    if turn.result_summary:
        lines.append(f"Result: {turn.result_summary}")
    if turn.findings:
        lines.append("Found: " + "; ".join(turn.findings))
    return "\n".join(lines)


def history(conv: Conversation, max_chars: int = HISTORY_CHARS) -> tuple[list[dict[str, str]], str | None]:
    """The earlier turns for the next turn's requests: user/assistant message pairs, oldest first —
    each question, then the agent's account of it — and the note the next turn's classify step reads.

    The messages are unchanged from turn to turn, so a later turn's requests start as the earlier
    turns' did (a server's prefix cache keeps serving them); past `max_chars` the oldest whole turns
    are left out, and the first message says how many. The note says when this turn answers a
    clarifying question, and gives the last SQL by role (whole, when its turn is no longer shown)."""
    pairs = [(f"Question: {t.question}", account(t)) for t in conv.turns]
    used = 0
    kept: list[tuple[str, str]] = []
    for pair in reversed(pairs):
        size = len(pair[0]) + len(pair[1])
        if kept and used + size > max_chars:
            break
        kept.insert(0, pair)
        used += size
    shown_from = len(pairs) - len(kept)
    left = conv.dropped + shown_from
    messages: list[dict[str, str]] = []
    for i, (question, said) in enumerate(kept):
        if i == 0 and left:
            question = (
                f"({left} earlier turn{'s' if left != 1 else ''} of this conversation not shown)\n{question}"
            )
        messages += [{"role": "user", "content": question}, {"role": "assistant", "content": said}]
    return messages, _turn_note(conv, shown_from)


def _turn_note(conv: Conversation, shown_from: int) -> str | None:
    if not conv.turns:
        return None
    notes = []
    if pending_clarification(conv) is not None:
        notes.append(
            "The previous turn asked the user a clarifying question, and this message answers it: read the "
            "earlier question with this answer."
        )
    last = conv.last_sql_turn()
    if last is not None:
        index = conv.turns.index(last)
        n = conv.dropped + index + 1
        line = f"The last SQL is turn {n}'s" + (f": {last.sql}" if index < shown_from else " (above)") + "."
        if last.role_state is not None and not last.role_state.error:
            line += f" By role:\n{last.role_state.summary(max_chars=600)}"
        notes.append(line)
    return "\n".join(notes) or None
