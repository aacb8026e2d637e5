"""What one sandboxed call produced (`RunOutcome`), the server's capture of its stdout and stderr, and the
words for how a call ended when it did not end with a report."""

from __future__ import annotations

import signal
from typing import Any

from pydantic import BaseModel, ConfigDict

from flexsql.tools.sandbox.limits import SandboxLimits


class Captured(BaseModel):
    text: str
    chars: int
    truncated: bool


class RunOutcome(BaseModel):
    """Everything one sandboxed call produced, before the tool turns it into a PythonResult."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    stdout: Captured
    stderr: Captured
    report: dict[str, Any] | None
    table: Any = None  # pa.Table of the last expression, when it was a DataFrame/Series
    returncode: int | None = None
    killed_for: str | None = None
    cpu_s: float = 0.0
    maxrss_kb: int = 0
    elapsed_ms: float = 0.0
    limits_hit: list[str] = []
    crash: str | None = None
    sql_calls: int = 0


class OutputCapture:
    """Keeps the first bytes of a pipe (enough for `chars` characters), counts the rest."""

    def __init__(self, chars: int) -> None:
        self.chars = chars
        self.limit = chars * 4 + 16
        self.data = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.limit - len(self.data)
        if room > 0:
            self.data += chunk[:room]

    def result(self, child_chars: int | None) -> Captured:
        text = self.data.decode("utf-8", errors="replace")
        complete = self.total <= self.limit
        total = max(child_chars or 0, len(text) if complete else self.total)
        shown = text[: self.chars]
        return Captured(text=shown, chars=total, truncated=total > len(shown))


def explain_exit(
    returncode: int | None, killed_for: str | None, cpu_s: float, limits: SandboxLimits, error: str | None
) -> tuple[str, str | None]:
    """Why the call ended without a report, for the model to act on, and the limit it hit (if any)."""
    if killed_for == "timeout":
        return (
            f"the code ran past the {limits.timeout_s:g} s wall-clock limit; its process group was killed. "
            "Make it faster (vectorize with pandas or duckdb, work on a sample) or pass a larger timeout_s"
        ), "timeout"
    if killed_for == "file size":
        return (
            f"the code wrote more than {limits.file_mb} MB to its working directory and was killed; "
            "write less (or nothing: return a DataFrame instead)"
        ), "file size"
    if killed_for == "protocol":
        return "the sandboxed process sent an oversized message and was killed", None
    if killed_for == "sandbox restarted":
        return "the sandbox template process stopped during this call; run the code again", None
    if error:
        return f"the sandbox could not start a process: {error}", ("processes" if "fork" in error else None)
    if returncode is None:
        return "the sandboxed process ended without a report", None
    if returncode < 0:
        return _explain_signal(-returncode, cpu_s, limits)
    if returncode == 70:
        return (
            "the sandbox failed to set itself up (see stderr); this is a flexsql problem, please report it",
            None,
        )
    return (
        f"the code ended the sandboxed process (exit status {returncode}) before the result could be "
        "reported; do not call os._exit or close file descriptor 3"
    ), None


def _explain_signal(sig: int, cpu_s: float, limits: SandboxLimits) -> tuple[str, str | None]:
    name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"
    if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu_s >= limits.cpu_s - 0.5):
        return f"the code used its {limits.cpu_s} s of CPU time and was killed", "cpu"
    if sig == signal.SIGSEGV:
        return (
            "the sandboxed process crashed (SIGSEGV): usually a C-level stack overflow from very deep "
            "recursion, or a library failing on memory exhaustion"
        ), None
    if sig == signal.SIGKILL:
        return (
            f"the sandboxed process was killed (SIGKILL), most likely for using more than its "
            f"{limits.memory_mb} MB of memory"
        ), "memory"
    return f"the sandboxed process was killed by {name}", None
