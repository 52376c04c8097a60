"""Wait until a file lands in a folder: Linux inotify through libc, or a plain timeout elsewhere.

The embedded broker's consumers sleep on this instead of polling the folder on a timer, so a
message is picked up as soon as it is renamed into place (IN_MOVED_TO) rather than up to a
polling interval later. Only wake-ups come from here; what is in the folder is always read
from the folder itself, so a missed or spurious wake-up costs time, never a message.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import sys

IN_MOVED_TO = 0x00000080
IN_CLOSE_WRITE = 0x00000008
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000


def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        return libc
    except (OSError, AttributeError):
        return None


class DirWatch:
    """A readable fd that becomes ready when a file is moved into (or written in) `folder`.

    `fd` is None where inotify is unavailable; then `wait` just sleeps for its timeout, which
    is the old polling behaviour."""

    def __init__(self, folder: str):
        self.fd: int | None = None
        libc = _libc()
        if libc is None:
            return
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            return
        if libc.inotify_add_watch(fd, os.fsencode(folder), IN_MOVED_TO | IN_CLOSE_WRITE) < 0:
            os.close(fd)
            return
        self.fd = fd

    def wait(self, timeout: float, extra_fds: tuple[int, ...] = ()) -> bool:
        """Block until a file event or one of `extra_fds` is readable, or `timeout` passes.

        Returns True when woken (the events are drained, so the next wait blocks again)."""
        fds = [fd for fd in (self.fd, *extra_fds) if fd is not None]
        if not fds:
            select.select([], [], [], timeout)
            return False
        ready, _, _ = select.select(fds, [], [], timeout)
        for fd in ready:
            drain(fd)
        return bool(ready)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def drain(fd: int) -> None:
    """Read a non-blocking fd until it is empty (inotify events or doorbell bytes)."""
    try:
        while os.read(fd, 65536):
            pass
    except (BlockingIOError, InterruptedError):
        pass
