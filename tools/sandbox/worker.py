"""The sandboxed side of run_python: a pre-warmed template process ("zygote") and the child it forks per call.

This file runs as a script (`python -I -S worker.py --zygote FD`), never imported by the server, and
imports only the standard library plus pandas, numpy, pyarrow and duckdb: nothing of flexsql that could reach
a source, a connection string or a credential.

Why a zygote: importing pandas/pyarrow/duckdb costs 0.4-1 s, far above the 300 ms budget of a call. The zygote
imports them once, in an empty environment and (when the OS allows) inside its own network namespace, and
then forks one fresh child per call. The zygote never runs user code and never receives data (only a working
directory path and limits); each child is used for exactly one call and exits, so nothing leaks from one call
(or session) to the next.

What a child does before running user code, in this order (see `_child_main`):
 1. new session (its own process group, so the whole group can be killed), stdin from /dev/null, stdout and
    stderr to pipes read by the server, fd 3 to a socketpair for `flexsql.sql()` and the final report; every
    other inherited descriptor closed;
 2. chdir into its private working directory;
 3. Landlock ruleset (Linux >= 5.13): read-only access to the Python installation and shared libraries, full
    access to the working directory only, no execve at all, no TCP bind/connect (ABI >= 4), no signals to or
    abstract sockets of processes outside the sandbox (ABI >= 6);
 4. rlimits: address space, CPU seconds, file size, process/thread count, no core files, few descriptors;
 5. when the server runs as root: drop to an unprivileged uid (default 65534) with no groups and no
    capabilities; parent-death signal; no_new_privs; then the Landlock restriction takes effect, and a
    seccomp filter denies creating sockets (socketpair stays), ptrace, namespaces and mounts, bpf,
    io_uring, keyrings, kernel modules, kexec and reboot;
 6. an empty environment (HOME and TMPDIR = the working directory);
 7. an audit hook (PEP 578) that refuses subprocesses, fork, exec, signals, sockets, ctypes, loading
    ctypes/cffi, raising rlimits, and Python-level file access outside the allowed directories. An audit
    hook is not a security boundary (C code such as DuckDB's or Arrow's file readers does not pass through
    it); it is the only file/network layer left when neither Landlock nor the uid drop is available.

When the Python installation is not readable by the unprivileged uid (for example pyenv under a 0700 /root),
the zygote opens those directories as root before forking and the child imports through /proc/self/fd/N
(descriptors stay valid after the uid drop; Landlock rules are attached to the same directories).
"""

from __future__ import annotations

import ast
import errno
import fcntl
import io
import json
import linecache
import os
import secrets
import selectors
import signal
import socket
import stat
import struct
import sys
import time
import traceback
import types

MB = 1024 * 1024
RPC_FD = 3
CELL = "<cell>"
MAX_LINE = 4 * MB

# Landlock (include/uapi/linux/landlock.h); the syscall numbers are the same on every architecture.
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1, 2, 4, 8
_FS_REMOVE_DIR, _FS_REMOVE_FILE, _FS_MAKE_CHAR, _FS_MAKE_DIR = 16, 32, 64, 128
_FS_MAKE_REG, _FS_MAKE_SOCK, _FS_MAKE_FIFO, _FS_MAKE_BLOCK, _FS_MAKE_SYM = 256, 512, 1024, 2048, 4096
_FS_REFER, _FS_TRUNCATE, _FS_IOCTL_DEV = 8192, 16384, 32768
_FILE_RIGHTS = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV
_RO = _FS_READ_FILE | _FS_READ_DIR
_RW = (
    _RO
    | _FS_WRITE_FILE
    | _FS_REMOVE_DIR
    | _FS_REMOVE_FILE
    | _FS_MAKE_DIR
    | _FS_MAKE_REG
    | _FS_MAKE_SYM
    | _FS_REFER
    | _FS_TRUNCATE
)
_NET_ALL = 1 | 2  # BIND_TCP | CONNECT_TCP
_SCOPE_ALL = 1 | 2  # ABSTRACT_UNIX_SOCKET | SIGNAL
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_SECCOMP, _PR_SET_CHILD_SUBREAPER, _PR_SET_NO_NEW_PRIVS = (
    1,
    4,
    22,
    36,
    38,
)

