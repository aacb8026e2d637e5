"""Import flexsql from another checkout: a benchmark measures "before" in the same run as "after".

`use_checkout(DIR)` makes `import flexsql` (and every `flexsql.*` subpackage, mapped to its folder as
setup.py's ROOTS map them) resolve to the checkout in DIR instead of the installed one; call it before
the first flexsql import, in a child process of its own. A benchmark's `--baseline DIR` (a worktree of
the commit to compare with: `git worktree add --detach /tmp/base main`) runs its measurement there.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOTS = {
    "flexsql": "flexsql",
    "flexsql.server": "server",
    "flexsql.tools": "tools",
    "flexsql.prompts": "prompts",
    "flexsql.skills": "skills",
    "flexsql.agent": "agent",
    "flexsql.evals": "evals",
}


class _Checkout(importlib.abc.MetaPathFinder):
    def __init__(self, root: Path) -> None:
        self.root = root

    def find_spec(self, fullname: str, path: Any = None, target: ModuleType | None = None) -> Any:
        parent = fullname.rpartition(".")[0]
        if fullname not in ROOTS and parent in ROOTS:  # a root's own modules: from the checkout too
            return importlib.machinery.PathFinder.find_spec(fullname, [str(self.root / ROOTS[parent])])
        if fullname not in ROOTS:
            return None  # deeper modules are found under their parent's folder
        folder = self.root / ROOTS[fullname]
        return importlib.util.spec_from_file_location(
            fullname, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )


def use_checkout(root: str | Path) -> None:
    """Resolve flexsql from the checkout at `root` (before anything imported it)."""
    if any(name == "flexsql" or name.startswith("flexsql.") for name in sys.modules):
        raise RuntimeError("flexsql is already imported: use_checkout must run first")
    sys.meta_path.insert(0, _Checkout(Path(root).resolve()))


__all__ = ["use_checkout"]
