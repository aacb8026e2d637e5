"""The distribution installs one import package, `flexsql`, with every subpackage and its data files,
and works from a non-editable install in a clean virtual environment."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.support.paths import ROOT

pytestmark = pytest.mark.integration

# the folders setup.py maps to flexsql.* (kept in sync with it: a folder missing here fails below)
FOLDERS = {
    "flexsql": "flexsql",
    "server": "flexsql/server",
    "tools": "flexsql/tools",
    "prompts": "flexsql/prompts",
    "skills": "flexsql/skills",
    "agent": "flexsql/agent",
    "evals": "flexsql/evals",
}

# what a build reads besides the package folders
BUILD_FILES = ("pyproject.toml", "setup.py", "README.md")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built from a copy of the checkout: setuptools writes build/ and *.egg-info beside the
    sources, which must land in a temporary directory, not in the checkout (where a second run, or two
    at once, would find or collide with them)."""
    source = tmp_path_factory.mktemp("source")
    for name in BUILD_FILES:
        shutil.copy2(ROOT / name, source / name)
    for folder in FOLDERS:
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return next(out.glob("flexsql-*.whl"))


def test_wheel_has_only_the_flexsql_package_and_ships_data(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.startswith("flexsql-")}
    assert top == {"flexsql"}, top
    for expected in (
        "flexsql/py.typed",
        "flexsql/tools/sql/guard.py",
        "flexsql/tools/engines/duckdb_source.py",
        "flexsql/server/cli.py",
        "flexsql/prompts/plan.md",
        "flexsql/evals/__init__.py",
    ):
        assert expected in names, expected
    assert any(n.startswith("flexsql/skills/") and n.endswith("/SKILL.md") for n in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "flexsql = flexsql.server.entry:run" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_wheel_ships_every_python_file_of_every_package_folder(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = []
    for folder, package_path in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            inside = f"{package_path}/{path.relative_to(ROOT / folder).as_posix()}"
            if inside not in names:
                missing.append(inside)
    assert not missing, f"not in the wheel: {missing}"
    mapped = set(FOLDERS)
    setup_roots = (ROOT / "setup.py").read_text()
    for folder in mapped - {"flexsql"}:
        assert f'"{folder}"' in setup_roots, f"setup.py does not map {folder}/"


@pytest.mark.integration
def test_non_editable_install_in_a_clean_venv_runs_the_cli(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            "-q",
            str(wheel),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    # the dependencies come from this environment, added as a plain path (not a site dir), so its
    # editable flexsql finder is NOT loaded: only the wheel's flexsql can be imported
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(purelib, "flexsql_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEXSQL_", "PYTHON"))}
    env["FLEXSQL_CACHE_DIR"] = str(tmp_path / "cache")
    run_dir = tmp_path / "elsewhere"
    run_dir.mkdir()
    where = subprocess.run(
        [
            str(python),
            "-c",
            "import flexsql.tools.sql.guard as g, flexsql.agent as a; print(g.__file__); print(a.__file__)",
        ],
        cwd=run_dir,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert str(ROOT) not in where and all(line.startswith(purelib) for line in where.split()), where
    version = subprocess.run(
        [str(venv / "bin" / "flexsql"), "--version"],
        cwd=run_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert version.returncode == 0 and "0." in version.stdout, version.stderr
    call = subprocess.run(
        [str(venv / "bin" / "flexsql"), "call", "list_sources"],
        cwd=run_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert call.returncode == 0, call.stderr[-2000:]
    assert "demo" in call.stdout and "duckdb" in call.stdout, call.stdout


@pytest.mark.parametrize("package, needed_by", [("sqlglot", "fakesnow"), ("python-dateutil", "botocore")])
def test_a_plain_install_and_the_dev_extra_pick_the_same_versions(package: str, needed_by: str) -> None:
    """Was: `pip install -e '.[dev]'` downgraded sqlglot (fakesnow pins it) and python-dateutil (botocore
    caps it), so the tests ran other versions than users get: the runtime pins lie within the dev ones."""
    import importlib.metadata as metadata
    import tomllib

    from packaging.requirements import Requirement
    from packaging.version import Version

    ours = next(
        Requirement(r)
        for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
        if Requirement(r).name == package
    )
    try:
        theirs = next(
            Requirement(r)
            for r in metadata.requires(needed_by) or []
            if Requirement(r).name == package and not Requirement(r).marker
        )
    except metadata.PackageNotFoundError:
        pytest.skip(f"{needed_by} is not installed (pip install -e '.[dev]')")
    installed = Version(metadata.version(package))
    assert installed in ours.specifier and installed in theirs.specifier
    # every release a plain install could pick next is one the dev extra allows too
    for bump in (f"{installed.major}.{installed.minor}.{installed.micro + 1}", f"{installed.major}.{installed.minor + 1}.0",
                 f"{installed.major + 1}.0.0"):  # fmt: skip
        assert (Version(bump) in ours.specifier) <= (Version(bump) in theirs.specifier), (package, bump)
