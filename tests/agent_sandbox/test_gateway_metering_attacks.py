"""Budgets the gateway enforces cannot be dodged from inside a sandbox.

Hanging up: an agent in a real sandbox (bwrap, docker) reads a
streamed reply through its door until the text is in, then closes the connection and exits,
before the provider's last event, which alone carries the output count. The provider bills
the whole reply, so the gateway must still meter it, and the run's token budget must hold;
and a stream the provider itself cuts short leaves a token budget unenforceable: spent.

Firing many model calls at once: a token or cost budget is charged only when a reply is in,
so every call admitted before that overshoots it; at most MAX_IN_FLIGHT_BUDGETED are.

The hang-up's provider is a loopback server of this test. Once the sandbox has ended it sends the rest
of the stream: 32 MB of SSE comments (more than socket buffers hold, so it cannot be sent
unless the gateway goes on reading) and then the events with the usage.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import threading
from pathlib import Path

import pytest

from evalq.workers.gateway import Gateway, RunBudgets, Upstream
from evalq.workers.profile import new_profile
from evalq.workers.sandbox import AgentJob, get_agent_sandbox
from probe_limits import PROBE_LIMITS

OUTPUT_TOKENS = 500


def sse(event: str, data: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


HEAD = sse("message_start", {"type": "message_start", "message": {
    "id": "m1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
    "content": [], "usage": {"input_tokens": 10, "output_tokens": 1}}}) + \
    sse("content_block_start", {"type": "content_block_start", "index": 0,
                                "content_block": {"type": "text", "text": ""}}) + \
    sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                "delta": {"type": "text_delta", "text": "THE-ANSWER"}})
TAIL = sse("content_block_stop", {"type": "content_block_stop", "index": 0}) + \
    sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                          "usage": {"output_tokens": OUTPUT_TOKENS}}) + \
    sse("message_stop", {"type": "message_stop"})


class Provider:
    """Answers one streamed request with HEAD and keeps the connection for `finish`."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(60)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stream = threading.Event()
        self.conn = None
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        conn, _ = self.sock.accept()
        conn.settimeout(60)
        data = b""
        while b"\r\n\r\n" not in data:
            data += conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Connection: close\r\n\r\n" + HEAD)
        self.conn = conn
        self.stream.set()

    def finish(self, tail: bool) -> bool:
        """Send the padding and (if `tail`) the usage events, then close; False when the
        gateway hung up on us first."""
        assert self.stream.wait(60)
        try:
            if tail:
                self.conn.sendall(PADDING + TAIL)
            self.conn.shutdown(socket.SHUT_WR)
            while self.conn.recv(65536):  # until the gateway is done with the stream
                pass
            return True
        except OSError:
            return False
        finally:
            self.conn.close()

    def close(self):
        self.sock.close()


PADDING = (b": " + b"x" * 16382 + b"\n\n") * 2048  # 32 MB of comments, no event


AGENT = r'''
import http.client, json, sys
port = int(sys.argv[1])
def body(stream):
    return json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 1000, "stream": stream,
                       "messages": [{"role": "user", "content": "hi"}]})
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
conn.request("POST", "/v1/messages", body=body(True), headers={"content-type": "application/json"})
reply = conn.getresponse()
got = b""
while b"THE-ANSWER" not in got:
    got += reply.fp.read1(65536)
conn.sock.close()  # the text is in: hang up before the usage arrives
print("A", reply.status, flush=True)
'''


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
@pytest.mark.parametrize("provider_ends", ["whole", "cut"])
def test_hanging_up_before_the_usage_event_does_not_dodge_the_meter(tmp_path, backend,
                                                                    provider_ends):
    from evalq.workers.sandbox import DOOR_PORT

    provider, gateway = Provider(), Gateway()
    folder = Path(tempfile.mkdtemp(prefix="evalq-hangup-", dir="/tmp"))
    profile = new_profile(tmp_path / "runs")
    profile.workspace.mkdir()
    try:
        run = gateway.open_run("hangup", folder / "door.sock", [Upstream(provider.url)],
                               budgets=RunBudgets(max_tokens=100))
        done = get_agent_sandbox(backend).run(AgentJob(
            argv=["/usr/bin/python3", "-c", AGENT, str(DOOR_PORT)], env=profile.env,
            workspace=profile.workspace, profile_root=profile.root, limits=PROBE_LIMITS,
            door=run, label="hangup"))
        assert done.exit_code == 0, (done.stdout, done.stderr)
        assert b"A 200" in done.stdout  # the agent had its answer and is gone
        whole = provider_ends == "whole"
        read_to_the_end = provider.finish(tail=whole)
        run.close()  # (waits for the request still in flight to be recorded)
        (record,) = run.records()
        assert record["stream"] and record["input_tokens"] == 10, record
        if whole:
            assert read_to_the_end, "the gateway stopped reading when the agent hung up"
            assert record["output_tokens"] == OUTPUT_TOKENS, record
            assert run.exhausted == "tokens budget spent (510 of 100)", run.exhausted
        else:  # no output count ever came: charged at its worst case (its max_tokens)
            assert record["output_tokens"] is None, record
            assert record["charged"].startswith("at its worst case (request 1 reported no "
                                                "output_tokens)"), record
            worst = record["request_bytes"] + 1000  # input at most a token a byte
            assert run.exhausted == f"tokens budget spent ({worst} of 100)", run.exhausted
            assert run.totals()["output_tokens"] is None  # unknown, never 0
    finally:
        gateway.close()
        provider.close()
        profile.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


