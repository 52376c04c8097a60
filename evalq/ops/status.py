"""A study's progress from the database alone: every planned trial in exactly one bucket.

Each trial is classified by its latest attempt: a pending attempt (none yet, queued, running,
grading, cancelled) gives its state, a finished one gives the counted outcome (first valid
attempt, SPEC D3). So `by_state` and `by_outcome` together, and `by_host` alone, add up to
`planned`.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from evalq.models import OUTCOMES
from evalq.report.attempts import trial_views
from evalq.results.store import attempts_of, read_study, trials_of
from evalq.ops.environments import describe, study_environment_flag

PENDING_STATES = ("unsent", "queued", "running", "grading", "cancelled")
NO_HOST = "(no worker yet)"


@dataclass
class StudyStatus:
    study: str
    planned: int
    finished: int
    cancelled_flag: bool
    by_state: dict[str, int]
    by_outcome: dict[str, int]
    by_host: dict[str, int]
    first_attempt_outcomes: dict[str, int]
    attempts: int
    expired_leases: int
    environments: Optional[dict] = None
    environments_note: Optional[str] = None
    checks: dict[str, bool] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def trial_bucket(view) -> tuple[str, str]:
    """('state', name) for a pending trial, ('outcome', name) for a finished one."""
    latest = view.attempts[-1] if view.attempts else None
    if latest is None:
        return "state", "unsent"
    if latest.outcome is None:
        return "state", latest.state if latest.state in PENDING_STATES else "queued"
    return "outcome", view.outcome


def study_status(engine, study_id: str, now: float | None = None) -> StudyStatus:
    now = time.time() if now is None else now
    study = read_study(engine, study_id)
    trials = trials_of(engine, study_id)
    attempts = attempts_of(engine, study_id)
    views = trial_views(trials, attempts)
    by_state = {s: 0 for s in PENDING_STATES}
    by_outcome = {o: 0 for o in OUTCOMES}
    first = {o: 0 for o in OUTCOMES}
    first["pending"] = 0
    by_host: dict[str, int] = {}
    for view in views:
        kind, name = trial_bucket(view)
        bucket = by_state if kind == "state" else by_outcome
        bucket[name] = bucket.get(name, 0) + 1
        hosts = [a.worker_host for a in view.attempts if a.worker_host]
        host = hosts[-1] if hosts else NO_HOST
        by_host[host] = by_host.get(host, 0) + 1
        first_outcome = view.first.outcome if view.first else "pending"
        first[first_outcome] = first.get(first_outcome, 0) + 1
    expired = sum(1 for a in attempts if a.outcome is None and a.state == "running"
                  and a.lease_expires_at is not None and a.lease_expires_at < now)
    flag = study_environment_flag(attempts)
    planned = len(views)
    status = StudyStatus(study=study_id, planned=planned,
                         finished=sum(by_outcome.values()), cancelled_flag=bool(study.cancelled),
                         by_state=by_state, by_outcome=by_outcome,
                         by_host=dict(sorted(by_host.items())), first_attempt_outcomes=first,
                         attempts=len(attempts), expired_leases=expired, environments=flag,
                         environments_note=describe(flag))
    status.checks = {
        "states_and_outcomes_add_up": sum(by_state.values()) + sum(by_outcome.values()) == planned,
        "hosts_add_up": sum(by_host.values()) == planned,
        "first_attempts_add_up": sum(first.values()) == planned,
    }
    return status


def render(status: StudyStatus) -> str:
    """Plain text for a terminal: one line per group, zero counts left out."""
    def line(title: str, counts: dict[str, int]) -> str:
        shown = ", ".join(f"{k} {v}" for k, v in counts.items() if v) or "none"
        return f"  {title:<14} {shown}"

    head = f"study {status.study}: {status.finished}/{status.planned} trials finished"
    if status.cancelled_flag:
        head += " (cancelled)"
    lines = [head,
             line("pending", status.by_state),
             line("outcomes", status.by_outcome),
             line("first attempt", status.first_attempt_outcomes),
             line("worker hosts", status.by_host),
             f"  {'attempts':<14} {status.attempts} rows"
             + (f", {status.expired_leases} with an expired lease (recovered on resume)"
                if status.expired_leases else "")]
    if status.environments_note:
        lines.append(f"  warning: {status.environments_note}")
    if not all(status.checks.values()):
        lines.append(f"  error: counts do not add up: {status.checks}")
    return "\n".join(lines)
