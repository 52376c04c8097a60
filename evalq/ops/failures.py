"""Why attempts failed, counted in SQL: the reasons `evalq run` and `evalq status` show.

Infrastructure and grading failures are evalq's, not the agent's, so their reasons belong where
the user looks (the end of `evalq run`, `evalq status`, the report), not only in a worker's log.
"""

from __future__ import annotations

from sqlalchemy import func, select

from evalq.analysis.agent_errors import AgentErrorCount
from evalq.plaintext import one_line
from evalq.results.store import AttemptRow

FAILURES = ("infrastructure_failure", "grading_failure")
SHOWN = 5


def common_reasons(engine, study_id: str, outcomes=FAILURES,
                   limit: int = SHOWN) -> list[tuple[str, str, int]]:
    """(outcome, reason, attempts) for the most common reasons among attempts with `outcomes`."""
    count = func.count().label("n")
    query = (select(AttemptRow.outcome, AttemptRow.reason, count)
             .where(AttemptRow.study_id == study_id, AttemptRow.outcome.in_(outcomes))
             .group_by(AttemptRow.outcome, AttemptRow.reason)
             .order_by(count.desc(), AttemptRow.outcome, AttemptRow.reason).limit(limit))
    with engine.connect() as conn:
        return [(o, r or "no reason recorded", n) for o, r, n in conn.execute(query)]


def reason_lines(reasons: list[tuple[str, str, int]], indent: str = "  ") -> list[str]:
    return [f"{indent}{n} x {outcome}: {one_line(reason, 300)}" for outcome, reason, n in reasons]


def run_summary(report: dict, reasons: list[tuple[str, str, int]]) -> list[str]:
    """One screen after a study: outcomes per condition, the commonest failure reasons."""
    lines = [f"study {report['study']['id']}: outcomes per condition"]
    errors = report.get("agent_errors") or {}
    for name, condition in report["conditions"].items():
        shown = ", ".join(f"{k} {v}" for k, v in condition["outcomes"].items() if v) or "none"
        broken = (errors.get(name) or {}).get("errors")
        lines.append(f"  {name}: {shown}" + (f" ({broken} agent error(s): `evalq status "
                                             f"{report['study']['id']}` lists them)"
                                             if broken else ""))
    for name, count in errors.items():
        warning = AgentErrorCount(name, **count).warning()
        if warning:
            lines.append(f"warning: {warning}; the claims are {report['claims']['status']}")
    if reasons:
        lines.append("most common failure reasons:")
        lines += reason_lines(reasons)
    return lines


def failed_trials(report: dict) -> int:
    """Trials whose counted outcome is a failure of evalq's (not the agent's)."""
    return sum(condition["outcomes"].get(o, 0) for condition in report["conditions"].values()
               for o in FAILURES)
