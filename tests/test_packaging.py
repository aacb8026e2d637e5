"""The distribution installs one import package, `flexsql`, with its data files."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_has_only_the_flexsql_package_and_ships_data(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path),
                    str(ROOT)], check=True, capture_output=True, timeout=300)
    wheel = next(tmp_path.glob("flexsql-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.startswith("flexsql-")}
    assert top == {"flexsql"}, top
    for expected in ("flexsql/py.typed", "flexsql/tools/guard.py", "flexsql/tools/sources/duckdb_source.py",
                     "flexsql/server/cli.py", "flexsql/prompts/plan.md", "flexsql/evals/__init__.py"):
        assert expected in names, expected
    assert any(n.startswith("flexsql/skills/") and n.endswith("/SKILL.md") for n in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "flexsql = flexsql.server.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
