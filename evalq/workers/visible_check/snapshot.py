"""The workspace at the first visible check, copied while the agent is still running.

The copy is made by the worker, outside the sandbox, into a folder of its own that the agent
never sees, so nothing the agent does afterwards reaches it. Reading a live tree of a hostile
writer needs care a finished one does not: a folder may be swapped for a symlink between two
reads, and a path-based walk would then follow it out of the workspace (to the worker's own
files). So every folder is opened relative to its parent's descriptor with O_NOFOLLOW and every
file relative to its folder's: whatever the agent renames, the copy never leaves the folders
it opened. Only regular files (with one link) and folders travel, within the archive limits
(evalq.fixtures.archive); what is dropped is named. The tree may still mix moments of a
workspace the agent changes while it is copied: that is its own doing, and only its own
result can suffer from it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from evalq.fixtures.archive import MAX_ENTRIES, MAX_WORKSPACE_BYTES, WorkspaceTooLarge
from evalq.plaintext import escaped_name
from evalq.treewalk import MAX_DEPTH, MAX_NAME_CHARS

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
#: dropped entries named one by one (the rest are counted)
NAMED_DROPS = 50


def copy_live(workspace: Path, dest: Path, limit: int = MAX_WORKSPACE_BYTES) -> list[str]:
    """Copy the live `workspace` into the new folder `dest`; returns what was dropped and why.
    Raises WorkspaceTooLarge past `limit` bytes or MAX_ENTRIES entries, and OSError when the
    workspace itself is no longer a folder."""
    dest.mkdir(mode=0o700)
    drops: list[str] = []
    root = os.open(workspace, _DIR_FLAGS)
    # depth first; each frame: (its folder's descriptor, its copy, depth, names left)
    frames = [(root, dest, 0, sorted(os.listdir(root), reverse=True))]
    entries = total = 0
    try:
        while frames:
            fd, into, depth, names = frames[-1]
            if not names:
                os.close(fd)
                frames.pop()
                continue
            name = names.pop()
            entries += 1
            if entries > MAX_ENTRIES:
                raise WorkspaceTooLarge(f"workspace over {MAX_ENTRIES} entries")
            rel = into.relative_to(dest) / name
            why, child = _entry(fd, name, into, depth, len(str(rel)), limit - total)
            if isinstance(child, int):  # a folder, opened: walk it next
                frames.append((child, into / name, depth + 1,
                               sorted(os.listdir(child), reverse=True)))
            elif isinstance(child, (bytes, bytearray)):
                total += len(child)
            if why is not None and len(drops) < NAMED_DROPS:
                drops.append(f"{escaped_name(str(rel))[:200]}: {why}")
    finally:
        for fd, *_ in frames:
            os.close(fd)
    return drops


def _entry(fd: int, name: str, into: Path, depth: int, rel_chars: int, room: int):
    """(why it was dropped or None, an opened folder's descriptor / a file's bytes / None)."""
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except OSError as exc:
        return f"unreadable ({exc.strerror})", None
    if rel_chars > MAX_NAME_CHARS:
        return f"path over {MAX_NAME_CHARS} characters", None
    if stat.S_ISDIR(st.st_mode):
        if depth + 1 > MAX_DEPTH:
            return f"deeper than {MAX_DEPTH} levels", None
        try:
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            return f"replaced while copied ({exc.strerror})", None
        (into / name).mkdir(mode=0o700)
        return None, child
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file or folder", None
    if st.st_nlink > 1:
        return "hard link", None
    if st.st_size > room:
        raise WorkspaceTooLarge(f"workspace over {MAX_WORKSPACE_BYTES} bytes of files")
    try:
        handle = os.open(name, _FILE_FLAGS, dir_fd=fd)
    except OSError as exc:
        return f"unreadable ({exc.strerror})", None
    with os.fdopen(handle, "rb") as source:
        now = os.fstat(handle)
        if not stat.S_ISREG(now.st_mode) or now.st_nlink > 1:
            return "replaced while copied", None
        data = source.read(room + 1)
    if len(data) > room:
        raise WorkspaceTooLarge(f"workspace over {MAX_WORKSPACE_BYTES} bytes of files")
    target = into / name
    target.write_bytes(data)
    os.chmod(target, 0o755 if now.st_mode & stat.S_IXUSR else 0o644)
    return None, data
