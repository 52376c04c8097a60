"""Token usage read off the wire, whole replies and server-sent events, in evalq's convention:
input_tokens excludes cache reads and writes. A count the provider did not send stays None.

Anthropic streams split usage over message_start and message_delta (the delta's counts are
cumulative and win; message_start's output count is a placeholder, so a stream cut before its
message_delta has no output count); OpenAI chat streams carry it in a last chunk (when asked
for); Responses streams in response.completed (or .incomplete / .failed).
"""

from __future__ import annotations

import json
from typing import Any, Iterator, Optional

from evalq.workers.gateway.wire import ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES

KEYS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
Usage = dict[str, Optional[int]]
RESPONSE_DONE = ("response.completed", "response.incomplete", "response.failed")


def _count(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 \
        else None


def _dig(data: Any, *keys: str) -> Any:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def empty() -> Usage:
    return dict.fromkeys(KEYS)


def anthropic_usage(raw: Any) -> Usage:
    return {"input_tokens": _count(_dig(raw, "input_tokens")),
            "output_tokens": _count(_dig(raw, "output_tokens")),
            "cache_read_tokens": _count(_dig(raw, "cache_read_input_tokens")),
            "cache_write_tokens": _count(_dig(raw, "cache_creation_input_tokens"))}


def openai_usage(raw: Any, prompt_key: str, output_key: str, details_key: str) -> Usage:
    """OpenAI counts cached tokens inside the prompt count; evalq keeps them apart."""
    prompt, cached = _count(_dig(raw, prompt_key)), _count(_dig(raw, details_key,
                                                               "cached_tokens"))
    uncached = prompt - cached if prompt is not None and cached is not None \
        and cached <= prompt else prompt if cached is None else None
    return {"input_tokens": uncached, "output_tokens": _count(_dig(raw, output_key)),
            "cache_read_tokens": cached, "cache_write_tokens": None}


def chat_usage(raw: Any) -> Usage:
    return openai_usage(raw, "prompt_tokens", "completion_tokens", "prompt_tokens_details")


def responses_usage(raw: Any) -> Usage:
    return openai_usage(raw, "input_tokens", "output_tokens", "input_tokens_details")


def merge(base: Usage, newer: Usage) -> Usage:
    """Fields the newer report carries replace the older ones; absent ones are kept."""
    return {k: newer[k] if newer[k] is not None else base[k] for k in KEYS}


def from_body(wire: Optional[str], body: bytes) -> Usage:
    """Usage of a whole (non-streamed) JSON reply."""
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return empty()
    raw = _dig(payload, "usage")
    if raw is None:
        return empty()
    if wire == ANTHROPIC:
        return anthropic_usage(raw)
    if wire == OPENAI_CHAT:
        return chat_usage(raw)
    if wire == OPENAI_RESPONSES:
        return responses_usage(raw)
    return empty()


class EventParser:
    """Incremental server-sent events: feed bytes, get (event, data) for each complete event;
    with `needle`, only for events whose raw bytes contain it (the rest are not decoded)."""

    def __init__(self, needle: bytes = b"") -> None:
        self.buffer = b""
        self.needle = needle

    def feed(self, chunk: bytes) -> Iterator[tuple[Optional[str], str]]:
        self.buffer += chunk.replace(b"\r\n", b"\n")
        while b"\n\n" in self.buffer:
            block, self.buffer = self.buffer.split(b"\n\n", 1)
            if self.needle not in block:
                continue
            event, data = None, []
            for line in block.decode("utf-8", "replace").split("\n"):
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "event":
                    event = value
                elif name == "data":
                    data.append(value)
            if data:
                yield event, "\n".join(data)


class StreamUsage:
    """Usage of a streamed reply, updated event by event."""

    def __init__(self, wire: Optional[str]):
        self.wire = wire
        # every format puts its counts under a "usage" key: the many text deltas without one
        # are passed by undecoded (a count the provider escaped oddly would be missed, and the
        # budget then charges the call at its worst case: closed, not open)
        self.parser = EventParser(needle=b'"usage"')
        self.usage = empty()

    def feed(self, chunk: bytes) -> None:
        if self.wire is None:
            return
        for event, data in self.parser.feed(chunk):
            if data == "[DONE]":
                continue
            try:
                payload = json.loads(data)
            except ValueError:
                continue
            self._event(event or _dig(payload, "type"), payload)

    def _event(self, kind: Optional[str], payload: Any) -> None:
        if self.wire == ANTHROPIC:
            if kind == "message_start":
                start = anthropic_usage(_dig(payload, "message", "usage"))
                self.usage = merge(self.usage, {**start, "output_tokens": None})
            elif kind == "message_delta":
                self.usage = merge(self.usage, anthropic_usage(_dig(payload, "usage")))
        elif self.wire == OPENAI_CHAT:
            if isinstance(_dig(payload, "usage"), dict):
                self.usage = chat_usage(payload["usage"])
        elif self.wire == OPENAI_RESPONSES and kind in RESPONSE_DONE:
            if isinstance(_dig(payload, "response", "usage"), dict):
                self.usage = responses_usage(payload["response"]["usage"])
