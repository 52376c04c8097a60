"""The door out of an agent sandbox: a unix socket on the host that reaches the model endpoint.

Until the model gateway lands (evalq/workers/gateway/), the door is a plain byte relay from a
per-run unix socket to the upstream's host and port, loopback only (the scripted model server
in tests). The gateway replaces this body: the same call, the same yielded socket path.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
import tempfile
import threading
from contextlib import contextmanager
from typing import Iterator, Optional
from urllib.parse import urlsplit

from evalq.errors import InfrastructureError
from evalq.workers.sandbox.launcher import relay


def _loopback_address(upstream_base_url: str) -> tuple[str, int]:
    parts = urlsplit(upstream_base_url)
    host = parts.hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if parts.scheme != "http" or not loopback:
        raise InfrastructureError(
            f"the agent sandbox's door relays only to plain-http loopback endpoints, not "
            f"{upstream_base_url!r}: real providers need the model gateway")
    return host, parts.port or 80


def _to_upstream(client: socket.socket, address: tuple[str, int]) -> None:
    try:
        upstream = socket.create_connection(address, timeout=30)
    except OSError:
        client.close()
        return
    upstream.settimeout(None)
    relay(client, upstream)


@contextmanager
def open_door(upstream_base_url: str,
              credentials: Optional[dict[str, str]] = None) -> Iterator[str]:
    """A unix socket path that relays each connection to the upstream, for the block.

    `credentials` are the real provider keys, kept outside the sandbox (the agent gets a
    placeholder); this relay forwards bytes only, so it needs none: the scripted model server
    accepts any key. The gateway injects them.
    """
    address = _loopback_address(upstream_base_url)
    folder = tempfile.mkdtemp(prefix="evalq-door-")
    path = os.path.join(folder, "door.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o600)  # the worker's own; the Docker backend hands it to the agent user
    listener.listen(64)
    stopped = threading.Event()

    def serve() -> None:
        while not stopped.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=_to_upstream, args=(client, address),
                             daemon=True).start()

    thread = threading.Thread(target=serve, name="evalq-door", daemon=True)
    thread.start()
    try:
        yield path
    finally:
        stopped.set()
        try:
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accept()
        except OSError:
            pass
        listener.close()
        thread.join(5)
        shutil.rmtree(folder, ignore_errors=True)