PARALLEL = r"""
import json, sys, threading, urllib.request, urllib.error
url, n = sys.argv[1], int(sys.argv[2])
codes = []
def call():
    body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 1000,
                       "messages": [{"role": "user", "content": "hi"}]}).encode()
    req = urllib.request.Request(url + "/v1/messages", data=body, method="POST",
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            codes.append(r.status)
    except urllib.error.HTTPError as e:
        codes.append(e.code)
threads = [threading.Thread(target=call) for _ in range(n)]
for t in threads: t.start()
for t in threads: t.join()
print("CODES", json.dumps(sorted(codes)))
"""


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_many_model_calls_at_once_overshoot_a_token_budget_by_a_few_at_most(tmp_path, backend):
    from evalq.modelserver import ModelServer
    from evalq.modelserver.script import parse_script
    from evalq.workers.gateway.run import MAX_IN_FLIGHT_BUDGETED
    from evalq.workers.sandbox import DOOR_PORT

    calls, gate = 16, threading.Event()
    script = parse_script({"fallback": {"text": "ok", "usage": {
        "input_tokens": 600, "output_tokens": 400, "cache_read_tokens": 0}}})
    folder = Path(tempfile.mkdtemp(prefix="evalq-burst-", dir="/tmp"))
    profile = new_profile(tmp_path / "runs")
    profile.workspace.mkdir()
    gateway = Gateway()
    out: dict = {}
    try:
        with ModelServer(script, gate=gate) as server:
            run = gateway.open_run("burst", folder / "door.sock", [Upstream(server.url)],
                                   budgets=RunBudgets(max_tokens=1000))  # one call's worth
            job = AgentJob(argv=["/usr/bin/python3", "-c", PARALLEL,
                                 f"http://127.0.0.1:{DOOR_PORT}", str(calls)],
                           env=profile.env, workspace=profile.workspace,
                           profile_root=profile.root, limits=PROBE_LIMITS,
                           door=run, label="burst")
            agent = threading.Thread(target=lambda: out.update(
                done=get_agent_sandbox(backend).run(job)), daemon=True)
            agent.start()
            try:
                # the first few reach the provider; the rest wait in the gateway
                assert server.wait_in_flight(MAX_IN_FLIGHT_BUDGETED)
                assert run.waiting.wait_for("model", calls - MAX_IN_FLIGHT_BUDGETED, 30), \
                    f"{server.in_flight} calls reached the provider at once"
                assert server.in_flight == MAX_IN_FLIGHT_BUDGETED
            finally:
                gate.set()
                agent.join(60)
            reached = len(server.exchanges)
        done = out["done"]
        assert done.exit_code == 0, done.stderr
        codes = json.loads(done.stdout.decode().split("CODES", 1)[1])
        # those in flight were let finish; once charged, every waiting one was refused
        assert reached == MAX_IN_FLIGHT_BUDGETED and server.max_in_flight == reached
        assert codes == [200] * reached + [429] * (calls - reached), codes
        assert run.exhausted.startswith("tokens budget spent"), run.exhausted
    finally:
        gateway.close()
        profile.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


