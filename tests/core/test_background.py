"""flexsql/background.py: interpreter exit waits (bounded) for background builders, and tells them to stop."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROGRAM = """
import sys, threading, time
from pathlib import Path
from flexsql import background

done = Path(sys.argv[1])

def build():
    for _ in range(50):  # a builder's loop: stops at its next check once the process exits
        if background.exiting():
            done.write_text("stopped")
            return
        time.sleep(0.02)
    done.write_text("finished")

if sys.argv[2] == "background":
    background.start(build, name="flexsql-test-builder")
else:
    threading.Thread(target=build, daemon=True).start()
time.sleep(0.1)
"""


def _run(tmp_path: Path, how: str) -> tuple[int, str | None]:
    done = tmp_path / f"{how}.txt"
    proc = subprocess.run([sys.executable, "-c", PROGRAM, str(done), how], capture_output=True, timeout=60)
    return proc.returncode, done.read_text() if done.exists() else None


def test_exit_tells_a_background_builder_to_stop_and_waits_for_it(tmp_path: Path) -> None:
    assert _run(tmp_path, "background") == (0, "stopped")


def test_a_plain_daemon_thread_is_cut_off_at_exit(tmp_path: Path) -> None:
    # positive control: without background.start the builder never reaches its end
    assert _run(tmp_path, "daemon") == (0, None)
