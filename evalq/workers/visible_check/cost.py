"""The repair cost of a run: what it spent after its first visible check.

Every figure is counted from the first check (the worker's clock) to the agent's end, each
from a source the agent does not edit where there is one: the check runs from the worker's
own count, the time from the worker's clock, the tokens from the model gateway's records of
the wire. Commands come from the run's trajectory (the agent harness's own account, read
from its output stream). A figure no source gives is None with the reason, never 0. Human
interventions are never recorded: evalq's runs have no way for a person to step in, and
nothing counts one, so the figure is unavailable rather than a claimed zero.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, Optional

from evalq.workers.visible_check.channel import CheckRecord


def repair_cost(record: CheckRecord, finished_at: float, transcript: Optional[bytes],
                wire_records: Optional[list[dict[str, Any]]]) -> Optional[dict[str, Any]]:
    """The figures after the first check, or None when the check never ran."""
    first = record.first_check_at
    if first is None:
        return None
    why: dict[str, str] = {}
    commands = _commands_after(first, transcript, why)
    tokens = _tokens_after(first, wire_records, why)
    why["human_interventions"] = "not recorded: evalq's runs give a person no way to step in"
    return {"visible_check_runs": record.check_runs,
            "repair_check_runs": record.check_runs - 1,
            "commands_after_first_check": commands,
            "elapsed_seconds": round(max(0.0, finished_at - first), 3),
            "input_tokens_after_first_check": tokens[0],
            "output_tokens_after_first_check": tokens[1],
            "human_interventions": None, "unavailable": why}


def _seconds(stamp: Any) -> Optional[float]:
    if not isinstance(stamp, str):
        return None
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:  # trajectories are in UTC (trajectory.iso_time)
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def _commands_after(first: float, transcript: Optional[bytes], why: dict[str, str]
                    ) -> Optional[int]:
    """Tool calls in trajectory steps stamped at or after the first check."""
    field = "commands_after_first_check"
    try:
        trajectory = json.loads(transcript) if transcript else None
    except (ValueError, RecursionError):
        trajectory = None
    steps = trajectory.get("steps") if isinstance(trajectory, dict) else None
    if not isinstance(steps, list):
        why[field] = "the run has no readable trajectory"
        return None
    calls = [(s.get("timestamp"), s.get("tool_calls")) for s in steps if isinstance(s, dict)]
    calls = [(stamp, len(c)) for stamp, c in calls if isinstance(c, list) and c]
    if not calls:  # the check itself was a command: a harness that records commands has one
        why[field] = "the agent's trajectory records no tool calls (a command agent's never does)"
        return None
    times = [(_seconds(stamp), n) for stamp, n in calls]
    if any(t is None for t, _ in times):
        why[field] = "a step with tool calls has no timestamp"
        return None
    return sum(n for t, n in times if t >= first)


def _tokens_after(first: float, records: Optional[list[dict[str, Any]]],
                  why: dict[str, str]) -> tuple[Optional[int], Optional[int]]:
    """(input, output) tokens the gateway metered for requests that arrived after the first
    check; None when no gateway metered the run or a counted request lacks the count."""
    if records is None:
        for side in ("input", "output"):
            why[f"{side}_tokens_after_first_check"] = "no model gateway metered this run"
        return None, None
    out: list[Optional[int]] = []
    for side in ("input_tokens", "output_tokens"):
        total: Optional[int] = 0
        for item in records:
            if not item.get("wire") or item.get("refused") or item.get("started_at", 0) < first:
                continue
            status = item.get("status")
            if not isinstance(status, int) or not 200 <= status < 300:
                continue  # not billed (the gateway's totals leave these out too)
            value = (item.get("usage") or {}).get(side)
            if not isinstance(value, int):
                why[f"{side}_after_first_check"] = "a metered request lacks the count"
                total = None
                break
            total += value
        out.append(total)
    return out[0], out[1]
