"""Graders' self-checks of fixtures in the database, for people: which grader refuses what.

A grading worker keeps its own self-check verdicts in memory (graders/selfcheck.py) and never
trusts another worker's: a misconfigured grader is one worker's fault. It writes each verdict
here too, one row per (grader, fixture digest), the latest check winning, so `evalq status`
can say which grader refuses which fixture and why while the fixture's trials wait.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import exists, select

from evalq.results.store import GraderCheckRow, TrialRow, dialect_insert


def record_check(engine, row: dict[str, Any]) -> None:
    """Upsert one grader's verdict on one fixture (GraderCheckRow's columns)."""
    table = GraderCheckRow.__table__
    statement = dialect_insert(engine)(table).values(row)
    statement = statement.on_conflict_do_update(
        index_elements=["grader", "fixture_digest"],
        set_={k: statement.excluded[k] for k in row if k not in ("grader", "fixture_digest")})
    with engine.begin() as conn:
        conn.execute(statement)


def refusals(engine, study_id: str) -> list[dict[str, Any]]:
    """The graders whose latest self-check of one of the study's fixtures failed, oldest first.

    Costs one small query when no grader refuses anything (the usual case)."""
    checks, trials = GraderCheckRow.__table__.c, TrialRow.__table__.c
    with engine.connect() as conn:
        failed = conn.execute(select(checks).where(checks.ok.is_(False))
                              .order_by(checks.checked_at)).mappings().all()
        if not failed:
            return []
        ours = {d for d in {r["fixture_digest"] for r in failed}
                if conn.execute(select(exists().where(trials.study_id == study_id,
                                                      trials.fixture_digest == d))).scalar()}
    return [dict(r) for r in failed if r["fixture_digest"] in ours]


def refusal_line(row: dict[str, Any]) -> str:
    """One line for people: "grader G refuses fixture F: why"."""
    return f"grader {row['grader']} refuses fixture {row['fixture_id']}: {row['reason']}"
