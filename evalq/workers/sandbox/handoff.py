"""The worker's side of a sandbox's door: take the one listener its prelude hands over.

Inside the sandbox the prelude (prelude.py) listens on 127.0.0.1:DOOR_PORT and sends that
listening socket over a channel that only this sandbox start holds: under bubblewrap one end
of a socket pair the sandbox inherits (nothing on disk another process could connect to),
under Docker a unix socket in a fresh folder of the worker's, bind-mounted, that accepts one
connection and is then closed. One message is read, on the gateway's event loop; it must be
the prelude's greeting with exactly one descriptor: a listening TCP socket on
127.0.0.1:DOOR_PORT that is not in the worker's own network namespace. Anything else is
refused and the door stays shut (the run fails as evalq's: the agent never started). Once the
answer is sent the channel is closed, so the agent, which starts only after it, has no way to
send the worker anything but HTTP to its door.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import socket
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Optional

from evalq.errors import InfrastructureError
from evalq.proc import ProcResult
from evalq.unix_sockets import bound_unix_socket
from evalq.workers.sandbox.prelude import GREETING

log = logging.getLogger("evalq.worker")
#: descriptors one message may carry before it is cut (MSG_CTRUNC): more than one is refused
MAX_FDS = 4
TCP_LISTEN = "0A"


def _in_own_netns(sock: socket.socket) -> bool:
    """Whether a listening TCP socket is in this process's network namespace (listed in its
    /proc/self/net/tcp): a door there would be open to every process of the host."""
    inode = str(os.fstat(sock.fileno()).st_ino)
    with open("/proc/self/net/tcp") as table:
        next(table)
        return any(f[3] == TCP_LISTEN and f[9] == inode
                   for f in (line.split() for line in table) if len(f) > 9)


def refusal(data: bytes, flags: int, fds: list[int], port: int) -> Optional[str]:
    """Why a handed message is not a door's listener, else None (checks only; closes nothing)."""
    if flags & (socket.MSG_CTRUNC | socket.MSG_TRUNC):
        return "the message was cut (too long, or too many descriptors)"
    if data != GREETING:
        return "not the prelude's greeting"
    if len(fds) != 1:
        return f"{len(fds)} descriptors instead of one listener"
    try:
        sock = socket.socket(fileno=os.dup(fds[0]))
    except OSError:
        return "the descriptor is not a socket"
    try:
        if sock.family != socket.AF_INET or sock.type != socket.SOCK_STREAM:
            return "not a TCP socket"
        if not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
            return "not a listening socket"
        if sock.getsockname() != ("127.0.0.1", port):
            return f"bound to {sock.getsockname()}, not 127.0.0.1:{port}"
        if _in_own_netns(sock):
            return "bound in the worker's own network namespace"
    finally:
        sock.close()
    return None


