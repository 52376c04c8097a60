"""Helpers for reading agents' own output: JSONL event streams and optional-number sums."""

from __future__ import annotations

import json
from typing import Any, Iterable, Optional

from evalq.workers.agents.numbers import count


def jsonl_events(data: bytes) -> list[dict[str, Any]]:
    """Every line of `data` that is a JSON object; other lines (banners, logs) are skipped."""
    events = []
    for line in data.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            events.append(value)
    return events


def opt_int(value: Any) -> Optional[int]:
    """A count from a reported number; None for anything missing or not a count (NaN, a
    negative or absurdly large number, text): evalq.workers.agents.numbers."""
    return count(value)


def opt_sum(values: Iterable[Optional[int]]) -> Optional[int]:
    """Sum of reported numbers; None when any is missing (a partial sum would understate)."""
    total = 0
    for value in values:
        if value is None:
            return None
        total += value
    return total
