"""The door's channel takes exactly one listener, from the sandbox, and nothing else.

These speak to the worker's side of the channel (evalq.workers.sandbox.handoff) as a hostile
sandbox could if it got hold of it: every message that is not the prelude's greeting with one
listening TCP socket on 127.0.0.1:PORT, outside the worker's own network namespace, is
refused and the door stays shut; after the one answer the channel is closed, so nothing more
can be sent; the Docker channel's socket takes one connection and then refuses all others.
The real gateway and real sockets throughout; listeners "in the sandbox" are made in a network
namespace of this test's own (`unshare -rn`, as bubblewrap makes one).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from evalq.workers.gateway import Gateway, Upstream
from evalq.workers.gateway.unix_client import UnixConnection
from evalq.workers.sandbox.handoff import Handoff
from evalq.workers.sandbox.prelude import GREETING

PORT = 8976

#: run in a new user + network namespace: listen on 127.0.0.1:PORT there and send the listener
#: with the greeting given over the channel it inherited, then print the answer, then try again
SENDER = r"""
import socket, sys
fd, port = int(sys.argv[1]), int(sys.argv[2])
listener = socket.socket()
listener.bind(("127.0.0.1", port))
listener.listen(8)
channel = socket.socket(fileno=fd)
socket.send_fds(channel, [sys.argv[3].encode()], [listener.fileno()])
print(channel.recv(256).decode(), flush=True)
print("AGAIN", end=" ")
try:
    socket.send_fds(channel, [sys.argv[3].encode()], [listener.fileno()])
    print(repr(channel.recv(256)))
except OSError as exc:
    print(type(exc).__name__)