# seccomp: syscalls no analysis needs and escapes do. socket() is denied (socketpair, used by asyncio, is not):
# Landlock does not cover connecting to pathname Unix sockets such as PostgreSQL's /run/postgresql/.s.PGSQL.*.
_SECCOMP_DENIED = {
    # arch: (AUDIT_ARCH_*, {name: number}); numbers from <asm/unistd_64.h> and <asm-generic/unistd.h>
    "x86_64": (
        0xC000003E,
        {
            "socket": 41,
            "ptrace": 101,
            "syslog": 103,
            "pivot_root": 155,
            "mount": 165,
            "umount2": 166,
            "swapon": 167,
            "swapoff": 168,
            "reboot": 169,
            "init_module": 175,
            "delete_module": 176,
            "kexec_load": 246,
            "add_key": 248,
            "request_key": 249,
            "keyctl": 250,
            "unshare": 272,
            "perf_event_open": 298,
            "name_to_handle_at": 303,
            "open_by_handle_at": 304,
            "setns": 308,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "finit_module": 313,
            "kexec_file_load": 320,
            "bpf": 321,
            "userfaultfd": 323,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "umount2": 39,
            "mount": 40,
            "pivot_root": 41,
            "unshare": 97,
            "kexec_load": 104,
            "init_module": 105,
            "delete_module": 106,
            "syslog": 116,
            "ptrace": 117,
            "reboot": 142,
            "socket": 198,
            "add_key": 217,
            "request_key": 218,
            "keyctl": 219,
            "swapon": 224,
            "swapoff": 225,
            "perf_event_open": 241,
            "name_to_handle_at": 264,
            "open_by_handle_at": 265,
            "setns": 268,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "finit_module": 273,
            "bpf": 280,
            "userfaultfd": 282,
            "kexec_file_load": 294,
        },
    ),
}
_SECCOMP_COMMON = {
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
}

# Read-only system paths the libraries may touch after the fork: shared libraries of lazily loaded extension
# modules, time zones, CPU/memory probes (DuckDB reads cgroup files when it starts), random devices.
SYSTEM_READ = [
    "/usr/lib",
    "/usr/lib64",
    "/lib",
    "/lib64",
    "/usr/local/lib",
    "/etc/ld.so.cache",
    "/usr/share/zoneinfo",
    "/etc/localtime",
    "/dev/null",
    "/dev/zero",
    "/dev/urandom",
    "/dev/random",
    "/proc/meminfo",
    "/proc/cpuinfo",
    "/proc/stat",
    "/sys/fs/cgroup",
    "/sys/devices/system/cpu",
]
WRITABLE_DEVICES = ("/dev/null",)

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


