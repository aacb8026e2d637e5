"""Is a process tree still working? Read from the threads' scheduler states in /proc, not from CPU
seconds: a thread at work is runnable (state R: on a CPU or waiting for one) however loaded the
machine is, while CPU seconds in a time window shrink under load and grow with any other work.

    assert await steadily(server.pid, busy=False), "the call went on after the client left"
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

import anyio


def _stat(path: str) -> list[str]:
    """The fields of a /proc stat file after the command name: state, ppid, …"""
    return Path(path, "stat").read_text().rsplit(")", 1)[1].split()


def _tree(root: int) -> list[int]:
    """`root` and every process under it."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                children.setdefault(int(_stat(f"/proc/{entry}")[1]), []).append(int(entry))
    tree, todo = [], [root]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo += children.get(current, [])
    return tree


def runnable_threads(root: int, *, itself: bool = True) -> int:
    """Threads of `root`'s process tree (with `itself=False`, of the processes under it only) that are
    running or waiting for a CPU. The calling thread does not count."""
    me = (os.getpid(), threading.get_native_id())
    runnable = 0
    for pid in _tree(root)[(0 if itself else 1) :]:
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{pid}/task"):
                if (pid, int(task)) == me:
                    continue
                with contextlib.suppress(OSError):
                    runnable += _stat(f"/proc/{pid}/task/{task}")[0] == "R"
    return runnable


async def steadily(
    root: int, busy: bool, *, itself: bool = True, within_s: float = 60.0, readings: int = 10
) -> bool:
    """Whether `readings` readings in a row, 50 ms apart, find `root`'s tree busy (a runnable thread
    in each) or idle (none in any) before `within_s` runs out. A query or program at work is runnable
    in every reading; an idle process almost never, and only for a moment."""
    deadline = time.monotonic() + within_s
    streak = 0
    while time.monotonic() < deadline:
        streak = streak + 1 if (runnable_threads(root, itself=itself) > 0) == busy else 0
        if streak >= readings:
            return True
        await anyio.sleep(0.05)
    return False
