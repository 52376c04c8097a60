"""Reading, from the worker's side, a file that sandboxed code could write.

Everything below a run's root was the agent's to shape: any folder on the way may be a
symlink to a host path (the hidden tests, the results database, /etc), the file itself a
symlink, a FIFO (a plain read blocks the worker for ever), or far larger than anything evalq
keeps. So the path is opened one component at a time from the root, never following a link,
the file non-blocking, and only a regular file of at most `limit` bytes is read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Optional

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def read_left(root: Path | str, path: Path | str, limit: int) -> Optional[bytes]:
    """The bytes of `path` (inside `root`, which evalq made) when it is a regular file of at
    most `limit` bytes reached through real folders only; None otherwise (absent, a link
    anywhere on the way, a FIFO, socket or device, too large, unreadable)."""
    rel = Path(os.path.abspath(path)).relative_to(os.path.abspath(root))
    if not rel.parts:
        return None
    try:
        fd = os.open(root, _DIR)
    except OSError:
        return None
    try:
        for part in rel.parts[:-1]:
            inner = os.open(part, _DIR, dir_fd=fd)
            os.close(fd)
            fd = inner
        file_fd = os.open(rel.parts[-1], _FILE, dir_fd=fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    with os.fdopen(file_fd, "rb") as handle:
        st = os.fstat(file_fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        data = handle.read(limit + 1)
    return data if len(data) <= limit else None
