"""Process management for run_python: the pre-warmed template, one sandboxed child per call, limits, IPC.

Design (measured on the 2-core dev box; see benchmarks/python_tool.py):
- Spawning `python -c "import pandas, pyarrow, duckdb"` per call costs ~1 s, far over the 300 ms budget;
  forking a warm template costs 20-35 ms per trivial call (median, including all confinement).
  So one template process (the "zygote", tools/sandbox/worker.py) is started per server process, in an empty
  environment, inside `unshare --net` when available, and imports pandas/numpy/pyarrow/duckdb once. For each
  call it forks a fresh child that confines itself (Landlock, rlimits, uid drop, audit hook) and runs the
  code once; the template never runs user code and never sees data, so no state crosses calls or sessions.
- Data travels as Arrow IPC files in the call's private working directory: the server writes the inputs
  (column-wise conversion, cached per result), the child returns the last expression's DataFrame the same way;
  the server reads it with O_NOFOLLOW, checks its size and validates it fully before converting it to rows.
- `flexsql.sql()` inside the child is a JSON-lines request over a socketpair; the server answers it by
  calling the sql handler it was given (the guarded, row-capped Source.execute) and writes the rows as an
  Arrow file. The child never receives connection details.
- The wall-clock limit is enforced by the template (SIGKILL to the child's whole process group) and, should
  the template hang, by the server (it kills the template; children die with it through PDEATHSIG).
- Disk use: RLIMIT_FSIZE caps each file; the server checks the working directory's total every 0.1 s and
  kills the call above file_mb.

Security layers and where they apply are summarised by `Isolation.layers()`, which the tool description shows.
What stops what (tests/test_sandbox_attacks.py, run with single layers switched off via `Sandbox(...)`):
- the audit hook refuses first: fork/exec/subprocess, sockets and DNS, ctypes, setrlimit, gc introspection,
  Python-level file access outside the working directory;
- with the hook off, the kernel layers still stop every file, exec, network and signal escape: Landlock and
  the uid drop each deny reading the database/config/environ and writing outside; Landlock denies executing
  any program; the network namespace, Landlock's TCP rules and seccomp (no socket()) deny connecting, and
  seccomp alone stops connecting to a pathname Unix socket (e.g. PostgreSQL's, often mode 0777), which
  neither Landlock nor a network namespace covers; signals to the server fail (other uid, Landlock scope);
  a fork bomb hits RLIMIT_NPROC (uid drop) or the wall clock (group kill);
- rlimits stop memory, CPU, file-size and thread bombs; the disk monitor stops many-file floods; bounded
  writers (in the child) and capped pipe reads (here) stop output floods;
- without Landlock and without root (audit hook only), C-level readers (DuckDB, Arrow) are not confined:
  `Isolation.warnings()` says so.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import os
import pwd
import re
import selectors
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc
from pydantic import BaseModel, ConfigDict

from flexsql.config import SandboxConfig
from flexsql.errors import FlexSQLError, RefusedError
from flexsql.tools.engines.base import active_cancel_hooks

MB = 1024 * 1024
WORKER = Path(__file__).with_name("worker.py")
RESULT_NAME = re.compile(r"result-[0-9a-f]{16}\.arrow")
BASE_PREFIX = "flexsql-sandbox-"
MAX_RPC_LINE = 4 * MB
QUOTA_CHECK_S = 0.1
MAX_FILES = 20_000
# glibc arenas and Arrow's jemalloc would reserve address space and start threads; the template must stay
# single-threaded (it forks) and small in address space (RLIMIT_AS is set relative to it).
TEMPLATE_ENV = {
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "MALLOC_ARENA_MAX": "2",
    "ARROW_DEFAULT_MEMORY_POOL": "system",
    "JE_ARROW_MALLOC_CONF": "background_thread:false",
    "PYTHONDONTWRITEBYTECODE": "1",
}

# handler(sql) or handler(sql, source) when the code passed flexsql.sql(…, source=…)
SqlHandler = Callable[..., tuple[pa.Table, dict[str, Any]]]


class SandboxLimits(BaseModel):
    timeout_s: float
    cpu_s: int
    memory_mb: int
    file_mb: int
    max_processes: int
    max_output_chars: int

    @classmethod
    def from_config(cls, config: SandboxConfig, timeout_s: float | None = None) -> SandboxLimits:
        return cls(
            timeout_s=timeout_s or config.timeout_s,
            cpu_s=config.cpu_s,
            memory_mb=config.memory_mb,
            file_mb=config.file_mb,
            max_processes=effective_max_processes(config),
            max_output_chars=config.max_output_chars,
        )


def effective_max_processes(config: SandboxConfig) -> int:
    """RLIMIT_NPROC counts threads, and DuckDB and Arrow start one per core: below that floor a plain
    duckdb.sql() would fail on a many-core host."""
    return max(config.max_processes, 2 * (os.cpu_count() or 1) + 8)


@dataclass(frozen=True)
class Isolation:
    """What confines the sandbox on this host."""

    network_namespace: bool
    landlock_abi: int
    uid: int | None
    seccomp: bool = False
    remapped: tuple[str, ...] = ()
    platform_ok: bool = True

    def layers(self) -> list[str]:
        layers = [
            "a fresh process per call, forked from a pre-warmed template that never runs user code; "
            "its whole process group is killed at the wall-clock limit",
            "rlimits: address space, CPU seconds, file size, process/thread count, no core dumps",
            "empty environment (no credentials, tokens or connection details; the sandbox only gets data)",
            "private working directory, removed after the call",
        ]
        if self.network_namespace:
            layers.append("network namespace without interfaces (no network at all)")
        if self.landlock_abi:
            parts = [
                "read-only access to the Python installation and system libraries, writes only in the "
                "working directory, no program execution"
            ]
            if self.landlock_abi >= 4:
                parts.append("no TCP connect/bind")
            if self.landlock_abi >= 6:
                parts.append("no signals to processes outside the sandbox")
            layers.append(f"Landlock (ABI {self.landlock_abi}): " + "; ".join(parts))
        if self.seccomp:
            layers.append(
                "seccomp: no new sockets (socketpairs only), no ptrace, namespaces, mounts, bpf, io_uring, "
                "keyrings, kernel modules, kexec or reboot"
            )
        if self.uid is not None:
            layers.append(
                f"runs as unprivileged uid {self.uid} (no capabilities, no access to root-only files, "
                "cannot signal the server)"
            )
        layers.append(
            "audit hook (weaker, Python-level): refuses subprocesses, fork/exec, signals, sockets, "
            "ctypes/cffi, raising rlimits, and file access outside the working directory and the "
            "Python installation"
        )
        return layers

    def warnings(self) -> list[str]:
        """What is weaker than intended on this host, and what to do about it."""
        found = []
        if not self.platform_ok:
            found.append("run_python needs Linux; it is unavailable on this platform")
        if not self.landlock_abi and self.uid is None:
            found.append(
                "file access is only checked by the Python audit hook: C-level readers (DuckDB, Arrow) "
                "can read whatever this server's user can read. Run the server as root (the sandbox then "
                "drops to an unprivileged uid) or on Linux >= 5.13 with Landlock enabled, or set "
                "[sandbox] enabled = false"
            )
        if not self.network_namespace and self.landlock_abi < 4:
            found.append(
                "network access is only refused by the Python audit hook (no network namespace, no "
                "Landlock network rules): allow `unshare --net` or use Linux >= 6.7"
            )
        return found


def detect_isolation() -> Isolation:
    """The layers this host can provide, without starting the template (cheap; cached)."""
    return _detect()


_detect_cache: Isolation | None = None


def _detect() -> Isolation:
    global _detect_cache
    if _detect_cache is None:
        linux = sys.platform.startswith("linux")
        _detect_cache = Isolation(
            network_namespace=_unshare_prefix() is not None,
            landlock_abi=_landlock_abi(),
            uid=_sandbox_uid()[0],
            platform_ok=linux,
            seccomp=linux and os.uname().machine in ("x86_64", "aarch64"),
        )
    return _detect_cache


def _landlock_abi() -> int:
    if not sys.platform.startswith("linux"):
        return 0
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        abi = libc.syscall(444, None, 0, 1)
        return int(abi) if abi > 0 else 0
    except (OSError, AttributeError):
        return 0


def _sandbox_uid() -> tuple[int | None, int | None]:
    """As root, the child drops to `nobody` (NPROC then counts only sandbox processes); otherwise it keeps ours."""
    if os.geteuid() != 0:
        return None, None
    try:
        entry = pwd.getpwnam("nobody")
        return entry.pw_uid, entry.pw_gid
    except KeyError:
        return 65534, 65534


_unshare_cache: list[list[str] | None] = []


def _unshare_prefix() -> list[str] | None:
    """`unshare --net` (plus a user namespace when not root) if it works here, else None."""
    if not _unshare_cache:
        prefix = None
        binary = shutil.which("unshare") if sys.platform.startswith("linux") else None
        if binary:
            candidate = [binary, "--net"] + ([] if os.geteuid() == 0 else ["--map-root-user"])
            try:
                ok = (
                    subprocess.run(
                        [*candidate, "true"],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        timeout=10,
                        env={},
                    ).returncode
                    == 0
                )
            except (OSError, subprocess.TimeoutExpired):
                ok = False
            prefix = candidate if ok else None
        _unshare_cache.append(prefix)
    return _unshare_cache[0]


class _TemplateLost(Exception):
    """The template died before it forked the call's child."""


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


