"""The package's shape: no import cycle among evalq's modules, and only shared modules at the top.

Imports are read with `ast`, so every import counts, including those inside functions: a cycle
hidden behind a lazy import is still a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "evalq"

#: shipped read-only into the judge's sandbox as its own package (`evalq_judge`): it imports
#: nothing of evalq, so it uses relative imports among its own modules
JUDGE_PACKAGE = ROOT / "graders" / "judge"

#: modules every part of the trial's path shares; anything else lives in a package
SHARED_TOP_LEVEL = {"__init__", "__main__", "artifacts", "config", "digest", "errors", "fileio",
                    "gcpause", "models", "plaintext", "pricing", "proc", "safe_read", "treewalk",
                    "unix_sockets", "urls"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in ROOT.rglob("*.py")}


def runtime_nodes(tree: ast.AST):
    """Every node except those under `if TYPE_CHECKING:` (annotations only, never executed)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and getattr(child.test, "id", None) == "TYPE_CHECKING":
                stack.extend(child.orelse)
                continue
            stack.append(child)


def imported(path: Path, known: dict[str, Path]) -> set[str]:
    """evalq modules that `path` imports (a package's __init__ counts when a name is not a module)."""
    found: set[str] = set()
    for node in runtime_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if JUDGE_PACKAGE in path.parents:
                continue
            assert node.level == 0, f"{path}: relative import (evalq uses absolute ones)"
            base = node.module or ""
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                     for alias in node.names]
        else:
            continue
        found.update(name for name in names if name in known)
    return found


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a list of modules (first == last), or None; iterative depth-first search."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(graph):
        if state.get(start):
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            step = next(stack[-1], None)
            if step is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(step) == 1:
                return path[path.index(step):] + [step]
            elif not state.get(step):
                state[step] = 1
                path.append(step)
                stack.append(iter(sorted(graph[step])))
    return None


def test_type_checking_imports_are_not_runtime_imports(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("from typing import TYPE_CHECKING\nimport evalq.b\n"
                      "if TYPE_CHECKING:\n    import evalq.c\n")
    assert imported(module, {"evalq.b": module, "evalq.c": module}) == {"evalq.b"}


def test_find_cycle_sees_a_cycle_and_its_absence():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_no_import_cycle_among_evalq_modules():
    known = modules()
    graph = {name: imported(path, known) - {name} for name, path in known.items()}
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_only_shared_modules_at_the_top_level():
    top = {p.stem for p in ROOT.glob("*.py")}
    assert top - SHARED_TOP_LEVEL == set(), "move these into the package of their step"


def test_the_judge_package_imports_nothing_of_evalq():
    """It runs in the judge's sandbox, where evalq is not installed."""
    for path in JUDGE_PACKAGE.glob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            assert not any(n.split(".")[0] == "evalq" for n in names), f"{path} imports evalq"
