"""The import contract: layers depend only on the layers below them, and no modules form a cycle.

Every import counts, including those inside functions (a function-level import is how a cycle hides)
and those under `if TYPE_CHECKING:` for the layer order (a type from a layer above is still a
dependency on it). Only type-checking imports are left out of the cycle check: they never run.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

from tests.support.paths import ROOT

# the repository's folders and the packages they install as (setup.py's ROOTS)
FOLDERS = {
    "flexsql": "flexsql",
    "tools": "flexsql.tools",
    "agent": "flexsql.agent",
    "prompts": "flexsql.prompts",
    "evals": "flexsql.evals",
    "server": "flexsql.server",
    "skills": "flexsql.skills",
}
# lowest first; a module belongs to the first layer with a prefix that matches it
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "core",
        (
            "flexsql.config",
            "flexsql.errors",
            "flexsql.paths",
            "flexsql.plural",
            "flexsql.background",
            "flexsql.handles",
            "flexsql.surrogates",
            "flexsql.demo_db",
            "flexsql",
        ),
    ),
    ("sql", ("flexsql.tools.sql",)),
    ("engines", ("flexsql.tools.engines",)),
    ("runtime", ("flexsql.tools.runtime",)),
    # the knowledge store's files (tools/knowledge/store.py): search reads its synonyms and descriptions
    ("knowledge store", ("flexsql.tools.knowledge.store",)),
    ("search/values/sandbox", ("flexsql.tools.search", "flexsql.tools.values", "flexsql.tools.sandbox")),
    ("tools", ("flexsql.tools",)),
    ("agent", ("flexsql.agent", "flexsql.prompts")),
    ("evals", ("flexsql.evals",)),
    ("server", ("flexsql.server", "flexsql.skills")),
]


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = [p for p in path.relative_to(ROOT / folder).with_suffix("").parts if p != "__init__"]
            found[".".join([package, *parts])] = path
    return found


def layer_of(module: str) -> int:
    for index, (_, prefixes) in enumerate(LAYERS):
        # the bare `flexsql` package is core; its subpackages have layers of their own
        if any(module == p or (p != "flexsql" and module.startswith(p + ".")) for p in prefixes):
            return index
    raise AssertionError(f"{module} is in no layer: add it to LAYERS")


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


@functools.cache
def _parsed(path: Path) -> tuple[ast.Module, frozenset[int]]:
    """A module's syntax tree and its TYPE_CHECKING lines, read once for all the tests here."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return tree, frozenset(_type_checking_lines(tree))


def imports(module: str, path: Path, known: dict[str, Path]) -> Iterator[tuple[str, int, bool]]:
    """(imported flexsql module, line, only for type checking) for every import in the file."""
    tree, typing_only = _parsed(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        for target in targets:
            if target.startswith("flexsql"):
                while target not in known and "." in target:  # `import flexsql.x.y` names attributes too
                    target = target.rpartition(".")[0]
                if target != module:
                    yield target, node.lineno, node.lineno in typing_only


def test_every_import_goes_down_the_layers() -> None:
    known = modules()
    upward = []
    for module, path in known.items():
        mine = layer_of(module)
        for target, line, _ in imports(module, path, known):
            theirs = layer_of(target)
            if theirs > mine:
                upward.append(
                    f"{path.relative_to(ROOT)}:{line}: {module} ({LAYERS[mine][0]}) imports "
                    f"{target} ({LAYERS[theirs][0]})"
                )
    order = " < ".join(name for name, _ in LAYERS)
    assert not upward, f"imports against the layer order {order}:\n" + "\n".join(upward)


def test_no_import_cycles() -> None:
    known = modules()
    graph = {
        m: sorted({t for t, _, typing in imports(m, p, known) if not typing and not m.startswith(t + ".")})
        for m, p in known.items()
    }
    # a package's __init__ importing its own submodules is how a package exports: not a cycle
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_contract_sees_a_wrong_way_import(tmp_path: Path) -> None:
    """Positive control: an engine module importing the agent is reported."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from flexsql.agent import pipeline\n")
    found = list(
        imports("flexsql.tools.engines.probe", probe, {**modules(), "flexsql.tools.engines.probe": probe})
    )
    assert ("flexsql.agent.pipeline", 2, False) in found
    assert layer_of("flexsql.agent.pipeline") > layer_of("flexsql.tools.engines.probe")
