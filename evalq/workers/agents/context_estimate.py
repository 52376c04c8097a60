"""Estimated context size per request, from the messages an agent's own trajectory says it sent.

Kept apart from the reported prompt tokens: this is an estimate, made the same way
for every agent that records its messages: characters of message text and tool-call
arguments, divided by CHARS_PER_TOKEN, rounded up. Tool definitions and provider-side system
text are not in a trajectory and are not counted. Agents whose output does not carry the
messages they sent (Claude Code's stream lacks its system prompt) report None: unavailable.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

CHARS_PER_TOKEN = 4
METHOD = f"message text and tool-call arguments, characters / {CHARS_PER_TOKEN}"
SENT_ROLES = ("system", "user", "assistant", "tool")


def message_chars(message: dict[str, Any]) -> int:
    """Characters of one chat message's text and tool-call arguments."""
    content = message.get("content")
    if isinstance(content, str):
        total = len(content)
    elif isinstance(content, list):
        total = sum(len(part.get("text") or "") for part in content if isinstance(part, dict))
    else:
        total = 0
    for call in message.get("tool_calls") or []:
        function = (call or {}).get("function") or {}
        total += len(function.get("name") or "") + len(function.get("arguments") or "")
    return total


def estimate_tokens(messages: Iterable[dict[str, Any]]) -> int:
    return math.ceil(sum(message_chars(m) for m in messages if m.get("role") in SENT_ROLES)
                     / CHARS_PER_TOKEN)


def per_request(messages: list[dict[str, Any]]) -> list[int]:
    """For each assistant reply, the estimated size of the conversation sent to get it."""
    return [estimate_tokens(messages[:i]) for i, m in enumerate(messages)
            if m.get("role") == "assistant"]
