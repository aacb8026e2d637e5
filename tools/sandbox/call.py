"""One call in the sandbox, seen from the server: its files, then everything it sends while it runs.

The server writes the inputs and the job into the call's working directory, hands the template the
descriptors of the call's channels, and relays until the child has exited and its pipes are drained:
stdout/stderr (kept up to a cap, counted beyond it), `flexsql.sql()` requests (answered by calling the sql
handler it was given and writing the rows as an Arrow file), the final report, and the template's status
events (started, exit). It enforces what the template cannot: the disk quota (checked every QUOTA_CHECK_S),
cancellation of the calling tool call, and a hard deadline should the template itself hang.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import socket
import stat
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa

from flexsql.errors import FlexSQLError
from flexsql.tools.engines import active_cancel_hooks
from flexsql.tools.sandbox.arrow_io import read_result, write_arrow
from flexsql.tools.sandbox.limits import MB, SandboxLimits
from flexsql.tools.sandbox.outcome import OutputCapture, RunOutcome, explain_exit

MAX_RPC_LINE = 4 * MB
QUOTA_CHECK_S = 0.1
MAX_FILES = 20_000

# handler(sql) or handler(sql, source) when the code passed flexsql.sql(…, source=…)
SqlHandler = Callable[..., tuple[pa.Table, dict[str, Any]]]


class TemplateLost(Exception):
    """The template died before it forked the call's child."""


class TemplateLink(Protocol):
    """The template process as a call needs it (the Sandbox)."""

    def send(self, message: dict[str, Any], fds: Sequence[int]) -> subprocess.Popen[bytes] | None: ...

    def abandon_template(self, proc: subprocess.Popen[bytes] | None = None) -> None: ...


@dataclass
class Call:
    workdir: str
    limits: SandboxLimits
    sql_handler: SqlHandler | None
    parent_files: set[str] = field(default_factory=set)
    pid: int | None = None
    sql_calls: int = 0
    deadline: float | None = None  # monotonic time the template kills the program at


def write_job(call: Call, code: str, inputs: dict[str, pa.Table]) -> None:
    """The inputs as Arrow files and job.json, in the working directory (the server's files: not counted
    against the call's disk quota)."""
    manifest = {}
    for index, (result_id, table) in enumerate(inputs.items()):
        name = f"input-{index}.arrow"
        write_arrow(os.path.join(call.workdir, name), table)
        call.parent_files.add(name)
        manifest[result_id] = name
    job = {"code": code, "inputs": manifest, "max_output_chars": call.limits.max_output_chars}
    job_path = os.path.join(call.workdir, "job.json")
    with open(job_path, "w", encoding="utf-8") as fh:
        json.dump(job, fh)
    os.chmod(job_path, 0o644)
    call.parent_files.add("job.json")


