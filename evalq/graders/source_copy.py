"""The judge's copy of the agent's workspace, taken before any of the agent's code runs.

Static checks of the agent's source (a leftover copy of a function, an AST rule) read this
copy, in the judge (evalq_judge.source_text): read in the subject, through `inspect` or
`open`, they saw whatever the agent's code, loaded first, chose to show; read live, they
would see files that code rewrote at import. Only regular files are copied (no links, so
nothing points out of the copy), smallest first, within the caps below: a file left out is
missing from the copy, and a check that needs it fails (the agent's doing, never the grader's).
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from pathlib import Path

#: the copy's name in the grading folder
SOURCE_DIR = "source"
#: caps of the copy: each file, all of them, how many, and how many entries are looked at
MAX_FILE_BYTES = 1024 * 1024
MAX_TOTAL_BYTES = 16 * 1024 * 1024
MAX_FILES = 5000
MAX_SEEN = 50_000
#: errors that mean the grading's disk is full: the copy stops there
DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def regular_files(root: Path) -> list[tuple[int, str]]:
    """(size, relative path) of the regular files under root, links not followed, at most
    MAX_SEEN entries looked at; iterative, since a tree may be deeper than the recursion limit."""
    found: list[tuple[int, str]] = []
    stack, seen = [root], 0
    while stack and seen < MAX_SEEN:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                stack.append(Path(entry.path))
            elif stat.S_ISREG(info.st_mode) and info.st_size <= MAX_FILE_BYTES:
                found.append((info.st_size, Path(entry.path).relative_to(root).as_posix()))
    return found


def copy_source(workdir: Path, grading: Path) -> Path:
    """Copy the workspace's regular files into grading/SOURCE_DIR, smallest first within the
    caps; readable by every sandbox user, writable by none. Returns the copy."""
    dest = grading / SOURCE_DIR
    dest.mkdir(mode=0o755)
    os.chmod(dest, 0o755)
    total = count = 0
    for size, rel in sorted(regular_files(workdir)):
        if count >= MAX_FILES or total + size > MAX_TOTAL_BYTES:
            break
        target = dest / rel
        try:
            _make_parents(dest, target.parent)
            shutil.copyfile(workdir / rel, target, follow_symlinks=False)
            os.chmod(target, 0o644)
        except OSError as exc:
            if exc.errno in DISK_FULL:
                break
            continue  # changed under the copy (nothing of the agent's runs yet): left out
        total, count = total + size, count + 1
    return dest


def _make_parents(root: Path, folder: Path) -> None:
    missing = []
    while folder != root and not folder.is_dir():
        missing.append(folder)
        folder = folder.parent
    for made in reversed(missing):
        made.mkdir(mode=0o755)
        os.chmod(made, 0o755)
