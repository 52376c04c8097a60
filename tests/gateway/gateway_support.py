"""Gateway test support: the scripted model server plays the provider, requests go over real
unix sockets (as the in-sandbox forwarder sends them). Fixtures are imported by name (the
suite keeps one conftest.py, at the top)."""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest

from evalq.workers.gateway import Gateway
from evalq.workers.gateway.unix_client import UnixConnection


@pytest.fixture
def sock_dir():
    """A short private directory: unix socket paths must stay under 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="gw-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def gateway():
    gw = Gateway()
    yield gw
    gw.close()


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


@contextmanager
def tcp_forwarder(socket_path: str) -> Iterator[int]:
    """A loopback TCP port piped to a gateway socket, as the forwarder inside a sandbox does
    (for a real agent CLI, which speaks TCP). Yields the port."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    done = threading.Event()

    def pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def serve() -> None:
        while not done.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(socket_path)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=pipe, args=(a, b), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        done.set()
        listener.close()
        thread.join(5)