"""


@pytest.fixture
def gateway():
    gw = Gateway()
    yield gw
    gw.close()


def _waited(handoff: Handoff, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not handoff.opened.is_set() and handoff.problem is None:
        assert time.monotonic() < deadline, "the handoff never answered"
        handoff.opened.wait(0.02)


def _send(handoff_end: int, data: bytes, fds: list[int]) -> bytes:
    channel = socket.socket(fileno=os.dup(handoff_end))
    try:
        channel.settimeout(10)
        socket.send_fds(channel, [data], fds)
        return channel.recv(256)
    finally:
        channel.close()


def _refused(gateway, make, port: int = PORT):
    """Hand what `make()` returns ([fds], data) over an inherited-style channel."""
    run = gateway.open_run("bad", None, [Upstream("http://127.0.0.1:9")])
    handoff = Handoff(run, port, inherited=True)
    fds, data = make()
    try:
        answer = _send(handoff.sandbox_fd, data, fds)
        _waited(handoff)
        return handoff, answer, run
    finally:
        for fd in fds:
            os.close(fd)
        handoff.close()
        run.close()


def _tcp(kind=socket.SOCK_STREAM, listen=True, port=PORT):
    sock = socket.socket(socket.AF_INET, kind)
    if listen:
        sock.bind(("127.0.0.1", port))
        sock.listen(1)
    return sock


def _free_port() -> int:
    probe = _tcp(port=0)
    try:
        return probe.getsockname()[1]
    finally:
        probe.close()


REFUSALS = {"greeting": "greeting", "nothing": "0 descriptors", "two": "2 descriptors",
            "pipe": "not a socket", "udp": "not a TCP socket", "unix": "not a TCP socket",
            "not-listening": "not a listening socket",
            "own-netns": "worker's own network namespace"}


@pytest.mark.parametrize("what", sorted(REFUSALS))
def test_anything_but_one_sandbox_listener_is_refused(gateway, what):
    port = _free_port() if what == "own-netns" else PORT
    held: list = []  # what this test made, closed at the end
    data, fds = GREETING, []
    if what == "greeting":
        held.append(_tcp(port=0))
        data = b"GET / HTTP/1.1\r\n"
    elif what == "two":
        held += [_tcp(port=0), _tcp(port=0)]
    elif what == "udp":
        held.append(_tcp(socket.SOCK_DGRAM, listen=False))
    elif what == "unix":
        held.append(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
    elif what == "not-listening":
        held.append(_tcp(listen=False))
    elif what == "own-netns":  # the right kind and address, but open to the whole host
        held.append(_tcp(port=port))
    fds = [os.dup(s.fileno()) for s in held]
    if what == "pipe":
        read, write = os.pipe()
        os.close(write)
        fds = [read]
    try:
        handoff, answer, run = _refused(gateway, lambda: (fds, data), port)
    finally:
        for sock in held:
            sock.close()
    assert not handoff.opened.is_set()
    assert answer.startswith(b"refused: "), answer
    assert REFUSALS[what] in (handoff.problem or ""), handoff.problem
    assert run.run_id not in gateway.handed  # nothing reached the gateway


def _in_new_netns(argv: list[str], fd: int) -> subprocess.CompletedProcess:
    return subprocess.run(["unshare", "-rn", "sh", "-c", 'ip link set lo up; exec "$@"', "sh",
                           *argv], capture_output=True, text=True, timeout=60, pass_fds=(fd,))


def test_a_listener_from_another_netns_opens_the_door_once_and_the_channel_closes(gateway):
    """The Docker-style channel: the first connection hands a real sandbox-netns listener; the
    gateway serves it; the same connection cannot hand a second; a new connection is refused."""
    from evalq.modelserver import ModelServer
    from evalq.modelserver.script import parse_script

    script = parse_script({"fallback": {"text": "ok", "usage": {"input_tokens": 1,
                                                                "output_tokens": 1}}})
    with ModelServer(script) as server:
        run = gateway.open_run("door", None, [Upstream(server.url)])
        handoff = Handoff(run, PORT, inherited=False)
        try:
            # connected from here (the socket is the agent user's, in the worker's folder),
            # then inherited by a process in a network namespace of its own, as a sandbox's
            channel = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            channel.connect(handoff.path)
            try:
                done = _in_new_netns([sys.executable, "-c", SENDER, str(channel.fileno()),
                                      str(PORT), GREETING.decode()], channel.fileno())
            finally:
                channel.close()
            _waited(handoff)
            assert handoff.opened.is_set(), (handoff.problem, done.stderr)
            first, again = done.stdout.splitlines()
            assert first == "ok"
            # the answer was the last thing on the channel: a second listener goes nowhere
            assert again in ("AGAIN BrokenPipeError", "AGAIN ConnectionResetError",
                             "AGAIN b''"), again
            assert len(gateway.handed[run.run_id]) == 1
            stranger = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            with pytest.raises(ConnectionRefusedError):
                stranger.connect(handoff.path)
            stranger.close()
        finally:
            handoff.close()
            run.close()
        assert run.run_id not in gateway.handed  # closed with the run


def test_no_connection_at_all_before_the_handoff_leaves_the_door_shut(gateway):
    run = gateway.open_run("never", None, [Upstream("http://127.0.0.1:9")])
    handoff = Handoff(run, PORT, inherited=False)
    path = handoff.path
    handoff.close()
    run.close()
    assert not handoff.opened.is_set() and not os.path.exists(path)


def test_the_unix_socket_of_a_run_still_serves_beside(gateway, tmp_path):
    """A run opened with a socket path keeps it (the gateway's own tests and tools use it)."""
    from evalq.modelserver import ModelServer
    from evalq.modelserver.script import parse_script

    with ModelServer(parse_script({"fallback": {"text": "ok", "usage": {}}})) as server:
        run = gateway.open_run("both", tmp_path / "g.sock", [Upstream(server.url)])
        conn = UnixConnection(str(tmp_path / "g.sock"))
        conn.request("POST", "/v1/messages/count_tokens", body=b"{}",
                     headers={"Content-Type": "application/json"})
        assert conn.getresponse().status == 200
        conn.close()
        run.close()
