"""A plain HTTP/1.1 client over a unix socket: what the in-sandbox forwarder would pass on."""

from __future__ import annotations

import http.client
import json
import socket
from dataclasses import dataclass
from typing import Any, Optional


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float = 20.0):
        super().__init__("127.0.0.1", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.socket_path)


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    raw: bytes

    def json(self) -> Any:
        return json.loads(self.raw)

    def seen(self) -> str:
        """Everything the agent could read of this reply."""
        return json.dumps(self.headers) + self.raw.decode("utf-8", "replace")


def send(path: str, target: str, body: Optional[dict] = None, headers: Optional[dict] = None,
         method: str = "POST") -> Reply:
    conn = UnixConnection(path)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, target, body=data, headers={
            "Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        return Reply(response.status, dict(response.getheaders()), response.read())
    finally:
        conn.close()
