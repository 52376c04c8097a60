"""One normalized trajectory per run, in the shape of Harbor's Agent Trajectory Interchange
Format (ATIF v1.4, harbor docs/rfcs/0001-trajectory-format.md), so any adapter's run reads alike.

Where evalq differs from ATIF: step metrics keep evalq's names and meaning (`input_tokens`
excludes cached input, `cache_write_tokens` is kept, None means "not reported", never 0);
`extra.usage_scope` says whether usage is per request or per turn; timestamps are None where
the agent's output has none; tool results carry `is_error`; `final_metrics` is left to metrics.json.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable, Optional

from evalq.report.json_text import dumps, finite
from evalq.workers.agents.numbers import count
from evalq.workers.agents.skill_install import loaded_from_tool_calls

SCHEMA_VERSION = "ATIF-v1.4"
USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def iso_time(value: Any) -> Optional[str]:
    """ISO-8601 UTC from epoch seconds or milliseconds, or an ISO string passed through."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    seconds = value / 1000 if value > 1e11 else value
    try:  # the agent's number: NaN, or a year past 9999, is no time
        moment = datetime.fromtimestamp(seconds, timezone.utc)
    except (ValueError, OverflowError, OSError):
        return None
    return moment.isoformat().replace("+00:00", "Z")


@dataclass
class Step:
    """One message: the task, an agent reply with its tool calls, or the results of those calls."""

    source: str  # "user" | "agent" | "system"
    message: str = ""
    timestamp: Optional[str] = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    usage: Optional[dict[str, Optional[int]]] = None

    def call(self, call_id: str, name: str, arguments: Any) -> None:
        self.tool_calls.append({"tool_call_id": str(call_id), "function_name": str(name),
                                "arguments": arguments if isinstance(arguments, dict)
                                else {"input": arguments}})

    def result(self, call_id: str, content: Any, is_error: bool = False) -> None:
        text = content if isinstance(content, str) else dumps(finite(content), default=str)
        self.results.append({"source_call_id": str(call_id), "content": text,
                             "is_error": bool(is_error)})


def build(agent: str, version: Optional[str], model: Optional[str], steps: Iterable[Step],
          *, usage_scope: str, session_id: Optional[str] = None,
          notes: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """The trajectory document. `usage_scope`: "request", "turn" or "run"; `notes`: why a
    count or a field is missing (the accounting reasons)."""
    out = []
    for index, step in enumerate(steps, 1):
        item: dict[str, Any] = {"step_id": index, "timestamp": step.timestamp,
                                "source": step.source, "message": step.message}
        if step.tool_calls:
            item["tool_calls"] = step.tool_calls
        if step.results:
            item["observation"] = {"results": step.results}
        if step.usage is not None:
            item["metrics"] = {k: count(step.usage.get(k)) for k in USAGE_FIELDS}
        out.append(item)
    return {"schema_version": SCHEMA_VERSION, "session_id": session_id,
            "agent": {"name": agent, "version": version, "model_name": model},
            "steps": out, "extra": {"usage_scope": usage_scope, "notes": dict(notes or {})}}


def encode(trajectory: dict[str, Any]) -> bytes:
    """Strict JSON: the agent's own values (tool arguments) may hold NaN, written as null."""
    return dumps(finite(trajectory), indent=1, default=str).encode()


def tool_calls(trajectory: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for s in trajectory.get("steps") or [] for c in s.get("tool_calls") or []]


def failed_calls(trajectory: dict[str, Any]) -> set[str]:
    """Ids of the tool calls whose result was an error."""
    return {r.get("source_call_id") for s in trajectory.get("steps") or []
            for r in (s.get("observation") or {}).get("results") or [] if r.get("is_error")}


def skill_loaded(trajectory: dict[str, Any], skill: Optional[str]) -> Optional[bool]:
    """R6 from the trace: a call of the skill tool naming the skill, or a read of its SKILL.md,
    that did not fail (any such skill-tool call when no skill is set). None with no steps."""
    if not trajectory.get("steps"):
        return None
    failed = failed_calls(trajectory)
    calls = [(c.get("function_name", ""), c.get("arguments")) for c in tool_calls(trajectory)
             if c.get("tool_call_id") not in failed]
    if not skill:
        return any(name.lower() == "skill" for name, _ in calls)
    return loaded_from_tool_calls(calls, str(skill).rstrip("/").split("/")[-1])
