"""Laying one file tree over another: reference solutions, hidden tests, fixture workspaces.

Kept free of pydantic and the rest of evalq so the scripted agent's process starts fast.
An overlay may hold `.evalq-delete`: one workspace path per line to remove.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from evalq.digest import tree_files
from evalq.errors import UserError

DELETE_LIST = ".evalq-delete"


def copy_tree(src: Path, dest: Path) -> None:
    """Copy regular files and directories only, keeping the executable bit."""
    for file in tree_files(src):
        target = dest / file.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(file, target)


def apply_overlay(overlay: Path, workspace: Path) -> list[str]:
    """Write an overlay's files over a workspace and delete what its delete list names."""
    changed: list[str] = []
    deletions = overlay / DELETE_LIST
    for file in tree_files(overlay, exclude=[DELETE_LIST]):
        rel = file.relative_to(overlay)
        target = workspace / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(file, target)
        changed.append(rel.as_posix())
    if deletions.is_file():
        for line in deletions.read_text().splitlines():
            rel = line.strip()
            if not rel or rel.startswith("#"):
                continue
            target = (workspace / rel).resolve()
            if workspace.resolve() not in target.parents:
                raise UserError(f"delete list names a path outside the workspace: {rel}",
                                file=deletions)
            if target.is_file():
                target.unlink()
                changed.append(rel)
    return changed
