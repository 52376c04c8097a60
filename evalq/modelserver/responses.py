"""Replies in the OpenAI Responses API (`POST /v1/responses`), whole or as server-sent events.

Codex CLI and opencode's `openai` provider speak only this API. Usage follows the provider:
`input_tokens` includes cached tokens, which `input_tokens_details.cached_tokens` names.
"""

from __future__ import annotations

import time
from typing import Any, Iterator

from evalq.report.json_text import dumps
from evalq.modelserver.script import Turn
from evalq.modelserver.wire import new_id, openai_usage, sse, with_usage


def _items(turn: Turn) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if turn.text:
        items.append({"type": "message", "id": new_id("msg_"), "status": "completed",
                      "role": "assistant",
                      "content": [{"type": "output_text", "text": turn.text,
                                   "annotations": []}]})
    for call in turn.tool_calls:
        items.append({"type": "function_call", "id": new_id("fc_"), "call_id": new_id("call_"),
                      "name": call.name, "arguments": dumps(call.arguments),
                      "status": "completed"})
    return items


def response_object(turn: Turn, model: str) -> dict[str, Any]:
    reply: dict[str, Any] = {
        "id": new_id("resp_"), "object": "response", "created_at": int(time.time()),
        "status": "completed", "model": model, "output": _items(turn),
        "parallel_tool_calls": True, "tool_choice": "auto", "error": None,
        "incomplete_details": None}
    return with_usage(reply, openai_usage(turn.reported_usage, "responses"))


def responses_stream(turn: Turn, model: str) -> Iterator[bytes]:
    """response.created, per item: output_item.added, its deltas, output_item.done; then
    response.completed carrying the whole response (and its usage, when the turn reports one)."""
    whole = response_object(turn, model)
    sequence = iter(range(1_000_000))

    def event(kind: str, **fields: Any) -> bytes:
        return sse(kind, {"type": kind, "sequence_number": next(sequence), **fields})

    pending = {**whole, "status": "in_progress", "output": []}
    pending.pop("usage", None)
    yield event("response.created", response=pending)
    yield event("response.in_progress", response=pending)
    for index, item in enumerate(whole["output"]):
        if item["type"] == "message":
            yield from _message_events(event, index, item)
        else:
            yield from _call_events(event, index, item)
    yield event("response.completed", response=whole)


def _message_events(event, index: int, item: dict[str, Any]) -> Iterator[bytes]:
    part = item["content"][0]
    where = {"item_id": item["id"], "output_index": index, "content_index": 0}
    yield event("response.output_item.added", output_index=index,
                item={**item, "status": "in_progress", "content": []})
    yield event("response.content_part.added", **where, part={**part, "text": ""})
    yield event("response.output_text.delta", **where, delta=part["text"])
    yield event("response.output_text.done", **where, text=part["text"])
    yield event("response.content_part.done", **where, part=part)
    yield event("response.output_item.done", output_index=index, item=item)


def _call_events(event, index: int, item: dict[str, Any]) -> Iterator[bytes]:
    where = {"item_id": item["id"], "output_index": index}
    yield event("response.output_item.added", output_index=index,
                item={**item, "status": "in_progress", "arguments": ""})
    yield event("response.function_call_arguments.delta", **where, delta=item["arguments"])
    yield event("response.function_call_arguments.done", **where, arguments=item["arguments"])
    yield event("response.output_item.done", output_index=index, item=item)
