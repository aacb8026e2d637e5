"""run_python's supervisor (tools/sandbox/supervisor.py): the template reports the isolation layers it
enforces, and working directories of dead servers are removed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from flexsql.tools.sandbox.isolation import detect_isolation
from flexsql.tools.sandbox.supervisor import get_sandbox

pytestmark = pytest.mark.integration


def test_template_reports_what_it_enforces():
    info = get_sandbox().start()
    assert info["threads"] == 1  # forking is only safe from a single-threaded template
    iso = get_sandbox().isolation()
    detected = detect_isolation()
    assert iso.landlock_abi == detected.landlock_abi and iso.uid == detected.uid
    assert iso.network_namespace == detected.network_namespace and iso.seccomp == detected.seccomp


def test_working_directories_of_dead_servers_are_removed(tmp_path):
    import tempfile

    from flexsql.tools.sandbox.supervisor import BASE_PREFIX, Sandbox

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    orphan = Path(tempfile.mkdtemp(prefix=BASE_PREFIX))
    (orphan / "owner.pid").write_text(dead.stdout.strip())
    (orphan / "call-x").mkdir()
    sandbox = Sandbox()
    try:
        sandbox.start()
        assert not orphan.exists()
        assert Path(sandbox.base).is_dir()  # its own, recorded with a live owner
    finally:
        sandbox.close()
