"""The sandbox worker (tools/sandbox/worker/, started by tools/sandbox/launch.py): it imports nothing of
flexsql, and loads in an isolated interpreter with every module imported before the fork."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from flexsql.tools.sandbox.launch import WORKER_MAIN

# what the worker may import besides the standard library, and only inside functions
WORKER_THIRD_PARTY = {"numpy", "pandas", "pyarrow", "duckdb"}


def test_the_worker_imports_nothing_of_flexsql():
    """Every module of the worker package imports the standard library, its sibling modules (relative
    imports), and pandas & co: nothing of flexsql, nothing that could reach a source or a credential."""
    import ast

    modules = sorted(WORKER_MAIN.parent.glob("*.py"))
    assert len(modules) >= 8
    for path in modules:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or top in WORKER_THIRD_PARTY, f"{path.name}: {name}"


@pytest.mark.integration
def test_the_worker_loads_in_an_isolated_interpreter_with_every_module_before_the_fork():
    """As the template starts (-I -S -B: the standard library alone on sys.path), the package loads from
    its directory, and importing zygote.py imports every module of it, so a child never reads the worker's
    files; nothing of flexsql and none of pandas & co is imported at that point."""
    import sys

    probe = (
        "import json, runpy, sys\n"
        f"entry = runpy.run_path({str(WORKER_MAIN)!r}, run_name='probe')\n"
        "entry['load_package']()\n"
        "__import__(entry['PACKAGE'] + '.zygote')\n"
        "print(json.dumps([entry['PACKAGE'], sys.path, sorted(sys.modules)]))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-B", "-c", probe], capture_output=True, text=True, env={}, timeout=60
    )
    assert done.returncode == 0, done.stderr
    package, path, loaded = json.loads(done.stdout)
    assert not any(str(WORKER_MAIN.parent.parent) in entry for entry in path)
    modules = {p.stem for p in WORKER_MAIN.parent.glob("*.py")} - {"__init__", "__main__"}
    assert {f"{package}.{name}" for name in modules} <= set(loaded)
    assert not [name for name in loaded if name.split(".")[0] in {"flexsql", *WORKER_THIRD_PARTY}]
