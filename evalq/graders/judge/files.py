"""Files a check hands to the subject's code, or reads back from it: made by the judge itself.

The judge and the subject share one folder (EVALQ_SHARED_DIR, the same path in both). These
helpers run in the judge's process, never in the subject's, where the agent's code may have
replaced `open`, `tempfile`, `os` or `pathlib` before the first check ran (a setup file meant
to expose a bug was rewritten on its way in that way). Paths cross to the subject as data.

The subject's user may write in a folder made by `tmp_dir()` (its code under test writes
there), not in one made by `tmp_dir(writable=False)`. Nothing in the shared folder is trusted
as a path: each helper walks to its file one folder at a time without following links, opens
only regular files without waiting on one, and reads at most MAX_FILE_BYTES.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import PurePosixPath

SHARED_ENV = "EVALQ_SHARED_DIR"
#: the most a read gives back (a subject could leave a file of any size)
MAX_FILE_BYTES = 16 * 1024 * 1024
_DIR_OPEN = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class SharedFileError(AssertionError):
    """A shared file the judge will not use (a link, not a regular file, too large): the
    check fails with this reason."""


def shared_root() -> PurePosixPath:
    where = os.environ.get(SHARED_ENV)
    if not where:
        raise RuntimeError("no shared folder: run these tests through the evalq grader")
    return PurePosixPath(where)


def tmp_dir(writable: bool = True) -> PurePosixPath:
    """A fresh folder both sides see. `writable`: the subject's code may add and change files
    in it; else it may only read what the judge put there (a driver's source, a fixed input)."""
    root = shared_root()
    with _Folder(os.open(root, _DIR_OPEN)) as top:
        name = f"t-{secrets.token_hex(8)}"
        os.mkdir(name, 0o700, dir_fd=top.fd)
        with _Folder(os.open(name, _DIR_OPEN, dir_fd=top.fd)) as made:
            os.fchmod(made.fd, 0o777 if writable else 0o755)
    return root / name


def write_text(path, text: str, encoding: str = "utf-8") -> None:
    """Write a file in a folder tmp_dir() made (its missing folders made too), fresh: whatever
    was at that name before is replaced, never written through."""
    write_bytes(path, text.encode(encoding))


def write_bytes(path, data: bytes) -> None:
    with _parent(path, create=True) as (folder, name):
        try:
            os.unlink(name, dir_fd=folder.fd)
        except FileNotFoundError:
            pass
        except IsADirectoryError:
            raise SharedFileError(f"{path} is a folder") from None
        fd = os.open(name, _CREATE, 0o600, dir_fd=folder.fd)
        with os.fdopen(fd, "wb") as out:
            os.fchmod(fd, 0o666 if folder.mode & 0o002 else 0o644)
            out.write(data)


def read_bytes(path, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file in the shared folder (a link, FIFO or device is refused)."""
    with _parent(path) as (folder, name):
        try:
            fd = os.open(name, _READ_OPEN, dir_fd=folder.fd)
        except OSError as exc:
            if exc.errno in _LINK_ERRORS:
                raise SharedFileError(f"{path} is a link; the judge does not follow it") from None
            raise
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SharedFileError(f"{path} is not a regular file")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise SharedFileError(f"{path} holds over {limit} bytes")
    return data


def read_text(path, encoding: str = "utf-8") -> str:
    return read_bytes(path).decode(encoding)


def set_mtime(path, seconds: float) -> None:
    """Set a file's access and modification times (a file the judge wrote: it owns it)."""
    with _parent(path) as (folder, name):
        os.utime(name, (seconds, seconds), dir_fd=folder.fd, follow_symlinks=False)


#: what opening through a link (or a file where a folder should be) fails with
_LINK_ERRORS = (errno.ELOOP, errno.ENOTDIR)


class _Folder:
    """An open folder descriptor, closed on leaving."""

    def __init__(self, fd: int):
        self.fd = fd
        self.mode = os.fstat(fd).st_mode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        os.close(self.fd)


class _parent:
    """(folder, name) of `path`'s last part: its folders opened one by one from the shared
    root, never through a link (ones missing are made when `create`, like their parent)."""

    def __init__(self, path, create: bool = False):
        root, where = shared_root(), PurePosixPath(str(path))
        try:
            parts = where.relative_to(root).parts
        except ValueError:
            raise SharedFileError(f"{path} is not in the shared folder {root} (make it with "
                                  "tmp_dir())") from None
        if len(parts) < 2 or any(p in ("", ".", "..") for p in parts):
            raise SharedFileError(f"{path} is not in a folder made by tmp_dir()")
        self.path, self.parts, self.create = path, parts, create
        self.folder: _Folder | None = None

    def __enter__(self):
        fd = os.open(shared_root(), _DIR_OPEN)
        try:
            for part in self.parts[:-1]:
                fd, above = self._step(fd, part), fd
                os.close(above)
        except OSError as exc:
            os.close(fd)
            if exc.errno in _LINK_ERRORS:
                raise SharedFileError(f"{self.path}: a folder on the way is a link or not a "
                                      "folder; the judge does not follow it") from None
            raise
        self.folder = _Folder(fd)
        return self.folder, self.parts[-1]

    def _step(self, fd: int, part: str) -> int:
        """The folder `part` in the open folder `fd`, opened (and made, like `fd`, if asked)."""
        if self.create and not _exists(part, fd):
            os.mkdir(part, 0o700, dir_fd=fd)
            made = os.open(part, _DIR_OPEN, dir_fd=fd)
            os.fchmod(made, stat.S_IMODE(os.fstat(fd).st_mode))
            return made
        return os.open(part, _DIR_OPEN, dir_fd=fd)

    def __exit__(self, *exc):
        if self.folder is not None:
            os.close(self.folder.fd)


def _exists(name: str, fd: int) -> bool:
    try:
        os.stat(name, dir_fd=fd, follow_symlinks=False)
        return True
    except FileNotFoundError:
        return False
