"""The child the zygote forks for one call, confining itself before it runs the user's code.

What a child does before running user code, in this order (see `child_main`):
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
    ctypes/cffi, raising rlimits, and Python-level file access outside the allowed directories (audit.py,
    armed by job.py just before the user's code runs).
"""

from __future__ import annotations

import fcntl
import os
import signal
import sys
from typing import Any

from .channels import MB, RPC_FD
from .job import run_job
from .landlock import landlock_ruleset, restrict_self
from .state import PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG, State


def child_main(req: dict[str, Any], out: int, err: int, rpc: int, state: State) -> None:
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
    ruleset = landlock_ruleset(state, workdir) if state.landlock_abi else -1
    _set_rlimits(limits, state)
    if state.uid is not None:
        _drop_privileges(state.uid, state.gid)
    state.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # after the uid change, which clears it
    if state.remap:
        state.prctl(PR_SET_DUMPABLE, 1)  # /proc/self/fd stays ours after the uid change
    state.prctl(PR_SET_NO_NEW_PRIVS, 1)
    if ruleset >= 0:
        restrict_self(state, ruleset)
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
    run_job(workdir, limits, state)


def _drop_privileges(uid: int, gid: int | None) -> None:
    if gid is None:  # the supervisor sends both ids or neither; never run user code half-dropped
        raise RuntimeError("could not drop privileges: no group id")
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.geteuid() != uid or os.getegid() != gid:
        raise RuntimeError("could not drop privileges")


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


def _set_rlimits(limits: dict[str, Any], state: State) -> None:
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
