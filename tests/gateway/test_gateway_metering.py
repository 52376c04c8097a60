"""Tokens the gateway records equal the usage the provider put on the wire, exactly, for the
three wire formats, whole and streamed; a reply without usage leaves every count None."""

from __future__ import annotations

import pytest

from gateway_support import gateway, send, sock_dir  # noqa: F401 (fixtures)
from evalq.modelserver import ModelServer
from evalq.modelserver.script import parse_script
from evalq.workers.gateway import Upstream

ANTHROPIC_USAGE = [{"input_tokens": 1200, "output_tokens": 85, "cache_read_tokens": 3000,
                    "cache_write_tokens": 410},
                   {"input_tokens": 7, "output_tokens": 1, "cache_read_tokens": 0,
                    "cache_write_tokens": 0}]
# OpenAI reports no cache writes; a script giving one would not be on the wire
OPENAI_USAGE = [{"input_tokens": 900, "output_tokens": 64, "cache_read_tokens": 512},
                {"input_tokens": 13, "output_tokens": 2}]

FORMATS = {
    "anthropic-messages": ("/v1/messages", ANTHROPIC_USAGE, {}),
    "openai-chat": ("/v1/chat/completions", OPENAI_USAGE,
                    {"stream_options": {"include_usage": True}}),
    "openai-responses": ("/v1/responses", OPENAI_USAGE, {}),
}
MESSAGES = [{"role": "user", "content": "Fix the bug in slug.py"},
            {"role": "assistant", "content": [{"type": "text", "text": "Reading it."}]}]


def body_for(wire: str, stream: bool, extra: dict) -> dict:
    body = {"model": "claude-sonnet-4-5" if wire.startswith("anthropic") else "gpt-5",
            "stream": stream, **(extra if stream else {})}
    if wire == "openai-responses":
        body.update(instructions="Be brief.", input=MESSAGES)
    elif wire == "openai-chat":
        body["messages"] = [{"role": "system", "content": "Be brief."}, *MESSAGES]
    else:
        body.update(system="Be brief.", messages=MESSAGES)
    return body


@pytest.mark.parametrize("wire", list(FORMATS))
def test_tokens_equal_the_servers_usage_streaming_and_not(wire, gateway, sock_dir):
    path, usages, extra = FORMATS[wire]
    turns = [{"text": f"reply {i}", "usage": u,
              "tool_calls": [{"name": "bash", "arguments": {"cmd": "ls"}}] if i == 0 else []}
             for i, u in enumerate(usages * 2)]
    with ModelServer(parse_script({"turns": turns})) as server:
        run = gateway.open_run("m", sock_dir / "g.sock", upstreams=[Upstream(server.url)])
        for stream in (False, True, False, True):
            reply = send(str(sock_dir / "g.sock"), path, body_for(wire, stream, extra))
            assert reply.status == 200, reply.raw
        records = run.records()
        assert [r["wire"] for r in records] == [wire] * 4
        assert [r["stream"] for r in records] == [False, True, False, True]
        for record, exchange in zip(records, server.exchanges, strict=True):
            assert {k: record[k] for k in exchange.usage} == exchange.usage
        assert [r["cache_write_tokens"] for r in records] == \
            [e.usage["cache_write_tokens"] for e in server.exchanges]
        totals = run.totals()
        for key in server.reported():  # a total is None as soon as one reply lacked the count
            counts = [e.usage[key] for e in server.exchanges]
            assert totals[key] == (None if None in counts else sum(counts)), key
        assert totals["input_tokens"] == server.reported()["input_tokens"] is not None
        assert totals["requests"] == totals["model_calls"] == 4
        # prompt size: the messages (chat counts its system message) and all their text
        chars = len("Fix the bug in slug.py") + len("Reading it.") + len("Be brief.")
        count = 3 if wire == "openai-chat" else 2
        assert {(r["prompt_messages"], r["prompt_chars"]) for r in records} == {(count, chars)}
        assert all(r["request_bytes"] > 0 and r["latency_ms"] > 0 for r in records)
        # the upstream's part of each call is timed apart, inside the whole (gateway-added
        # latency is the difference)
        assert all(0 < r["upstream_ms"] <= r["latency_ms"] for r in records)
        assert all(r["model"] == body_for(wire, False, {})["model"] for r in records)
        # the same body twice is a retry: requests 3 and 4 repeat 1 and 2
        assert [r["retry"] for r in records] == [False, False, True, True]
        assert totals["retries"] == 2
        run.close()