def _log(message: str) -> None:
    try:
        os.write(2, (message.rstrip() + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except InterruptedError:
            continue
        view = view[written:]


# ---------------------------------------------------------------------------------------------- zygote


class _State:
    """What the zygote prepares once for all its children."""

    def __init__(self, boot: dict) -> None:
        import ctypes

        self.uid: int | None = boot.get("uid")
        self.gid: int | None = boot.get("gid")
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.syscall.restype = ctypes.c_long
        self.ctypes = ctypes
        self.landlock_abi = self._landlock_abi() if boot.get("landlock", True) else 0
        self.audit_hook = bool(boot.get("audit_hook", True))
        self.seccomp = (
            bool(boot.get("seccomp", True)) and sys.platform.startswith("linux") and self.probe_seccomp()
        )
        self.seccomp_program = self.seccomp_filter() if self.seccomp else None
        self.read_paths = self._read_paths()
        # directories the unprivileged uid cannot reach: opened now (as root), used through /proc/self/fd/N
        self.remap: dict[str, int] = {}
        if self.uid is not None:
            for path in self.read_paths:
                if os.path.isdir(path) and not _world_readable(path):
                    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                    # above the numbers a child dup2s its pipes onto (0-3)
                    high = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
                    os.close(fd)
                    self.remap[path] = high
        self.real_read_roots = tuple(sorted({os.path.realpath(p) for p in self.read_paths}))

    def _landlock_abi(self) -> int:
        if not sys.platform.startswith("linux"):
            return 0
        abi = self.libc.syscall(_SYS_CREATE_RULESET, None, 0, 1)  # LANDLOCK_CREATE_RULESET_VERSION
        return int(abi) if abi > 0 else 0

    @staticmethod
    def _read_paths() -> list[str]:
        paths: list[str] = []
        for path in [*sys.path, *SYSTEM_READ]:
            if path and os.path.exists(path) and path not in paths:
                paths.append(path)
        return paths

    def prctl(self, option: int, value: int) -> None:
        if self.libc.prctl(option, value, 0, 0, 0) != 0:
            raise OSError(self.ctypes.get_errno(), f"prctl({option}) failed")

    def seccomp_filter(self):
        """The BPF program (kept alive here) or None when this architecture has no table."""
        arch = _SECCOMP_DENIED.get(os.uname().machine)
        if arch is None:
            return None
        audit_arch, numbers = arch
        denied = sorted({*numbers.values(), *_SECCOMP_COMMON.values()})

        def op(code: int, jt: int, jf: int, k: int) -> bytes:
            return struct.pack("HBBI", code, jt, jf, k)

        ld_abs, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
        body = [
            op(ld_abs, 0, 0, 4),
            op(jeq, 1, 0, audit_arch),
            op(ret, 0, 0, 0x80000000),  # other ABI: kill
            op(ld_abs, 0, 0, 0),
        ]
        checks = ([(jge, 0x40000000)] if audit_arch == 0xC000003E else []) + [(jeq, nr) for nr in denied]
        for index, (code, nr) in enumerate(checks):
            body.append(op(code, len(checks) - index, 0, nr))  # jump to the final "deny"
        body += [op(ret, 0, 0, 0x7FFF0000), op(ret, 0, 0, 0x00050000 | errno.EPERM)]  # allow / EPERM
        ctypes = self.ctypes

        class SockFprog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

        buffer = ctypes.create_string_buffer(b"".join(body))
        program = SockFprog(len(body), ctypes.cast(buffer, ctypes.c_void_p))
        return program, buffer

    def apply_seccomp(self, program) -> None:
        if (
            self.libc.prctl(_PR_SET_SECCOMP, 2, self.ctypes.byref(program[0]), 0, 0) != 0
        ):  # SECCOMP_MODE_FILTER
            raise OSError(self.ctypes.get_errno(), "seccomp filter could not be installed")

    def probe_seccomp(self) -> bool:
        """Install the filter in a throwaway child: the children then rely on it (or know it is missing)."""
        program = self.seccomp_filter()
        if program is None:
            return False
        pid = os.fork()
        if pid == 0:
            try:
                self.prctl(_PR_SET_NO_NEW_PRIVS, 1)
                self.apply_seccomp(program)
                socket.socket(socket.AF_INET)
                os._exit(1)  # the filter did not stop socket()
            except PermissionError:
                os._exit(0)
            except BaseException:  # noqa: B036
                os._exit(1)
        return os.waitpid(pid, 0)[1] == 0


def _world_readable(path: str) -> bool:
    """Whether a uid with no groups can traverse to `path` and list it (the "other" permission bits)."""
    current = "/"
    for part in [p for p in path.split("/") if p]:
        try:
            mode = os.stat(current).st_mode
        except OSError:
            return False
        if not mode & stat.S_IXOTH:
            return False
        current = os.path.join(current, part)
    try:
        mode = os.stat(current).st_mode
    except OSError:
        return False
    return bool(mode & stat.S_IROTH and (not stat.S_ISDIR(mode) or mode & stat.S_IXOTH))


class _Zygote:
    def __init__(self, ctrl: socket.socket, state: _State) -> None:
        self.ctrl = ctrl
        self.state = state
        self.sel = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        os.set_blocking(self.wake_r, False)
        # pid -> [status fd, deadline, reason for a kill or None]
        self.children: dict[int, list] = {}

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

    def _handle(self, msg: dict, fds: list[int]) -> None:
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

    def _fork(self, req: dict, fds: list[int]) -> None:
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
                _child_main(req, out, err, rpc, self.state)
            except BaseException:  # noqa: B036 - report anything, then leave without running zygote code
                _log("sandbox setup failed:\n" + traceback.format_exc())
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


def _send_status(fd: int, event: dict) -> None:
    try:
        _write_all(fd, (json.dumps(event) + "\n").encode())
    except OSError:
        pass  # the server gave up on this call


def zygote_main(ctrl_fd: int) -> int:
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
        state = _State(boot)
        # orphans of a child (daemonized grandchildren) come back to us and are reaped, instead of piling
        # up as zombies under a PID 1 that may never reap them (they would count against RLIMIT_NPROC)
        state.prctl(_PR_SET_CHILD_SUBREAPER, 1)
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
    _Zygote(ctrl, state).serve()
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


# ---------------------------------------------------------------------------------------------- child


def _child_main(req: dict, out: int, err: int, rpc: int, state: _State) -> None:
    os.setsid()
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails with EFBIG instead of killing
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    # move the received descriptors out of the way first, so no dup2 below overwrites one of them
    sources = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (os.open("/dev/null", os.O_RDWR), out, err, rpc)]
    for target, source in enumerate(sources):
        os.dup2(source, target)
    keep = {0, 1, 2, RPC_FD, *state.remap.values()}
    _close_fds_except(keep)
    workdir = req["workdir"]
    os.chdir(workdir)
    limits = req["limits"]
    ruleset = _landlock_ruleset(state, workdir) if state.landlock_abi else -1
    _set_rlimits(limits, state)
    if state.uid is not None:
        os.setgroups([])
        os.setresgid(state.gid, state.gid, state.gid)
        os.setresuid(state.uid, state.uid, state.uid)
        if os.geteuid() != state.uid or os.getegid() != state.gid:
            raise RuntimeError("could not drop privileges")
    state.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # after the uid change, which clears it
    if state.remap:
        state.prctl(_PR_SET_DUMPABLE, 1)  # /proc/self/fd stays ours after the uid change
    state.prctl(_PR_SET_NO_NEW_PRIVS, 1)
    if ruleset >= 0:
        if state.libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0) != 0:
            raise OSError(state.ctypes.get_errno(), "landlock_restrict_self failed")
        os.close(ruleset)
    if state.seccomp_program is not None:
        state.apply_seccomp(state.seccomp_program)
    if state.remap:
        _remap_import_paths(state.remap)
    os.environ.clear()
    os.environ.update(
        {
            "HOME": workdir,
            "TMPDIR": workdir,
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
        }
    )
    _run_job(workdir, limits, state)


