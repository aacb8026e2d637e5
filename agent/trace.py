"""One JSONL trace per question: every request, reply (with reasoning), tool call and result,
candidate, verdict and timing, in order. Secrets never reach it: the values of the environment
variables that hold API keys are replaced wherever they appear, whatever the event."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any


class Trace:
    """Append-only events for one question; kept in memory and, with `path`, written as JSONL
    (one line per event, flushed, file 0600) so a killed run still leaves its trace."""

    def __init__(self, run_id: str, path: str | Path | None = None, secrets: list[str] | None = None) -> None:
        self.run_id = run_id
        self.path = Path(path) if path else None
        self.events: list[dict[str, Any]] = []
        self._secrets = [s for s in (secrets or []) if s and len(s) >= 4]
        self._start = time.perf_counter()
        self._lock = threading.Lock()
        self._file = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            self._file = os.fdopen(fd, "w", encoding="utf-8")

    def scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def event(self, kind: str, **fields: Any) -> None:
        record = {
            "t": round(time.perf_counter() - self._start, 4),
            "run": self.run_id,
            "kind": kind,
            **fields,
        }
        line = self.scrub(json.dumps(record, default=str, ensure_ascii=False))
        with self._lock:
            self.events.append(json.loads(line))
            if self._file is not None:
                self._file.write(line + "\n")
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def secret_values(names: list[str | None]) -> list[str]:
    """The values of the named environment variables (API keys), for scrubbing."""
    return [os.environ[n] for n in names if n and os.environ.get(n)]