@pytest.mark.parametrize("wire", list(FORMATS))
def test_no_usage_on_the_wire_gives_none_not_zero(wire, gateway, sock_dir):
    path, usages, extra = FORMATS[wire]
    quiet = {"text": "ok", "usage": usages[0], "no_usage": True}
    with ModelServer(parse_script({"turns": [{"text": "ok", "usage": usages[1]}, quiet,
                                             quiet]})) as server:
        run = gateway.open_run("q", sock_dir / "g.sock", upstreams=[Upstream(server.url)])
        for stream in (False, False, True):
            assert send(str(sock_dir / "g.sock"), path,
                        body_for(wire, stream, extra)).status == 200
        records = run.records()
        assert records[0]["input_tokens"] == usages[1]["input_tokens"]
        for record in records[1:]:
            assert [record[k] for k in ("input_tokens", "output_tokens", "cache_read_tokens",
                                        "cache_write_tokens")] == [None] * 4
            assert record["cost_usd"] is None
        totals = run.totals()
        assert totals["input_tokens"] is None and totals["output_tokens"] is None
        assert totals["cost_usd"] is None


def test_stream_usage_reads_the_counts_among_many_text_deltas():
    """Text deltas carry no usage and are passed by unparsed; the events that do carry it are
    read, in each format, however the stream is cut, and a text that merely mentions usage
    changes nothing."""
    from evalq.modelserver.responses import responses_stream
    from evalq.modelserver.script import Turn
    from evalq.modelserver.wire import anthropic_stream, openai_stream
    from evalq.workers.gateway.usage import StreamUsage

    text = 'say "usage" ' * 300  # many deltas, some quoting the key
    streams = {"anthropic-messages": (anthropic_stream(Turn(text=text, usage=ANTHROPIC_USAGE[0]),
                                                       "m"), ANTHROPIC_USAGE[0]),
               "openai-chat": (openai_stream(Turn(text=text, usage=OPENAI_USAGE[0]), "m", True),
                               {**OPENAI_USAGE[0], "cache_write_tokens": None}),
               "openai-responses": (responses_stream(Turn(text=text, usage=OPENAI_USAGE[0]),
                                                     "m"),
                                    {**OPENAI_USAGE[0], "cache_write_tokens": None})}
    for wire, (events, expected) in streams.items():
        raw = b"".join(events)
        for size in (1, 7, 4096, len(raw)):
            meter = StreamUsage(wire)
            for at in range(0, len(raw), size):
                meter.feed(raw[at:at + size])
            assert meter.usage == expected, (wire, size)


def test_stream_usage_from_raw_events_one_byte_at_a_time():
    """The same events cut anywhere give the same counts; a stream cut before message_delta has
    no output count (message_start's is a placeholder)."""
    from evalq.modelserver.responses import responses_stream
    from evalq.modelserver.script import Turn
    from evalq.modelserver.wire import anthropic_stream
    from evalq.workers.gateway.usage import StreamUsage

    turn = Turn(text="hi", usage=ANTHROPIC_USAGE[0])
    raw = b"".join(anthropic_stream(turn, "m"))
    meter = StreamUsage("anthropic-messages")
    for i in range(len(raw)):
        meter.feed(raw[i:i + 1])
    assert meter.usage == ANTHROPIC_USAGE[0]
    cut = StreamUsage("anthropic-messages")
    cut.feed(raw[:raw.index(b"event: message_delta")])
    assert cut.usage["output_tokens"] is None
    assert cut.usage["input_tokens"] == ANTHROPIC_USAGE[0]["input_tokens"]
    responses = StreamUsage("openai-responses")
    responses.feed(b"".join(responses_stream(Turn(text="x", usage=OPENAI_USAGE[0]), "m"))
                   .replace(b"\n", b"\r\n"))
    assert responses.usage == {**OPENAI_USAGE[0], "cache_write_tokens": None}


@pytest.mark.parametrize("prefix,path,wire", [
    ("", "/v1/messages", "anthropic-messages"), ("", "/v1/messages/count_tokens", None),
    ("/v1", "/v1/chat/completions", "openai-chat"),
    ("/openai/v1", "/openai/v1/responses", "openai-responses"),
    ("/openai", "/openai/v1/responses", "openai-responses"),
    ("/v1", "/v1/responses/compact", "openai-responses"),
    ("/v1", "/v1/responses/input_tokens", None)])
def test_wire_format_by_endpoint(prefix, path, wire):
    from evalq.workers.gateway.endpoints import endpoint

    assert endpoint("any", prefix, "POST", path) == wire


@pytest.mark.parametrize("prefix,path", [
    ("/v1", "/v1/responses/resp_1"), ("/v1", "/v1/models"), ("/v1", "/v1/v1/responses"),
    ("/openai/v1", "/openai/v1/responses/"), ("", "/messages"), ("/api/v1", "/v1/messages")])
def test_other_paths_are_no_endpoint(prefix, path):
    from evalq.workers.gateway.endpoints import NotAnEndpoint, endpoint

    with pytest.raises(NotAnEndpoint, match="is not a model call"):
        endpoint("any", prefix, "POST", path)