def _close_fds_except(keep: set[int]) -> None:
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 1024))
    for fd in fds:
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _landlock_ruleset(state: _State, workdir: str) -> int:
    abi = state.landlock_abi
    handled_fs = (1 << 13) - 1
    if abi >= 2:
        handled_fs |= _FS_REFER
    if abi >= 3:
        handled_fs |= _FS_TRUNCATE
    if abi >= 5:
        handled_fs |= _FS_IOCTL_DEV
    fields = [handled_fs]
    if abi >= 4:
        fields.append(_NET_ALL)  # no TCP rule is added: every bind and connect is refused
    if abi >= 6:
        fields.append(_SCOPE_ALL)
    attr = struct.pack(f"{len(fields)}Q", *fields)
    ruleset = state.libc.syscall(_SYS_CREATE_RULESET, attr, len(attr), 0)
    if ruleset < 0:
        raise OSError(state.ctypes.get_errno(), "landlock_create_ruleset failed")
    ruleset = int(ruleset)

    def allow(target: str | int, access: int) -> None:
        fd = target if isinstance(target, int) else os.open(target, os.O_PATH | os.O_CLOEXEC)
        try:
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                access &= _FILE_RIGHTS
            rule = struct.pack("=Qi", access & handled_fs, fd)
            if state.libc.syscall(_SYS_ADD_RULE, ruleset, 1, rule, 0) != 0:
                raise OSError(state.ctypes.get_errno(), f"landlock_add_rule failed for {target}")
        finally:
            if not isinstance(target, int):
                os.close(fd)

    for path in state.read_paths:
        if path in state.remap:
            allow(state.remap[path], _RO)
        else:
            allow(path, _RO | (_FS_WRITE_FILE if path in WRITABLE_DEVICES else 0))
    allow("/proc/self", _RO)  # opened here, in the child: its own /proc entry
    allow(workdir, _RW)
    return ruleset


def _set_rlimits(limits: dict, state: _State) -> None:
    import resource

    vm_kb = 0
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                vm_kb = int(line.split()[1])
    address_space = vm_kb * 1024 + int(limits["memory_mb"]) * MB
    cpu = int(limits["cpu_s"])
    file_size = int(limits["file_mb"]) * MB
    nproc = int(limits["max_processes"])
    if state.uid is None:
        nproc += _tasks_of_uid(os.getuid())  # RLIMIT_NPROC counts every task of the uid, not just ours
    for which, soft, hard in (
        (resource.RLIMIT_AS, address_space, address_space),
        (resource.RLIMIT_CPU, cpu, cpu + 2),
        (resource.RLIMIT_FSIZE, file_size, file_size),
        (resource.RLIMIT_NPROC, nproc, nproc),
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_NOFILE, 256, 256),
    ):
        resource.setrlimit(which, (soft, hard))


def _tasks_of_uid(uid: int) -> int:
    count = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    count += len(os.listdir(f"/proc/{name}/task"))
            except OSError:
                continue
    return count


