"""Putting a frozen study into the database and its pending trials on the agents queue.

The database decides what is pending: a planned trial whose latest attempt has no outcome and
is not visibly in flight gets its message (re)sent; one with an outcome is left alone.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlmodel import Session, select
from sqlalchemy import update

from .artifacts import open_store
from .config import Settings
from .errors import UserError
from .fixture_cache import publish_fixture
from .manifest import Study, freeze, verify_lock
from .plan import plan_trials
from .store import AttemptRow, StudyRow, TrialRow, create_attempts, init_db, save_study


@dataclass
class LaunchSummary:
    planned: int
    sent: int
    finished: int
    in_flight: int
    lock_digest: str


def register_study(study: Study, settings: Settings):
    """Freeze (or check the lock), plan, and insert the study and its trials. Returns the engine."""
    lock = verify_lock(study) or freeze(study)
    engine = init_db(settings.database_url)
    store = open_store(settings.artifacts_url)
    refs = {f.id: publish_fixture(store, f) for f in study.fixtures}
    manifest = study.manifest
    planned = plan_trials(study.id, [f.id for f in study.fixtures],
                          [c.name for c in manifest.conditions], manifest.repetitions,
                          manifest.seed)
    digests = {f.id: f.digest for f in study.fixtures}
    row = StudyRow(id=study.id, manifest=manifest.model_dump(mode="json"),
                   manifest_path=str(study.path), lock=lock, lock_digest=lock["lock_digest"],
                   mode=manifest.mode)
    trials = [TrialRow(id=p.trial_id, study_id=study.id, fixture_id=p.fixture_id,
                       fixture_digest=digests[p.fixture_id], fixture_ref=refs[p.fixture_id],
                       condition=p.condition, repetition=p.repetition, block=p.block,
                       order_index=p.order_index) for p in planned]
    save_study(engine, row, trials)
    return engine, lock


def message_for(trial: TrialRow, attempt: int, max_claims: int) -> dict:
    return {"study_id": trial.study_id, "trial_id": trial.id, "attempt": attempt,
            "fixture_id": trial.fixture_id, "condition": trial.condition,
            "repetition": trial.repetition, "fixture_ref": trial.fixture_ref,
            "fixture_digest": trial.fixture_digest, "max_claims": max_claims}


def task_limits(study: Study, fixture_id: str) -> tuple[float, float]:
    """Celery soft and hard time limits from the trial's wall budget, below the visibility timeout."""
    from .workers.runner import effective_limits

    limits = effective_limits(study.fixture(fixture_id).spec.limits, study.manifest)
    return limits.wall_seconds + 120, limits.wall_seconds + 240


def send_trials(app, study: Study, engine, resume: bool) -> LaunchSummary:
    """Create queued attempts for pending trials and send their messages in planned order."""
    now = time.time()
    with Session(engine) as session:
        trials = session.exec(select(TrialRow).where(TrialRow.study_id == study.id)
                              .order_by(TrialRow.order_index)).all()
        attempts = session.exec(select(AttemptRow).where(AttemptRow.study_id == study.id)).all()
        if resume:
            session.execute(update(StudyRow).where(StudyRow.id == study.id)
                            .values(cancelled=False))
            session.commit()
    latest: dict[str, AttemptRow] = {}
    for row in attempts:
        if row.trial_id not in latest or row.attempt > latest[row.trial_id].attempt:
            latest[row.trial_id] = row
    if latest and not resume and any(r.outcome is None for r in latest.values()):
        raise UserError(f"study '{study.id}' has already been started", field="id",
                        fix=f"use `evalq run {study.path} --resume` to continue it")
    to_send: list[tuple[TrialRow, int]] = []
    finished = in_flight = 0
    for trial in trials:
        row = latest.get(trial.id)
        if row is None:
            to_send.append((trial, 1))
        elif row.outcome is not None:
            finished += 1
        elif row.state == "running" and (row.lease_expires_at or 0) > now:
            in_flight += 1
        elif row.state == "grading":
            in_flight += 1
        else:
            to_send.append((trial, row.attempt))
    new_attempts = [t.id for t, a in to_send]
    create_attempts(engine, new_attempts, {t.id: a for t, a in to_send}, study.id)
    if resume:
        with Session(engine) as session:
            for trial, attempt in to_send:
                session.execute(update(AttemptRow).where(
                    AttemptRow.trial_id == trial.id, AttemptRow.attempt == attempt,
                    AttemptRow.state == "cancelled").values(state="queued"))
            session.commit()
    max_claims = study.manifest.max_attempts
    with app.producer_or_acquire() as producer:
        for trial, attempt in to_send:
            soft, hard = task_limits(study, trial.fixture_id)
            app.send_task("evalq.run_trial", args=[message_for(trial, attempt, max_claims)],
                          soft_time_limit=soft, time_limit=hard, producer=producer)
    return LaunchSummary(planned=len(trials), sent=len(to_send), finished=finished,
                         in_flight=in_flight, lock_digest=study.lock_path.name)
