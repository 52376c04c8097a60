"""Through a run's door, a provider as strict as the real ones sees only its documented paths,
its own auth headers and bodies it accepts: the door serves an upstream `https://host/v1` at
`/v1`, so an agent's `POST /v1/responses` reaches `/v1/responses`, never `/v1/v1/responses`."""

from __future__ import annotations

from gateway_support import send, sock_dir  # noqa: F401 - fixture
from strict_provider import StrictProvider
from evalq.unix_sockets import bound_unix_socket
from evalq.modelserver.script import parse_script
from evalq.workers.door import open_door
from evalq.workers.gateway import PLACEHOLDER_KEY

KEY = "sk-strict-provider-key-0123456789"
OK = {"text": "ok", "usage": {"input_tokens": 12, "output_tokens": 3, "cache_read_tokens": 0,
                              "cache_write_tokens": 0}}
MESSAGES = [{"role": "user", "content": "hi"}]


def _entrance(door, folder) -> str:
    """A unix socket of this test's that the door's run serves too (a sandbox's listener
    would arrive the same way, through serve_listener), for requests sent from here."""
    path = folder / "door.sock"
    listener = bound_unix_socket(path)
    listener.listen(16)
    door.run.gateway.serve_listener(door.run, listener)
    return str(path)


def test_openai_calls_reach_the_documented_paths_with_a_bearer_key(sock_dir):
    with StrictProvider(parse_script({"fallback": OK}), "openai", KEY) as provider, \
            open_door(provider.url + "/v1", {"OPENAI_API_KEY": KEY}, api="openai") as door:
        agent = {"Authorization": f"Bearer {PLACEHOLDER_KEY}"}
        entrance = _entrance(door, sock_dir)
        calls = [("/v1/responses", {"model": "gpt-5", "input": "hi"}),
                 ("/v1/responses", {"model": "gpt-5", "input": "hi", "stream": True}),
                 ("/v1/chat/completions", {"model": "gpt-5", "messages": MESSAGES}),
                 # a stream that does not ask for usage: the gateway asks, in a shape the
                 # provider accepts
                 ("/v1/chat/completions", {"model": "gpt-5", "messages": MESSAGES,
                                           "stream": True})]
        for path, body in calls:
            reply = send(entrance, path, body, headers=agent)
            assert reply.status == 200, (path, reply.raw[:300])
        assert provider.rejected == []
        assert [e.path for e in provider.exchanges] == [p for p, _ in calls]
        records = door.run.records()
        assert [r["usage_requested"] for r in records] == [False, False, False, True]
        assert door.run.totals()["input_tokens"] == 4 * 12


def test_anthropic_calls_carry_its_key_header_and_nothing_it_refuses(sock_dir):
    with StrictProvider(parse_script({"fallback": OK}), "anthropic", KEY) as provider, \
            open_door(provider.url, {"ANTHROPIC_API_KEY": KEY}, auth="x-api-key",
                      api="anthropic") as door:
        agent = {"x-api-key": PLACEHOLDER_KEY, "anthropic-version": "2023-06-01"}
        entrance = _entrance(door, sock_dir)
        body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": MESSAGES}
        for extra in ({}, {"stream": True}):
            reply = send(entrance, "/v1/messages?beta=true", {**body, **extra},
                         headers=agent)
            assert reply.status == 200, reply.raw[:300]
        assert send(entrance, "/v1/messages/count_tokens",
                    {"model": "claude-sonnet-4-5", "messages": MESSAGES},
                    headers=agent).status == 200
        assert provider.rejected == []
        assert [e.path for e in provider.exchanges] == ["/v1/messages"] * 2
        # the provider's own refusals still come back unchanged: a body it rejects
        bad = send(entrance, "/v1/messages", {"model": "claude-sonnet-4-5",
                                              "messages": MESSAGES}, headers=agent)
        assert bad.status == 400 and provider.rejected[-1][3] == "max_tokens: field required"


def test_the_strict_provider_refuses_what_the_real_apis_refuse():
    """The fake is only worth its checks: a doubled prefix, another path, a wrong key header
    or a body the API rejects each fail."""
    with StrictProvider(parse_script({"fallback": OK}), "openai", KEY) as provider:
        url = provider.url.removeprefix("http://")
        from http.client import HTTPConnection
        import json

        def post(path, body, headers):
            conn = HTTPConnection(url, timeout=10)
            conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json",
                                                          **headers})
            status = conn.getresponse().status
            conn.close()
            return status

        bearer = {"Authorization": f"Bearer {KEY}"}
        chat = {"model": "gpt-5", "messages": MESSAGES}
        assert post("/v1/v1/responses", {"model": "gpt-5", "input": "x"}, bearer) == 404
        assert post("/v1/files", {}, bearer) == 404
        assert post("/v1/chat/completions", chat, {"x-api-key": KEY}) == 401
        assert post("/v1/chat/completions", {**chat, "stream_options": {
            "include_usage": True}}, bearer) == 400
        assert post("/v1/chat/completions", chat, bearer) == 200
        assert [r[2] for r in provider.rejected] == [404, 404, 401, 400]