def _remap_import_paths(remap: dict[str, int]) -> None:
    def mapped(path: str) -> str:
        for root, fd in remap.items():
            if path == root or path.startswith(root + "/"):
                return f"/proc/self/fd/{fd}" + path[len(root) :]
        return path

    sys.path[:] = [mapped(p) for p in sys.path]
    for module in list(sys.modules.values()):
        search = getattr(module, "__path__", None)
        if isinstance(search, list):
            search[:] = [mapped(p) if isinstance(p, str) else p for p in search]
    sys.path_importer_cache.clear()


# ---------------------------------------------------------------------------------------------- the job


class SandboxRefusal(PermissionError):
    """Raised by the audit hook: the sandbox does not allow this operation."""


class CPUTimeLimit(BaseException):
    """The CPU-time limit was reached (SIGXCPU); a BaseException so `except Exception` does not swallow it."""


class _BoundedText(io.TextIOBase):
    """sys.stdout/sys.stderr: counts every character, passes only the first `limit` on to the pipe."""

    def __init__(self, fd: int, limit: int) -> None:
        self._fd = fd
        self._limit = limit
        self.chars = 0
        self.buffer = _BoundedBinary(self)

    encoding = "utf-8"
    errors = "backslashreplace"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self._fd

    def flush(self) -> None:
        pass

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        room = self._limit - self.chars
        self.chars += len(text)
        if room > 0:
            _write_all(self._fd, text[:room].encode("utf-8", "backslashreplace"))
        return len(text)


class _BoundedBinary(io.RawIOBase):
    def __init__(self, owner: _BoundedText) -> None:
        self._owner = owner

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:  # type: ignore[override]
        data = bytes(data)
        room = self._owner._limit - self._owner.chars
        self._owner.chars += len(data)
        if room > 0:
            _write_all(self._owner._fd, data[:room])
        return len(data)


class _Rpc:
    """JSON lines over fd 3: requests to the server (flexsql.sql) and the final report."""

    def __init__(self) -> None:
        self.sock = socket.socket(fileno=RPC_FD)
        self._buffer = b""

    def send(self, message: dict) -> None:
        self.sock.sendall((json.dumps(message, default=str) + "\n").encode())

    def receive(self) -> dict:
        while b"\n" not in self._buffer:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("the server closed the connection to the sandbox")
            self._buffer += chunk
            if len(self._buffer) > MAX_LINE:
                raise ConnectionError("oversized reply from the server")
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)


def _read_frame(path: str):
    import pyarrow as pa
    import pyarrow.ipc as ipc

    with pa.memory_map(path) as source:
        table = ipc.open_file(source).read_all()
    frame = table.to_pandas()
    # integers with NULLs would become floats; keep them integers (pandas' nullable Int dtypes)
    for position, column in enumerate(table.columns):
        if pa.types.is_integer(column.type) and column.null_count:
            frame.isetitem(position, column.to_pandas(types_mapper=_nullable_int))
    return frame


def _nullable_int(kind):
    import pandas as pd
    import pyarrow as pa

    return {
        pa.int8(): pd.Int8Dtype(),
        pa.int16(): pd.Int16Dtype(),
        pa.int32(): pd.Int32Dtype(),
        pa.int64(): pd.Int64Dtype(),
        pa.uint8(): pd.UInt8Dtype(),
        pa.uint16(): pd.UInt16Dtype(),
        pa.uint32(): pd.UInt32Dtype(),
        pa.uint64(): pd.UInt64Dtype(),
    }.get(kind)


def _flexsql_module(rpc: _Rpc, counter: list[int]) -> types.ModuleType:
    module = types.ModuleType(
        "flexsql",
        "run_python helpers: flexsql.sql(query, source=None) runs one read-only "
        "query through the server (guarded, row-capped) and returns a DataFrame; "
        "by default on the source of the results given.",
    )

    class SQLError(RuntimeError):
        """The server refused or failed the query (the message says why)."""

    def sql(query: str, source: str | None = None):
        if not isinstance(query, str) or not query.strip():
            raise TypeError(
                "flexsql.sql() takes one SQL string, e.g. flexsql.sql('SELECT count(*) FROM orders')"
            )
        if source is not None and not isinstance(source, str):
            raise TypeError("source= names a configured source, e.g. flexsql.sql('SELECT 1', source='sales')")
        counter[0] += 1
        rpc.send({"op": "sql", "sql": query, "source": source})
        reply = rpc.receive()
        if not reply.get("ok"):
            raise SQLError(str(reply.get("error") or "the query failed"))
        name = str(reply["file"])
        frame = _read_frame(name)
        os.remove(name)
        meta = {
            k: reply.get(k)
            for k in ("total_rows", "total_is_lower_bound", "truncated", "cells_cut", "elapsed_ms")
        }
        frame.attrs.update(meta)
        if reply.get("truncated"):
            total = f"{reply.get('total_rows')}{'+' if reply.get('total_is_lower_bound') else ''}"
            print(
                f"flexsql.sql: only the first {len(frame)} of {total} rows were returned "
                f"(server row cap); aggregate in SQL to see everything",
                file=sys.stderr,
            )
        if reply.get("cells_cut"):
            print(
                f"flexsql.sql: {reply.get('cells_cut')} value(s) were too big to return whole and end in a "
                f"'…' marker (server cell cap); select a part of them (substr) to work on",
                file=sys.stderr,
            )
        return frame

    sql.__module__ = SQLError.__module__ = "flexsql"
    SQLError.__qualname__ = "SQLError"
    module.sql = sql
    module.SQLError = SQLError
    return module


