"""A judge-subject channel for backends that cannot pass a file descriptor (Docker).

The grader listens on two unix sockets in two directories, one bound into each container;
each side connects to its own, and the grader copies bytes between the two connections.
Neither container can reach the other's directory, and nothing but the bytes crosses.
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

from evalq.unix_sockets import bound_unix_socket

SOCKET_NAME = "channel.sock"
ACCEPT_SECONDS = 60.0
#: how often a wait for a connection looks whether its side has ended meanwhile
POLL_SECONDS = 0.1


class Relay:
    def __init__(self, judge_dir: Path, subject_dir: Path):
        self.listeners = []
        for folder in (judge_dir, subject_dir):
            folder.mkdir(mode=0o755)
            listener = bound_unix_socket(folder / SOCKET_NAME)
            os.chmod(folder / SOCKET_NAME, 0o777)  # the sandbox users connect to it
            listener.listen(1)
            listener.settimeout(POLL_SECONDS)
            self.listeners.append(listener)
        self.judge_ended, self.subject_ended = threading.Event(), threading.Event()
        self.threads: list[threading.Thread] = []
        self.conns: list[socket.socket] = []
        self.error: str | None = None
        self.thread = threading.Thread(target=self._run, name="evalq-relay", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for listener, gone in zip(self.listeners, (self.judge_ended, self.subject_ended)):
                self.conns.append(_accept(listener, gone))
        except OSError as exc:
            self.error = f"a side never connected to the channel ({exc})"
            for conn in self.conns:  # the judge, waiting for its first line, sees the end
                _hang_up(conn)
            return
        judge, subject = self.conns
        for source, sink in ((judge, subject), (subject, judge)):
            t = threading.Thread(target=_copy, args=(source, sink), daemon=True)
            t.start()
            self.threads.append(t)

    def subject_gone(self) -> None:
        """The subject's container has ended: a connection it never made will not come."""
        self.subject_ended.set()

    def close(self) -> None:
        self.judge_ended.set()
        for s in self.listeners + self.conns:
            _hang_up(s)
            s.close()
        self.thread.join(5)
        for t in self.threads:
            t.join(5)


def _accept(listener: socket.socket, gone: threading.Event) -> socket.socket:
    """The one connection of a side, unless that side ends first or takes over a minute."""
    waited = 0.0
    while True:
        try:
            conn = listener.accept()[0]
            conn.settimeout(None)
            return conn
        except socket.timeout:
            waited += POLL_SECONDS
            if gone.is_set() or waited > ACCEPT_SECONDS:
                raise OSError("no connection") from None


def _hang_up(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _copy(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(1 << 16):
            sink.sendall(chunk)
    except OSError:
        pass
    try:
        sink.shutdown(socket.SHUT_WR)  # the other side sees the end as an end
    except OSError:
        pass
