"""Process management for run_python: the pre-warmed template, one sandboxed child per call, limits, IPC.

Design (measured on the 2-core dev box; see benchmarks/python_tool.py):
- Spawning `python -c "import pandas, pyarrow, duckdb"` per call costs ~1 s, far over the 300 ms budget;
  forking a warm template costs 20-35 ms per trivial call (median, including all confinement).
  So one template process (the "zygote", tools/sandbox/worker/) is started per server process, in an empty
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
What stops what (tests/tools/sandbox/test_attacks.py, run with single layers switched off via `Sandbox(...)`):
- the audit hook refuses first: fork/exec/subprocess, sockets and DNS, ctypes, setrlimit, gc introspection,
  Python-level file access outside the working directory;
- with the hook off, the kernel layers still stop every file, exec, network and signal escape: Landlock and
  the uid drop each deny reading the database/config/environ and writing outside; Landlock denies executing
  any program; the network namespace, Landlock's TCP rules and seccomp (no socket()) deny connecting, and
  seccomp alone stops connecting to a pathname Unix socket (e.g. PostgreSQL's, often mode 0777), which
  neither Landlock nor a network namespace covers; signals to the server fail (other uid, Landlock scope);
  a fork bomb hits RLIMIT_NPROC (uid drop) or the wall clock (group kill);
- rlimits stop memory, CPU, file-size and thread bombs; the disk monitor stops many-file floods; bounded
  writers (in the child) and capped pipe reads (call.py) stop output floods;
- without Landlock and without root (audit hook only), C-level readers (DuckDB, Arrow) are not confined:
  `Isolation.warnings()` says so.

Modules: this one (the template's lifecycle, one call's working directory, the process-wide singleton),
launch.py (the template's command line and environment), call.py (one call's traffic and quota),
outcome.py (what a call produced, how it ended), isolation.py (what this host offers), limits.py,
arrow_io.py (Arrow files and row conversion); worker/ is the sandboxed side.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from flexsql import background
from flexsql.errors import BusyError, FlexSQLError, RefusedError
from flexsql.tools.sandbox.call import Call, SqlHandler, TemplateLost, supervise, write_job
from flexsql.tools.sandbox.isolation import Isolation, own_netns, sandbox_uid, unshare_prefix
from flexsql.tools.sandbox.launch import TEMPLATE_ENV, site_paths, template_command
from flexsql.tools.sandbox.limits import SandboxLimits
from flexsql.tools.sandbox.outcome import RunOutcome

BASE_PREFIX = "flexsql-sandbox-"


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
        self._proc: subprocess.Popen[bytes] | None = None
        self._ctrl: socket.socket | None = None
        self.base: str | None = None
        self.info: dict[str, Any] = {}
        self.uid, self.gid = sandbox_uid() if drop_uid else (None, None)
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
        prefix = (unshare_prefix() or []) if self._use_netns else []
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
        cmd = template_command(prefix, theirs.fileno())
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
        boot = {
            "site_paths": site_paths(),
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
        info["network_namespace"] = bool(prefix) and info.get("netns") != own_netns()
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

    def send(self, message: dict[str, Any], fds: Sequence[int]) -> subprocess.Popen[bytes] | None:
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

    def abandon_template(self, proc: subprocess.Popen[bytes] | None = None) -> None:
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
        *,
        max_concurrent: int | None = None,
        queue_wait_s: float = 0.0,
    ) -> RunOutcome:
        """Run one program; with `max_concurrent`, only once fewer than that many run in this process
        (waiting up to `queue_wait_s`, else BusyError)."""
        if max_concurrent is None:
            return self._run(code, inputs, limits, sql_handler)
        with SANDBOX_SLOTS.hold(max_concurrent, queue_wait_s):
            return self._run(code, inputs, limits, sql_handler)

    def _run(
        self,
        code: str,
        inputs: dict[str, pa.Table],
        limits: SandboxLimits,
        sql_handler: SqlHandler | None,
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
            call = Call(workdir=workdir, limits=limits, sql_handler=sql_handler)
            write_job(call, code, inputs)
            try:
                outcome = supervise(self, call)
            except TemplateLost:
                # the template died before forking this call (killed from outside, or crashed): once more
                try:
                    outcome = supervise(self, call)
                except TemplateLost:
                    raise FlexSQLError(
                        "run_python's sandbox template process died twice while starting this "
                        "call; see the server log, and check memory limits on the host"
                    ) from None
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        outcome.elapsed_ms = round((time.perf_counter() - started) * 1000, 1)
        return outcome


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


class CallSlots:
    """How many programs run at once in this process (every session's run_python and every agent
    run's): a call beyond the limit waits up to its wait for one to end, then is refused as busy,
    so many clients cannot start many sandboxes of memory_mb each."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.running = 0
        self.waiting = 0

    @contextlib.contextmanager
    def hold(self, limit: int, wait_s: float) -> Iterator[None]:
        with self._cond:
            if self.running >= limit:
                self.waiting += 1
                try:
                    self._cond.wait_for(lambda: self.running < limit, timeout=wait_s)
                finally:
                    self.waiting -= 1
                if self.running >= limit:
                    running = self.running
                    raise BusyError(
                        f"{running} run_python sandbox{'es' if running != 1 else ''} running (the server's "
                        f"limit, [sandbox] max_concurrent = {limit}); waited {wait_s:g} s for one to end — "
                        "try again in a moment, or do this step with run_query"
                    )
            self.running += 1
        try:
            yield
        finally:
            with self._cond:
                self.running -= 1
                self._cond.notify_all()


SANDBOX_SLOTS = CallSlots()
"""The process's programs running at once ([sandbox] max_concurrent, read per call)."""

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
    return background.start(_quiet_start, name="flexsql-sandbox-prewarm")


def _quiet_start() -> None:
    with contextlib.suppress(Exception):
        get_sandbox().start()
