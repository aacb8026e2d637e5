"""Package discovery for the folder-to-`flexsql.*` layout (the metadata is in pyproject.toml).

The top-level folders map to flexsql subpackages (server/ is flexsql.server, …), a mapping
setuptools' own `find` cannot express. Listing the packages by hand silently dropped every new
subpackage from the wheel (they still imported in an editable install), so they are discovered
here: every folder under a mapped root that holds Python files is a package. A new top-level
folder still needs a line in ROOTS, and tests/core/test_packaging.py fails until it has one."""

from __future__ import annotations

from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent

# import package -> folder (relative to this file); nothing generic is installed at top level
ROOTS = {
    "flexsql": "flexsql",
    "flexsql.server": "server",
    "flexsql.tools": "tools",
    "flexsql.prompts": "prompts",
    "flexsql.skills": "skills",
    "flexsql.agent": "agent",
    "flexsql.evals": "evals",
}


def discover() -> list[str]:
    packages: set[str] = set()
    for package, folder in ROOTS.items():
        root = HERE / folder
        for path in [root, *sorted(p for p in root.rglob("*") if p.is_dir())]:
            if "__pycache__" in path.parts or path.name.startswith("."):
                continue
            if path == root or any(path.glob("*.py")):
                rel = path.relative_to(root)
                packages.add(".".join([package, *rel.parts]) if rel.parts else package)
    return sorted(packages)


setup(package_dir=ROOTS, packages=discover())