_BLOCKED_EVENTS = frozenset(
    {
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.fork",
        "os.forkpty",
        "os.startfile",
        "subprocess.Popen",
        "pty.spawn",
        "os.kill",
        "os.killpg",
        "signal.pthread_kill",
        "resource.setrlimit",
        "resource.prlimit",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "sys.remote_exec",
        "webbrowser.open",
        "urllib.Request",
        "http.client.connect",
        "ftplib.connect",
        "smtplib.connect",
        "poplib.connect",
        "imaplib.open",
        "nntplib.connect",
        "telnetlib.Telnet.open",
        "sqlite3.enable_load_extension",
        "sqlite3.load_extension",
    }
)
_BLOCKED_IMPORTS = frozenset(
    {
        "ctypes",
        "_ctypes",
        "cffi",
        "_cffi_backend",
        "_posixsubprocess",
        "_testcapi",
        "_testinternalcapi",
        "_testbuffer",
        "_xxsubinterpreters",
        "_xxinterpchannels",
        "pty",
        "_tkinter",
    }
)
# event -> positions of path arguments that must stay inside the working directory
_WRITE_EVENTS = {
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.rename": (0, 1),
    "os.mkdir": (0,),
    "os.link": (0, 1),
    "os.symlink": (1,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.truncate": (0,),
    "os.utime": (0,),
    "os.setxattr": (0,),
    "os.removexattr": (0,),
    "os.chflags": (0,),
    "os.lchflags": (0,),
    "shutil.rmtree": (0,),
}

_HOOK_SOURCE = """
def hook(event, args):
    if event == "socket.__new__" and len(args) > 1 and args[1] == AF_UNIX:
        return  # socketpair (asyncio); connecting or binding any socket is refused below
    if event in BLOCKED or event.startswith(("socket.", "ctypes.", "_ctypes.")):
        refuse(event, "")
    if event == "open":
        path, mode, flags = args[0], args[1], args[2] if len(args) > 2 else 0
        if isinstance(path, int) or path is None:
            return
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool(flags & WRITE_FLAGS)
        check(event, path, writing)
    elif event == "import":
        name = args[0] if args else ""
        if isinstance(name, str) and (name in BLOCKED_IMPORTS or name.split(".")[0] in BLOCKED_IMPORTS):
            refuse(event, name)
    elif event in WRITE_EVENTS:
        for index in WRITE_EVENTS[event]:
            if index < len(args) and (isinstance(args[index], (str, bytes)) or hasattr(args[index], "__fspath__")):
                check(event, args[index], True)
    elif event in ("os.listdir", "os.scandir"):
        path = args[0] if args else "."
        if path is None:
            path = "."
        if not isinstance(path, int):
            check(event, path, False)
    elif event == "sqlite3.connect":
        database = args[0] if args else ":memory:"
        if isinstance(database, (str, bytes)) and database not in (":memory:", b":memory:", "", b""):
            check(event, database, True)


def check(event, path, writing):
    text = fsdecode(fspath(path))
    real = realpath(text)
    inside = real == WORKDIR or real.startswith(WORKDIR + "/")
    if writing:
        if not inside and real not in WRITABLE_DEVICES:
            refuse(event, "writing " + text + ": only the working directory is writable")
    elif not inside and not (real in READ_ROOTS or real.startswith(READ_PREFIXES)):
        refuse(event, "reading " + text + ": outside the working directory and the Python installation")


def refuse(event, detail):
    message = "run_python sandbox refused " + event + (" (" + detail + ")" if detail else "")
    VIOLATIONS.append(message)
    raise SandboxRefusal(message)
"""


def _install_audit_hook(workdir: str, read_roots: tuple[str, ...], violations: list[str]) -> None:
    """Build the hook from source with its allow-lists as constants (harder to tamper with), then arm it."""
    namespace: dict = {
        "BLOCKED": _BLOCKED_EVENTS,
        "BLOCKED_IMPORTS": _BLOCKED_IMPORTS,
        "WRITE_EVENTS": types.MappingProxyType(dict(_WRITE_EVENTS)),
        "WRITE_FLAGS": os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND,
        "WORKDIR": os.path.realpath(workdir),
        "READ_ROOTS": frozenset(read_roots),
        "READ_PREFIXES": tuple(r.rstrip("/") + "/" for r in read_roots),
        "WRITABLE_DEVICES": WRITABLE_DEVICES,
        "VIOLATIONS": violations,
        "SandboxRefusal": SandboxRefusal,
        "realpath": os.path.realpath,
        "AF_UNIX": socket.AF_UNIX,
        "fspath": os.fspath,
        "fsdecode": os.fsdecode,
    }
    exec(compile(_HOOK_SOURCE, "<sandbox-audit-hook>", "exec"), namespace)  # noqa: S102 - our own constant source
    sys.addaudithook(namespace["hook"])


def _run_job(workdir: str, limits: dict, state: _State) -> None:
    import duckdb
    import numpy as np
    import pandas as pd

    rpc = _Rpc()
    with open("job.json", encoding="utf-8") as fh:
        job = json.load(fh)
    os.remove("job.json")  # the user's code starts in an empty directory
    cap = int(job["max_output_chars"])
    out, err = _BoundedText(1, cap), _BoundedText(2, cap)
    sys.stdout = sys.__stdout__ = out  # type: ignore[misc]
    sys.stderr = sys.__stderr__ = err  # type: ignore[misc]
    sql_calls = [0]
    sys.modules["flexsql"] = _flexsql_module(rpc, sql_calls)
    dfs = {rid: _read_frame(name) for rid, name in job["inputs"].items()}
    for name in job["inputs"].values():
        os.remove(name)
    namespace: dict = {
        "__name__": "__main__",
        "__builtins__": __builtins__,
        "dfs": dfs,
        "pd": pd,
        "np": np,
        "duckdb": duckdb,
        "flexsql": sys.modules["flexsql"],
    }
    if len(dfs) == 1:
        namespace["df"] = next(iter(dfs.values()))
    # ctypes is loaded (numpy imports it, and so did we): unlist it so `import ctypes` is refused by name
    for name in [n for n in sys.modules if n == "ctypes" or n.startswith("ctypes.") or n == "_ctypes"]:
        del sys.modules[name]
    state.libc = state.ctypes = None  # type: ignore[assignment]

    def on_cpu_limit(_signum, _frame):
        raise CPUTimeLimit(f"CPU time limit of {limits['cpu_s']} s reached")

    signal.signal(signal.SIGXCPU, on_cpu_limit)
    violations: list[str] = []
    if state.audit_hook:
        _install_audit_hook(workdir, state.real_read_roots, violations)

    report: dict = {
        "op": "done",
        "value_repr": None,
        "value_type": None,
        "result_file": None,
        "error": None,
        "error_type": None,
        "limits": [],
    }
    value = None
    try:
        value = _execute(job["code"], namespace)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            report["error"], report["error_type"] = f"SystemExit: {exc.code}", "SystemExit"
    except BaseException as exc:  # noqa: B036 - user code may raise anything; report it
        report["error"], report["error_type"] = _user_traceback(exc, job["code"]), type(exc).__name__
        limit = _limit_of(exc)
        if limit:
            report["limits"].append(limit)
    if report["error"] is None and value is not None:
        try:
            _describe_value(value, report, cap)
        except BaseException as exc:  # noqa: B036
            limit = _limit_of(exc)
            report["error"] = (
                f"the value of the last expression could not be returned: {type(exc).__name__}: {exc}"
            )
            if limit in ("file size", "memory"):
                report["error"] += (
                    f" (the {limit} limit: {limits['file_mb']} MB per file, {limits['memory_mb']} MB "
                    "of memory); return an aggregate or df.head(n) instead"
                )
            report["error_type"] = type(exc).__name__
            if limit:
                report["limits"].append(limit)
    if violations:
        report["refused"] = violations[:20]
    report["stdout_chars"], report["stderr_chars"] = out.chars, err.chars
    report["sql_calls"] = sql_calls[0]
    try:
        rpc.send(report)
    except OSError:
        pass
    os._exit(0)


def _execute(code: str, namespace: dict):
    linecache.cache[CELL] = (len(code), None, code.splitlines(True), CELL)
    tree = ast.parse(code, CELL, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, CELL, "exec"), namespace)  # noqa: S102 - running the user's code is the point
    if last is not None:
        return eval(compile(last, CELL, "eval"), namespace)  # noqa: S307
    return None


