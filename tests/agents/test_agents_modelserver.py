"""The scripted model server speaks both wire formats, streaming or not, with tool calls, and
reports exactly the usage it is told to."""

from __future__ import annotations

import json
import urllib.request

import pytest

from evalq.errors import UserError
from evalq.modelserver import ModelServer, load_script
from evalq.modelserver.script import parse_script

SCRIPT = {"turns": [
    {"text": "Let me look.", "tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}],
     "usage": {"input_tokens": 100, "output_tokens": 20, "cache_read_tokens": 30,
               "cache_write_tokens": 40}},
    {"match": {"tools": True}, "text": "Done.",
     "usage": {"input_tokens": 110, "output_tokens": 5}}],
    "fallback": {"text": "side reply", "usage": {"input_tokens": 1, "output_tokens": 1}}}


def post(url: str, body: dict) -> bytes:
    request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read()


def sse_data(raw: bytes) -> list:
    return [json.loads(line[6:]) for line in raw.decode().splitlines()
            if line.startswith("data: ") and line != "data: [DONE]"]


TOOLS_OPENAI = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]
TOOLS_ANTHROPIC = [{"name": "bash", "input_schema": {}}]


def test_openai_chat_completions_plain_and_streaming():
    with ModelServer(parse_script(SCRIPT)) as server:
        url = server.url + "/v1/chat/completions"
        first = json.loads(post(url, {"model": "m", "messages": [], "tools": TOOLS_OPENAI}))
        call = first["choices"][0]["message"]["tool_calls"][0]
        assert first["choices"][0]["finish_reason"] == "tool_calls"
        assert call["function"]["name"] == "bash"
        assert json.loads(call["function"]["arguments"]) == {"command": "ls"}
        # OpenAI counts cached tokens inside prompt_tokens
        assert first["usage"] == {"prompt_tokens": 130, "completion_tokens": 20,
                                  "total_tokens": 150, "prompt_tokens_details":
                                  {"cached_tokens": 30}}
        chunks = sse_data(post(url, {"model": "m", "messages": [], "tools": TOOLS_OPENAI,
                                     "stream": True,
                                     "stream_options": {"include_usage": True}}))
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks
                       if c["choices"])
        assert text == "Done."
        assert chunks[-1]["usage"]["prompt_tokens"] == 110
        assert server.finished
        assert server.reported() == {"input_tokens": 210, "output_tokens": 25,
                                     "cache_read_tokens": 30, "cache_write_tokens": 40}


def test_anthropic_messages_plain_and_streaming_with_tool_use():
    with ModelServer(parse_script(SCRIPT)) as server:
        url = server.url + "/v1/messages"
        events = sse_data(post(url, {"model": "c", "messages": [], "tools": TOOLS_ANTHROPIC,
                                     "stream": True}))
        kinds = [e["type"] for e in events]
        assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
        tool_start = next(e for e in events if e["type"] == "content_block_start"
                          and e["content_block"]["type"] == "tool_use")
        assert tool_start["content_block"]["name"] == "bash"
        partial = next(e for e in events if e.get("delta", {}).get("type") == "input_json_delta")
        assert json.loads(partial["delta"]["partial_json"]) == {"command": "ls"}
        delta = next(e for e in events if e["type"] == "message_delta")
        assert delta["delta"]["stop_reason"] == "tool_use"
        assert delta["usage"] == {"input_tokens": 100, "output_tokens": 20,
                                  "cache_read_input_tokens": 30,
                                  "cache_creation_input_tokens": 40}
        # a request without tools does not match the next turn: it gets the fallback
        side = json.loads(post(url, {"model": "c", "messages": []}))
        assert side["content"][0]["text"] == "side reply"
        last = json.loads(post(url, {"model": "c", "messages": [], "tools": TOOLS_ANTHROPIC}))
        assert last["stop_reason"] == "end_turn" and last["content"][0]["text"] == "Done."
        assert [e.turn for e in server.exchanges] == [0, None, 1]
        assert server.reported(only_scripted=True)["input_tokens"] == 210
        assert server.reported()["input_tokens"] == 211


def test_cwd_placeholder_is_filled_from_the_request():
    script = parse_script({"turns": [{"tool_calls": [
        {"name": "Write", "arguments": {"file_path": "{cwd}/a.py"}}]}]})
    with ModelServer(script) as server:
        reply = json.loads(post(server.url + "/v1/messages", {
            "model": "c", "system": "Working directory: /tmp/ws-123\nmore", "messages": []}))
    assert reply["content"][0]["input"] == {"file_path": "/tmp/ws-123/a.py"}


def test_loopback_only_and_bad_scripts_are_refused(tmp_path):
    with pytest.raises(ValueError, match="loopback"):
        ModelServer(parse_script(SCRIPT), host="0.0.0.0")
    bad = tmp_path / "s.json"
    bad.write_text(json.dumps({"turns": [{"usage": {"prompt_tokens": 3}}]}))
    with pytest.raises(UserError, match="unknown usage keys"):
        load_script(bad)
    toml = tmp_path / "s.toml"
    toml.write_text('[[turns]]\ntext = "hi"\nusage = { input_tokens = 3, output_tokens = 1 }\n')
    assert load_script(toml).turns[0].usage == {"input_tokens": 3, "output_tokens": 1}
