"""The door opened from outside: the worker makes the listener in the sandbox's network namespace.

Where bubblewrap runs as root with CAP_SYS_ADMIN, the worker needs nothing inside the sandbox
to open its door. bubblewrap reports its child's pid and network namespace (--info-fd) and
waits (--block-fd) before it starts the agent; meanwhile a short-lived thread of the worker
enters that namespace (setns: it affects that thread only, which ends right after), makes the
listening socket on 127.0.0.1:DOOR_PORT there, and hands it to the gateway; only then is
bubblewrap let go. No prelude, no channel, no process of evalq's beyond bubblewrap's own init:
the agent starts with its door already listening. Elsewhere (no CAP_SYS_ADMIN, Docker) the
prelude does the same from inside (handoff.py).
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import socket
import threading
from typing import Any, Optional

CLONE_NEWNET = 0x40000000
IP_FREEBIND = 15  # bind before bubblewrap has brought the namespace's loopback up
BACKLOG = 128
#: how long close() waits for the door's thread (it is woken at once)
JOIN_SECONDS = 30.0


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"setns: {os.strerror(errno)}")


def listen_in(pid: int, netns: int, port: int) -> socket.socket:
    """A socket listening on 127.0.0.1:port in the network namespace of `pid`, which must be
    `netns` (its inode, as bubblewrap reported it: a pid reused meanwhile is refused)."""
    made: dict[str, Any] = {}

    def inside() -> None:
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        target = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        try:
            if os.fstat(target).st_ino != netns:
                raise OSError(f"process {pid} is no longer in network namespace {netns}")
            _setns(target)
            try:
                listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                listener.setsockopt(socket.IPPROTO_IP, IP_FREEBIND, 1)
                listener.bind(("127.0.0.1", port))
                listener.listen(BACKLOG)
                made["listener"] = listener
            finally:
                _setns(own)  # (the thread ends next anyway)
        except OSError as exc:
            made["error"] = exc
        finally:
            os.close(own)
            os.close(target)

    thread = threading.Thread(target=inside, name="evalq-door-netns")
    thread.start()
    thread.join()
    if "error" in made:
        raise made["error"]
    return made["listener"]


class NetnsDoor:
    """One bubblewrap start's door, opened from outside. `options` and `fds` go to bwrap;
    `watch()` once it is starting; `opened`, `problem` and `close()` as a Handoff's."""

    def __init__(self, run: Any, port: int):
        self.run, self.port = run, port
        self.opened = threading.Event()
        self.problem: Optional[str] = None
        self.info_read, self.info_write = os.pipe()
        self.block_read, self.block_write = os.pipe()
        self.fds = (self.info_write, self.block_read)
        # close() writes here: the thread sleeps in poll() until bwrap reports or this wakes
        # it, never polling (hundreds of pending starts must not churn the worker's GIL)
        self.wake_read, self.wake_write = os.pipe()
        self.options = ["--info-fd", str(self.info_write), "--block-fd", str(self.block_read)]
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._open, name="evalq-door", daemon=True)
        self._thread.start()

    def failed(self) -> bool:
        """Whether the door cannot open: the sandbox is then stopped (its agent never ran)."""
        return self.problem is not None

    def _info(self) -> dict:
        data = b""
        waiting = select.poll()  # not select(): a busy worker's descriptors pass 1024
        waiting.register(self.info_read, select.POLLIN)
        waiting.register(self.wake_read, select.POLLIN)
        while not self._done.is_set():
            ready = {fd for fd, _ in waiting.poll()}
            if self.wake_read in ready:
                break
            chunk = os.read(self.info_read, 4096)
            if not chunk:
                break
            data += chunk
            try:
                return json.loads(data)
            except ValueError:
                continue
        raise OSError("bubblewrap reported no child")

    def _open(self) -> None:
        try:
            info = self._info()
            listener = listen_in(int(info["child-pid"]), int(info["net-namespace"]), self.port)
            self.run.gateway.serve_listener(self.run, listener)
            self.opened.set()
            os.write(self.block_write, b"go")  # bubblewrap starts the agent now
        except (OSError, KeyError, ValueError, TypeError) as exc:
            if not self._done.is_set():
                self.problem = f"the worker could not listen in the sandbox: {exc}"

    def close(self) -> None:
        self._done.set()
        os.write(self.wake_write, b"x")
        self._thread.join(JOIN_SECONDS)
        for fd in (self.info_read, self.info_write, self.block_read, self.block_write,
                   self.wake_read, self.wake_write):
            os.close(fd)
