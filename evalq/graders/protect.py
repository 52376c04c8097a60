"""The grader's own files: put back as the fixture shipped them before the hidden tests run.

An agent that cannot solve a task can still try to make its grader say it did: a conftest.py
whose hook marks every test passed, a pytest.ini that deselects the hidden tests, a file
planted where the hidden tests will be copied. That is the cheapest reward hack there is, and
SWE-bench's harness answers it the same way, by resetting the test files before grading.

Two rules, applied to the fresh copy of the final workspace:
- every top-level path the hidden tests occupy belongs to the grader: whatever the agent put
  there is removed before the hidden tests are copied in;
- every file matching one of the fixture's protected patterns (`grade.protected`, or the
  defaults of its toolchain) is restored from the fixture's workspace, or removed when the
  fixture has no such file.

What was reset is returned, so the grade's reason records it. This closes the cheap routes,
not all of them: code the tests import runs in the runner's process and can still tamper with
it (README, "Sandboxes").
"""

from __future__ import annotations

import fnmatch
import shutil
from pathlib import Path, PurePosixPath
from typing import Sequence

from evalq.digest import tree_files

#: Files that configure the test runner, per toolchain, when a fixture names none.
DEFAULT_PROTECTED: dict[str, tuple[str, ...]] = {
    "python": ("conftest.py", "pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini",
               "setup.cfg"),
}


def protected_patterns(toolchain: str, declared: Sequence[str] | None) -> tuple[str, ...]:
    return tuple(declared) if declared is not None else DEFAULT_PROTECTED.get(toolchain, ())


def matches(rel: str, patterns: Sequence[str]) -> bool:
    """A pattern without "/" matches a file name at any depth; one with "/" the whole path."""
    name = PurePosixPath(rel).name
    return any(fnmatch.fnmatchcase(rel if "/" in p else name, p) for p in patterns)


def reset_grader_files(workdir: Path, original: Path, hidden: Path,
                       patterns: Sequence[str]) -> list[str]:
    """Apply both rules to `workdir`; returns one note per path that had to change."""
    notes: list[str] = []
    for entry in sorted(hidden.iterdir()):
        target = workdir / entry.name
        if target.is_dir():
            shutil.rmtree(target)
            notes.append(f"{entry.name}/ (the hidden tests' place: removed)")
        elif target.exists():
            target.unlink()
            notes.append(f"{entry.name} (the hidden tests' place: removed)")
    if not patterns:
        return notes
    shipped = {p.relative_to(original).as_posix(): p for p in tree_files(original)
               if matches(p.relative_to(original).as_posix(), patterns)}
    present = {p.relative_to(workdir).as_posix(): p for p in tree_files(workdir)
               if matches(p.relative_to(workdir).as_posix(), patterns)}
    for rel in sorted(set(shipped) | set(present)):
        target = workdir / rel
        if rel not in shipped:
            target.unlink()
            notes.append(f"{rel} (added by the agent: removed)")
        elif rel not in present or target.read_bytes() != shipped[rel].read_bytes():
            how = "changed" if rel in present else "deleted"
            _make_parents(workdir, PurePosixPath(rel).parent)
            shutil.copy2(shipped[rel], target)
            notes.append(f"{rel} ({how} by the agent: restored)")
    return notes


def _make_parents(workdir: Path, rel_dir: PurePosixPath) -> None:
    """Create rel_dir under workdir, removing any file the agent left where a directory goes."""
    current = workdir
    for part in rel_dir.parts:
        current = current / part
        if current.exists() and not current.is_dir():
            current.unlink()
        current.mkdir(exist_ok=True)