def supervise(template: TemplateLink, call: Call) -> RunOutcome:
    """Have the template fork the call's child, relay until it ended, and say what it produced; raises
    TemplateLost when the template died before it forked the child."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    rpc, rpc_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    status, status_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        proc = template.send(
            {"op": "run", "workdir": call.workdir, "limits": call.limits.model_dump()},
            [out_w, err_w, rpc_child.fileno(), status_child.fileno()],
        )
    except BaseException:
        for fd in (out_r, err_r):
            os.close(fd)
        rpc.close()
        status.close()
        raise
    finally:
        os.close(out_w)
        os.close(err_w)
        rpc_child.close()
        status_child.close()

    watch = _Watch(template, proc, call, out_r, err_r, rpc, status)
    try:
        watch.run()
    finally:
        watch.close()
    exit_event = watch.exit_event
    if exit_event and exit_event.get("killed_for") == "sandbox restarted" and call.pid is None:
        template.abandon_template(proc)
        raise TemplateLost()
    return _outcome(call, watch.report, exit_event or {}, watch.captures, watch.extra_limits)


class _Watch:
    """A running call: its channels, what came through them so far, and its deadlines."""

    def __init__(
        self,
        template: TemplateLink,
        proc: subprocess.Popen[bytes] | None,
        call: Call,
        out_r: int,
        err_r: int,
        rpc: socket.socket,
        status: socket.socket,
    ) -> None:
        self.template, self.proc, self.call = template, proc, call
        self.out_r, self.err_r, self.rpc, self.status = out_r, err_r, rpc, status
        limits = call.limits
        self.captures = {
            "out": OutputCapture(limits.max_output_chars),
            "err": OutputCapture(limits.max_output_chars),
        }
        self.sel = selectors.DefaultSelector()
        self.sel.register(out_r, selectors.EVENT_READ, "out")
        self.sel.register(err_r, selectors.EVENT_READ, "err")
        self.sel.register(rpc, selectors.EVENT_READ, "rpc")
        self.sel.register(status, selectors.EVENT_READ, "status")
        self.buffers = {"rpc": b"", "status": b""}
        self.report: dict[str, Any] | None = None
        self.exit_event: dict[str, Any] | None = None
        self.exited_at = 0.0
        self.open_pipes = {out_r, err_r}
        self.hard_deadline = time.monotonic() + limits.timeout_s + 30
        self.next_quota = time.monotonic() + QUOTA_CHECK_S
        self.extra_limits: list[str] = []
        # the calling tool call's hooks (this worker thread inherits the context): when it is
        # cancelled, the program is killed rather than left running to its wall-clock limit
        self.cancel = active_cancel_hooks.get()
        self.cancel_sent = False

    def run(self) -> None:
        while True:
            now = time.monotonic()
            if self.exit_event is not None and (not self.open_pipes or now - self.exited_at > 2):
                return
            if now > self.hard_deadline:
                self.template.abandon_template(self.proc)
                self.exit_event = self.exit_event or {"returncode": None, "killed_for": "timeout"}
                return
            for key, _ in self.sel.select(QUOTA_CHECK_S):
                if key.data in ("out", "err"):
                    self._on_output(key.data, key.fd)
                elif key.data == "rpc":
                    self._on_rpc()
                elif key.data == "status":
                    self._on_status()
            self._check_cancel()
            self._check_disk()

    def close(self) -> None:
        self.sel.close()
        for fd in (self.out_r, self.err_r):
            os.close(fd)
        self.rpc.close()
        self.status.close()

    def _on_output(self, name: str, fd: int) -> None:
        chunk = os.read(fd, 1 << 16)
        if chunk:
            self.captures[name].feed(chunk)
        else:
            self.sel.unregister(fd)
            self.open_pipes.discard(fd)

    def _on_rpc(self) -> None:
        data = _recv(self.rpc)
        if not data:
            self.sel.unregister(self.rpc)
            return
        self.buffers["rpc"] += data
        while b"\n" in self.buffers["rpc"]:
            line, self.buffers["rpc"] = self.buffers["rpc"].split(b"\n", 1)
            message = _json_or_none(line)
            if message is None:
                continue
            if message.get("op") == "sql":
                asked = time.monotonic()
                reply = _serve_sql(self.call, message)
                # a slow query holds this loop, not the template: do not count it against it
                self.hard_deadline += time.monotonic() - asked
                with contextlib.suppress(OSError):
                    self.rpc.sendall((json.dumps(reply, default=str) + "\n").encode())
            elif message.get("op") == "done":
                self.report = message
        if len(self.buffers["rpc"]) > MAX_RPC_LINE:
            self.buffers["rpc"] = b""
            _kill(self.template, self.call, "protocol")

    def _on_status(self) -> None:
        data = _recv(self.status)
        if not data:
            self.sel.unregister(self.status)
            if self.exit_event is None:  # the template died under this call
                self.exit_event = {"returncode": None, "killed_for": "sandbox restarted"}
                self.exited_at = time.monotonic()
            return
        self.buffers["status"] += data
        while b"\n" in self.buffers["status"]:
            line, self.buffers["status"] = self.buffers["status"].split(b"\n", 1)
            event = _json_or_none(line) or {}
            if event.get("event") == "started":
                self.call.pid = int(event["pid"])
                self.call.deadline = time.monotonic() + self.call.limits.timeout_s
            elif event.get("event") in ("exit", "error"):
                self.exit_event = event
                self.exited_at = time.monotonic()

    def _check_cancel(self) -> None:
        if (
            self.call.pid is not None
            and self.exit_event is None
            and self.cancel is not None
            and self.cancel.cancelled
            and not self.cancel_sent
        ):
            self.cancel_sent = True
            _kill(self.template, self.call, "cancelled")

    def _check_disk(self) -> None:
        if self.call.pid is not None and self.exit_event is None and time.monotonic() >= self.next_quota:
            self.next_quota = time.monotonic() + QUOTA_CHECK_S
            if _disk_used(self.call) > self.call.limits.file_mb * MB:
                self.extra_limits.append("file size")
                _kill(self.template, self.call, "file size")


def _kill(template: TemplateLink, call: Call, reason: str) -> None:
    if call.pid is not None:
        with contextlib.suppress(OSError):
            template.send({"op": "kill", "pid": call.pid, "reason": reason}, [])


def _serve_sql(call: Call, message: dict[str, Any]) -> dict[str, Any]:
    call.sql_calls += 1
    sql = message.get("sql")
    if call.sql_handler is None:
        return {"ok": False, "error": "flexsql.sql() is not available in this call (no source to query)"}
    if not isinstance(sql, str) or len(sql) > 1_000_000:
        return {
            "ok": False,
            "error": "flexsql.sql() takes one SQL string of at most 1,000,000 characters",
        }
    source = message.get("source")
    if source is not None and (not isinstance(source, str) or len(source) > 200):
        return {"ok": False, "error": "flexsql.sql(source=…) takes the name of a configured source"}
    # the query gets only the time the program has left: it is killed at its deadline anyway, and a
    # query left running would hold this call (and the engine) for the full query timeout
    left = (call.deadline or time.monotonic() + call.limits.timeout_s) - time.monotonic()
    if left <= 0.05:
        return {
            "ok": False,
            "error": f"no time left for flexsql.sql(): the program has used its "
            f"{call.limits.timeout_s:g} s wall-clock limit",
        }
    try:
        table, meta = call.sql_handler(sql, source, timeout_s=left)
    except FlexSQLError as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:4000]}
    except Exception as exc:  # a driver error: the message is what the model needs to fix the query
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:4000]}
    name = f"sql-{call.sql_calls}.arrow"
    write_arrow(os.path.join(call.workdir, name), table)
    call.parent_files.add(name)
    return {"ok": True, "file": name, **meta}


def _outcome(
    call: Call,
    report: dict[str, Any] | None,
    exit_event: dict[str, Any],
    captures: dict[str, OutputCapture],
    extra_limits: list[str],
) -> RunOutcome:
    limits = call.limits
    report = report if isinstance(report, dict) else None
    stdout = captures["out"].result(_int(report, "stdout_chars"))
    stderr = captures["err"].result(_int(report, "stderr_chars"))
    returncode = exit_event.get("returncode")
    killed_for = exit_event.get("killed_for")
    cpu_s = float(exit_event.get("cpu_s") or 0.0)
    hit: list[str] = []
    for name in (report or {}).get("limits") or []:
        if isinstance(name, str) and name not in hit:
            hit.append(name)
    if killed_for in ("timeout", "file size") and killed_for not in hit:
        hit.append(killed_for)
    for name in extra_limits:
        if name not in hit:
            hit.append(name)
    crash = None
    if report is None or killed_for:
        crash, limit = explain_exit(returncode, killed_for, cpu_s, limits, exit_event.get("error"))
        if limit and limit not in hit:
            hit.append(limit)
    table = None
    if report and not killed_for and isinstance(report.get("result_file"), str):
        try:
            table = read_result(call.workdir, report["result_file"], limits.file_mb * MB)
        except (OSError, ValueError, pa.ArrowException) as exc:
            crash = f"the returned DataFrame could not be read back: {exc}"
    return RunOutcome(
        stdout=stdout,
        stderr=stderr,
        report=report,
        table=table,
        returncode=returncode,
        killed_for=killed_for,
        cpu_s=cpu_s,
        maxrss_kb=int(exit_event.get("maxrss_kb") or 0),
        limits_hit=hit,
        crash=crash,
        sql_calls=call.sql_calls,
    )


def _int(report: dict[str, Any] | None, key: str) -> int | None:
    value = (report or {}).get(key)
    return value if isinstance(value, int) else None


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(1 << 16)
    except (ConnectionResetError, BlockingIOError, InterruptedError):
        return b""


def _json_or_none(line: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _disk_used(call: Call) -> int:
    """Bytes the child wrote in its working directory (the server's own files excluded)."""
    total = 0
    seen = 0
    stack = [call.workdir]
    while stack:
        directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            if seen > MAX_FILES:
                return 1 << 62  # a flood of files is treated as over the quota
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                stack.append(entry.path)
            elif not (directory == call.workdir and entry.name in call.parent_files):
                total += info.st_blocks * 512
    return total