class _Capture:
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


@dataclass
class _Call:
    workdir: str
    limits: SandboxLimits
    sql_handler: SqlHandler | None
    parent_files: set[str] = field(default_factory=set)
    pid: int | None = None
    sql_calls: int = 0
    deadline: float | None = None  # monotonic time the template kills the program at


class Sandbox:
    """The template process and the calls it serves; one per server process (see `get_sandbox`)."""

    def __init__(
        self,
        *,
        network_namespace: bool = True,
        landlock: bool = True,
        drop_uid: bool = True,
        seccomp: bool = True,
        audit_hook: bool = True,
    ) -> None:
        """All layers are on by default; turning one off is for tests and diagnostics (what do the others
        still stop?), never for serving."""
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._ctrl: socket.socket | None = None
        self.base: str | None = None
        self.info: dict[str, Any] = {}
        self.uid, self.gid = _sandbox_uid() if drop_uid else (None, None)
        self._use_netns = network_namespace
        self._landlock = landlock
        self._audit_hook = audit_hook
        self._seccomp = seccomp

    # ------------------------------------------------------------------ template lifecycle

    def start(self) -> dict[str, Any]:
        with self._lock:
            return self._ensure_started()

    def _ensure_started(self) -> dict[str, Any]:
        if self._proc is not None and self._proc.poll() is None and self._ctrl is not None:
            return self.info
        self._stop_locked()
        if not sys.platform.startswith("linux"):
            raise RefusedError(
                "run_python's sandbox needs Linux (process isolation with rlimits, namespaces and "
                "Landlock); run the server on Linux or use run_query"
            )
        if self.base is None or not os.path.isdir(self.base):
            _remove_orphaned_bases()
            self.base = tempfile.mkdtemp(prefix=BASE_PREFIX)
            os.chmod(self.base, 0o711)  # the unprivileged child must traverse to its own working directory
            Path(self.base, "owner.pid").write_text(str(os.getpid()))
        prefix = (_unshare_prefix() or []) if self._use_netns else []
        try:
            self.info = self._spawn(prefix)
        except FlexSQLError:
            if not prefix:
                raise
            self.info = self._spawn([])  # the namespace could not be entered after all
        return self.info

    def _spawn(self, prefix: list[str]) -> dict[str, Any]:
        assert self.base is not None
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        log_path = os.path.join(self.base, "template.log")
        cmd = [*prefix, sys.executable, "-I", "-S", "-B", str(WORKER), "--zygote", str(theirs.fileno())]
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                cmd,
                pass_fds=(theirs.fileno(),),
                env=dict(TEMPLATE_ENV),
                cwd=self.base,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        theirs.close()
        site_paths = _site_paths()
        boot = {
            "site_paths": site_paths,
            "uid": self.uid,
            "gid": self.gid,
            "landlock": self._landlock,
            "audit_hook": self._audit_hook,
            "seccomp": self._seccomp,
        }
        try:
            ours.sendall(json.dumps(boot).encode())
            ours.settimeout(120)
            reply = ours.recv(1 << 16)
            ours.settimeout(None)
        except OSError as exc:
            reply = b""
            reason = str(exc)
        else:
            reason = "it exited during start-up"
        info = json.loads(reply) if reply else {"ready": False, "error": reason}
        if not info.get("ready"):
            with contextlib.suppress(OSError):
                proc.kill()
            proc.wait()
            ours.close()
            log_tail = Path(log_path).read_text(errors="replace")[-2000:]
            raise FlexSQLError(
                f"run_python's sandbox could not start: {info.get('error') or reason}\n{log_tail}"
                "\ncheck that pandas, pyarrow and duckdb import in this Python environment"
            )
        info["network_namespace"] = bool(prefix) and info.get("netns") != _own_netns()
        self._proc, self._ctrl = proc, ours
        return info

    def isolation(self) -> Isolation:
        info = self.start()
        return Isolation(
            network_namespace=bool(info.get("network_namespace")),
            landlock_abi=int(info.get("landlock_abi") or 0),
            uid=info.get("uid"),
            seccomp=bool(info.get("seccomp")),
            remapped=tuple(info.get("remapped") or ()),
        )

    def close(self) -> None:
        with self._lock:
            self._stop_locked()
            if self.base is not None:
                shutil.rmtree(self.base, ignore_errors=True)
                self.base = None

    def _stop_locked(self) -> None:
        if self._ctrl is not None:
            self._ctrl.close()  # EOF: the template kills its children and exits
            self._ctrl = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait()
            self._proc = None

    def _send(self, message: dict[str, Any], fds: Sequence[int]) -> subprocess.Popen | None:
        """Send to the template (started if needed); returns the template process it went to."""
        data = json.dumps(message).encode()
        with self._lock:
            for attempt in (1, 2):
                if message.get("op") == "run":
                    self._ensure_started()
                if self._ctrl is None:
                    return None
                try:
                    socket.send_fds(self._ctrl, [data], list(fds))
                    return self._proc
                except OSError:
                    if attempt == 2 or message.get("op") != "run":
                        raise
                    self._stop_locked()  # the template died: start a new one and retry once
        return None

    def _abandon_template(self, proc: subprocess.Popen | None = None) -> None:
        """Kill the template (when it stopped answering or died under a call) so the next call starts a new
        one; its children die with it (PDEATHSIG). With `proc`, only if that is still the current one."""
        with self._lock:
            if self._proc is None or (proc is not None and self._proc is not proc):
                return
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._stop_locked()

    # ------------------------------------------------------------------ one call

    def run(
        self,
        code: str,
        inputs: dict[str, pa.Table],
        limits: SandboxLimits,
        sql_handler: SqlHandler | None = None,
    ) -> RunOutcome:
        started = time.perf_counter()
        with self._lock:
            self._ensure_started()
            base = self.base
        workdir = tempfile.mkdtemp(prefix="call-", dir=base)
        try:
            if self.uid is not None:
                os.chown(workdir, self.uid, self.gid if self.gid is not None else -1)
            os.chmod(workdir, 0o700)
            call = _Call(workdir=workdir, limits=limits, sql_handler=sql_handler)
            manifest = {}
            for index, (result_id, table) in enumerate(inputs.items()):
                name = f"input-{index}.arrow"
                write_arrow(os.path.join(workdir, name), table)
                call.parent_files.add(name)
                manifest[result_id] = name
            job = {"code": code, "inputs": manifest, "max_output_chars": limits.max_output_chars}
            job_path = os.path.join(workdir, "job.json")
            with open(job_path, "w", encoding="utf-8") as fh:
                json.dump(job, fh)
            os.chmod(job_path, 0o644)
            call.parent_files.add("job.json")
            try:
                outcome = self._supervise(call)
            except _TemplateLost:
                # the template died before forking this call (killed from outside, or crashed): once more
                try:
                    outcome = self._supervise(call)
                except _TemplateLost:
                    raise FlexSQLError(
                        "run_python's sandbox template process died twice while starting this "
                        "call; see the server log, and check memory limits on the host"
                    ) from None
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        outcome.elapsed_ms = round((time.perf_counter() - started) * 1000, 1)
        return outcome

    def _supervise(self, call: _Call) -> RunOutcome:
        limits = call.limits
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        rpc, rpc_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        status, status_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            template = self._send(
                {"op": "run", "workdir": call.workdir, "limits": limits.model_dump()},
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

        captures = {"out": _Capture(limits.max_output_chars), "err": _Capture(limits.max_output_chars)}
        sel = selectors.DefaultSelector()
        sel.register(out_r, selectors.EVENT_READ, "out")
        sel.register(err_r, selectors.EVENT_READ, "err")
        sel.register(rpc, selectors.EVENT_READ, "rpc")
        sel.register(status, selectors.EVENT_READ, "status")
        buffers = {"rpc": b"", "status": b""}
        report: dict[str, Any] | None = None
        exit_event: dict[str, Any] | None = None
        exited_at = 0.0
        open_pipes = {out_r, err_r}
        hard_deadline = time.monotonic() + limits.timeout_s + 30
        next_quota = time.monotonic() + QUOTA_CHECK_S
        extra_limits: list[str] = []
        # the calling tool call's hooks (this worker thread inherits the context): when it is
        # cancelled, the program is killed rather than left running to its wall-clock limit
        cancel = active_cancel_hooks.get()
        cancel_sent = False
        try:
            while True:
                now = time.monotonic()
                if exit_event is not None and (not open_pipes or now - exited_at > 2):
                    break
                if now > hard_deadline:
                    self._abandon_template(template)
                    exit_event = exit_event or {"returncode": None, "killed_for": "timeout"}
                    break
                for key, _ in sel.select(QUOTA_CHECK_S):
                    if key.data in ("out", "err"):
                        chunk = os.read(key.fd, 1 << 16)
                        if chunk:
                            captures[key.data].feed(chunk)
                        else:
                            sel.unregister(key.fd)
                            open_pipes.discard(key.fd)
                    elif key.data == "rpc":
                        data = _recv(rpc)
                        if not data:
                            sel.unregister(rpc)
                            continue
                        buffers["rpc"] += data
                        while b"\n" in buffers["rpc"]:
                            line, buffers["rpc"] = buffers["rpc"].split(b"\n", 1)
                            message = _json_or_none(line)
                            if message is None:
                                continue
                            if message.get("op") == "sql":
                                asked = time.monotonic()
                                reply = self._serve_sql(call, message)
                                # a slow query holds this loop, not the template: do not count it against it
                                hard_deadline += time.monotonic() - asked
                                with contextlib.suppress(OSError):
                                    rpc.sendall((json.dumps(reply, default=str) + "\n").encode())
                            elif message.get("op") == "done":
                                report = message
                        if len(buffers["rpc"]) > MAX_RPC_LINE:
                            buffers["rpc"] = b""
                            self._kill(call, "protocol")
                    elif key.data == "status":
                        data = _recv(status)
                        if not data:
                            sel.unregister(status)
                            if exit_event is None:  # the template died under this call
                                exit_event = {"returncode": None, "killed_for": "sandbox restarted"}
                                exited_at = time.monotonic()
                            continue
                        buffers["status"] += data
                        while b"\n" in buffers["status"]:
                            line, buffers["status"] = buffers["status"].split(b"\n", 1)
                            event = _json_or_none(line) or {}
                            if event.get("event") == "started":
                                call.pid = int(event["pid"])
                                call.deadline = time.monotonic() + limits.timeout_s
                            elif event.get("event") in ("exit", "error"):
                                exit_event = event
                                exited_at = time.monotonic()
                if (
                    call.pid is not None
                    and exit_event is None
                    and cancel is not None
                    and cancel.cancelled
                    and not cancel_sent
                ):
                    cancel_sent = True
                    self._kill(call, "cancelled")
                if call.pid is not None and exit_event is None and time.monotonic() >= next_quota:
                    next_quota = time.monotonic() + QUOTA_CHECK_S
                    if _disk_used(call) > limits.file_mb * MB:
                        extra_limits.append("file size")
                        self._kill(call, "file size")
        finally:
            sel.close()
            for fd in (out_r, err_r):
                os.close(fd)
            rpc.close()
            status.close()
        if exit_event and exit_event.get("killed_for") == "sandbox restarted" and call.pid is None:
            self._abandon_template(template)
            raise _TemplateLost()
        return self._outcome(call, report, exit_event or {}, captures, extra_limits)

    def _kill(self, call: _Call, reason: str) -> None:
        if call.pid is not None:
            with contextlib.suppress(OSError):
                self._send({"op": "kill", "pid": call.pid, "reason": reason}, [])

    def _serve_sql(self, call: _Call, message: dict[str, Any]) -> dict[str, Any]:
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
        self,
        call: _Call,
        report: dict[str, Any] | None,
        exit_event: dict[str, Any],
        captures: dict[str, _Capture],
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
            crash, limit = _explain_exit(returncode, killed_for, cpu_s, limits, exit_event.get("error"))
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


def _explain_exit(
    returncode: int | None, killed_for: str | None, cpu_s: float, limits: SandboxLimits, error: str | None
) -> tuple[str, str | None]:
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
        sig = -returncode
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
    if returncode == 70:
        return (
            "the sandbox failed to set itself up (see stderr); this is a flexsql problem, please report it",
            None,
        )
    return (
        f"the code ended the sandboxed process (exit status {returncode}) before the result could be "
        "reported; do not call os._exit or close file descriptor 3"
    ), None


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


def _disk_used(call: _Call) -> int:
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


def _remove_orphaned_bases() -> None:
    """Working directories of servers that died without cleaning up (killed, crashed): theirs to remove."""
    root = Path(tempfile.gettempdir())
    for base in root.glob(BASE_PREFIX + "*"):
        try:
            if base.stat().st_uid != os.geteuid():
                continue
            owner = int((base / "owner.pid").read_text())
        except (OSError, ValueError):
            continue
        try:
            os.kill(owner, 0)
        except ProcessLookupError:
            shutil.rmtree(base, ignore_errors=True)
        except PermissionError:
            continue


def _own_netns() -> str | None:
    try:
        return os.readlink("/proc/self/ns/net")
    except OSError:
        return None


def _site_paths() -> list[str]:
    """Where the template finds pandas & co: this interpreter's site-packages (it runs with -I -S, so no .pth
    files run and the project checkout of an editable install is not on its path)."""
    import sysconfig

    paths = []
    for key in ("purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path and os.path.isdir(path) and path not in paths:
            paths.append(path)
    for path in sys.path:
        if path.endswith(("site-packages", "dist-packages")) and os.path.isdir(path) and path not in paths:
            paths.append(path)
    return paths


# ---------------------------------------------------------------------------------------------- Arrow I/O


def write_arrow(path: str, table: pa.Table) -> None:
    with pa.OSFile(path, "wb") as sink, ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    os.chmod(path, 0o644)


def read_result(workdir: str, name: str, max_bytes: int) -> pa.Table:
    """Read the child's result file without following links, bounded in size, fully validated."""
    if not RESULT_NAME.fullmatch(name):
        raise ValueError(f"unexpected result file name {name!r}")
    fd = os.open(os.path.join(workdir, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            raise ValueError("the result is not a plain file")
        if info.st_size > max_bytes:
            raise ValueError(f"the result file is larger than {max_bytes // MB} MB")
        data = fh.read(max_bytes + 1)
    table = ipc.open_file(pa.py_buffer(data)).read_all()
    table.validate(full=True)
    return table


@contextlib.contextmanager
def _gc_paused():
    """Building millions of tuples triggers the cyclic GC over and over; none of them can form cycles."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def table_from_rows(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> pa.Table:
    """Rows (as a Source returns them) to an Arrow table, column by column; a column Arrow cannot type
    (mixed kinds, integers beyond 64 bits) travels as text."""
    with _gc_paused():
        values_by_column = list(zip(*rows, strict=False)) if rows else [() for _ in columns]
        arrays = [_array(values) for values in values_by_column]
    return pa.Table.from_arrays(arrays, names=list(columns))


_CONVERSION_ERRORS = (
    pa.ArrowInvalid,
    pa.ArrowTypeError,
    pa.ArrowNotImplementedError,
    OverflowError,
    TypeError,
    ValueError,
)


def _array(values: Sequence[Any]) -> pa.Array:
    # converting with a known type is up to 4x faster than letting Arrow infer it over every value
    sample = [v for v in values[:2000] if v is not None]
    if sample:
        try:
            kind = pa.array(sample).type
            if not pa.types.is_null(kind):
                return pa.array(values, type=kind)
        except _CONVERSION_ERRORS:
            pass
    try:
        return pa.array(values)
    except _CONVERSION_ERRORS:
        return pa.array([None if v is None else str(v) for v in values], type=pa.string())


def rows_from_table(table: pa.Table) -> list[tuple[Any, ...]]:
    with _gc_paused():
        columns = [_column_values(table.column(i)) for i in range(table.num_columns)]
        if not columns:
            return [() for _ in range(table.num_rows)]
        return list(zip(*columns, strict=False))


def _column_values(column: pa.ChunkedArray) -> list[Any]:
    """Python values of a column; numpy's tolist is 3-10x faster than to_pylist for the common types."""
    kind = column.type
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind):
        if column.null_count == 0:
            return column.to_numpy().tolist()
        return _with_nulls(
            column, column.fill_null(False if pa.types.is_boolean(kind) else 0).to_numpy().tolist()
        )
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return column.to_numpy(zero_copy_only=False).tolist()
    if pa.types.is_date32(kind) or (pa.types.is_timestamp(kind) and kind.tz is None):
        if pa.types.is_timestamp(kind) and kind.unit == "ns":
            return column.to_pylist()  # numpy would give integers for nanoseconds
        return column.to_numpy().tolist()  # NaT becomes None
    return column.to_pylist()


def _with_nulls(column: pa.ChunkedArray, values: list[Any]) -> list[Any]:
    import numpy as np

    for index in np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False)):
        values[int(index)] = None
    return values


def sql_type(kind: pa.DataType) -> str:
    """A SQL type name for an Arrow type (what run_query would show)."""
    types = pa.types
    if types.is_boolean(kind):
        return "BOOLEAN"
    if types.is_integer(kind):
        return (
            {8: "TINYINT", 16: "SMALLINT", 32: "INTEGER", 64: "BIGINT"}[kind.bit_width]
            if types.is_signed_integer(kind)
            else {8: "UTINYINT", 16: "USMALLINT", 32: "UINTEGER", 64: "UBIGINT"}[kind.bit_width]
        )
    if types.is_floating(kind):
        return "FLOAT" if kind.bit_width <= 32 else "DOUBLE"
    if types.is_decimal(kind):
        return f"DECIMAL({kind.precision},{kind.scale})"
    if types.is_string(kind) or types.is_large_string(kind):
        return "VARCHAR"
    if types.is_date(kind):
        return "DATE"
    if types.is_timestamp(kind):
        return "TIMESTAMP WITH TIME ZONE" if kind.tz else "TIMESTAMP"
    if types.is_time(kind):
        return "TIME"
    if types.is_duration(kind):
        return "INTERVAL"
    if types.is_binary(kind) or types.is_large_binary(kind):
        return "BLOB"
    if types.is_null(kind):
        return "NULL"
    if types.is_dictionary(kind):
        return sql_type(kind.value_type)
    return str(kind).upper()


# ---------------------------------------------------------------------------------------------- singleton

_sandbox: Sandbox | None = None
_sandbox_lock = threading.Lock()


def get_sandbox() -> Sandbox:
    """The process-wide sandbox (its template starts on the first call, or with `prewarm`)."""
    global _sandbox
    with _sandbox_lock:
        if _sandbox is None:
            _sandbox = Sandbox()
            atexit.register(_sandbox.close)
        return _sandbox


def prewarm() -> threading.Thread:
    """Start the template in the background so the first run_python call does not wait for it."""
    thread = threading.Thread(target=_quiet_start, daemon=True, name="flexsql-sandbox-prewarm")
    thread.start()
    return thread


def _quiet_start() -> None:
    with contextlib.suppress(Exception):
        get_sandbox().start()
