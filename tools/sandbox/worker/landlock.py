"""Landlock (Linux >= 5.13), applied by each child to itself: read-only access to the Python installation and
shared libraries, full access to its working directory only, no execve at all, no TCP bind/connect (ABI >= 4),
no signals to or abstract sockets of processes outside the sandbox (ABI >= 6).

Constants from include/uapi/linux/landlock.h; the syscall numbers are the same on every architecture.
"""

from __future__ import annotations

import os
import stat
import struct
import sys
from typing import TYPE_CHECKING, Any

from .paths import WRITABLE_DEVICES

if TYPE_CHECKING:
    from .state import State

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
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


def landlock_abi(libc: Any) -> int:
    """The Landlock ABI version this kernel offers, 0 without Landlock."""
    if not sys.platform.startswith("linux"):
        return 0
    abi = libc.syscall(SYS_CREATE_RULESET, None, 0, 1)  # LANDLOCK_CREATE_RULESET_VERSION
    return int(abi) if abi > 0 else 0


def landlock_ruleset(state: State, workdir: str) -> int:
    """A ruleset fd for this child: the readable paths (the remapped ones through the zygote's descriptors),
    the child's own /proc entry, and its working directory."""
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
    ruleset = state.libc.syscall(SYS_CREATE_RULESET, attr, len(attr), 0)
    if ruleset < 0:
        raise OSError(state.ctypes.get_errno(), "landlock_create_ruleset failed")
    ruleset = int(ruleset)

    def allow(target: str | int, access: int) -> None:
        fd = target if isinstance(target, int) else os.open(target, os.O_PATH | os.O_CLOEXEC)
        try:
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                access &= _FILE_RIGHTS
            rule = struct.pack("=Qi", access & handled_fs, fd)
            if state.libc.syscall(SYS_ADD_RULE, ruleset, 1, rule, 0) != 0:
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


def restrict_self(state: State, ruleset: int) -> None:
    if state.libc.syscall(SYS_RESTRICT_SELF, ruleset, 0) != 0:
        raise OSError(state.ctypes.get_errno(), "landlock_restrict_self failed")
    os.close(ruleset)
