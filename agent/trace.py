"""One JSONL trace per question: every request, reply (with reasoning), tool call and result,
candidate, verdict and timing, in order. Secrets never reach it: the model endpoints' keys and URL
credentials are replaced wherever they appear, in every form (flexsql.agent.secrets), whatever the
event. Its size is bounded: past `max_bytes` an event is kept as a short summary (its kind and small
fields), the trace says where it was cut, and past a little more events are only counted."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from flexsql.agent.secrets import Scrubber

SUMMARY_ROOM = 128 * 1024  # bytes of summaries a cut trace may still take past its max_bytes
SMALL_FIELD = 300  # characters of a field a summary keeps
TRACE_SUFFIX = ".jsonl"

M = TypeVar("M", bound=BaseModel)


class Trace:
    """Append-only events for one question; kept in memory (as recorded, scrubbed) and, with `path`,
    written as JSONL (one line per event, flushed, file 0600 — an existing file is truncated and
    made 0600) so a killed run still leaves its trace. Without `max_bytes` it is not bounded."""

    def __init__(
        self,
        run_id: str,
        path: str | Path | None = None,
        secrets: Iterable[str] | None = None,
        max_bytes: int | None = None,
    ) -> None:
        self.run_id = run_id
        self.path = Path(path) if path else None
        self.events: list[dict[str, Any]] = []
        self.max_bytes = max_bytes
        self.scrubber = Scrubber(secrets or [])
        self._start = time.perf_counter()
        self._lock = threading.Lock()
        self._file: Any = None
        self._written = 0
        self._cut = False
        self._skipped = 0
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with contextlib.suppress(OSError):  # O_CREAT's mode applies to new files only
                os.fchmod(fd, 0o600)
            self._file = os.fdopen(fd, "wb")

    def scrub(self, text: str) -> str:
        return self.scrubber.text(text)

    def scrubbed(self, model: M) -> M:
        """`model` (an answer) without any secret in it."""
        return self.scrubber.model(model)

    def event(self, kind: str, **fields: Any) -> None:
        record = {
            "t": round(time.perf_counter() - self._start, 4),
            "run": self.run_id,
            "kind": kind,
            **fields,
        }
        record = self.scrubber.value(record)
        line = self.scrub(json.dumps(record, default=str, ensure_ascii=False))
        data = line.encode("utf-8", errors="replace") + b"\n"
        with self._lock:
            if self.max_bytes is None or self._written + len(data) <= self.max_bytes:
                self._keep(record, data)
                return
            if not self._cut:
                self._cut = True
                self._keep_record(
                    {
                        "t": record["t"],
                        "run": self.run_id,
                        "kind": "trace_cut",
                        "limit_bytes": self.max_bytes,
                        "note": "the trace reached [agent] trace_bytes: later events are summaries",
                    }
                )
            summary = _summary(record, len(data))
            summary_data = json.dumps(summary, default=str, ensure_ascii=False).encode() + b"\n"
            if self._written + len(summary_data) <= self.max_bytes + SUMMARY_ROOM:
                self._keep(summary, summary_data)
            else:
                self._skipped += 1

    def _keep_record(self, record: dict[str, Any]) -> None:
        self._keep(record, json.dumps(record, ensure_ascii=False).encode() + b"\n")

    def _keep(self, record: dict[str, Any], data: bytes) -> None:
        self.events.append(record)
        self._written += len(data)
        if self._file is not None:
            self._file.write(data)
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._skipped:
                self._keep_record(
                    {
                        "t": round(time.perf_counter() - self._start, 4),
                        "run": self.run_id,
                        "kind": "trace_cut",
                        "limit_bytes": self.max_bytes,
                        "skipped_events": self._skipped,
                    }
                )
                self._skipped = 0
            if self._file is not None:
                self._file.close()
                self._file = None


def _summary(record: dict[str, Any], size: int) -> dict[str, Any]:
    """The small fields of an event too big for the trace: its kind, time, ids, numbers, short text."""
    kept: dict[str, Any] = {"cut": True, "bytes": size}
    dropped: list[str] = []
    for name, value in record.items():
        if value is None or isinstance(value, bool | int | float):
            kept[name] = value
        elif isinstance(value, str) and len(value) <= SMALL_FIELD:
            kept[name] = value
        elif (
            isinstance(value, dict | list)
            and len(value) <= 20
            and len(json.dumps(value, default=str)) <= SMALL_FIELD
        ):
            kept[name] = value
        else:
            dropped.append(name)
    if dropped:
        kept["cut_fields"] = dropped
    return kept


def prune_traces(folder: Path, *, keep: int, max_bytes: int, room: int = 0) -> None:
    """Delete the oldest traces in `folder` until at most `keep` - 1 remain and they take at most
    `max_bytes` - `room` bytes (room for the trace about to be written). Another process may prune
    at the same time: a file gone already is skipped."""
    entries: list[tuple[float, int, Path]] = []
    for path in folder.glob("*" + TRACE_SUFFIX):
        with contextlib.suppress(OSError):
            info = path.stat()
            entries.append((info.st_mtime, info.st_size, path))
    entries.sort(key=lambda e: (e[0], e[2].name))
    total = sum(size for _, size, _ in entries)
    count = len(entries)
    budget = max(0, max_bytes - room)
    for _, size, path in entries:
        if count < keep and total <= budget:
            break
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)
        count -= 1
        total -= size
