"""The results database: idempotent upserts and leases, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlmodel import Session, select

from evalq.results.store import (AttemptRow, StudyRow, TrialRow, claim, create_attempts, init_db,
                         record_attempt, renew, save_study)


def _seed(engine):
    study = StudyRow(id="s", manifest={"conditions": []}, lock={}, lock_digest="sha256:x")
    trial = TrialRow(id="s/f/c/r1", study_id="s", fixture_id="f", fixture_digest="d",
                     fixture_ref="r", condition="c", repetition=1, block=0, order_index=0)
    save_study(engine, study, [trial])
    create_attempts(engine, [trial.id], {trial.id: 1}, "s")
    return trial.id


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request, tmp_path):
    if request.param == "sqlite":
        yield init_db(f"sqlite:///{tmp_path / 'r.db'}")
    else:
        url = request.getfixturevalue("postgres_url")
        yield init_db(url)


def _rows(engine):
    with Session(engine) as session:
        return session.exec(select(AttemptRow)).all()


def test_same_result_delivered_twice_makes_one_row(engine):
    trial_id = _seed(engine)
    payload = {"study_id": "s", "trial_id": trial_id, "attempt": 1, "outcome": "correct",
               "reason": None, "metrics": {"input_tokens": None}}
    assert record_attempt(engine, dict(payload)) is True
    assert record_attempt(engine, dict(payload, outcome="incorrect")) is False
    rows = _rows(engine)
    assert len(rows) == 1
    assert rows[0].outcome == "correct" and rows[0].state == "done"
    assert rows[0].metrics == {"input_tokens": None}


def test_regrade_replaces_the_grading_result_on_the_same_row(engine):
    trial_id = _seed(engine)
    base = {"study_id": "s", "trial_id": trial_id, "attempt": 1}
    record_attempt(engine, dict(base, outcome="grading_failure", reason="engine down"))
    assert record_attempt(engine, dict(base, outcome="correct", reason=None), regrade=True)
    rows = _rows(engine)
    assert [(r.outcome, r.regrades) for r in rows] == [("correct", 1)]


def test_lease_is_exclusive_until_it_expires(engine):
    trial_id = _seed(engine)
    assert claim(engine, trial_id, 1, "w1", 30, max_claims=3)[0] is True
    ok, why = claim(engine, trial_id, 1, "w2", 30, max_claims=3)
    assert ok is False and "leased by w1" in why
    assert not renew(engine, trial_id, 1, "w2", 30)
    assert renew(engine, trial_id, 1, "w1", -1)  # as if w1 died a lease ago
    assert claim(engine, trial_id, 1, "w2", 30, 3) == (True, "claimed")
    rows = _rows(engine)
    assert rows[0].lease_owner == "w2" and rows[0].claims == 2


def test_claim_cap_stops_a_trial_that_keeps_dying(engine):
    trial_id = _seed(engine)
    for owner in ("a", "b"):
        assert claim(engine, trial_id, 1, owner, -1, max_claims=2)[0]
    ok, why = claim(engine, trial_id, 1, "c", 30, max_claims=2)
    assert (ok, why) == (False, "claim cap reached")


def test_finished_attempt_cannot_be_claimed(engine):
    trial_id = _seed(engine)
    record_attempt(engine, {"study_id": "s", "trial_id": trial_id, "attempt": 1,
                            "outcome": "incorrect"})
    ok, why = claim(engine, trial_id, 1, "w", 30, 3)
    assert not ok and "already finished as incorrect" in why


def test_bulk_insert_keeps_awkward_text_and_existing_rows(engine):
    """insert_missing (COPY on PostgreSQL): escapes survive, NULLs stay NULL, re-runs add nothing."""
    from evalq.results.bulk import insert_missing
    from evalq.results.store import latest_attempts

    _seed(engine)  # s/f/c/r1 with attempt 1 already there
    awkward = ["tab\there", "new\nline", "back\\slash", "cr\rhere", "\\N", "ünïcode ✓", ""]
    trials = [dict(id=f"s/{i}/{text}", study_id="s", fixture_id=text, fixture_digest="d",
                   fixture_ref="r", condition="c", repetition=i, block=0, order_index=i + 1)
              for i, text in enumerate(awkward)]
    attempts = [dict(trial_id=t["id"], study_id="s", attempt=1, state="queued",
                     enqueued_at=1.5 + i, claims=0, regrades=0, reason=None)
                for i, t in enumerate(trials)]
    existing = dict(trial_id="s/f/c/r1", study_id="s", attempt=1, state="done",
                    enqueued_at=9.0, claims=7, regrades=0, reason="would overwrite")
    for _ in range(2):
        with Session(engine) as session:
            insert_missing(session.connection(), TrialRow.__table__, trials)
            insert_missing(session.connection(), AttemptRow.__table__, [existing, *attempts],
                           conflict=["trial_id", "attempt"])
            session.commit()
    by_id, latest = latest_attempts(engine, "s")
    assert len(by_id) == len(trials) + 1 and len(latest) == len(trials) + 1
    assert sorted(t.fixture_id for t in by_id.values() if t.id != "s/f/c/r1") == sorted(awkward)
    for i, trial in enumerate(trials):
        row = latest[trial["id"]]
        assert (row.enqueued_at, row.reason, row.state) == (1.5 + i, None, "queued")
    kept = latest["s/f/c/r1"]
    assert (kept.state, kept.claims, kept.reason) == ("queued", 0, None)
