"""Criterion results are stored with the attempt and read back alike on SQLite and PostgreSQL,
and a database made before them gains the column with its rows kept."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text
from sqlmodel import Session, SQLModel, select

from evalq.criteria.rates import stored_results
from evalq.criteria.status_counts import criteria_counts
from evalq.results.store import (AttemptRow, StudyRow, TrialRow, create_attempts, get_engine,
                                 init_db, record_attempt, record_attempts, save_study)

RESULTS = [{"name": "core", "kind": "hidden", "required": True, "passed": True,
            "evidence": "2 of 2 check(s) passed", "checks": ["h::test_a", "h::test_b"]},
           {"name": "loaded the skill", "kind": "trace", "required": False, "passed": False,
            "evidence": "0 tool call(s) of skill (wanted at least 1)", "steps": []},
           {"name": "accepted", "kind": "review", "required": False, "field": "human_accepted",
            "passed": None, "evidence": "not rated yet"}]


def _study(engine, trials: int = 2) -> list[str]:
    study = StudyRow(id="s", manifest={"conditions": [{"name": "c"}]}, lock={},
                     lock_digest="sha256:x")
    rows = [TrialRow(id=f"s/f/c/r{i}", study_id="s", fixture_id="f", fixture_digest="d",
                     fixture_ref="r", condition="c", repetition=i, block=i, order_index=i)
            for i in range(1, trials + 1)]
    save_study(engine, study, rows)
    create_attempts(engine, [r.id for r in rows], {r.id: 1 for r in rows}, "s")
    return [r.id for r in rows]


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    return (f"sqlite:///{tmp_path / 'c.db'}" if request.param == "sqlite"
            else request.getfixturevalue("postgres_url"))


def test_results_round_trip_and_a_regrade_replaces_them(db_url):
    engine = init_db(db_url)
    first, second = _study(engine)
    assert record_attempts(engine, [
        {"study_id": "s", "trial_id": first, "attempt": 1, "outcome": "correct",
         "criterion_results": RESULTS},
        {"study_id": "s", "trial_id": second, "attempt": 1, "outcome": "incorrect"}]) == \
        [True, True]
    assert stored_results(engine, "s") == {(first, 1): RESULTS}, \
        "a result without named criteria stores none (SQL NULL, not JSON null)"
    changed = [dict(RESULTS[0], passed=False, evidence="1 of 2 check(s) failed: h::test_b")]
    assert record_attempt(engine, {"study_id": "s", "trial_id": first, "attempt": 1,
                                   "outcome": "incorrect", "criterion_results": changed},
                          regrade=True)
    with Session(engine) as session:
        row = session.exec(select(AttemptRow).where(AttemptRow.trial_id == first)).one()
    assert row.criterion_results == changed and row.regrades == 1
    counts = criteria_counts(engine, "s")
    assert counts == {"core": {"c": {"met": 0, "not_met": 1, "unresolved": 0}}}


def test_an_old_database_gains_the_column(db_url):
    engine = get_engine(db_url)
    SQLModel.metadata.create_all(engine)
    (trial,) = _study(engine, trials=1)
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE attempts DROP COLUMN criterion_results"))
    engine.dispose()
    assert "criterion_results" not in {c["name"] for c in
                                       inspect(get_engine(db_url)).get_columns("attempts")}
    engine = init_db(db_url)
    assert "criterion_results" in {c["name"] for c in inspect(engine).get_columns("attempts")}
    assert record_attempt(engine, {"study_id": "s", "trial_id": trial, "attempt": 1,
                                   "outcome": "correct", "criterion_results": RESULTS})
    assert stored_results(engine, "s") == {(trial, 1): RESULTS}
