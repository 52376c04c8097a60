"""The gateway holds the key: whatever the agent sends as auth is dropped, the real key reaches
the provider, and nothing the agent gets back (headers, bodies, streams, errors) holds it."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gateway_support import gateway, send, sock_dir  # noqa: F401 (fixtures)
from evalq.modelserver import ModelServer
from evalq.modelserver.script import parse_script
from evalq.workers.gateway import PLACEHOLDER_KEY, Upstream
from evalq.workers.gateway.scrub import MASK, Scrubber

KEY = "sk-ant-REAL-7f3a9c1e5b2d4f6a8c0e"
AGENT_AUTH = {"Authorization": f"Bearer {PLACEHOLDER_KEY}", "x-api-key": PLACEHOLDER_KEY,
              "api-key": PLACEHOLDER_KEY, "X-Goog-Api-Key": "agent-guess",
              "Proxy-Authorization": "Basic eDp5", "Cookie": "session=agent",
              "X-My-Secret-Token": "agent", "OpenAI-Organization": "org-agent",
              "OpenAI-Project": "proj-agent", "anthropic-version": "2023-06-01"}
SCRIPT = {"turns": [{"text": "hi", "usage": {"input_tokens": 3, "output_tokens": 1}}] * 4}


@pytest.mark.parametrize("auth,header,value", [("x-api-key", "x-api-key", KEY),
                                               ("bearer", "Authorization", f"Bearer {KEY}"),
                                               ("api-key", "api-key", KEY)])
def test_agent_auth_is_dropped_and_the_real_key_injected(auth, header, value, gateway,
                                                         sock_dir):
    with ModelServer(parse_script(SCRIPT)) as server:
        gateway.open_run("k", sock_dir / "g.sock", credentials={"THE_KEY": KEY},
                         upstreams=[Upstream(server.url, auth=auth, credential="THE_KEY")])
        replies = [send(str(sock_dir / "g.sock"), "/v1/messages",
                        {"model": "claude-haiku-4-5", "messages": [], "stream": stream},
                        headers=AGENT_AUTH) for stream in (False, True)]
        assert [r.status for r in replies] == [200, 200]
        for exchange in server.exchanges:
            got = {k.lower(): v for k, v in exchange.headers.items()}
            assert got[header.lower()] == value
            sent = json.dumps(exchange.headers)
            assert PLACEHOLDER_KEY not in sent and "agent" not in sent.replace("user-agent", "")
            assert "cookie" not in got and "proxy-authorization" not in got
            assert got["anthropic-version"] == "2023-06-01"  # ordinary headers pass
        for reply in replies:
            assert KEY not in reply.seen()


class EchoHandler(BaseHTTPRequestHandler):
    """A provider that repeats the key back: in a header, a JSON error, and an event stream."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        return

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        key = self.headers.get("x-api-key", "")
        if self.path.endswith("/chat/completions"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            half = len(key) // 2
            for piece in (f"data: {{\"k\": \"{key[:half]}", f"{key[half:]}\"}}\n\n"):
                self.wfile.write(piece.encode())
                self.wfile.flush()
            self.close_connection = True
            return
        body = json.dumps({"error": {"message": f"invalid x-api-key {key}",
                                     "headers": dict(self.headers.items())}}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Echo-Key", key)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def echo_server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), EchoHandler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_a_provider_echoing_the_key_never_shows_it_to_the_agent(echo_server, gateway,
                                                                sock_dir):
    run = gateway.open_run("e", sock_dir / "g.sock", credentials={"K": KEY}, upstreams=[
        Upstream(echo_server, auth="x-api-key", credential="K")])
    error = send(str(sock_dir / "g.sock"), "/v1/messages", {"model": "m"}, headers=AGENT_AUTH)
    assert error.status == 401  # passed through
    assert KEY not in error.seen() and MASK.decode() in error.raw.decode()
    assert "X-Echo-Key" not in error.headers
    stream = send(str(sock_dir / "g.sock"), "/v1/chat/completions", {"model": "m"})
    assert stream.status == 200 and KEY not in stream.seen()
    assert json.loads(stream.raw.decode().removeprefix("data: "))["k"] == MASK.decode()
    assert all(KEY not in json.dumps(r) for r in run.records())


def test_upstream_failure_messages_hold_no_key(gateway, sock_dir):
    with ModelServer(parse_script(SCRIPT)) as server:
        url = server.url
    # the server is gone: the gateway answers 502 itself
    gateway.open_run("d", sock_dir / "g.sock", credentials={"K": KEY},
                     upstreams=[Upstream(url, auth="x-api-key", credential="K")])
    reply = send(str(sock_dir / "g.sock"), "/v1/messages", {"model": "m"})
    assert reply.status == 502 and reply.json()["error"]["type"] == "upstream_error"
    assert KEY not in reply.seen()


def test_each_run_is_its_socket_whatever_the_agent_claims(gateway, sock_dir):
    with ModelServer(parse_script(SCRIPT)) as one, ModelServer(parse_script(SCRIPT)) as two:
        run_a = gateway.open_run("a", sock_dir / "a.sock", credentials={"K": "key-of-a"},
                                 upstreams=[Upstream(one.url, auth="x-api-key",
                                                     credential="K")])
        run_b = gateway.open_run("b", sock_dir / "b.sock", credentials={"K": "key-of-b"},
                                 upstreams=[Upstream(two.url, auth="x-api-key",
                                                     credential="K")])
        # run b's agent names run a and a's upstream: it still is run b, and a's host is refused
        claim = {"X-Evalq-Run": "a", "Host": one.url.split("//")[1]}
        assert send(str(sock_dir / "b.sock"), "/v1/messages", {"model": "m"},
                    headers=claim).status == 200
        assert send(str(sock_dir / "b.sock"), one.url + "/v1/messages",
                    {"model": "m"}).status == 403
        assert [e.headers["x-api-key"] for e in two.exchanges] == ["key-of-b"]
        assert one.exchanges == []
        assert run_a.records() == [] and len(run_b.records()) == 2
        run_a.close()
        assert not (sock_dir / "a.sock").exists()
        assert send(str(sock_dir / "b.sock"), "/v1/messages", {"model": "m"}).status == 200


def test_a_missing_credential_is_refused_at_open(gateway, sock_dir):
    with pytest.raises(ValueError, match="no value for credential"):
        gateway.open_run("m", sock_dir / "g.sock", credentials={},
                         upstreams=[Upstream("https://api.anthropic.com", credential="K")])


def test_scrubber_masks_a_key_split_at_every_position():
    for cut in range(len(KEY) + 1):
        stream = Scrubber([KEY])
        text = f"data: before {KEY} after\n\n".encode()
        at = text.index(KEY.encode()) + cut
        out = stream.feed(text[:at]) + stream.feed(text[at:]) + stream.flush()
        assert out == text.replace(KEY.encode(), MASK), cut
    # a tail that merely looks like the start of a key is sent once the stream ends
    stream = Scrubber([KEY])
    assert stream.feed(b"event end sk-") == b"event end " and stream.flush() == b"sk-"
    # an event ending in a blank line goes out at once
    assert Scrubber([KEY]).feed(b"data: {}\n\n") == b"data: {}\n\n"


def test_open_run_refuses_what_it_cannot_serve_safely(gateway, sock_dir):
    upstream = [Upstream("https://api.anthropic.com")]
    (sock_dir / "file").write_text("not a socket")
    with pytest.raises(FileExistsError, match="not a socket"):
        gateway.open_run("f", sock_dir / "file", upstreams=upstream)
    with pytest.raises(ValueError, match="over 107 bytes"):
        gateway.open_run("l", sock_dir / ("x" * 120), upstreams=upstream)
    run = gateway.open_run("r", sock_dir / "r.sock", upstreams=upstream)
    assert (sock_dir / "r.sock").stat().st_mode & 0o777 == 0o600
    with pytest.raises(ValueError, match="already open"):
        gateway.open_run("r", sock_dir / "other.sock", upstreams=upstream)
    with pytest.raises(ValueError, match="share a mount"):
        gateway.open_run("m", sock_dir / "m.sock", upstreams=upstream * 2)
    run.close()
    assert not (sock_dir / "r.sock").exists()
    assert gateway.open_run("r", sock_dir / "r.sock", upstreams=upstream).run_id == "r"
