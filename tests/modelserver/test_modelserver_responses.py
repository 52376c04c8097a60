"""The scripted model server speaks the OpenAI Responses API (whole and streamed, with function
calls and cached tokens), can report no usage at all in every format, replies scripted error
statuses, and records request headers: all checked over loopback against the real server."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from evalq.errors import UserError
from evalq.modelserver import ModelServer
from evalq.modelserver.script import parse_script

USAGE = {"input_tokens": 100, "output_tokens": 20, "cache_read_tokens": 30}
TOOLS = [{"type": "function", "name": "shell", "parameters": {"type": "object"}}]
SCRIPT = {"turns": [
    {"text": "Looking.", "tool_calls": [{"name": "shell", "arguments": {"command": ["ls"]}}],
     "usage": USAGE},
    {"match": {"tool": "shell"}, "text": "Done.", "usage": {"input_tokens": 7,
                                                             "output_tokens": 3}}]}


def post(url: str, body: dict, headers: dict | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={
        "Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def events(raw: bytes) -> list[tuple[str, dict]]:
    """(event name, data) pairs of a server-sent event stream."""
    out = []
    for block in raw.decode().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in lines and lines["data"] != "[DONE]":
            out.append((lines.get("event"), json.loads(lines["data"])))
    return out


def test_responses_whole_reply_with_function_call_and_cached_tokens():
    with ModelServer(parse_script(SCRIPT)) as server:
        status, raw = post(server.url + "/v1/responses",
                           {"model": "gpt-5", "input": "hi", "tools": TOOLS},
                           headers={"Authorization": "Bearer real-key"})
        assert status == 200
        reply = json.loads(raw)
        assert reply["object"] == "response" and reply["status"] == "completed"
        message, call = reply["output"]
        assert message["content"][0] == {"type": "output_text", "text": "Looking.",
                                         "annotations": []}
        assert call["type"] == "function_call" and call["name"] == "shell"
        assert json.loads(call["arguments"]) == {"command": ["ls"]}
        # the Responses API counts cached tokens inside input_tokens, like chat completions
        assert reply["usage"]["input_tokens"] == 130
        assert reply["usage"]["input_tokens_details"] == {"cached_tokens": 30}
        assert reply["usage"]["output_tokens"] == 20 and reply["usage"]["total_tokens"] == 150
        assert server.exchanges[0].api == "responses"
        assert server.exchanges[0].headers["Authorization"] == "Bearer real-key"
        assert server.exchanges[0].tool_names == ["shell"]


def test_responses_stream_events_in_order_with_usage_on_completed():
    with ModelServer(parse_script(SCRIPT)) as server:
        status, raw = post(server.url + "/v1/responses",
                           {"model": "gpt-5", "input": [], "tools": TOOLS, "stream": True})
        assert status == 200
        stream = events(raw)
        names = [name for name, _ in stream]
        assert all(name == data["type"] for name, data in stream)
        assert [data["sequence_number"] for _, data in stream] == list(range(len(stream)))
        assert names[0] == "response.created" and names[-1] == "response.completed"
        assert "usage" not in stream[0][1]["response"]
        text = "".join(d["delta"] for n, d in stream if n == "response.output_text.delta")
        assert text == "Looking."
        added = [d["item"] for n, d in stream if n == "response.output_item.added"]
        assert [item["type"] for item in added] == ["message", "function_call"]
        arguments = "".join(d["delta"] for n, d in stream
                            if n == "response.function_call_arguments.delta")
        assert json.loads(arguments) == {"command": ["ls"]}
        done = stream[-1][1]["response"]
        assert done["usage"]["input_tokens"] == 130
        assert done["usage"]["input_tokens_details"]["cached_tokens"] == 30
        assert done["output"][1]["call_id"] == added[1]["call_id"]
        # the second turn matches because the request declares the tool
        _, raw = post(server.url + "/v1/responses", {"model": "gpt-5", "tools": TOOLS})
        assert json.loads(raw)["output"][0]["content"][0]["text"] == "Done."
        assert server.finished
        assert server.reported() == {"input_tokens": 107, "output_tokens": 23,
                                     "cache_read_tokens": 30, "cache_write_tokens": None}


@pytest.mark.parametrize("path,stream_extra", [
    ("/v1/messages", {}), ("/v1/chat/completions", {"stream_options": {"include_usage": True}}),
    ("/v1/responses", {})])
def test_no_usage_turns_carry_no_usage_in_any_format(path, stream_extra):
    turn = {"text": "quiet", "usage": USAGE}  # the script-wide switch silences every turn
    with ModelServer(parse_script({"no_usage": True, "turns": [turn, turn],
                                   "fallback": turn})) as server:
        _, whole = post(server.url + path, {"model": "m", "messages": [], "input": "x"})
        assert "usage" not in json.loads(whole)
        _, streamed = post(server.url + path, {"model": "m", "messages": [], "stream": True,
                                               **stream_extra})
        datas = [data for _, data in events(streamed)]
        assert datas, "the stream carried no events"
        assert all("usage" not in d and "usage" not in (d.get("message") or {})
                   and "usage" not in (d.get("response") or {}) for d in datas)
        _, fallback = post(server.url + path, {"model": "m", "messages": [], "input": "x"})
        assert "usage" not in json.loads(fallback)
        assert server.reported() == dict.fromkeys(server.reported(), None)


@pytest.mark.parametrize("path,api", [("/v1/messages", "anthropic"),
                                      ("/v1/responses", "responses")])
def test_scripted_error_status_in_the_providers_shape(path, api):
    with ModelServer(parse_script({"turns": [{"status": 429}, {"status": 503},
                                             {"text": "ok"}]})) as server:
        first, raw = post(server.url + path, {"model": "m"})
        second, _ = post(server.url + path, {"model": "m"})
        third, _ = post(server.url + path, {"model": "m"})
        assert (first, second, third) == (429, 503, 200)
        body = json.loads(raw)
        assert body["error"]["type"] == "rate_limit_error"
        assert (body.get("type") == "error") == (api == "anthropic")
        assert [e.status for e in server.exchanges] == [429, 503, 200]
    with pytest.raises(UserError, match="not an HTTP error status"):
        parse_script({"turns": [{"status": 200}]})
