"""A grading directory with a size cap: a tmpfs of the grader's disk allowance mounted on it.

RLIMIT_FSIZE caps each file, not their sum: hostile code can write file after file until
the host's disk is full. bubblewrap binds the workspace and report from the grading
directory, so a size-capped tmpfs there caps everything the graded code can write (its /tmp
is a tmpfs of its own). Pages written there are also charged to the sandbox's memory cgroup.
Mounting needs CAP_SYS_ADMIN (root in a container often lacks it); without it the directory
stays uncapped and the grade says so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterator, Optional

from evalq.graders.sandbox.cleanup import remove_tree
from evalq.graders.sandbox.owner import owned_name
from evalq.graders.sandbox.privilege import mount_refused

log = logging.getLogger("evalq.grading")
SOURCE = "evalq-grade"
#: grading directories are named with the owning process (sandbox/owner.py)
DIR_PREFIX = "evalq-grade-"
MS_NOSUID, MS_NODEV = 2, 4
MNT_DETACH = 2
FULL_BELOW_BYTES = 1024 * 1024


@dataclass
class Scratch:
    """Where a grading happens; `capped` when its total size is limited, else `note` says why."""

    folder: Path
    capped: bool = False
    note: Optional[str] = None

    def full(self) -> bool:
        """Whether graded code used up the cap (so a missing report is the disk limit's doing)."""
        if not self.capped:
            return False
        stats = os.statvfs(self.folder)
        return stats.f_bavail * stats.f_frsize < FULL_BELOW_BYTES


@lru_cache(maxsize=1)
def _libc():
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
    libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    return libc


def mount_tmpfs(folder: Path, source: str, options: str) -> Optional[str]:
    """Mount a nosuid, nodev tmpfs named `source` with `options` on `folder`; None when it
    is mounted, else why not. Grading scratch and agent profiles both use it."""
    if _libc().mount(source.encode(), str(folder).encode(), b"tmpfs", MS_NOSUID | MS_NODEV,
                     options.encode()) != 0:
        return os.strerror(ctypes.get_errno())
    return None


def unmount(folder: Path) -> bool:
    """Detach the tmpfs on `folder` (what is in it goes with it); whether it was."""
    return _libc().umount2(str(folder).encode(), MNT_DETACH) == 0


@contextmanager
def grading_folder() -> Iterator[Path]:
    """A fresh directory named after this process, removed afterwards however deep a tree the
    graded code left in it (sandbox/cleanup.py); what cannot be removed is logged."""
    folder = Path(tempfile.mkdtemp(prefix=owned_name(DIR_PREFIX)))
    try:
        yield folder
    finally:
        left = remove_tree(folder)
        if left:
            log.warning("grading folder %s not fully removed: %s", folder, "; ".join(left))


@contextmanager
def size_capped(folder: Path, size_mb: int) -> Iterator[Scratch]:
    """Mount a tmpfs of `size_mb` on the empty `folder` for the block."""
    refused = mount_refused()
    if refused is not None:
        yield Scratch(folder, note=f"no total disk cap ({refused})")
        return
    why = mount_tmpfs(folder, SOURCE, f"size={int(size_mb)}m,mode=0711")
    if why is not None:
        yield Scratch(folder, note=f"no total disk cap (tmpfs mount failed: {why})")
        return
    try:
        yield Scratch(folder, capped=True)
    finally:
        unmount(folder)


@contextmanager
def uncapped(folder: Path, note: Optional[str] = None) -> Iterator[Scratch]:
    """For backends that limit disk their own way (or not at all: `note` says why)."""
    yield Scratch(folder, note=note)


def _capped_mounts() -> list[Path]:
    """Mount points of grading tmpfs mounts in this mount namespace."""
    found = []
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) > 4 and len(tail) > 1 and tail[0] == "tmpfs" and tail[1] == SOURCE:
                found.append(Path(fields[4].replace("\\040", " ")))
    return found


def sweep_mounts(max_age_seconds: float) -> int:
    """Unmount and remove grading tmpfs mounts whose grading process is gone or too old."""
    from evalq.graders.sandbox.owner import orphaned

    removed = 0
    now = time.time()
    for mount in _capped_mounts():
        try:
            age = now - mount.stat().st_mtime
        except OSError:
            age = 0.0
        if not orphaned(mount.name, DIR_PREFIX, age, max_age_seconds):
            continue
        if unmount(mount):
            removed += 1
            remove_tree(mount)
    return removed


def sweep_folders(max_age_seconds: float) -> int:
    """Remove grading folders in the temp dir whose grading process is gone or too old (an
    uncapped folder of a killed worker holds whatever the graded code wrote, on the host's disk)."""
    from evalq.graders.sandbox.owner import orphaned

    removed = 0
    now = time.time()
    base = Path(tempfile.gettempdir())
    for folder in base.glob(f"{DIR_PREFIX}*"):
        try:
            age = now - folder.lstat().st_mtime
        except OSError:
            continue
        if folder.is_dir() and not folder.is_symlink() and \
                orphaned(folder.name, DIR_PREFIX, age, max_age_seconds) and \
                not remove_tree(folder):
            removed += 1
    return removed
