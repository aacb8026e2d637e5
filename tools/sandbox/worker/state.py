"""What the zygote prepares once for all its children: libc through ctypes, the Landlock ABI, the seccomp
filter, and the paths a child may read.

When the Python installation is not readable by the unprivileged uid (for example pyenv under a 0700 /root),
the zygote opens those directories as root before forking and the child imports through /proc/self/fd/N
(descriptors stay valid after the uid drop; Landlock rules are attached to the same directories).
"""

from __future__ import annotations

import fcntl
import os
import socket
import stat
import sys
from typing import Any

from . import seccomp
from .landlock import landlock_abi
from .paths import SYSTEM_READ

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 4, 36, 38


class State:
    """What the zygote prepares once for all its children."""

    def __init__(self, boot: dict[str, Any]) -> None:
        # not a module global: the child unlists ctypes and drops this object's reference to it before user
        # code runs (job.py), and a global would keep it reachable
        import ctypes

        self.uid: int | None = boot.get("uid")
        self.gid: int | None = boot.get("gid")
        self.libc: Any = ctypes.CDLL(None, use_errno=True)
        self.libc.syscall.restype = ctypes.c_long
        self.ctypes: Any = ctypes
        self.landlock_abi = landlock_abi(self.libc) if boot.get("landlock", True) else 0
        self.audit_hook = bool(boot.get("audit_hook", True))
        self.seccomp = (
            bool(boot.get("seccomp", True)) and sys.platform.startswith("linux") and self.probe_seccomp()
        )
        self.seccomp_program = seccomp.build_filter(ctypes) if self.seccomp else None
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

    def apply_seccomp(self, program: tuple[Any, Any]) -> None:
        seccomp.install(self.libc, self.ctypes, program)

    def probe_seccomp(self) -> bool:
        """Install the filter in a throwaway child: the children then rely on it (or know it is missing)."""
        program = seccomp.build_filter(self.ctypes)
        if program is None:
            return False
        pid = os.fork()
        if pid == 0:
            try:
                self.prctl(PR_SET_NO_NEW_PRIVS, 1)
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
