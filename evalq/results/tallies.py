"""A study's progress counted by the database (GROUP BY), not by loading every row.

`evalq status` used to build a Python view of every trial and attempt per tick (11 s at
100,000 trials, bench/ticks.py); these aggregates return a few dozen rows whatever the size.
The rules are those of report/attempts.py: a trial's state is its latest attempt's; a finished
trial counts its first valid attempt, else its latest failure; its host is the latest one named.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import String, and_, cast, func, select

from evalq.models import VALID_OUTCOMES
from evalq.results.store import AttemptRow, Record, StudyRow, TrialRow, snapshot

VALID = [o.value for o in VALID_OUTCOMES]


def _per_trial(a, study_id: str, what, *where):
    """trial_id -> `what` (an aggregate) over the study's attempts matching `where`."""
    return (select(a.trial_id.label("trial_id"), what.label("n"))
            .where(a.study_id == study_id, *where).group_by(a.trial_id).subquery())


def _count_by(conn, a, study_id: str, pick, column, *where) -> dict[Any, int]:
    """Count trials by `column` of the attempt that the per-trial subquery `pick` names."""
    joined = a.join(pick, and_(a.c.trial_id == pick.c.trial_id, a.c.attempt == pick.c.n))
    rows = conn.execute(select(column, func.count()).select_from(joined)
                        .where(a.c.study_id == study_id, *where).group_by(column)).all()
    return {key: n for key, n in rows}


def counted_attempts(a, study_id: str, latest=None):
    """trial_id -> n, the attempt that counts, for every settled trial of the study: the first
    valid attempt, else the latest (a failure); join it to the attempts table `a`."""
    c = a.c
    latest = latest if latest is not None else _per_trial(c, study_id, func.max(c.attempt))
    valid = _per_trial(c, study_id, func.min(c.attempt), c.outcome.in_(VALID))
    last = a.alias("last")
    settled = (select(latest.c.trial_id).select_from(latest.join(
        last, and_(last.c.trial_id == latest.c.trial_id, last.c.attempt == latest.c.n)))
        .where(last.c.outcome.isnot(None)))
    return (select(latest.c.trial_id, func.coalesce(valid.c.n, latest.c.n).label("n"))
            .select_from(latest.outerjoin(valid, valid.c.trial_id == latest.c.trial_id))
            .where(latest.c.trial_id.in_(settled)).subquery())


def study_tallies(engine, study_id: str, now: float) -> dict[str, Any]:
    """Counts for ops/status.py: planned, latest states, counted outcomes, hosts, first outcomes."""
    a = AttemptRow.__table__
    c = a.c
    with snapshot(engine) as conn:  # every count of one state of the study
        planned = conn.execute(select(func.count()).select_from(TrialRow.__table__).where(
            TrialRow.__table__.c.study_id == study_id)).scalar()
        latest = _per_trial(c, study_id, func.max(c.attempt))
        states = _count_by(conn, a, study_id, latest, c.state, c.outcome.is_(None))
        counted = counted_attempts(a, study_id, latest)
        outcomes = _count_by(conn, a, study_id, counted, c.outcome)
        hosted = _per_trial(c, study_id, func.max(c.attempt), c.worker_host.isnot(None))
        hosts = _count_by(conn, a, study_id, hosted, c.worker_host)
        first = dict(conn.execute(select(c.outcome, func.count()).where(
            c.study_id == study_id, c.attempt == 1, c.outcome.isnot(None))
            .group_by(c.outcome)).all())
        attempts, expired = conn.execute(select(
            func.count(), func.count().filter(and_(c.outcome.is_(None), c.state == "running",
                                                   c.lease_expires_at < now)))
            .where(c.study_id == study_id)).one()
        with_attempts = conn.execute(select(func.count(func.distinct(c.trial_id)))
                                     .where(c.study_id == study_id)).scalar()
        envs = [Record({"worker_host": host, "worker_env": json.loads(env)})
                for host, env in conn.execute(select(c.worker_host, cast(c.worker_env, String))
                                              .where(c.study_id == study_id,
                                                     c.worker_env.isnot(None)).distinct())]
    return {"planned": planned, "states": states, "outcomes": outcomes, "hosts": hosts,
            "first": first, "attempts": attempts, "expired": expired,
            "unsent": planned - with_attempts, "environments": envs}


def studies_overview(engine) -> list[dict[str, Any]]:
    """Every study with its planned and finished (latest attempt has an outcome) trial counts."""
    s, t, a = StudyRow.__table__.c, TrialRow.__table__.c, AttemptRow.__table__
    with engine.connect() as conn:
        planned = dict(conn.execute(select(t.study_id, func.count()).group_by(t.study_id)).all())
        latest = (select(a.c.trial_id, a.c.study_id, func.max(a.c.attempt).label("n"))
                  .group_by(a.c.trial_id, a.c.study_id).subquery())
        last = a.alias("last")
        finished = dict(conn.execute(
            select(latest.c.study_id, func.count()).select_from(latest.join(
                last, and_(last.c.trial_id == latest.c.trial_id, last.c.attempt == latest.c.n)))
            .where(last.c.outcome.isnot(None)).group_by(latest.c.study_id)).all())
        rows = conn.execute(select(s.id, s.created_at, s.cancelled, s.mode, s.lock)
                            .order_by(s.created_at)).all()
    return [{"study": r.id, "planned": planned.get(r.id, 0), "finished": finished.get(r.id, 0),
             "created_at": r.created_at, "cancelled": bool(r.cancelled), "mode": r.mode,
             "smoke_of": (r.lock or {}).get("smoke", {}).get("of")} for r in rows]
