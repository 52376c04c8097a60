"""Removing a directory tree that hostile code built, however deep or odd it is.

shutil.rmtree recurses (a 3,000-deep tree raises RecursionError and stays on the host) and
needs paths that a deep tree makes longer than PATH_MAX. This walks with directory file
descriptors and no recursion; when the chain of open directories reaches MAX_OPEN it moves
the next directory up to the top (a rename within the tree), so neither the stack, the open
files nor any path grows with the tree's depth. It never follows a symlink and never crosses
into another file system (a mount point is reported, not entered).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

MAX_OPEN = 32
MAX_PROBLEMS = 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def remove_tree(path: Path | str) -> list[str]:
    """Remove `path` and all it holds; returns what could not be removed (empty when all went)."""
    path = os.fspath(path)
    try:
        top = os.lstat(path)
    except FileNotFoundError:
        return []
    problems: list[str] = []
    if not stat.S_ISDIR(top.st_mode):
        _try(problems, path, os.unlink, path)
        return problems
    try:
        root_fd = os.open(path, _DIR_FLAGS)
    except OSError as exc:
        return [f"{path}: {exc.strerror}"]
    try:
        _empty(root_fd, top.st_dev, problems)
    finally:
        os.close(root_fd)
    if not problems:
        _try(problems, path, os.rmdir, path)
    return problems[:MAX_PROBLEMS]


def _try(problems: list[str], where: str, func, *args, **kwargs) -> bool:
    try:
        func(*args, **kwargs)
        return True
    except FileNotFoundError:
        return True
    except OSError as exc:
        if len(problems) < MAX_PROBLEMS:
            problems.append(f"{where}: {exc.strerror}")
        return False


def _open_dir(parent_fd: int, name: str) -> int:
    """Open a subdirectory, making it searchable first if we own it but may not enter it."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except PermissionError:
        os.chmod(name, 0o700, dir_fd=parent_fd)
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)


def _next_subdir(fd: int, dev: int, stuck: set, problems: list[str]):
    """Unlink every non-directory in `fd`; return (name, inode) of a subdirectory to empty."""
    with os.scandir(fd) as entries:
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if not stat.S_ISDIR(st.st_mode):
                _try(problems, entry.name, os.unlink, entry.name, dir_fd=fd)
                continue
            key = (st.st_dev, st.st_ino)
            if key in stuck:
                continue
            if st.st_dev != dev:
                stuck.add(key)
                problems.append(f"{entry.name}: a mount point, left alone")
                continue
            return entry.name, key
    return None


def _hoist(fd: int, name: str, root_fd: int, serial: list[int]) -> bool:
    """Move directory `name` to the top of the tree under a fresh name (bounds the fd chain)."""
    for _ in range(100):
        serial[0] += 1
        try:
            os.rename(name, f".evalq-rm-{serial[0]}", src_dir_fd=fd, dst_dir_fd=root_fd)
            return True
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                return False
    return False


def _empty(root_fd: int, dev: int, problems: list[str]) -> None:
    """Empty the directory open as root_fd, depth first, without recursion."""
    stack: list[tuple[int, str, tuple]] = [(root_fd, "", ())]
    stuck: set = set()
    serial = [0]
    try:
        while stack:
            fd, name, key = stack[-1]
            found = _next_subdir(fd, dev, stuck, problems)
            if found is not None:
                child, child_key = found
                if len(stack) >= MAX_OPEN and _hoist(fd, child, root_fd, serial):
                    continue
                try:
                    stack.append((_open_dir(fd, child), child, child_key))
                except OSError as exc:
                    stuck.add(child_key)
                    problems.append(f"{child}: {exc.strerror}")
                continue
            stack.pop()
            if not stack:
                return
            os.close(fd)
            if not _try(problems, name, os.rmdir, name, dir_fd=stack[-1][0]):
                stuck.add(key)
    finally:
        for fd, _, _ in stack[1:]:
            os.close(fd)
