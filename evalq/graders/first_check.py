"""The session's first attempt: the workspace at the agent's first visible check, graded.

The agent worker snapshots the workspace when the agent first runs the fixture's visible check
(workers/visible_check/) and stores it as the `first_check_workspace` artifact. It is graded
exactly like the final workspace (same hidden tests, grader, sandbox and named criteria), and
its verdict is kept apart from the run's outcome: `first_check_result` (correct, incorrect,
grading_failure) with `first_check_reason`, or None with the reason when there is nothing to
grade. A later repair never changes it. A run that timed out after its first check is sent
to grading for that snapshot alone and keeps its outcome (`ended_run`). (This is not the
queue's "first valid attempt", which numbers whole re-runs of a trial.)
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from evalq.errors import EvalqError

NO_CHECK_DECLARED = "the fixture declares no visible check"
NO_RECORD = "the agent worker recorded nothing of the visible check"


def never_ran(checks: dict[str, Any]) -> str:
    declared = " ".join(str(a) for a in checks.get("declared") or [])[:200]
    return (f"the agent never ran the visible check (`{declared}`) through its command, so "
            "the session has no first attempt to grade")


def no_first_check(fixture, checks: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """The first-check fields when there is no snapshot to grade, else None."""
    if fixture.spec.visible_check is None:
        return {"first_check_result": None, "first_check_reason": NO_CHECK_DECLARED}
    if not isinstance(checks, dict):
        return {"first_check_result": None, "first_check_reason": NO_RECORD}
    if checks.get("first_check_at") is None:
        return {"first_check_result": None, "first_check_reason": never_ran(checks)}
    if checks.get("snapshot_refused"):  # the agent's tree, as a refused final workspace is
        return {"first_check_result": "incorrect",
                "first_check_reason": "not graded: the workspace at the first check cannot be "
                                      f"stored ({checks['snapshot_refused']})"}
    return None


def first_check_stored(checks: Optional[dict[str, Any]], artifacts: dict[str, Any]) -> bool:
    """Whether a run has a first-check workspace to grade (then even a timed-out run goes to
    grading, for that alone: `session_checks.ended` keeps its outcome, see `ended_run`)."""
    return isinstance(checks, dict) and "first_check_workspace" in artifacts


def ended_run(fixture, payload: dict[str, Any], transcript: Optional[bytes]
              ) -> Optional[dict[str, Any]]:
    """The result fields of a run that ended before grading (it timed out) and was sent to
    grading for its first check alone: its outcome as the agent worker recorded it in
    `session_checks.ended`, never one the grader gives; None for a run graded as usual."""
    from evalq.criteria.evaluate import ungraded

    ended = (payload.get("session_checks") or {}).get("ended")
    if not isinstance(ended, dict):
        return None
    fields: dict[str, Any] = {"outcome": ended.get("outcome") or "timed_out",
                              "reason": ended.get("reason"), "criteria": []}
    named = ungraded(fixture.spec.criteria, transcript, "the run timed out")
    if named is not None:
        fields["criterion_results"] = named
    return fields


def ungraded_first_check(fixture, checks: Optional[dict[str, Any]], why: str) -> dict[str, Any]:
    """The first-check fields of a run that is not sent to grading (timed out, refused)."""
    fields = no_first_check(fixture, checks)
    if fields is not None:
        return fields
    return {"first_check_result": None,
            "first_check_reason": f"the workspace at the first check is stored but was not "
                                  f"graded: {why}"}


def graded_first_check(fixture, payload: dict[str, Any], get: Callable[[str], bytes],
                       grade: Callable[[bytes], tuple[str, Optional[str], dict[str, Any]]]
                       ) -> dict[str, Any]:
    """The first-check fields of a graded run. `get` reads an artifact; `grade(archive)`
    gives (outcome, reason, grade record) by the run's own grading path."""
    checks = payload.get("session_checks")
    fields = no_first_check(fixture, checks)
    if fields is not None:
        return fields
    ref = (payload.get("artifacts") or {}).get("first_check_workspace")
    if ref is None:
        return {"first_check_result": None,
                "first_check_reason": "the workspace at the first check was not stored"}
    try:
        outcome, reason, record = grade(get(ref))
    except EvalqError as exc:
        return {"first_check_result": "grading_failure",
                "first_check_reason": f"{type(exc).__name__}: {exc}"}
    return {"first_check_result": outcome, "first_check_reason": reason,
            "first_check_grade": record}
