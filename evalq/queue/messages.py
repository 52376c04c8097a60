"""The shapes of the three messages (run_trial, grade_trial, record_result), in one place.

Messages carry ids and artifact references only, never workspaces (DESIGN).
"""

from __future__ import annotations

from typing import Any

from evalq.results.store import AttemptRow, TrialRow


GRADE_FIELDS = ("worker_host", "worker_env", "started_at", "agent_finished_at", "metrics",
                "artifacts")


def trial_ref(trial: TrialRow, attempt: int) -> dict[str, Any]:
    return {"study_id": trial.study_id, "trial_id": trial.id, "attempt": attempt,
            "fixture_id": trial.fixture_id, "condition": trial.condition,
            "repetition": trial.repetition, "fixture_ref": trial.fixture_ref,
            "fixture_digest": trial.fixture_digest}


def grading_payload(trial: TrialRow, row: AttemptRow, regrade: bool = False) -> dict[str, Any]:
    """The grade_trial message for a stored attempt: ids and artifact references only."""
    payload = trial_ref(trial, row.attempt)
    for name in GRADE_FIELDS:
        value = getattr(row, name)
        if value is not None:
            payload[name] = value
    if regrade:
        payload["regrade"] = True
    return payload


def message_for(trial: TrialRow, attempt: int, max_claims: int,
                visibility_timeout: int | None = None) -> dict:
    message = dict(trial_ref(trial, attempt), max_claims=max_claims)
    if visibility_timeout is not None:
        message["visibility_timeout"] = visibility_timeout  # workers warn if theirs is shorter
    return message


def arguments_shown(trial_id: str, attempt: int) -> str:
    """What Flower shows as a task's arguments: readable, and cheaper than Celery's saferepr."""
    return f"trial={trial_id} attempt={attempt}"


def result_payload(ref: dict, **fields) -> dict:
    """A record_result message for a run message's trial: its ids plus the given fields."""
    base = {k: ref[k] for k in ("study_id", "trial_id", "attempt", "fixture_id", "condition",
                                "repetition", "fixture_ref", "fixture_digest")}
    base.update(fields)
    return base
