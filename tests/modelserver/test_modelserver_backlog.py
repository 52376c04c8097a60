"""The scripted model server takes a burst of a few hundred agents connecting at once: its
listening socket queues that many (the kernel's own figure for the socket, read with `ss`),
and 200 clients started together all get their reply."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import urllib.request

import pytest

from evalq.modelserver import ModelServer
from evalq.modelserver.script import parse_script

CLIENTS = 200


def listen_backlog(port: int) -> int:
    """The accept queue's bound of the socket listening on 127.0.0.1:port, as the kernel has
    it (`ss` prints it as Send-Q for a listening socket)."""
    if shutil.which("ss") is None:
        pytest.fail("ss is not installed: apt-get install -y iproute2")
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True,
                         text=True, check=True).stdout.split()
    return int(out[2])


def test_listening_socket_queues_a_burst_of_agents():
    server = ModelServer(parse_script({"turns": []}))
    try:
        assert listen_backlog(server.httpd.server_address[1]) >= CLIENTS
    finally:
        server.httpd.server_close()


def test_two_hundred_clients_at_once_all_get_their_reply():
    start = threading.Barrier(CLIENTS)
    statuses: list[object] = []
    lock = threading.Lock()

    def client(url: str) -> None:
        request = urllib.request.Request(
            url + "/v1/messages", headers={"Content-Type": "application/json"},
            data=json.dumps({"model": "m", "max_tokens": 5, "messages": [
                {"role": "user", "content": "hi"}]}).encode())
        start.wait(60)
        try:
            with urllib.request.urlopen(request, timeout=60) as reply:
                result: object = reply.status
        except OSError as exc:  # a reset or refused connection
            result = repr(exc)
        with lock:
            statuses.append(result)

    with ModelServer(parse_script({"turns": [], "fallback": {"text": "ok"}})) as server:
        threads = [threading.Thread(target=client, args=(server.url,)) for _ in range(CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert len(server.exchanges) == CLIENTS
    assert statuses == [200] * CLIENTS, [s for s in statuses if s != 200][:5]
