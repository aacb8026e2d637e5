"""run_python's template process ("zygote"): started once per server process, it forks one child per call.

Why a zygote: importing pandas/pyarrow/duckdb costs 0.4-1 s, far above the 300 ms budget of a call. The zygote
imports them once, in an empty environment and (when the OS allows) inside its own network namespace, and
then forks one fresh child per call. The zygote never runs user code and never receives data (only a working
directory path and limits); each child is used for exactly one call and exits, so nothing leaks from one call
(or session) to the next.

The server talks to it over a SOCK_SEQPACKET socket: a boot message (site paths, uid, which layers to use),
the ready reply, then "run" requests (with the call's four descriptors) and "kill" requests; each call's
status socket receives "started" and "exit" (with the child's exit status, CPU time and peak memory), or
"error" when the fork failed.
"""

from __future__ import annotations

import io
import json
import os
import selectors
import signal
import socket
import sys
import time
import traceback
from typing import Any

from .channels import log, write_all
from .child import child_main
from .state import PR_SET_CHILD_SUBREAPER, State

# Warm the template with what user code commonly imports, so a call pays nothing for it.
PRELOAD = [
    "numpy",
    "pandas",
    "pyarrow",
    "pyarrow.ipc",
    "pyarrow.compute",
    "duckdb",
    "json",
    "re",
    "math",
    "statistics",
    "datetime",
    "decimal",
    "fractions",
    "collections",
    "itertools",
    "functools",
    "operator",
    "random",
    "string",
    "textwrap",
    "csv",
    "heapq",
    "bisect",
    "difflib",
    "hashlib",
    "pprint",
    "dataclasses",
    "typing",
    "enum",
    "copy",
    "uuid",
    "base64",
    "calendar",
    "zoneinfo",
    "unicodedata",
    "numbers",
    "warnings",
    "threading",
]


class Zygote:
    """The template's loop: a child per "run" request, killed on "kill" or at its deadline, then reaped."""

    def __init__(self, ctrl: socket.socket, state: State) -> None:
        self.ctrl = ctrl
        self.state = state
        self.sel = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        os.set_blocking(self.wake_r, False)
        # pid -> [status fd, deadline, reason for a kill or None]
        self.children: dict[int, list[Any]] = {}

    def serve(self) -> None:
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.sel.register(self.ctrl, selectors.EVENT_READ, "ctrl")
        self.sel.register(self.wake_r, selectors.EVENT_READ, "wake")
        while True:
            deadlines = [c[1] for c in self.children.values() if c[2] is None]
            timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
            for key, _ in self.sel.select(timeout):
                if key.data == "ctrl":
                    try:
                        msg, fds, _flags, _addr = socket.recv_fds(self.ctrl, 1 << 16, 8)
                    except InterruptedError:
                        continue
                    if not msg:
                        self._shutdown()
                        return
                    self._handle(json.loads(msg), fds)
                else:
                    try:
                        while os.read(self.wake_r, 512):
                            pass
                    except (BlockingIOError, InterruptedError):
                        pass
            now = time.monotonic()
            for pid, child in self.children.items():
                if child[2] is None and now >= child[1]:
                    child[2] = "timeout"
                    _kill_group(pid)
            self._reap()

    def _handle(self, msg: dict[str, Any], fds: list[int]) -> None:
        if msg.get("op") == "run" and len(fds) == 4:
            self._fork(msg, fds)
        elif msg.get("op") == "kill":
            child = self.children.get(int(msg.get("pid", 0)))
            if child is not None:
                child[2] = child[2] or str(msg.get("reason") or "killed")
                _kill_group(int(msg["pid"]))
            for fd in fds:
                os.close(fd)
        else:
            for fd in fds:
                os.close(fd)

    def _fork(self, req: dict[str, Any], fds: list[int]) -> None:
        out, err, rpc, status = fds
        try:
            pid = os.fork()
        except OSError as exc:
            _send_status(status, {"event": "error", "error": f"fork failed: {exc}"})
            for fd in fds:
                os.close(fd)
            return
        if pid == 0:  # the child: never returns
            try:
                self._forget_in_child(status)
                child_main(req, out, err, rpc, self.state)
            except BaseException:  # noqa: B036 - report anything, then leave without running zygote code
                log("sandbox setup failed:\n" + traceback.format_exc())
            finally:
                os._exit(70)
        for fd in (out, err, rpc):
            os.close(fd)
        self.children[pid] = [status, time.monotonic() + float(req["limits"]["timeout_s"]), None]
        _send_status(status, {"event": "started", "pid": pid})

    def _forget_in_child(self, own_status: int) -> None:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        self.sel.close()
        self.ctrl.close()
        for fd in (self.wake_r, self.wake_w, own_status, *[c[0] for c in self.children.values()]):
            try:
                os.close(fd)
            except OSError:
                pass
        self.children.clear()

    def _reap(self) -> None:
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if info is None:
                return
            pid = info.si_pid
            if pid not in self.children:  # an orphan of a killed child, adopted because we are a subreaper
                os.waitpid(pid, 0)
                continue
            _kill_group(pid)  # whatever the child left in its group dies with it
            _, wait_status, usage = os.wait4(pid, 0)
            status_fd, _deadline, reason = self.children.pop(pid)
            _send_status(
                status_fd,
                {
                    "event": "exit",
                    "pid": pid,
                    "returncode": os.waitstatus_to_exitcode(wait_status),
                    "killed_for": reason,
                    "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
                    "maxrss_kb": usage.ru_maxrss,
                },
            )
            os.close(status_fd)

    def _shutdown(self) -> None:
        for pid in list(self.children):
            _kill_group(pid)
        deadline = time.monotonic() + 2
        while self.children and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.01)


