"""Putting a frozen study into the database and its pending trials on the agents queue.

The database decides what is pending: a planned trial whose latest attempt has no outcome and
is not visibly in flight gets its message (re)sent; one with an outcome is left alone.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

from sqlmodel import Session
from sqlalchemy import update

from evalq.artifacts import open_store
from evalq.config import Settings, visibility_for
from evalq.errors import UserError
from evalq.fixtures.cache import publish_fixture
from evalq.queue.messages import message_for, shown_as, trial_label
from evalq.queue.publish import batch_sender
from evalq.study.skills import publish_skills
from evalq.study.lock import freeze, verify_lock
from evalq.study.budgets import longest_trial_seconds, task_limits
from evalq.study.manifest import Study
from evalq.study.order import plan_trials
from evalq.results.store import (AttemptRow, StudyRow, TrialRow, create_attempts, init_db, latest_attempts,
                    save_study)

log = logging.getLogger("evalq.queue.launch")


@dataclass
class LaunchSummary:
    planned: int
    sent: int
    finished: int
    in_flight: int


def smoke_study(study: Study, limit: int) -> Study:
    """The study as a smoke run of its first `limit` trials, under an id of its own.

    The subset is the first `limit` trials of the blocked-randomized order (whole blocks first,
    so every condition appears as early as the order allows). Its own id (`<id>.smoke<N>`) keeps
    its trials, status and report apart from the full study's, which can still run in full.
    """
    if limit < 1:
        raise UserError(f"--limit {limit} selects no trial", field="--limit",
                        fix="give a positive number of trials, e.g. --limit 4")
    manifest = study.manifest.model_copy(update={"id": f"{study.id}.smoke{limit}"})
    return dataclasses.replace(study, manifest=manifest)


def planned_rows(study: Study, limit: int | None = None) -> list:
    """The study's trials in run order (PlannedTrial), or the first `limit` of them."""
    manifest = study.manifest
    planned = plan_trials(study.id, [f.id for f in study.fixtures],
                          [c.name for c in manifest.conditions], manifest.repetitions,
                          manifest.seed)
    return planned[:limit] if limit else planned


def register_study(study: Study, settings: Settings, limit: int | None = None):
    """Freeze (or check the lock), plan, and insert the study and its trials.

    Returns (engine, lock, study); with `limit`, the study is the smoke run (smoke_study) and its
    lock records what it is a subset of, so no report or status mistakes it for the full study.
    """
    from evalq.workers.sandbox import get_agent_sandbox

    get_agent_sandbox(settings.agent_sandbox)  # a bad EVALQ_AGENT_SANDBOX fails here, clearly
    lock = verify_lock(study) or freeze(study)
    if limit is not None:
        full_id = study.id
        study = smoke_study(study, limit)
        lock = dict(lock, smoke={"of": full_id, "limit": limit,
                                 "chosen": "the first trials of the blocked-randomized order"})
    engine = init_db(settings.database_url)
    store = open_store(settings.artifacts_url)
    refs = {f.id: publish_fixture(store, f) for f in study.fixtures}
    if study.skills:  # workers install skills from the store, checked against the lock
        lock = dict(lock, published_skills=publish_skills(store, study.skills))
    # outside lock_digest, like published_skills: where agents ran is a worker setting
    lock = dict(lock, agent_sandbox=settings.agent_sandbox,
                sealed=settings.agent_sandbox != "none")
    manifest = study.manifest
    planned = planned_rows(study, limit)
    digests = {f.id: f.digest for f in study.fixtures}
    row = StudyRow(id=study.id, manifest=manifest.model_dump(mode="json"),
                   manifest_path=str(study.path), lock=lock, lock_digest=lock["lock_digest"],
                   mode=manifest.mode)
    trials = [dict(id=p.trial_id, study_id=study.id, fixture_id=p.fixture_id,
                   fixture_digest=digests[p.fixture_id], fixture_ref=refs[p.fixture_id],
                   condition=p.condition, repetition=p.repetition, block=p.block,
                   order_index=p.order_index) for p in planned]
    save_study(engine, row, trials)
    return engine, lock, study


def settings_for_study(settings: Settings, study: Study) -> Settings:
    """Settings whose visibility timeout covers the study's longest trial (about twice it).

    An explicit EVALQ_VISIBILITY_TIMEOUT is kept as given (tests use a short one on purpose).
    """
    longest = longest_trial_seconds(study)
    if longest <= settings.max_trial_seconds:
        return settings
    return settings.model_copy(update={"max_trial_seconds": longest})


