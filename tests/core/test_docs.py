"""The documentation that ships with the repository: generated parts current, no reference to a file
a clone lacks, and every repository path the README and docs/ name exists."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

THIS = Path(__file__).resolve()
TEXT_SUFFIXES = {".py", ".md", ".toml", ".json"}
# Not the project's files: where the fallback walk (no git) must not look.
NOT_OURS = {
    ".git",
    ".venv",
    "venv",
    "build",
    "dist",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    ".hypothesis",
}

# Files that exist only beside a developer's checkout (../shared), never in a clone. docs/ holds the
# project's own versions (docs/contract.md, docs/scoring.md), so `docs/X.md` is not one of them.
MISSING_IN_CLONE = re.compile(r"(?<!docs/)\b(?:DESIGN|ANCHORS|SCORING)\.md\b|\.\./shared\b|/shared/")
# Real public benchmark data (Spider, Spider 2.0, CoSQL) lives in ../shared/data on the developers'
# machines, so a benchmark script may name it as the default of its --data option; it is data a
# run reads when present, not a document the code relies on.
BENCHMARK_DATA = "../shared/data"

CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)")
# A backtick fence's info string holds no backtick: "```` ```sql ````" starting a line is inline code.
FENCED_BLOCK = re.compile(
    r"^(?P<fence>`{3,}(?=[^`\n]*$)|~{3,})[^\n]*\n.*?^(?P=fence)[ \t]*$", re.DOTALL | re.MULTILINE
)
LINK = re.compile(r"\]\(([^)\s]+)\)")
PATH_LIKE = re.compile(r"[\w.-]+/(?:[\w.*-]+/?)*")


def _project_files() -> list[Path]:
    """Tracked files plus new ones not ignored (what the next commit can hold), as they are now."""
    try:
        listing = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        paths = [ROOT / name for name in listing]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout (an unpacked sdist)
        paths = [p for p in ROOT.rglob("*") if not NOT_OURS & set(p.relative_to(ROOT).parts)]
    return [p for p in paths if p.suffix in TEXT_SUFFIXES and p.is_file()]


def _missing_file_references(path: Path) -> list[str]:
    relative = path.relative_to(ROOT).as_posix()
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if relative.startswith("benchmarks/"):
            line = line.replace(BENCHMARK_DATA, "")
        found += [
            f"{relative}:{number}: {m.group(0)!r} in {line.strip()[:120]!r}"
            for m in MISSING_IN_CLONE.finditer(line)
        ]
    return found


def _documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _top_level() -> set[str]:
    return {p.name for p in ROOT.iterdir()} - NOT_OURS


def _mentioned_paths(text: str) -> set[str]:
    """Backticked repository paths outside code blocks: `agent/contract.py`, `prompts/*.md`. A span
    whose first part is not a top-level entry of the repository (`exec_result/`, `.claude/skills`) is
    a user's path, not ours."""
    prose = FENCED_BLOCK.sub("", text)
    paths = set()
    for match in CODE_SPAN.finditer(prose):
        span = match.group(2).strip().removeprefix("./")
        if PATH_LIKE.fullmatch(span) and span.split("/")[0] in _top_level():
            paths.add(span.rstrip("/"))
    return paths


@pytest.mark.integration
def test_generated_parts_are_current() -> None:
    # in a fresh interpreter: click caches each command's help option on first use, so a command
    # another test ran on its own would render `--help` where `flexsql … --help` prints `-h, --help`
    check = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "generate.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 0, (
        "generated docs are stale (run `python docs/generate.py`):\n" + check.stdout + check.stderr
    )


@pytest.mark.integration
def test_no_reference_to_files_a_clone_lacks() -> None:
    # this file is left out: its patterns spell the very names it looks for
    found = [ref for path in _project_files() if path != THIS for ref in _missing_file_references(path)]
    assert not found, (
        "these lines name files a clone does not have (point them at docs/ instead):\n" + "\n".join(found)
    )


def test_paths_the_docs_mention_exist() -> None:
    missing = []
    for doc in _documents():
        text = doc.read_text(encoding="utf-8")
        for mentioned in sorted(_mentioned_paths(text)):
            if not any(ROOT.glob(mentioned)):
                missing.append(f"{doc.relative_to(ROOT)}: `{mentioned}`")
        for target in LINK.findall(FENCED_BLOCK.sub("", text)):
            local = target.split("#")[0]
            if local and "://" not in local and not (doc.parent / local).exists():
                missing.append(f"{doc.relative_to(ROOT)}: link ({target})")
    assert not missing, "the docs name paths that do not exist:\n" + "\n".join(missing)


def test_mentioned_paths_are_recognised() -> None:
    # The path check must see real mentions and pass over a user's paths, or it proves nothing.
    text = "See `agent/contract.py`, `prompts/*.md`, `./benchmarks/`, `.claude/skills`, `exec_result/`.\n"
    text += "```toml\n`tools/not_here.py`\n```\n"
    assert _mentioned_paths(text) == {"agent/contract.py", "prompts/*.md", "benchmarks"}
