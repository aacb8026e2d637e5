"""The audit hook (PEP 578) armed in each child just before user code runs.

It refuses subprocesses, fork, exec, signals, sockets, ctypes, loading ctypes/cffi, raising rlimits, and
Python-level file access outside the allowed directories. An audit hook is not a security boundary (C code
such as DuckDB's or Arrow's file readers does not pass through it); it is the only file/network layer left
when neither Landlock nor the uid drop is available, and elsewhere it refuses first, with a clearer message.
"""

from __future__ import annotations

import os
import socket
import sys
import types
from typing import Any

from .paths import WRITABLE_DEVICES


class SandboxRefusal(PermissionError):
    """Raised by the audit hook: the sandbox does not allow this operation."""

    # user code sees it in its tracebacks, which name a class of __main__ without its module: "SandboxRefusal:
    # …", as when the worker was a single script
    __module__ = "__main__"


BLOCKED_EVENTS = frozenset(
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
BLOCKED_IMPORTS = frozenset(
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
WRITE_EVENTS = {
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

HOOK_SOURCE = """
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


def install_audit_hook(workdir: str, read_roots: tuple[str, ...], violations: list[str]) -> None:
    """Build the hook from source with its allow-lists as constants (harder to tamper with), then arm it."""
    namespace: dict[str, Any] = {
        "BLOCKED": BLOCKED_EVENTS,
        "BLOCKED_IMPORTS": BLOCKED_IMPORTS,
        "WRITE_EVENTS": types.MappingProxyType(dict(WRITE_EVENTS)),
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
    exec(compile(HOOK_SOURCE, "<sandbox-audit-hook>", "exec"), namespace)  # noqa: S102 - our own constant source
    sys.addaudithook(namespace["hook"])
