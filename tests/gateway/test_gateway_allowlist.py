"""Only the run's allowlisted base URLs are reachable; everything else gets a 403 with a JSON
error, reaches no server, and is recorded. A provider's 429 or 5xx comes back unchanged."""

from __future__ import annotations

import json
import socket

import pytest

from gateway_support import gateway, send, sock_dir  # noqa: F401 (fixtures)
from evalq.modelserver import ModelServer
from evalq.modelserver.script import parse_script
from evalq.modelserver.wire import error_body
from evalq.workers.gateway import Upstream

OK = {"text": "ok", "usage": {"input_tokens": 5, "output_tokens": 1}}


@pytest.fixture
def servers():
    """The allowed provider, and another loopback listener the agent should not reach."""
    with ModelServer(parse_script({"turns": [OK] * 3})) as allowed, \
            ModelServer(parse_script({"turns": [OK]})) as other:
        yield allowed, other


def refused_targets(allowed: str, other: str) -> list[str]:
    return [other + "/v1/messages",                  # another loopback port
            allowed.replace("127.0.0.1", "localhost") + "/v1/messages",  # same port, other name
            "https://api.anthropic.com/v1/messages",  # a real provider not on this allowlist
            allowed.replace("http:", "https:") + "/v1/messages",  # other scheme
            allowed + "/v2/messages",                 # outside the path prefix
            allowed + "/v1x/messages",                # a prefix is whole segments
            "/v1/../v2/messages", "/v1/%2e%2e/v2/messages", "/v1/%252e%252e/x",
            "/v1//messages", "/v1/a%2fb", "/v1/a\\b", "/v1/./messages"]


def test_everything_off_the_allowlist_is_refused_and_recorded(servers, gateway, sock_dir):
    allowed, other = servers
    run = gateway.open_run("a", sock_dir / "g.sock", upstreams=[
        Upstream(allowed.url + "/v1")])
    targets = refused_targets(allowed.url, other.url)
    for target in targets:
        reply = send(str(sock_dir / "g.sock"), target, {"model": "m", "messages": []})
        assert reply.status == 403, target
        assert reply.json()["error"]["type"] == "not_allowed", target
        assert reply.headers["x-should-retry"] == "false"
    assert allowed.exchanges == [] and other.exchanges == []
    records = run.records()
    assert len(records) == len(targets) and all(r["refused"] for r in records)
    assert run.totals()["refused"] == len(targets) and run.totals()["forwarded"] == 0
    # and the allowed endpoint works, by path (the gateway mirrors the upstream's paths: its
    # base URL's /v1 is the agent's /v1, never doubled) and as an absolute URL
    assert send(str(sock_dir / "g.sock"), "/v1/messages", {"model": "m"}).status == 200
    assert send(str(sock_dir / "g.sock"), allowed.url + "/v1/messages",
                {"model": "m"}).status == 200
    assert [e.path for e in allowed.exchanges] == ["/v1/messages"] * 2


#: what a key-holding door must not pass: reads of the provider account (stored completions,
#: files, batches, responses, other models' data) and billed endpoints it cannot meter
ACCOUNT_REQUESTS = [("GET", "/v1/files"), ("GET", "/v1/files/file-1/content"),
                    ("GET", "/v1/batches"), ("GET", "/v1/messages/batches"),
                    ("GET", "/v1/chat/completions"), ("GET", "/v1/chat/completions/chatcmpl-1"),
                    ("GET", "/v1/chat/completions/chatcmpl-1/messages"),
                    ("GET", "/v1/responses/resp_1"), ("GET", "/v1/responses/resp_1/input_items"),
                    ("DELETE", "/v1/responses/resp_1"), ("GET", "/v1/models"),
                    ("GET", "/v1/organization/usage/completions"), ("HEAD", "/v1/messages"),
                    ("OPTIONS", "/v1/messages"), ("GET", "/v1/messages"),
                    ("POST", "/v1/messages/batches"), ("POST", "/v1/embeddings"),
                    ("POST", "/v1/files"), ("DELETE", "/v1/files/f1"), ("PATCH", "/v1/files/f1"),
                    ("POST", "/v1/completions"), ("POST", "/v1/messages/"),
                    ("POST", "/v1/chat/completions/x"), ("POST", "/v1/responses/resp_1/cancel")]


@pytest.mark.parametrize("api", ["any", "anthropic", "openai"])
def test_only_the_model_call_endpoints_pass(servers, gateway, sock_dir, api):
    """Method and exact path, per the upstream's API: anything else, reads included, is
    refused with a 403 naming what is allowed, recorded, and never reaches the provider."""
    allowed, _ = servers
    run = gateway.open_run("w", sock_dir / "g.sock", upstreams=[Upstream(allowed.url, api=api)])
    door = str(sock_dir / "g.sock")
    for method, path in ACCOUNT_REQUESTS:
        reply = send(door, path, None if method in ("GET", "HEAD") else {"model": "m"},
                     method=method)
        assert reply.status == 403, (method, path)
        if method != "HEAD":
            error = reply.json()["error"]
            assert error["type"] == "not_allowed" and "is not a model call" in error["message"]
    assert allowed.exchanges == []
    records = run.records()
    assert [(r["method"], r["path"]) for r in records] == ACCOUNT_REQUESTS
    assert all(r["refused"] and r["status"] == 403 for r in records)
    # the model calls of the upstream's API pass, the other API's are refused
    calls = {"anthropic": ["/v1/messages", "/v1/messages/count_tokens"],
             "openai": ["/v1/chat/completions", "/v1/responses", "/v1/responses/input_tokens"]}
    for family, paths in calls.items():
        for path in paths:
            reply = send(door, path, {"model": "m", "messages": []})
            forwarded = "x-evalq-gateway" not in reply.headers  # the provider's own answer
            assert forwarded == (api in ("any", family)), (api, path, reply.status)


