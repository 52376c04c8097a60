"""A study's progress from the database alone: every planned trial in exactly one bucket.

Each trial is classified by its latest attempt: a pending attempt (none yet, queued, running,
grading, cancelled) gives its state, a finished one gives the counted outcome (first valid
attempt). So `by_state` and `by_outcome` together, and `by_host` alone, add up to
`planned`.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from evalq.analysis.agent_errors import describe_exit, last_line
from evalq.criteria.status_counts import criteria_counts, criteria_lines
from evalq.models import OUTCOMES
from evalq.plaintext import one_line
from evalq.results.grader_checks import refusal_line, refusals
from evalq.results.store import read_study
from evalq.results.tallies import study_tallies
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
    #: graders refusing a fixture of the study (their self-check of it failed): with_refusals
    grader_refusals: list[dict] = field(default_factory=list)
    #: condition -> {runs, errors, by_kind}: runs whose agent itself broke (with_agent_errors)
    agent_errors: dict[str, dict] = field(default_factory=dict)
    #: the first such runs, with exit status, model calls, stop reason and stderr's tail
    agent_error_runs: list[dict] = field(default_factory=list)
    #: the sentences that make a report's claims exploratory (most runs are agent errors)
    agent_error_warnings: list[str] = field(default_factory=list)
    #: criterion -> condition -> {met, not_met, unresolved} (evalq/criteria/status_counts.py)
    criteria: dict[str, dict] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def study_status(engine, study_id: str, now: float | None = None) -> StudyStatus:
    """Counted by the database (results/tallies.py): a tick costs a few aggregates, not a view
    of every trial. `evalq status --watch` keeps counts current instead (ops/status_watch.py)."""
    now = time.time() if now is None else now
    study = read_study(engine, study_id)
    return status_from_counts(study_id, bool(study.cancelled), study_tallies(engine, study_id, now))


def with_refusals(engine, status: StudyStatus) -> StudyStatus:
    """The status with the graders that refuse one of its fixtures while trials are pending
    (graders/selfcheck.py): why gradings wait and who has to be fixed."""
    pending = status.finished < status.planned
    status.grader_refusals = refusals(engine, status.study) if pending else []
    return status


#: agent-error runs `evalq status` lists
AGENT_ERROR_RUNS_SHOWN = 10


def with_agent_errors(engine, status: StudyStatus) -> StudyStatus:
    """The status with each condition's agent errors (evalq/analysis/agent_errors.py) and the
    first of those runs: a broken agent shows while the study runs, not only in its report."""
    from evalq.results.agent_error_tallies import agent_error_counts, agent_error_runs

    names = [c["name"] for c in read_study(engine, status.study).manifest.get("conditions", [])]
    counts = agent_error_counts(engine, status.study, names)
    status.agent_errors = {name: count.as_dict() for name, count in counts.items()}
    status.agent_error_warnings = [w for w in (c.warning() for c in counts.values()) if w]
    status.agent_error_runs = (agent_error_runs(engine, status.study, AGENT_ERROR_RUNS_SHOWN)
                               if any(c.errors for c in counts.values()) else [])
    status.criteria = criteria_counts(engine, status.study)
    return status


class AgentErrorsEvery:
    """with_agent_errors for a watching status: counting them reads every finished run, so
    a watch (whose ticks cost O(changes)) refreshes them at most every `every` seconds, and
    once more when the study has settled; in between a tick shows the last counts."""

    def __init__(self, engine, every: float = 30.0):
        self.engine, self.every = engine, every
        self.last: Optional[StudyStatus] = None
        self.at = float("-inf")

    def add(self, status: StudyStatus) -> StudyStatus:
        settled = status.finished >= status.planned
        if self.last is None or settled or time.monotonic() - self.at >= self.every:
            self.last, self.at = with_agent_errors(self.engine, status), time.monotonic()
            return status
        status.agent_errors = self.last.agent_errors
        status.agent_error_warnings = self.last.agent_error_warnings
        status.agent_error_runs = self.last.agent_error_runs
        status.criteria = self.last.criteria
        return status


def _agent_error_lines(status: StudyStatus) -> list[str]:
    """Per condition its agent errors, then the runs: all of it the agent's text made safe."""
    if not status.agent_errors:
        return []
    shown = ", ".join(f"{name} {c['errors']}/{c['runs']}"
                      + (" (" + "; ".join(f"{k} {n}" for k, n in c["by_kind"].items()) + ")"
                         if c["by_kind"] else "")
                      for name, c in status.agent_errors.items())
    lines = [f"  {'agent errors':<14} {shown}"]
    lines += [f"  warning: {w}" for w in status.agent_error_warnings]
    for run in status.agent_error_runs:
        calls = "unavailable" if run["model_calls"] is None else run["model_calls"]
        stop = one_line(run.get("stop_reason"), 80) or "unavailable"
        stderr = one_line(last_line(run.get("stderr_tail")), 200) or "(empty)"
        lines.append(f"    {one_line(run['trial_id'])}: {run['outcome']}, the agent "
                     f"{run['agent_error']}; {describe_exit(run['exit_code'])}, model calls "
                     f"{calls}, stop reason {stop}; stderr: {stderr}")
    errors = sum(c["errors"] for c in status.agent_errors.values())
    if errors > len(status.agent_error_runs):
        lines.append(f"    … {errors - len(status.agent_error_runs)} more; each run's stderr "
                     "is on its transcript page (`evalq report`)")
    return lines


def status_from_counts(study_id: str, cancelled: bool, t: dict) -> StudyStatus:
    """A StudyStatus from raw counts: latest pending states, counted outcomes, named hosts,
    first-attempt outcomes (study_tallies' keys); what is not counted is unsent/pending/no host."""
    planned = t["planned"]
    by_state = {s: 0 for s in PENDING_STATES}
    by_state["unsent"] = t["unsent"]
    for state, n in t["states"].items():
        name = state if state in PENDING_STATES else "queued"
        by_state[name] += n
    by_outcome = {o: 0 for o in OUTCOMES}
    by_outcome.update({k: v for k, v in t["outcomes"].items() if v})
    first = {o: 0 for o in OUTCOMES}
    first.update({k: v for k, v in t["first"].items() if v})
    first["pending"] = planned - sum(t["first"].values())
    by_host = {k: v for k, v in t["hosts"].items() if v}
    if planned - sum(by_host.values()):
        by_host[NO_HOST] = planned - sum(by_host.values())
    flag = study_environment_flag(t["environments"])
    status = StudyStatus(study=study_id, planned=planned,
                         finished=sum(by_outcome.values()), cancelled_flag=cancelled,
                         by_state=by_state, by_outcome=by_outcome,
                         by_host=dict(sorted(by_host.items())), first_attempt_outcomes=first,
                         attempts=t["attempts"], expired_leases=t["expired"], environments=flag,
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
    lines += _agent_error_lines(status) + criteria_lines(status.criteria)
    if status.environments_note:
        lines.append(f"  warning: {status.environments_note}")
    for row in status.grader_refusals:
        when = time.strftime("%H:%M:%S", time.gmtime(row["checked_at"]))
        lines.append(f"  warning: {refusal_line(row)} (checked {when} UTC; its trials wait "
                     "for a grader that passes its self-check)")
    if not all(status.checks.values()):
        lines.append(f"  error: counts do not add up: {status.checks}")
    return "\n".join(lines)
