"""What a request says about itself: its wire format (from the path), model, streaming, and
prompt size (message count and characters of message text)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES = "anthropic-messages", "openai-chat", "openai-responses"
#: Path endings of the model calls the gateway meters; anything else is forwarded unmetered.
PATH_ENDINGS = (("/messages", ANTHROPIC), ("/chat/completions", OPENAI_CHAT),
                ("/responses", OPENAI_RESPONSES),
                ("/responses/compact", OPENAI_RESPONSES))  # Codex's remote compaction
#: Requests that change nothing billable: forwarded unmetered. Any other write (POST, PUT,
#: PATCH, DELETE) that is not a metered model call is refused, so no billed endpoint the
#: gateway cannot meter (batches, files, embeddings, fine-tuning, ...) slips past a budget.
READ_METHODS = ("GET", "HEAD", "OPTIONS")
FREE_WRITES = ("/messages/count_tokens", "/responses/input_tokens")
#: Keys whose string values are text the model reads (tool arguments and results included).
TEXT_KEYS = ("text", "content", "output", "arguments", "thinking", "instructions", "system")


def wire_format(path: str) -> Optional[str]:
    """The metered format of a request path, None for others (count_tokens, models, ...)."""
    path = path.split("?", 1)[0].rstrip("/")
    return next((name for end, name in PATH_ENDINGS if path.endswith(end)), None)


def unmetered_write(method: str, path: str) -> bool:
    """A write to an endpoint that is neither a metered model call nor known to be free."""
    path = path.split("?", 1)[0].rstrip("/")
    return method.upper() not in READ_METHODS and wire_format(path) is None \
        and not path.endswith(FREE_WRITES)


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


@dataclass(frozen=True)
class RequestFacts:
    model: Optional[str] = None
    stream: bool = False
    prompt_messages: Optional[int] = None
    prompt_chars: Optional[int] = None


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
    return RequestFacts(model=model, stream=stream, prompt_messages=messages,
                        prompt_chars=chars if messages is not None else None)