def test_the_door_mirrors_an_upstream_path_prefix(gateway, sock_dir):
    """The agent's base URL is the upstream's with the origin replaced: with an upstream
    https://host/v1 the agent posts /v1/responses, which reaches /v1/responses (not
    /v1/v1/responses); an upstream rooted deeper keeps its root."""
    with ModelServer(parse_script({"fallback": OK})) as server:
        gateway.open_run("p", sock_dir / "p.sock", upstreams=[Upstream(server.url + "/v1")])
        gateway.open_run("q", sock_dir / "q.sock", upstreams=[
            Upstream(server.url + "/api/v1", api="openai")])
        for path in ("/v1/responses", "/v1/chat/completions", "/v1/messages"):
            assert send(str(sock_dir / "p.sock"), path, {"model": "m"}).status == 200
        assert send(str(sock_dir / "q.sock"), "/api/v1/chat/completions",
                    {"model": "m"}).status == 200
        assert send(str(sock_dir / "q.sock"), "/v1/chat/completions",
                    {"model": "m"}).status == 403
        assert [e.path for e in server.exchanges] == [
            "/v1/responses", "/v1/chat/completions", "/v1/messages", "/api/v1/chat/completions"]


def test_connect_tunnels_are_refused(servers, gateway, sock_dir):
    allowed, _ = servers
    gateway.open_run("c", sock_dir / "g.sock", upstreams=[Upstream(allowed.url)])
    host = allowed.url.split("//")[1]
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(str(sock_dir / "g.sock"))
        sock.sendall(f"CONNECT {host} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        head = sock.recv(4096).decode()
    assert head.startswith("HTTP/1.1 403") and "CONNECT tunnels are refused" in head
    assert allowed.exchanges == []


def test_mounts_route_several_upstreams(servers, gateway, sock_dir):
    allowed, other = servers
    run = gateway.open_run("m", sock_dir / "g.sock", upstreams=[
        Upstream(allowed.url, mount="/anthropic"), Upstream(other.url + "/v1", mount="/oa")])
    assert send(str(sock_dir / "g.sock"), "/anthropic/v1/messages", {"model": "m"}).status \
        == 200
    assert send(str(sock_dir / "g.sock"), "/oa/chat/completions", {"model": "m"}).status == 200
    assert send(str(sock_dir / "g.sock"), "/v1/messages", {"model": "m"}).status == 403
    assert [e.path for e in allowed.exchanges] == ["/v1/messages"]
    assert [e.path for e in other.exchanges] == ["/v1/chat/completions"]
    assert [r["wire"] for r in run.records()] == ["anthropic-messages", "openai-chat", None]


@pytest.mark.parametrize("url,match", [
    ("http://10.1.2.3:8080", "not loopback"), ("https://user:pw@api.example.com", "user info"),
    ("ftp://api.example.com", "http"), ("https://api.example.com/v1/../x", "dot")])
def test_bad_upstreams_are_refused_when_the_run_opens(url, match):
    with pytest.raises(ValueError, match=match):
        Upstream(url)


@pytest.mark.parametrize("path,api", [("/v1/messages", "anthropic"),
                                      ("/v1/chat/completions", "openai"),
                                      ("/v1/responses", "responses")])
def test_provider_429_and_5xx_pass_through_unchanged_and_are_counted(path, api, gateway,
                                                                     sock_dir):
    script = {"turns": [{"status": 429}, {"status": 529}, {"status": 500}, OK]}
    with ModelServer(parse_script(script)) as server:
        run = gateway.open_run("p", sock_dir / "g.sock", upstreams=[Upstream(server.url)])
        body = {"model": "claude-haiku-4-5", "messages": []}
        replies = [send(str(sock_dir / "g.sock"), path, body) for _ in range(4)]
        assert [r.status for r in replies] == [429, 529, 500, 200]
        for reply, status in zip(replies[:3], (429, 529, 500)):
            assert reply.json() == error_body(api, status)
            assert "x-evalq-gateway" not in reply.headers  # the provider's own answer
        totals = run.totals()
        assert (totals["provider_429"], totals["provider_5xx"]) == (1, 2)
        assert totals["retries"] == 3  # the agent sent the same body four times
        # failed calls are not billed, so the one success gives the totals
        assert (totals["input_tokens"], totals["output_tokens"]) == (5, 1)
        assert [r["cost_usd"] for r in run.records()][:3] == [0.0, 0.0, 0.0]
        assert json.dumps(run.records())  # plain data


def test_a_run_held_to_its_models_refuses_any_other(servers, gateway, sock_dir):
    """A condition that declares its models (allowed_models) has the gateway refuse a model
    call naming another, or none: the agent writes the model into every request."""
    allowed, _ = servers
    run = gateway.open_run("pinned", sock_dir / "g.sock", upstreams=[
        Upstream(allowed.url + "/v1")], models={"small", "side"})
    door = str(sock_dir / "g.sock")
    for body in ({"model": "big"}, {"model": "small\n"}, {"messages": []}, {"model": 5}):
        reply = send(door, "/v1/messages", body)
        assert reply.status == 403 and reply.json()["error"]["type"] == "model_not_allowed"
    assert send(door, "/v1/messages", {"model": "small"}).status == 200
    assert send(door, "/v1/messages", {"model": "side"}).status == 200
    assert [e.body.get("model") for e in allowed.exchanges] == ["small", "side"]
    assert run.totals()["refused"] == 4