FLOOD = r"""
import socket
held = []
for _ in range(1000):  # connections to the door, each held open
    try:
        held.append(socket.create_connection(("127.0.0.1", 8976), timeout=30))
    except OSError:
        break
with open("ready", "w") as f:
    f.write(str(len(held)))
with open("go") as f:  # hold them until the test has looked
    f.read()
"""


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_a_flood_of_connections_to_the_door_cannot_starve_other_runs(tmp_path, backend):
    """One gateway serves every run of a worker: its file descriptors are shared. An agent
    holding 1,000 connections to its door keeps at most MAX_CONNECTIONS_PER_RUN of them, and
    another run on the same gateway is served meanwhile."""
    from evalq.modelserver import ModelServer
    from evalq.modelserver.script import parse_script
    from evalq.workers.gateway.gateway import MAX_CONNECTIONS_PER_RUN
    from evalq.workers.gateway.unix_client import UnixConnection

    script = parse_script({"fallback": {"text": "ok", "usage": {"input_tokens": 1,
                                                                "output_tokens": 1}}})
    folder = Path(tempfile.mkdtemp(prefix="evalq-flood-", dir="/tmp"))
    profile = new_profile(tmp_path / "runs")
    profile.workspace.mkdir()
    for name in ("ready", "go"):
        os.mkfifo(profile.workspace / name)
    gateway, out = Gateway(), {}
    try:
        with ModelServer(script) as server:
            flooded = gateway.open_run("flood", folder / "a.sock", [Upstream(server.url)])
            other = gateway.open_run("other", folder / "b.sock", [Upstream(server.url)])
            before = _fds()
            job = AgentJob(argv=["/usr/bin/python3", "-c", FLOOD], env=profile.env,
                           workspace=profile.workspace, profile_root=profile.root,
                           limits=PROBE_LIMITS, door=flooded, label="flood")
            agent = threading.Thread(target=lambda: out.update(
                done=get_agent_sandbox(backend).run(job)), daemon=True)
            agent.start()
            try:
                with open(profile.workspace / "ready") as ready:  # the agent holds them now
                    connected = int(ready.read())
                statuses = []
                for _ in range(2):  # (the gateway's loop also closes what it refused)
                    conn = UnixConnection(str(other.socket_path))
                    conn.request("POST", "/v1/messages/count_tokens", body=b"{}",
                                 headers={"Content-Type": "application/json"})
                    statuses.append(conn.getresponse().status)
                    conn.close()
                held = len(flooded.http_server.open)
                grown = _fds() - before
            finally:
                with open(profile.workspace / "go", "w"):
                    pass
                agent.join(60)
        assert out["done"].exit_code == 0, out["done"].stderr
        assert connected == 1000  # the agent's connect() succeeded; the gateway hung up
        assert held <= MAX_CONNECTIONS_PER_RUN and grown <= MAX_CONNECTIONS_PER_RUN + 16, \
            (held, grown)
        assert statuses == [200, 200]
    finally:
        gateway.close()
        profile.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


HAMMER = r"""
import http.client, sys
conn = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=30)
codes = {}
for _ in range(int(sys.argv[2])):  # refused by the gateway itself: thousands a second
    try:
        conn.request("POST", "/v1/batches", body="{}", headers={"content-type": "application/json"})
        response = conn.getresponse()
        response.read()
        codes[response.status] = codes.get(response.status, 0) + 1
    except (OSError, http.client.HTTPException):
        conn = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=30)
print("CODES", codes)
"""


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_a_request_loop_cannot_grow_the_gateways_records_without_bound(tmp_path, backend,
                                                                       monkeypatch):
    """Every request through the door is a record in the worker's memory; past
    MAX_REQUESTS_PER_RUN (200 here) none is served or kept, and the run is stopped."""
    from evalq.workers.gateway import run as gateway_run
    from evalq.workers.sandbox import DOOR_PORT

    monkeypatch.setattr(gateway_run, "MAX_REQUESTS_PER_RUN", 200)
    folder = Path(tempfile.mkdtemp(prefix="evalq-loop-", dir="/tmp"))
    profile = new_profile(tmp_path / "runs")
    profile.workspace.mkdir()
    gateway = Gateway()
    try:
        run = gateway.open_run("loop", folder / "door.sock", [Upstream("http://127.0.0.1:9")])
        done = get_agent_sandbox(backend).run(AgentJob(
            argv=["/usr/bin/python3", "-c", HAMMER, str(DOOR_PORT), "1000"], env=profile.env,
            workspace=profile.workspace, profile_root=profile.root, limits=PROBE_LIMITS,
            door=run, label="loop"))
        assert done.exit_code == 0, done.stderr
        assert b"CODES {403: 200, 429: 800}" in done.stdout, done.stdout
        assert len(run.records()) == 200
        assert run.exhausted == "requests through the door over 200"
    finally:
        gateway.close()
        profile.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


MALFORMED = r"""
import socket, sys
for _ in range(int(sys.argv[1])):  # each one a fresh connection with a request aiohttp rejects
    s = socket.create_connection(("127.0.0.1", 8976), timeout=30)
    s.sendall(b"POST /v1/messages HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n")
    s.recv(65536)
    s.close()
print("SENT")
"""


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_malformed_requests_in_a_loop_do_not_flood_the_workers_log(tmp_path, backend, caplog):
    from evalq.workers.gateway.gateway import MAX_LOGGED_ERRORS_PER_RUN

    folder = Path(tempfile.mkdtemp(prefix="evalq-bad-", dir="/tmp"))
    profile = new_profile(tmp_path / "runs")
    profile.workspace.mkdir()
    gateway = Gateway()
    try:
        run = gateway.open_run("bad", folder / "door.sock", [Upstream("http://127.0.0.1:9")])
        with caplog.at_level("DEBUG"):
            done = get_agent_sandbox(backend).run(AgentJob(
                argv=["/usr/bin/python3", "-c", MALFORMED, "300"], env=profile.env,
                workspace=profile.workspace, profile_root=profile.root, limits=PROBE_LIMITS,
                door=run, label="bad"))
            run.close()  # (every connection's handler has run)
        assert done.exit_code == 0 and b"SENT" in done.stdout, done.stderr
        logged = [r for r in caplog.records if "Error handling request" in r.getMessage()]
        assert 1 <= len(logged) <= MAX_LOGGED_ERRORS_PER_RUN, len(logged)
    finally:
        gateway.close()
        profile.cleanup()
        shutil.rmtree(folder, ignore_errors=True)