def _limit_of(exc: BaseException) -> str | None:
    if isinstance(exc, MemoryError):
        return "memory"
    if isinstance(exc, CPUTimeLimit):
        return "cpu"
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        return "file size"
    if isinstance(exc, OSError) and exc.errno == errno.EAGAIN:
        return "processes"
    if isinstance(exc, RuntimeError) and "can't start new thread" in str(exc):
        return "processes"
    return None


def _user_traceback(exc: BaseException, code: str, max_lines: int = 20) -> str:
    """The traceback restricted to frames of the user's cell; the library and sandbox frames are dropped."""
    if isinstance(exc, SyntaxError) and exc.filename == CELL:
        lines = traceback.format_exception_only(type(exc), exc)
    else:
        # select the cell's frames before any source line is looked up (library files are not to be read)
        frames = traceback.StackSummary.extract(
            (frame, line)
            for frame, line in traceback.walk_tb(exc.__traceback__)
            if frame.f_code.co_filename == CELL
        )
        lines = ["Traceback (most recent call last):\n"] if frames else []
        lines += traceback.format_list(frames)
        lines += traceback.format_exception_only(type(exc), exc)
    text_lines = "".join(lines).rstrip("\n").split("\n")
    if len(text_lines) > max_lines:
        cut = len(text_lines) - max_lines + 1
        text_lines = text_lines[:3] + [f"  … {cut} lines cut …"] + text_lines[3 + cut :]
    text = "\n".join(text_lines)
    return text if len(text) <= 4000 else text[:1500] + "\n  … cut …\n" + text[-2400:]


