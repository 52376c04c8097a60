"""The evidence row's session and retention fields where the end-to-end study has none: a run
without a finished attempt, a visible check never run, a stage run whose baseline was not
correct or that has no valid outcome. Null, never false or 0, and always with its reason."""

from __future__ import annotations

from types import SimpleNamespace

from evalq.analysis.evidence import NOT_A_STAGE, session_fields, stage_fields

RECORD = {"conditions": {"skill": {"skill": "installed"}}}


def _attempt(**fields):
    base = {"first_check_result": None, "first_check_reason": None, "eventual_result": None,
            "session_checks": None}
    return SimpleNamespace(**dict(base, **fields))


def _stage(baseline_outcome: str, outcome, passes):
    link = {"baseline_trial": "base/t/skill/r1", "baseline_condition": "skill",
            "baseline_outcome": baseline_outcome, "outcome": outcome, "passes": passes,
            "retention_observation": baseline_outcome == "correct"}
    return {"link": link, "baseline_task": "t", "baseline_study": "base",
            "baseline_date": "2026-12-04T10:00:00Z"}


def test_no_finished_attempt_is_null_with_its_reason():
    fields = session_fields(None)
    assert fields["first_check_result"] is None and fields["repair_cost"] is None
    assert fields["eventual_result"] is None
    assert fields["repair_cost_reason"] == fields["first_check_reason"] == "no finished attempt"


def test_a_check_never_run_has_no_repair_cost_and_says_why():
    stored = _attempt(eventual_result="correct",
                      first_check_reason="the agent never ran the visible check",
                      session_checks={"check_runs": 0, "repair_cost": None})
    fields = session_fields(stored)
    assert fields["repair_cost"] is None and fields["eventual_result"] == "correct"
    assert fields["repair_cost_reason"] == "the agent never ran the visible check"
    # a record without the reason still says which of the two it is
    assert session_fields(_attempt(session_checks={"check_runs": 0}))[
        "repair_cost_reason"] == "the agent never ran the visible check"
    assert session_fields(_attempt())["repair_cost_reason"] == \
        "the fixture declares no visible check"


def test_a_stored_repair_cost_is_passed_on_as_stored():
    cost = {"repair_check_runs": 2, "commands_after_first_check": None,
            "unavailable": {"commands_after_first_check": "no tool calls"}}
    fields = session_fields(_attempt(first_check_result="incorrect", eventual_result="correct",
                                     session_checks={"repair_cost": cost}))
    assert fields["repair_cost"] == cost and fields["repair_cost_reason"] is None
    assert (fields["first_check_result"], fields["eventual_result"]) == ("incorrect", "correct")


def test_retention_is_observed_only_from_a_correct_baseline_and_a_valid_outcome():
    kept = stage_fields(RECORD, _stage("correct", "incorrect", False))
    assert kept["retained"] is False and kept["retention_reason"] is None
    assert (kept["baseline_trial_id"], kept["baseline_skill"]) == ("base/t/skill/r1",
                                                                   "installed")
    failing = stage_fields(RECORD, _stage("incorrect", "correct", True))
    assert failing["retained"] is None
    assert "not correct: no retention observation" in failing["retention_reason"]
    open_run = stage_fields(RECORD, _stage("correct", "infrastructure_failure", None))
    assert open_run["retained"] is None
    assert open_run["retention_reason"] == "no valid outcome (infrastructure_failure)"
    outside = stage_fields(RECORD, None)
    assert outside["retained"] is None and outside["retention_reason"] == NOT_A_STAGE
    assert outside["baseline_trial_id"] is None
