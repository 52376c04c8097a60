"""Replies in the chat wire formats, whole or as server-sent events, from one scripted Turn.

(The OpenAI Responses API has its own module, `responses`.)

Usage in a script uses evalq's convention (input_tokens excludes cache reads and writes);
each format maps it the way that provider reports it.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Iterator

from evalq.report.json_text import dumps
from evalq.modelserver.script import Turn


def new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


ERROR_TYPES = {429: "rate_limit_error", 529: "overloaded_error"}


def error_body(api: str, status: int) -> dict[str, Any]:
    """What a provider sends with an error status, in the shape its clients parse."""
    kind = ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    message = f"scripted error {status}"
    if api == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "code": str(status)}}


def with_usage(reply: dict[str, Any], usage: dict[str, Any] | None) -> dict[str, Any]:
    """The reply with its usage object, unless the turn reports none."""
    if usage is not None:
        reply["usage"] = usage
    return reply


def sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    body = data if isinstance(data, str) else dumps(data)
    return f"{head}data: {body}\n\n".encode()


# ------------------------------------------------------------------ Anthropic messages
def anthropic_usage(usage: dict[str, Any]) -> dict[str, int] | None:
    if not usage:
        return None
    out = {"input_tokens": usage.get("input_tokens") or 0,
           "output_tokens": usage.get("output_tokens") or 0}
    if usage.get("cache_read_tokens") is not None:
        out["cache_read_input_tokens"] = usage["cache_read_tokens"]
    if usage.get("cache_write_tokens") is not None:
        out["cache_creation_input_tokens"] = usage["cache_write_tokens"]
    return out


def _anthropic_blocks(turn: Turn) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if turn.text:
        blocks.append({"type": "text", "text": turn.text})
    for call in turn.tool_calls:
        blocks.append({"type": "tool_use", "id": new_id("toolu_"), "name": call.name,
                       "input": call.arguments})
    return blocks


def anthropic_message(turn: Turn, model: str) -> dict[str, Any]:
    message = {"id": new_id("msg_"), "type": "message", "role": "assistant", "model": model,
               "content": _anthropic_blocks(turn),
               "stop_reason": "tool_use" if turn.tool_calls else "end_turn",
               "stop_sequence": None}
    return with_usage(message, anthropic_usage(turn.reported_usage))


def anthropic_stream(turn: Turn, model: str) -> Iterator[bytes]:
    whole = anthropic_message(turn, model)
    start = {**whole, "content": [], "stop_reason": None}
    if "usage" in whole:
        start["usage"] = {**whole["usage"], "output_tokens": 0}
    yield sse("message_start", {"type": "message_start", "message": start})
    for index, block in enumerate(whole["content"]):
        if block["type"] == "text":
            yield sse("content_block_start", {"type": "content_block_start", "index": index,
                                              "content_block": {"type": "text", "text": ""}})
            yield sse("content_block_delta", {"type": "content_block_delta", "index": index,
                                              "delta": {"type": "text_delta",
                                                        "text": block["text"]}})
        else:
            yield sse("content_block_start", {"type": "content_block_start", "index": index,
                                              "content_block": {**block, "input": {}}})
            yield sse("content_block_delta", {"type": "content_block_delta", "index": index,
                                              "delta": {"type": "input_json_delta",
                                                        "partial_json": dumps(
                                                            block["input"])}})
        yield sse("content_block_stop", {"type": "content_block_stop", "index": index})
    delta: dict[str, Any] = {"type": "message_delta",
                             "delta": {"stop_reason": whole["stop_reason"],
                                       "stop_sequence": None}}
    if "usage" in whole:
        delta["usage"] = whole["usage"]
    yield sse("message_delta", delta)
    yield sse("message_stop", {"type": "message_stop"})


# ------------------------------------------------------------------ OpenAI chat completions
#: (prompt, completion, prompt details) field names of each OpenAI API's usage object.
OPENAI_USAGE_NAMES = {"chat": ("prompt_tokens", "completion_tokens", "prompt_tokens_details"),
                      "responses": ("input_tokens", "output_tokens", "input_tokens_details")}


def openai_usage(usage: dict[str, Any], api: str = "chat") -> dict[str, Any] | None:
    """OpenAI counts cached tokens inside the prompt (evalq's scripts keep them apart), and
    names the cached count only when the script gives one."""
    if not usage:
        return None
    prompt_key, completion_key, details_key = OPENAI_USAGE_NAMES[api]
    cached = usage.get("cache_read_tokens") or 0
    prompt = (usage.get("input_tokens") or 0) + cached
    completion = usage.get("output_tokens") or 0
    out: dict[str, Any] = {prompt_key: prompt, completion_key: completion,
                           "total_tokens": prompt + completion}
    if usage.get("cache_read_tokens") is not None:
        out[details_key] = {"cached_tokens": cached}
    return out


def _openai_calls(turn: Turn) -> list[dict[str, Any]]:
    return [{"id": new_id("call_"), "type": "function",
             "function": {"name": c.name, "arguments": dumps(c.arguments)}}
            for c in turn.tool_calls]


def openai_completion(turn: Turn, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    calls = _openai_calls(turn)
    if calls:
        message["tool_calls"] = calls
    reply: dict[str, Any] = {
        "id": new_id("chatcmpl-"), "object": "chat.completion", "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message,
                     "finish_reason": "tool_calls" if calls else "stop"}]}
    return with_usage(reply, openai_usage(turn.reported_usage))


def openai_stream(turn: Turn, model: str, include_usage: bool) -> Iterator[bytes]:
    base = {"id": new_id("chatcmpl-"), "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse(None, {**base, "choices": [{"index": 0, "delta": delta,
                                               "finish_reason": finish}]})

    yield chunk({"role": "assistant", "content": ""})
    if turn.text:
        yield chunk({"content": turn.text})
    calls = _openai_calls(turn)
    for index, call in enumerate(calls):
        yield chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                     "function": {"name": call["function"]["name"],
                                                  "arguments": ""}}]})
        yield chunk({"tool_calls": [{"index": index, "function": {
            "arguments": call["function"]["arguments"]}}]})
    yield chunk({}, "tool_calls" if calls else "stop")
    usage = openai_usage(turn.reported_usage)
    if include_usage and usage is not None:
        yield sse(None, {**base, "choices": [], "usage": usage})
    yield sse(None, "[DONE]")
