"""Walking a directory tree an agent built: no recursion, no symlink followed, bounded depth.

os.walk and Path.rglob recurse (a 1,500-deep tree raises RecursionError) and build paths that
a deep tree makes longer than the kernel accepts. This walk is iterative and depth first with
sorted names (the same tree, the same order); it does not descend below `max_depth` levels
or into names longer than `max_name_chars`, and yields such directories flagged `cut`.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

MAX_DEPTH = 64
MAX_NAME_CHARS = 1024


@dataclass(frozen=True)
class Entry:
    """One entry: its name relative to the root (posix), its path, its lstat or why not."""

    name: str
    path: str
    depth: int
    st: Optional[os.stat_result] = None
    error: Optional[str] = None
    #: a directory the walk did not enter (too deep, or its name too long)
    cut: bool = False

    @property
    def is_dir(self) -> bool:
        return self.st is not None and stat.S_ISDIR(self.st.st_mode)

    @property
    def is_regular(self) -> bool:
        return self.st is not None and stat.S_ISREG(self.st.st_mode)


def walk(root: Path | str, max_depth: int = MAX_DEPTH,
         max_name_chars: int = MAX_NAME_CHARS) -> Iterator[Entry]:
    """Every entry under root (not root itself); an unreadable directory is yielded with
    `error` set instead of its contents."""
    stack: list[tuple[str, int]] = [("", 0)]
    root = os.fspath(root)
    while stack:
        rel, depth = stack.pop()
        here = os.path.join(root, rel) if rel else root
        try:
            with os.scandir(here) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            if rel:
                yield Entry(rel, here, depth, error=f"unreadable directory ({exc.strerror})")
            continue
        subdirs = []
        for item in entries:
            name = f"{rel}/{item.name}" if rel else item.name
            try:
                st = item.stat(follow_symlinks=False)
            except OSError as exc:
                yield Entry(name, item.path, depth + 1, error=f"unreadable ({exc.strerror})")
                continue
            is_dir = stat.S_ISDIR(st.st_mode)
            cut = is_dir and (depth + 1 > max_depth or len(name) > max_name_chars)
            yield Entry(name, item.path, depth + 1, st=st, cut=cut)
            if is_dir and not cut:
                subdirs.append((name, depth + 1))
        stack.extend(reversed(subdirs))
