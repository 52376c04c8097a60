"""Trace criteria: a declarative rule checked against the run's normalized trajectory.

Which trajectory counts: the `transcript` artifact the worker wrote after the run, built by the
agent's adapter from what the sandbox captured of the agent process's own output stream (for
mini-swe-agent, the trajectory file the worker told it to write in its logs folder). Nothing
in the agent's workspace is ever read for it, so a trajectory-shaped file the agent writes
there is just a file of its workspace. The stream is the agent program's own account, not an
independent observation (a command the agent runs shares its user in the sandbox): a trace
criterion says what the harness reported. The rule reads events, never runs code:

- `tool_call`: one per tool call (its name, its arguments as JSON text, whether its result
  was an error);
- `message`: one per step's message text (the task, the agent's replies);
- `final_message`: the agent's last message (its final report).
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass
from typing import Any, Optional

from evalq.criteria.spec import TraceRule

#: the most characters of one event's text a rule looks at; the most events it reads
EVENT_TEXT_LIMIT = 65_536
EVENT_LIMIT = 20_000
#: step ids named in evidence
EVIDENCE_STEPS = 10


@dataclass(frozen=True)
class Event:
    kind: str  # tool_call | message | final_message
    step: Any  # the trajectory's step_id
    text: str  # lower-cased: arguments as JSON, or the message
    tool: str = ""  # lower-cased tool name
    failed: Optional[bool] = None


def events(trajectory: Any) -> Optional[list[Event]]:
    """The trajectory's events in order; None when it is no trajectory (nothing to judge)."""
    if not isinstance(trajectory, dict) or not isinstance(trajectory.get("steps"), list):
        return None
    steps = [s for s in trajectory["steps"] if isinstance(s, dict)]
    failed = {str(r.get("source_call_id")) for s in steps
              for r in _list((_dict(s.get("observation"))).get("results"))
              if isinstance(r, dict) and r.get("is_error")}
    out: list[Event] = []
    for step in steps:
        step_id = step.get("step_id")
        message = step.get("message")
        if isinstance(message, str) and message:
            out.append(Event("message", step_id, _cut(message)))
        for call in _list(step.get("tool_calls"))[:EVENT_LIMIT]:
            if not isinstance(call, dict):
                continue
            arguments = call.get("arguments")
            text = arguments if isinstance(arguments, str) else json.dumps(
                arguments, ensure_ascii=False, default=str, sort_keys=True)
            out.append(Event("tool_call", step_id, _cut(text),
                             tool=str(call.get("function_name") or "").lower()[:200],
                             failed=str(call.get("tool_call_id")) in failed))
        if len(out) >= EVENT_LIMIT:
            break
    out = out[:EVENT_LIMIT]
    final = next((s for s in reversed(steps) if s.get("source") == "agent"
                  and isinstance(s.get("message"), str) and s["message"]), None)
    if final is not None:  # the last thing the agent said, even past the limit
        out.append(Event("final_message", final.get("step_id"), _cut(final["message"])))
    return out


def check(rule: TraceRule, found: Optional[list[Event]]) -> tuple[Optional[bool], str, list]:
    """(passed, evidence, matched step ids); passed None when there is no trajectory."""
    if found is None:
        return None, "no trajectory was recorded for this run", []
    return _check(rule, found)


def _check(rule: TraceRule, found: list[Event]) -> tuple[bool, str, list]:
    if rule.all is not None or rule.any is not None:
        parts = [_check(r, found) for r in (rule.all or rule.any or [])]
        verdicts = [p[0] for p in parts]
        passed = all(verdicts) if rule.all is not None else any(verdicts)
        word = "all of" if rule.all is not None else "any of"
        steps = [s for p in parts for s in p[2]]
        return passed, f"{word} (" + "; ".join(p[1] for p in parts) + ")", steps
    matched = [e for e in found if _matches(rule, e)]
    n = len(matched)
    passed = n >= rule.min_count and (rule.max_count is None or n <= rule.max_count)
    bound = f"at most {rule.max_count}" if rule.min_count == 0 else (
        f"{rule.min_count} to {rule.max_count}" if rule.max_count is not None
        else f"at least {rule.min_count}")
    steps = list(dict.fromkeys(e.step for e in matched))
    shown = ", ".join(str(s) for s in steps[:EVIDENCE_STEPS]) + (
        ", …" if len(steps) > EVIDENCE_STEPS else "")
    where = f" at step(s) {shown}" if steps else ""
    return passed, f"{n} {_described(rule)} (wanted {bound}){where}", steps


def _matches(rule: TraceRule, event: Event) -> bool:
    if event.kind != rule.event:
        return False
    if rule.tool is not None and not fnmatch.fnmatchcase(event.tool, rule.tool.lower()):
        return False
    if rule.succeeded is not None and event.failed is rule.succeeded:
        return False
    if rule.contains is not None and not any(w.lower() in event.text for w in rule.contains):
        return False
    return not any(w.lower() in event.text for w in rule.excludes or [])


def _described(rule: TraceRule) -> str:
    what = {"tool_call": "tool call(s)", "message": "message(s)",
            "final_message": "final message"}[rule.event or "message"]
    if rule.tool:
        what += f" of {rule.tool}"
    if rule.succeeded is not None:
        what += " that succeeded" if rule.succeeded else " that failed"
    if rule.contains:
        what += " containing " + " or ".join(repr(w) for w in rule.contains)
    if rule.excludes:
        what += " without " + " or ".join(repr(w) for w in rule.excludes)
    return what


def _cut(text: str) -> str:
    return text[:EVENT_TEXT_LIMIT].lower()


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}
