"""A refused grading and a grader's self-check verdicts in the results database, on SQLite and
PostgreSQL: the refused grading keeps no outcome, no delivery may claim it until its lease runs
out, then the sweep re-sends it; `status` names the refusing grader while trials are pending."""

from __future__ import annotations

import time

import pytest
from sqlmodel import Session, select

from evalq.ops.status import render, study_status, with_refusals
from evalq.results.grader_checks import record_check, refusals
from evalq.results.store import (AttemptRow, StudyRow, TrialRow, claim_grading, create_attempts,
                                 init_db, mark_state, record_attempt, refuse_grading,
                                 reserve_stranded_gradings, save_study)

TRIAL = "s/f/c/r1"


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request, tmp_path):
    url = (f"sqlite:///{tmp_path / 'r.db'}" if request.param == "sqlite"
           else request.getfixturevalue("postgres_url"))
    engine = init_db(url)
    study = StudyRow(id="s", manifest={"conditions": []}, lock={}, lock_digest="sha256:x")
    trial = TrialRow(id=TRIAL, study_id="s", fixture_id="f", fixture_digest="sha256:f",
                     fixture_ref="r", condition="c", repetition=1, block=0, order_index=0)
    save_study(engine, study, [trial])
    create_attempts(engine, [TRIAL], {TRIAL: 1}, "s")
    mark_state(engine, TRIAL, 1, state="grading", artifacts={"workspace": "ref"})
    return engine


def _row(engine) -> AttemptRow:
    with Session(engine) as session:
        return session.exec(select(AttemptRow)).one()


def test_a_refused_grading_waits_a_lease_then_is_resent(engine):
    assert claim_grading(engine, TRIAL, 1, "grader:g@h:1:a", 30)[0]
    assert refuse_grading(engine, TRIAL, 1, "grader:g@h:1:a", "g@h", retry_after=0.5)
    row = _row(engine)
    assert (row.outcome, row.state, row.lease_owner) == (None, "grading", "(refused by g@h)")
    # a delivery in the meantime (the same grader's, say) cannot take it back at once
    ok, why = claim_grading(engine, TRIAL, 1, "grader:g@h:1:b", 30)
    assert not ok and "(refused by g@h)" in why
    assert reserve_stranded_gradings(engine, 30) == []
    deadline = time.time() + 10
    while time.time() <= row.lease_expires_at and time.time() < deadline:
        time.sleep(0.05)  # the lease's own expiry, read from the row: what is being tested
    assert reserve_stranded_gradings(engine, 30) == [(TRIAL, 1)]
    assert claim_grading(engine, TRIAL, 1, "grader:other@h2:2:c", 30)[0]


def test_only_the_lease_holder_can_refuse(engine):
    assert claim_grading(engine, TRIAL, 1, "grader:g@h:1:a", 30)[0]
    assert not refuse_grading(engine, TRIAL, 1, "grader:late@h:9:z", "late@h", 5)
    assert _row(engine).lease_owner == "grader:g@h:1:a"
    record_attempt(engine, {"study_id": "s", "trial_id": TRIAL, "attempt": 1,
                            "outcome": "correct", "reason": None})
    assert not refuse_grading(engine, TRIAL, 1, "grader:g@h:1:a", "g@h", 5)
    assert _row(engine).outcome == "correct"


def _check(grader: str, ok: bool, digest: str = "sha256:f", at: float = 1.0e9) -> dict:
    return {"grader": grader, "fixture_digest": digest, "fixture_id": "f", "sandbox": "bwrap",
            "toolchain": "sha256:t", "ok": ok,
            "reason": None if ok else "correct reference graded incorrect: 1 hidden check(s) "
                                      "failed: test_x",
            "verdicts": {"correct": "correct" if ok else "incorrect", "incorrect": "incorrect"},
            "checked_at": at}


def test_status_names_the_refusing_grader_while_trials_wait(engine):
    record_check(engine, _check("grading@bad", False))
    record_check(engine, _check("grading@good", True))
    record_check(engine, _check("grading@bad", False, digest="sha256:another-study's"))
    status = with_refusals(engine, study_status(engine, "s"))
    assert [(r["grader"], r["fixture_id"]) for r in status.grader_refusals] == \
        [("grading@bad", "f")]
    assert ("grader grading@bad refuses fixture f: correct reference graded incorrect: 1 hidden "
            "check(s) failed: test_x") in render(status)
    assert status.as_dict()["grader_refusals"][0]["reason"].startswith("correct reference")
    # the same grader passing later (fixed) replaces its refusal
    record_check(engine, _check("grading@bad", True, at=1.0e9 + 60))
    assert refusals(engine, "s") == []
    assert "refuses" not in render(with_refusals(engine, study_status(engine, "s")))


def test_a_finished_study_shows_no_refusal(engine):
    record_check(engine, _check("grading@bad", False))
    record_attempt(engine, {"study_id": "s", "trial_id": TRIAL, "attempt": 1,
                            "outcome": "correct", "reason": None})
    assert with_refusals(engine, study_status(engine, "s")).grader_refusals == []


def test_a_waiting_run_says_once_which_grader_refuses(engine):
    """`evalq run`'s wait loop names each refusing grader once, not on every poll, and names
    a new refusal (another reason) when it comes."""
    from evalq.cli.refusal_notice import RefusalNotice

    said: list[str] = []
    notice = RefusalNotice(engine, "s", every=0, echo=said.append)
    notice()
    assert said == []
    record_check(engine, _check("grading@bad", False))
    notice()
    notice()
    assert len(said) == 1 and said[0].startswith("waiting: grader grading@bad refuses "
                                                 "fixture f: correct reference"), said
    record_check(engine, dict(_check("grading@bad", False, at=1.0e9 + 5),
                              reason="the grading sandbox is unavailable"))
    notice()
    assert len(said) == 2 and "sandbox is unavailable" in said[1], said
