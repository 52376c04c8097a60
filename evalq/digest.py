"""Canonical sha256 digests over directory trees and over JSON-able data."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Any, Iterable

from evalq.report.json_text import dumps
from evalq.errors import UserError


def tree_files(root: Path, exclude: Iterable[str] = ()) -> list[Path]:
    """Every regular file under root in POSIX-path order; symlinks and special files are refused."""
    excluded = set(exclude)
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if rel in excluded:
                continue
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                raise UserError("symbolic links are not allowed in a fixture", file=path,
                                fix="replace the link with a regular file")
            if stat.S_ISREG(mode):
                found.append(path)
            elif not stat.S_ISDIR(mode):
                raise UserError("only regular files and directories are allowed", file=path,
                                fix="remove the special file")
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def canonical_mode(mode: int) -> str:
    """Git keeps only the executable bit, so the digest does too (a clone must match)."""
    return "755" if mode & stat.S_IXUSR else "644"


def tree_digest(root: Path, exclude: Iterable[str] = ()) -> str:
    """sha256 over lines 'path NUL mode NUL sha256(content)' of every file, in path order."""
    outer = hashlib.sha256()
    for path in tree_files(root, exclude):
        rel = path.relative_to(root).as_posix()
        content = hashlib.sha256(path.read_bytes()).hexdigest()
        outer.update(f"{rel}\0{canonical_mode(path.stat().st_mode)}\0{content}\n".encode())
    return "sha256:" + outer.hexdigest()


def data_digest(data: Any) -> str:
    """sha256 of canonical JSON (sorted keys, no spaces) of plain data."""
    text = dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def combine(*digests: str) -> str:
    return data_digest(list(digests))