def _kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
            return
        except (ProcessLookupError, PermissionError):
            continue


def _send_status(fd: int, event: dict[str, Any]) -> None:
    try:
        write_all(fd, (json.dumps(event) + "\n").encode())
    except OSError:
        pass  # the server gave up on this call


def zygote_main(ctrl_fd: int) -> int:
    """Import pandas & co, probe what confinement works, tell the server, then serve until it hangs up."""
    ctrl = socket.socket(fileno=ctrl_fd)
    boot = json.loads(ctrl.recv(1 << 16))
    for path in boot.get("site_paths", []):
        if path not in sys.path:
            sys.path.append(path)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import importlib

        for name in PRELOAD:
            importlib.import_module(name)
        _warm_up()
        state = State(boot)
        # orphans of a child (daemonized grandchildren) come back to us and are reaped, instead of piling
        # up as zombies under a PID 1 that may never reap them (they would count against RLIMIT_NPROC)
        state.prctl(PR_SET_CHILD_SUBREAPER, 1)
    except BaseException:  # noqa: B036 - the server shows this text when the sandbox cannot start
        ctrl.send(json.dumps({"ready": False, "error": traceback.format_exc()[-4000:]}).encode())
        return 1
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1
    ctrl.send(
        json.dumps(
            {
                "ready": True,
                "pid": os.getpid(),
                "landlock_abi": state.landlock_abi,
                "uid": state.uid,
                "remapped": sorted(state.remap),
                "threads": threads,
                "audit_hook": state.audit_hook,
                "seccomp": state.seccomp,
                "python": sys.version.split()[0],
                "netns": _netns(),
                "read_paths": state.read_paths,
            }
        ).encode()
    )
    Zygote(ctrl, state).serve()
    return 0


def _netns() -> str | None:
    try:
        return os.readlink("/proc/self/ns/net")
    except OSError:
        return None


def _warm_up() -> None:
    """Run the lazy first-use paths of pandas/pyarrow once, single-threaded, so children start warm."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.ipc as ipc

    frame = pd.DataFrame({"a": np.arange(3), "b": ["x", "y", None], "c": [1.5, None, 2.0]})
    repr(frame)
    repr(frame["a"])
    frame.groupby("b").sum()
    table = pa.Table.from_pandas(frame, preserve_index=False, nthreads=1)
    sink = io.BytesIO()
    with ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    ipc.open_file(pa.py_buffer(sink.getvalue())).read_all().to_pandas(use_threads=False)
