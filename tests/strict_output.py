"""Reading evalq's outputs as the strictest consumer would: UTF-8, and JSON without NaN,
Infinity or a lone surrogate (PostgreSQL and most parsers outside Python refuse them)."""

from __future__ import annotations

import json


def _no_constant(word: str):
    raise AssertionError(f"{word} in JSON output")


def strict_json(text: bytes | str):
    """The parsed value; raises on invalid UTF-8, NaN/Infinity or a lone surrogate."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    value = json.loads(text, parse_constant=_no_constant)
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            item.encode("utf-8")  # a lone surrogate (a \udcff escape) raises here
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return value


def strict_jsonl(data: bytes) -> list:
    return [strict_json(line) for line in data.decode("utf-8").splitlines() if line]