def send_run_messages(app, study: Study, to_send: list[tuple[TrialRow, int]],
                      before_sending: Optional[Callable[[], None]] = None) -> int:
    """run_trial messages for (trial, attempt) pairs, with time limits from the budgets."""
    return publish_run_messages(app, to_send, lambda fixture_id: task_limits(study, fixture_id),
                                study.manifest.max_attempts,
                                visibility_for(longest_trial_seconds(study)), before_sending)


def publish_run_messages(app, to_send: list[tuple[TrialRow, int]],
                         limits_of: Callable[[str], tuple[float, float]], max_claims: int,
                         visibility: int,
                         before_sending: Optional[Callable[[], None]] = None) -> int:
    """Send run_trial messages; `limits_of(fixture_id)` gives (soft, hard), asked once a fixture.

    `before_sending` (creating the attempt rows the messages name) has returned before any
    message is sent. On Redis it runs in a thread while the messages are built and held, so
    the database's work and the building overlap (bench/); if it fails, nothing is sent.
    """
    limits: dict[str, tuple[float, float]] = {}  # per fixture, not per message (bench/)
    with batch_sender(app, hold=before_sending is not None) as sender:
        if before_sending is not None and not sender.held:  # this broker sends at once
            before_sending()
            before_sending = None
        with alongside(before_sending):
            for trial, attempt in to_send:
                if trial.fixture_id not in limits:
                    limits[trial.fixture_id] = limits_of(trial.fixture_id)
                soft, hard = limits[trial.fixture_id]
                message = message_for(trial, attempt, max_claims, visibility)
                shown = shown_as("evalq.run_trial", message)
                sender.send("evalq.run_trial", [message], shown["argsrepr"], soft, hard,
                            shown["shadow"])
    return len(to_send)


@contextmanager
def alongside(work: Optional[Callable[[], None]]) -> Iterator[None]:
    """Run `work` in a thread during the block; the block ends only when it has, with its error."""
    if work is None:
        yield
        return
    failed: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            failed.append(exc)

    thread = threading.Thread(target=run, name="evalq-before-sending")
    thread.start()
    try:
        yield
    finally:
        thread.join()
    if failed:
        raise failed[0]


def make_sweeper(app, study: Study, engine, settings: Settings):
    """The launcher's periodic recovery: expired leases, lost grading messages, broker restarts."""
    from evalq.ops.recovery import Sweeper

    every = max(1.0, settings.lease_seconds / 4)  # a dead grader's trial back within ~a lease
    return Sweeper(app, engine, study.id, settings.broker_url, every=every,
                   grading_grace=max(settings.visibility_seconds, 4 * settings.lease_seconds),
                   resend_all=lambda: send_trials(app, study, engine, resume=True),
                   resend_expired=lambda items: send_run_messages(
                       app, study, [(t, r.attempt) for t, r in items]),
                   lease_seconds=settings.lease_seconds)


def send_trials(app, study: Study, engine, resume: bool) -> LaunchSummary:
    """Create queued attempts for pending trials and send their messages in planned order."""
    now = time.time()
    if resume:
        with Session(engine) as session:
            session.execute(update(StudyRow).where(StudyRow.id == study.id)
                            .values(cancelled=False))
            session.commit()
    by_id, latest = latest_attempts(engine, study.id)
    trials = sorted(by_id.values(), key=lambda t: t.order_index)
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
    def create() -> None:  # the rows every message names, committed before any is sent
        create_attempts(engine, [t.id for t, a in to_send], {t.id: a for t, a in to_send},
                        study.id)
        if resume:
            with Session(engine) as session:
                for trial, attempt in to_send:
                    session.execute(update(AttemptRow).where(
                        AttemptRow.trial_id == trial.id, AttemptRow.attempt == attempt,
                        AttemptRow.state == "cancelled").values(state="queued"))
                session.commit()

    send_run_messages(app, study, to_send, before_sending=create)
    if to_send:
        log.info("study %s: sent %d run_trial message(s), first %s", study.id, len(to_send),
                 trial_label(to_send[0][0].id, to_send[0][1]))
    if resume:  # attempts stuck in grading (message lost): grade the stored artifacts again
        from evalq.ops.recovery import send_grading

        by_id = {t.id: t for t in trials}
        stuck = [(by_id[r.trial_id], r) for r in latest.values()
                 if r.outcome is None and r.state == "grading" and r.artifacts]
        send_grading(app, stuck)
    return LaunchSummary(planned=len(trials), sent=len(to_send), finished=finished,
                         in_flight=in_flight)