def _describe_value(value, report: dict, cap: int) -> None:
    import pandas as pd

    report["value_type"] = type(value).__name__
    if isinstance(value, pd.DataFrame | pd.Series):
        table = _frame_to_table(value)
        name = f"result-{secrets.token_hex(8)}.arrow"
        _write_table(table, name)
        report["result_file"] = name
        kind = "Series" if isinstance(value, pd.Series) else "DataFrame"
        report["value_repr"] = f"{kind}: {table.num_rows} rows × {table.num_columns} columns"
        return
    if isinstance(value, str | bytes) and len(value) > cap:
        unit = "chars" if isinstance(value, str) else "bytes"
        report["value_repr"] = repr(value[:cap])[:cap] + f" … ({len(value)} {unit})"
        return
    text = repr(value)
    report["value_repr"] = text if len(text) <= cap else text[:cap] + f" … ({len(text)} chars)"


def _frame_to_table(value):
    import pandas as pd
    import pyarrow as pa

    if isinstance(value, pd.Series):
        value = value.to_frame(name=value.name if value.name is not None else "value")
    frame = value
    index = frame.index
    if isinstance(index, pd.MultiIndex) or index.name is not None or not pd.api.types.is_integer_dtype(index):
        frame = frame.reset_index()  # a named or labelled index (groupby, value_counts, describe) is data
    if isinstance(frame.columns, pd.MultiIndex):
        frame.columns = ["_".join(str(p) for p in col if str(p)) for col in frame.columns]
    names, seen = [], set()
    for column in frame.columns:
        name, n = str(column), 1
        while name in seen:
            n += 1
            name = f"{column}_{n}"
        seen.add(name)
        names.append(name)
    arrays = []
    for position in range(frame.shape[1]):
        series = frame.iloc[:, position]
        try:
            arrays.append(pa.array(series, from_pandas=True))
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError):
            arrays.append(pa.array([None if _is_missing(v) else str(v) for v in series], type=pa.string()))
    return pa.Table.from_arrays(arrays, names=names)


def _is_missing(value) -> bool:
    try:
        return value is None or bool(value != value)
    except (TypeError, ValueError):
        return False


def _write_table(table, name: str) -> None:
    import pyarrow.ipc as ipc

    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as fh, ipc.new_file(fh, table.schema) as writer:
        writer.write_table(table)


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[1] == "--zygote":
        return zygote_main(int(argv[2]))
    print("usage: worker.py --zygote FD (started by flexsql's run_python, not by hand)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
