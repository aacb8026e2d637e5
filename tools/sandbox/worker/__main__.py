"""Entry point of run_python's template process, started by the server (tools/sandbox/launch.py) as

    python -I -S -B <this directory>/__main__.py --zygote FD

and never imported by the server. The worker imports only the standard library plus pandas, numpy, pyarrow
and duckdb: nothing of flexsql that could reach a source, a connection string or a credential.

-I keeps the interpreter isolated (no PYTHON* variables, no user site-packages, and the script's directory is
not put on sys.path), -S runs no site hooks or .pth files, -B writes no bytecode. So this file loads the rest
of the worker package itself: from its own directory, under the name PACKAGE, without adding any folder to
sys.path (its parent folder holds the server side of the sandbox, which must stay out of reach). Every module
of the package imports only the standard library at import time, pandas & co inside functions, since the
site-packages that hold them are only added by the zygote once it has its boot message; and importing
zygote.py imports every module, before the first fork, so a child never needs to read the worker's files
(Landlock would not let it). tests/tools/sandbox/test_worker.py checks both.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types

PACKAGE = "sandbox_worker"


def load_package() -> types.ModuleType:
    """The worker package, imported from this directory under PACKAGE (see the module docstring)."""
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location(
        PACKAGE, os.path.join(here, "__init__.py"), submodule_search_locations=[here]
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"the sandbox worker package cannot be loaded from {here}")
    package = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = package
    spec.loader.exec_module(package)
    return package


# at module level rather than in a main(): user code runs a fixed number of frames below this one, and the
# recursion depth left to it stays what it was when the worker was a single script
if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--zygote":
        load_package()
        zygote = importlib.import_module(PACKAGE + ".zygote")
        sys.exit(zygote.zygote_main(int(sys.argv[2])))
    print(
        "usage: worker/__main__.py --zygote FD (started by flexsql's run_python, not by hand)",
        file=sys.stderr,
    )
    sys.exit(2)
