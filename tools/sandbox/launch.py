"""How the template process is launched, so that nothing of the server reaches it.

    [unshare --net [--map-root-user]] python -I -S -B tools/sandbox/worker/__main__.py --zygote FD

- -I: the interpreter ignores PYTHON* variables and the user's site-packages, and does not put the script's
  directory on sys.path; -S: no `site`, so no .pth file runs (the path hook of an editable install to this
  checkout among them); -B: no bytecode is written. sys.path is then the standard library only, plus this
  interpreter's site-packages, which the template appends from the boot message to import pandas & co.
- The worker is a package (tools/sandbox/worker/) launched by its `__main__.py`, which loads its sibling
  modules from its own directory under a name of its own, without putting a folder on sys.path: the
  server side of the sandbox next to it stays out of reach, and every module of the worker imports only the
  standard library at import time (plus pandas, numpy, pyarrow and duckdb inside functions), nothing of
  flexsql (tests/tools/sandbox/test_worker.py checks this for every module).
- The environment is TEMPLATE_ENV alone: no credentials, tokens or connection details.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

WORKER_MAIN = Path(__file__).with_name("worker") / "__main__.py"
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


def template_command(prefix: list[str], ctrl_fd: int) -> list[str]:
    """The template's command line; `prefix` enters a network namespace (or is empty)."""
    return [*prefix, sys.executable, "-I", "-S", "-B", str(WORKER_MAIN), "--zygote", str(ctrl_fd)]


def site_paths() -> list[str]:
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
