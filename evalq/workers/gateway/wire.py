"""What a model call says about itself: model, streaming and prompt size (message count and
characters of message text). Its wire format comes from its endpoint (endpoints.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES = "anthropic-messages", "openai-chat", "openai-responses"
#: Keys whose string values are text the model reads (tool arguments and results included).
TEXT_KEYS = ("text", "content", "output", "arguments", "thinking", "instructions", "system")


def text_chars(value: Any) -> int:
    """Characters of message text in a message, content block or list of them: every string
    under a text-like key, tool-use inputs as compact JSON; images and ids are not text."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list):
        return sum(text_chars(item) for item in value)
    if not isinstance(value, dict):
        return 0
    total = sum(text_chars(value[key]) for key in TEXT_KEYS if key in value)
    if isinstance(value.get("input"), dict):  # an Anthropic tool_use block
        total += len(json.dumps(value["input"], separators=(",", ":")))
    return total


#: where each format puts the most output tokens the reply may have, first found wins
MAX_OUTPUT_KEYS = {ANTHROPIC: ("max_tokens",),
                   OPENAI_CHAT: ("max_completion_tokens", "max_tokens"),
                   OPENAI_RESPONSES: ("max_output_tokens",)}


@dataclass(frozen=True)
class RequestFacts:
    model: Optional[str] = None
    stream: bool = False
    prompt_messages: Optional[int] = None
    prompt_chars: Optional[int] = None
    #: the output cap the request sets (None: the model's own limit applies)
    max_output: Optional[int] = None
    #: whether it has stream_options, and whether they ask for usage (include_usage)
    stream_options: bool = False
    usage_asked: bool = False


def _positive_int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 \
        else None


def usage_requested(wire: Optional[str], body: bytes, facts: "RequestFacts") -> Optional[bytes]:
    """The body of an OpenAI chat stream that does not ask for usage, now asking for it
    (`stream_options.include_usage`), else None. Without it the stream carries no counts, so
    no budget could be charged for it: the gateway asks itself, whatever the agent wanted.
    Without stream_options the member is spliced in before the object's closing brace (no
    re-encoding of a prompt of megabytes); with other stream_options the body is rewritten."""
    if wire != OPENAI_CHAT or not facts.stream or facts.usage_asked:
        return None
    if not facts.stream_options:
        return body.rstrip()[:-1] + b',"stream_options":{"include_usage":true}}'
    payload = json.loads(body)
    options = payload.get("stream_options")
    payload["stream_options"] = {**(options if isinstance(options, dict) else {}),
                                 "include_usage": True}
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()


def request_facts(wire: Optional[str], body: bytes) -> RequestFacts:
    """Model, streaming and prompt size of a model request; unknowns stay None."""
    if wire is None or not body:
        return RequestFacts()
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return RequestFacts()
    if not isinstance(payload, dict):
        return RequestFacts()
    model = payload.get("model") if isinstance(payload.get("model"), str) else None
    stream = payload.get("stream") is True
    if wire == OPENAI_RESPONSES:
        items = payload.get("input")
        messages = 1 if isinstance(items, str) else len(items) if isinstance(items, list) \
            else None
        chars = text_chars(items) + text_chars(payload.get("instructions"))
    else:
        items = payload.get("messages")
        messages = len(items) if isinstance(items, list) else None
        chars = text_chars(items) + text_chars(payload.get("system"))
    cap = next((v for v in (_positive_int(payload.get(k)) for k in MAX_OUTPUT_KEYS[wire])
                if v is not None), None)
    options = payload.get("stream_options")
    return RequestFacts(model=model, stream=stream, prompt_messages=messages,
                        prompt_chars=chars if messages is not None else None, max_output=cap,
                        stream_options="stream_options" in payload,
                        usage_asked=isinstance(options, dict)
                        and options.get("include_usage") is True)
