"""The child's seccomp filter (Linux, x86_64 and aarch64), as a classic BPF program built with ctypes.

The filter returns EPERM for the syscalls below and allows everything else; a syscall of another ABI kills
the process. The zygote builds it once and checks in a throwaway child that the kernel accepts it and that it
does stop socket() (`State.probe_seccomp`); each child installs it after no_new_privs.
"""

from __future__ import annotations

import errno
import os
import struct
from types import ModuleType
from typing import Any

PR_SET_SECCOMP = 22

# seccomp: syscalls no analysis needs and escapes do. socket() is denied (socketpair, used by asyncio, is not):
# Landlock does not cover connecting to pathname Unix sockets such as PostgreSQL's /run/postgresql/.s.PGSQL.*.
DENIED = {
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
COMMON = {
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


def build_filter(ctypes: ModuleType) -> tuple[Any, Any] | None:
    """The BPF program and the buffer it points into (kept alive together), or None when this architecture
    has no table."""
    arch = DENIED.get(os.uname().machine)
    if arch is None:
        return None
    audit_arch, numbers = arch
    denied = sorted({*numbers.values(), *COMMON.values()})

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

    # ctypes is passed in, not imported (the child drops every reference to it), so mypy cannot see its classes
    class SockFprog(ctypes.Structure):  # type: ignore[name-defined, misc]
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    buffer = ctypes.create_string_buffer(b"".join(body))
    program = SockFprog(len(body), ctypes.cast(buffer, ctypes.c_void_p))
    return program, buffer


def install(libc: Any, ctypes: ModuleType, program: tuple[Any, Any]) -> None:
    if libc.prctl(PR_SET_SECCOMP, 2, ctypes.byref(program[0]), 0, 0) != 0:  # SECCOMP_MODE_FILTER
        raise OSError(ctypes.get_errno(), "seccomp filter could not be installed")
