"""An HTTP/1.1 connection to a run's own gateway socket: for health probes, the tests and the
bench (http.client speaks TCP only)."""

from __future__ import annotations

import http.client
import socket


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float = 20.0):
        super().__init__("127.0.0.1", timeout=timeout)
        self.socket_path = str(path)

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.socket_path)
