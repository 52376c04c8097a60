"""The report's section on agent errors: runs where the agent itself broke, per condition,
and the first of those runs with what they left (exit status, model calls, stderr).

Their outcome stays as graded (an agent that crashes has not solved the task); the section is
there so that a broken agent is not read as a weak one.
"""

from __future__ import annotations

from typing import Any

from evalq.analysis.agent_errors import describe_exit
from evalq.plaintext import one_line
from evalq.report import fmt

#: agent-error runs listed; the rest are in report.json's trial_rows
SHOWN = 20


def _cell(text: Any, limit: int = 160) -> str:
    """Agent text for one Markdown table cell: one line, its pipes and backticks escaped."""
    return one_line(None if text is None else str(text), limit).replace("|", "\\|") \
        .replace("`", "'") or fmt.UNAVAILABLE


def agent_error_lines(report: dict[str, Any]) -> list[str]:
    """Markdown lines, none when no condition had an agent error."""
    counts = report.get("agent_errors") or {}
    if not any(c["errors"] for c in counts.values()):
        return []
    lines = ["## Agent errors", "",
             "Runs where the agent itself broke: it exited with an error, was killed, or made "
             "no model call. They keep their graded outcome (usually incorrect).", "",
             "| condition | runs | agent errors | kinds |", "|---|---|---|---|"]
    for name, c in counts.items():
        kinds = "; ".join(f"{kind}: {n}" for kind, n in c["by_kind"].items()) or "none"
        lines.append(f"| {name} | {c['runs']} | {c['errors']} | {kinds} |")
    rows = [r for r in report.get("trial_rows") or [] if r.get("agent_error")]
    lines += ["", "| trial | condition | outcome | agent error | exit status | model calls "
              "| stop reason | last stderr line |", "|---|" + "---|" * 7]
    for r in rows[:SHOWN]:
        lines.append(f"| {r['trial_id']} | {r['condition']} | {r['outcome']} | "
                     f"{r['agent_error']} | {describe_exit(r.get('exit_code'))} | "
                     f"{fmt.count(r.get('model_calls'))} | {_cell(r.get('stop_reason'), 60)} | "
                     f"{_cell(r.get('stderr_last_line'))} |")
    if len(rows) > SHOWN:
        lines.append(f"\n{len(rows) - SHOWN:,} more agent-error runs in report.json "
                     "(`trial_rows`).")
    return lines + [""]
