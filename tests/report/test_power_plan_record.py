"""The report's account of the power plan: recorded or not, before or after the runs, intact."""

from __future__ import annotations

from evalq.planning.lock import planning_section, preregistration
from evalq.report.preregistration import claim_reasons, describe, plan_record


class _Study:
    id = "s"
    lock_path = "study.lock.json"


PLAN = {"chosen_design": {"tasks": 30, "repetitions": 3, "trials": 180, "meets_target": True},
        "target": {"effect": 0.1}}


def test_no_plan_is_said_and_costs_no_claim():
    record = plan_record({"lock_digest": "sha256:x"})
    assert record["recorded"] is False and record["before_runs"] is None
    assert claim_reasons(record) == [] and describe(record) == "none recorded"
    assert plan_record(None)["recorded"] is False


def test_a_plan_before_the_runs_is_a_preregistration():
    section = planning_section(PLAN, preregistration(_Study, 0, force=False))
    record = plan_record({"planning": section})
    assert record["recorded"] and record["intact"] and record["before_runs"] is True
    assert record["design"] == {"tasks": 30, "repetitions": 3, "trials": 180}
    assert claim_reasons(record) == []
    assert describe(record).startswith("written before the runs; 30 tasks × 3 repetitions")


def test_a_forced_plan_after_runs_makes_claims_exploratory():
    section = planning_section(PLAN, preregistration(_Study, 12, force=True))
    record = plan_record({"planning": section})
    assert record["before_runs"] is False and record["attempts_at_planning"] == 12
    assert claim_reasons(record) == [
        "the power plan was written after 12 attempts had run: not a pre-registration"]
    assert "**written after 12 attempts had run**" in describe(record)


def test_an_edited_plan_is_caught_by_its_digest():
    section = planning_section(PLAN, preregistration(_Study, 12, force=True))
    # rewritten to look like a pre-registration, digest left as it was
    section["preregistration"] = dict(section["preregistration"], before_runs=True,
                                      attempts_at_planning=0, forced=False, note=None)
    record = plan_record({"planning": section})
    assert record["intact"] is False
    assert claim_reasons(record) == ["the power plan in the lock was edited after it was written"]
    assert "edited after it was written" in describe(record)
    # the time it was written is outside the digest: moving it is not an edit of the plan
    moved = planning_section(PLAN, preregistration(_Study, 0, force=False))
    moved["planned_at"] = 0.0
    assert plan_record({"planning": moved})["intact"] is True


def test_a_plan_that_does_not_say_when_is_unavailable_not_guessed():
    section = planning_section(PLAN)  # no preregistration part (an older plan)
    record = plan_record({"planning": section})
    assert record["intact"] is True and record["before_runs"] is None
    assert claim_reasons(record) == []
    assert describe(record).startswith("unavailable (the plan does not say when")


def test_a_plan_dated_after_the_first_run_is_not_taken_at_its_word():
    section = planning_section(PLAN, preregistration(_Study, 0, force=False))
    first_run = section["planned_at"] - 60  # a run had started a minute before the plan
    record = plan_record({"planning": section}, first_run_at=first_run)
    assert record["before_runs"] is False and "dated after" in record["note"]
    assert claim_reasons(record) == [
        "the power plan is dated after the study's first run started: not a pre-registration"]
    assert "**dated after the first run started**" in describe(record)
    later = plan_record({"planning": section}, first_run_at=section["planned_at"] + 60)
    assert later["before_runs"] is True and claim_reasons(later) == []