class Handoff:
    """One sandbox start's channel to `run`'s door (`run`: an open GatewayRun).

    `inherited=True`: `sandbox_fd` is the end the sandbox must inherit (pass_fds); else
    `path` is a unix socket to bind-mount. `opened` is set once the listener is the
    gateway's; `problem` says why a handed message was refused. `close()` after the run."""

    def __init__(self, run: Any, port: int, inherited: bool):
        self.run, self.port = run, port
        self.gateway = run.gateway
        self.loop = self.gateway.loop
        self.opened = threading.Event()
        self.problem: Optional[str] = None
        self.folder: Optional[Path] = None
        self.path: Optional[str] = None
        self.sandbox_fd: Optional[int] = None
        self._theirs: Optional[socket.socket] = None
        self._listening: Optional[socket.socket] = None
        self._channel: Optional[socket.socket] = None
        if inherited:
            self._channel, self._theirs = socket.socketpair(socket.AF_UNIX,
                                                            socket.SOCK_SEQPACKET)
            self.sandbox_fd = self._theirs.fileno()
        else:
            from evalq.workers.sandbox.base import own_door

            self.folder = Path(tempfile.mkdtemp(prefix="evalq-door-"))  # 0700: the worker's
            path = self.folder / "door.sock"
            self._listening = bound_unix_socket(path, socket.SOCK_SEQPACKET)
            self._listening.listen(1)
            self.path = str(path)
            own_door(self.path)
        self.loop.call_soon_threadsafe(self._watch)

    # ------------------------------------------------------------ on the gateway's loop
    def _watch(self) -> None:
        if self._listening is not None:
            self._listening.setblocking(False)
            self.loop.add_reader(self._listening.fileno(), self._accept)
        elif self._channel is not None:
            self._read_from(self._channel)

    def _read_from(self, channel: socket.socket) -> None:
        self._channel = channel
        channel.setblocking(False)
        self.loop.add_reader(channel.fileno(), self._receive)

    def _accept(self) -> None:
        """The first connection is the channel; the socket then stops listening for good."""
        try:
            channel, _ = self._listening.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return
        self._stop_listening()
        self._read_from(channel)

    def _receive(self) -> None:
        channel = self._channel
        try:
            data, ancillary, flags, _ = channel.recvmsg(
                len(GREETING) + 1, socket.CMSG_SPACE(MAX_FDS * 4))
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            data, ancillary, flags = b"", [], 0
            self.problem = f"the channel failed: {exc}"
        fds = _descriptors(ancillary)
        try:
            problem = self.problem or refusal(data, flags, fds, self.port)
            if problem is None:
                self.gateway.serve_listener(self.run, socket.socket(fileno=fds.pop(0)))
                self.opened.set()
            else:
                self.problem = problem
                log.warning("run %s: a door's listener was refused: %s", self.run.run_id,
                            problem)
            _answer(channel, b"ok" if problem is None else f"refused: {problem}".encode())
        finally:
            for fd in fds:
                os.close(fd)
            self._close_channel()

    def _stop_listening(self) -> None:
        if self._listening is not None:
            self.loop.remove_reader(self._listening.fileno())
            self._listening.close()
            self._listening = None

    def _close_channel(self) -> None:
        if self._channel is not None:
            self.loop.remove_reader(self._channel.fileno())
            self._channel.close()
            self._channel = None

    async def _stop(self) -> None:
        self._stop_listening()
        self._close_channel()

    # ------------------------------------------------------------ from the worker's thread
    def close(self) -> None:
        """Stop waiting (if the sandbox never handed anything) and remove what was made."""
        asyncio.run_coroutine_threadsafe(self._stop(), self.loop).result(30)
        if self._theirs is not None:
            self._theirs.close()
            self._theirs = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


def _descriptors(ancillary: list) -> list[int]:
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(data) - len(data) % 4
            fds += [int.from_bytes(data[i:i + 4], sys.byteorder) for i in range(0, usable, 4)]
    return fds


def _answer(channel: socket.socket, message: bytes) -> None:
    try:
        channel.send(message[:256])
    except OSError:
        pass  # the sandbox is gone already: nothing waits for the answer


def with_door(job: Any, make: Callable[[], Any], body: Callable[[Any], ProcResult]) -> ProcResult:
    """Run `body(door)` with `job`'s door being opened (`make()`: a Handoff, or a NetnsDoor;
    None when the job has no door). A door that never opened is evalq's failure: the agent
    was never started (the prelude does not exec it; bubblewrap is stopped before it)."""
    door = make() if job.door is not None else None
    try:
        proc = body(door)
    finally:
        if door is not None:
            door.close()
    if door is not None and not door.opened.is_set():
        why = door.problem or "the sandbox's prelude handed no listener"
        said = proc.stderr[-400:].decode("utf-8", "replace").strip()
        raise InfrastructureError(f"agent sandbox: its door did not open ({why}); the agent "
                                  "was not started" + (f": {said}" if said else ""))
    return proc
