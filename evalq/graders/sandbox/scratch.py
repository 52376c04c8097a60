"""A grading directory with a size cap: a tmpfs of the grader's disk allowance mounted on it.

RLIMIT_FSIZE caps each file, not their sum: hostile code can write file after file until
the host's disk is full. bubblewrap binds the workspace and report from the grading
directory, so a size-capped tmpfs there caps everything the graded code can write (its /tmp
is a tmpfs of its own). Pages written there are also charged to the sandbox's memory cgroup.
Mounting needs root; without it the directory stays uncapped and the grade says so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterator, Optional

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


@contextmanager
def size_capped(folder: Path, size_mb: int) -> Iterator[Scratch]:
    """Mount a tmpfs of `size_mb` on the empty `folder` for the block."""
    if os.geteuid() != 0:
        yield Scratch(folder, note="no total disk cap (needs root to mount a tmpfs)")
        return
    options = f"size={int(size_mb)}m,mode=0711".encode()
    target = str(folder).encode()
    if _libc().mount(b"evalq-grade", target, b"tmpfs", MS_NOSUID | MS_NODEV, options) != 0:
        why = os.strerror(ctypes.get_errno())
        yield Scratch(folder, note=f"no total disk cap (tmpfs mount failed: {why})")
        return
    try:
        yield Scratch(folder, capped=True)
    finally:
        _libc().umount2(target, MNT_DETACH)


@contextmanager
def uncapped(folder: Path) -> Iterator[Scratch]:
    """For backends that limit disk their own way (or not at all: README says which)."""
    yield Scratch(folder)
