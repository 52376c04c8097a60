"""The shapes of the three messages (run_trial, grade_trial, record_result), in one place.

Messages carry ids and artifact references only, never workspaces (DESIGN).
"""

from __future__ import annotations

from typing import Any

from evalq.results.store import AttemptRow, TrialRow


GRADE_FIELDS = ("worker_host", "worker_env", "started_at", "agent_finished_at", "metrics",
                "artifacts", "session_checks")


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


def trial_label(trial_id: str, attempt: int) -> str:
    """`study/task/condition/rN#a`: how Flower, worker logs and operators name one attempt.

    It is each message's argsrepr (Flower's task list) and its shadow name (worker log lines
    such as "Task evalq.run_trial[...] received" read "Task <label>[...]" instead), and
    cheaper than Celery's saferepr of the payload.
    """
    return f"{trial_id}#{attempt}"


def shadow_name(task_name: str, trial_id: str, attempt: int) -> str:
    """The name a worker logs and Flower lists for a message: the task and its trial."""
    return f"{task_name.removeprefix('evalq.')} {trial_label(trial_id, attempt)}"


def result_payload(ref: dict, **fields) -> dict:
    """A record_result message for a run message's trial: its ids plus the given fields."""
    base = {k: ref[k] for k in ("study_id", "trial_id", "attempt", "fixture_id", "condition",
                                "repetition", "fixture_ref", "fixture_digest")}
    base.update(fields)
    return base


def shown_as(task_name: str, payload: dict) -> dict[str, str]:
    """send_task options that name a message by its trial in Flower and in worker logs."""
    return {"argsrepr": trial_label(payload["trial_id"], payload["attempt"]),
            "shadow": shadow_name(task_name, payload["trial_id"], payload["attempt"])}
