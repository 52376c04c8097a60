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

SOCKET_NAME = "channel.sock"
ACCEPT_SECONDS = 60.0


class Relay:
    def __init__(self, judge_dir: Path, subject_dir: Path):
        self.listeners = []
        for folder in (judge_dir, subject_dir):
            folder.mkdir(mode=0o755)
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(str(folder / SOCKET_NAME))
            os.chmod(folder / SOCKET_NAME, 0o777)  # the sandbox users connect to it
            listener.listen(1)
            listener.settimeout(ACCEPT_SECONDS)
            self.listeners.append(listener)
        self.threads: list[threading.Thread] = []
        self.conns: list[socket.socket] = []
        self.error: str | None = None
        self.thread = threading.Thread(target=self._run, name="evalq-relay", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.conns = [listener.accept()[0] for listener in self.listeners]
        except OSError as exc:
            self.error = f"a side never connected to the channel ({exc})"
            return
        judge, subject = self.conns
        for source, sink in ((judge, subject), (subject, judge)):
            t = threading.Thread(target=_copy, args=(source, sink), daemon=True)
            t.start()
            self.threads.append(t)

    def close(self) -> None:
        for s in self.listeners + self.conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        self.thread.join(5)
        for t in self.threads:
            t.join(5)


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
