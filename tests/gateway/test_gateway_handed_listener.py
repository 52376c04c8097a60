"""Connections that arrive on a listener handed to the gateway (a sealed sandbox's door).

`Gateway.serve_listener(run, listener)` serves a run on what a listening socket accepts, as
the door does with the one its sandbox hands over. Served like the run's own socket (the
same records, the same per-run connection bound); closed with the run; and a listener that
fails under it (the agent shut it down, however it got it) costs that run its door and
nothing else: the loop neither spins on it nor stops serving other runs.
"""

from __future__ import annotations

import http.client
import logging
import socket
import time

import pytest

from evalq.modelserver import ModelServer
from evalq.modelserver.script import parse_script
from evalq.workers.gateway import Gateway, Upstream
from gateway_support import gateway  # noqa: F401 - fixture

SCRIPT = {"fallback": {"text": "ok", "usage": {"input_tokens": 1, "output_tokens": 1}}}


def _listener(backlog: int = 16) -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(backlog)
    return sock


def _count_tokens(port: int) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", "/v1/messages/count_tokens", body=b"{}",
                     headers={"Content-Type": "application/json"})
        return conn.getresponse().status
    finally:
        conn.close()


def _wait(condition, what: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.01)


def test_a_handed_listener_serves_the_run_until_it_closes(gateway: Gateway):
    with ModelServer(parse_script(SCRIPT)) as server:
        run = gateway.open_run("handed", None, [Upstream(server.url)])
        listener = _listener()
        port = listener.getsockname()[1]
        gateway.serve_listener(run, listener)
        assert [_count_tokens(port) for _ in range(3)] == [200] * 3
        assert [r["path"] for r in run.records()] == ["/v1/messages/count_tokens"] * 3
        run.close()
    assert listener.fileno() == -1  # the gateway closed it with the run
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5)


def test_a_listener_handed_to_a_closed_run_is_closed(gateway: Gateway):
    run = gateway.open_run("closed", None, [Upstream("http://127.0.0.1:9")])
    run.close()
    listener = _listener()
    gateway.serve_listener(run, listener)
    _wait(lambda: listener.fileno() == -1, "the listener was closed")
    assert run.run_id not in gateway.handed


def test_a_listener_that_fails_costs_only_its_own_run(gateway: Gateway, caplog):
    with ModelServer(parse_script(SCRIPT)) as server:
        broken = gateway.open_run("broken", None, [Upstream(server.url)])
        other = gateway.open_run("other", None, [Upstream(server.url)])
        doomed, kept = _listener(), _listener()
        twin = doomed.dup()  # what an agent holding its listener could do with it
        gateway.serve_listener(broken, doomed)
        gateway.serve_listener(other, kept)
        port = kept.getsockname()[1]
        assert _count_tokens(doomed.getsockname()[1]) == 200
        with caplog.at_level(logging.WARNING, logger="evalq.gateway"):
            twin.shutdown(socket.SHUT_RDWR)  # no longer listening: accept() fails for good
            _wait(lambda: broken.run_id not in gateway.handed, "the failed listener dropped")
            assert [_count_tokens(port) for _ in range(20)] == [200] * 20
        twin.close()
        failed = [r for r in caplog.records if "stopped accepting" in r.getMessage()]
        assert len(failed) == 1 and "broken" in failed[0].getMessage()  # once, not a spin
        assert len(gateway.handed[other.run_id]) == 1
        broken.close()
        other.close()


def test_a_burst_past_the_backlog_is_all_served(gateway: Gateway):
    """Connections waiting in the handed listener's queue are taken in batches, all of them."""
    with ModelServer(parse_script(SCRIPT)) as server:
        run = gateway.open_run("burst", None, [Upstream(server.url)])
        listener = _listener(backlog=64)
        port = listener.getsockname()[1]
        waiting = [socket.create_connection(("127.0.0.1", port), timeout=10)
                   for _ in range(40)]  # queued before the gateway accepts any (batches of 16)
        gateway.serve_listener(run, listener)
        request = (b"POST /v1/messages/count_tokens HTTP/1.1\r\nHost: x\r\n"
                   b"Content-Type: application/json\r\nContent-Length: 2\r\n"
                   b"Connection: close\r\n\r\n{}")
        for conn in waiting:
            conn.sendall(request)
        replies = [conn.recv(64) for conn in waiting]
        for conn in waiting:
            conn.close()
        assert all(r.startswith(b"HTTP/1.1 200") for r in replies), replies[:3]
        run.close()
