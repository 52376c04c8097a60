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
from functools import partial
from typing import Any, Callable, Iterator, Optional

from sqlmodel import Session
from sqlalchemy import update

from evalq.artifacts import open_store
from evalq.config import Settings, visibility_for
from evalq.errors import UserError
from evalq.fixtures.cache import publish_fixture
from evalq.gcpause import cyclic_gc_paused
from evalq.queue.messages import message_for, shown_as, trial_label
from evalq.queue.publish import batch_sender
from evalq.study.agent_source import publish_sources
from evalq.study.executor import executor_id, record_executor, with_executor
from evalq.study.skills import publish_skills
from evalq.study.lock import freeze, verify_lock
from evalq.study.budgets import longest_trial_seconds, task_limits
from evalq.study.manifest import Study
from evalq.study.order import plan_trials
from evalq.results.store import (AttemptRow, StudyRow, TrialRow, create_attempts, init_db,
                                 latest_attempts, row_type, save_new_study, save_study,
                                 study_exists)

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


@dataclass
class Prepared:
    """A study checked and planned, with the rows it will write: nothing written yet but the
    fixtures and skills its workers fetch from the artifact store."""

    engine: Any
    lock: dict
    study: Study
    row: StudyRow
    trials: list[dict]  # TrialRow's columns, in planned order


def prepare_study(study: Study, settings: Settings, limit: int | None = None,
                  allow_dirty: bool = False) -> Prepared:
    """Freeze (or check the lock), publish fixtures, skills and agent sources, and plan the
    trials.

    With `limit`, the study is the smoke run (smoke_study) and its lock records what it is a
    subset of, so no report or status mistakes it for the full study. `allow_dirty`: freeze
    agent sources with uncommitted changes (only when the study is not frozen yet).
    """
    from evalq.workers.sandbox import get_agent_sandbox

    get_agent_sandbox(settings.agent_sandbox)  # a bad EVALQ_AGENT_SANDBOX fails here, clearly
    lock = verify_lock(study) or freeze(study, allow_dirty=allow_dirty)
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
    if study.sources:  # and mount agent sources from it, checked the same way
        lock = dict(lock, published_agent_sources=publish_sources(
            store, study.sources, lock.get("agent_sources") or {}))
    # outside lock_digest, like published_skills: where agents ran is a worker setting
    lock = with_executor(dict(lock, agent_sandbox=settings.agent_sandbox,
                              sealed=settings.agent_sandbox != "none"), executor_id())
    manifest = study.manifest
    digests = {f.id: f.digest for f in study.fixtures}
    row = StudyRow(id=study.id, manifest=manifest.model_dump(mode="json"),
                   manifest_path=str(study.path), lock=lock, lock_digest=lock["lock_digest"],
                   mode=manifest.mode)
    with cyclic_gc_paused():  # 100,000 plans and rows (bench/ scale)
        trials = [dict(id=p.trial_id, study_id=study.id, fixture_id=p.fixture_id,
                       fixture_digest=digests[p.fixture_id], fixture_ref=refs[p.fixture_id],
                       condition=p.condition, repetition=p.repetition, block=p.block,
                       order_index=p.order_index) for p in planned_rows(study, limit)]
    return Prepared(engine=engine, lock=lock, study=study, row=row, trials=trials)


def register_study(study: Study, settings: Settings, limit: int | None = None):
    """prepare_study, then insert the study and its trials (those not there yet).

    Returns (engine, lock, study), the study being the smoke run with `limit`.
    """
    prepared = prepare_study(study, settings, limit)
    save_study(prepared.engine, prepared.row, prepared.trials)
    return prepared.engine, prepared.lock, prepared.study


def launch_study(app, prepared: Prepared, resume: bool) -> LaunchSummary:
    """Write the study and send its pending trials' messages: what `evalq run` does.

    A study never launched before skips reading back what it has just planned: its study,
    trial and first attempt rows are written in a thread while the messages are built, a
    transaction per WRITE_CHUNK trials, and each chunk's messages are sent once its rows have
    committed (bench/ scale). Any other goes through register_study's insert and send_trials.
    The cyclic collector is paused meanwhile (evalq.gcpause).
    """
    with cyclic_gc_paused():
        return _launch(app, prepared, resume)


def _launch(app, prepared: Prepared, resume: bool) -> LaunchSummary:
    study, engine = prepared.study, prepared.engine
    if not prepared.trials or study_exists(engine, study.id):
        save_study(engine, prepared.row, prepared.trials)
        record_executor(engine, study.id, executor_id())  # whoever resumes executes runs too
        return send_trials(app, study, engine, resume)
    to_send = first_sends(prepared)

    def write_rows(start: int, stop: int) -> None:
        save_new_study(engine, prepared.row if start == 0 else None,
                       prepared.trials[start:stop])

    send_run_messages(app, study, to_send, write_rows)
    _log_sent(study.id, to_send)
    return LaunchSummary(planned=len(to_send), sent=len(to_send), finished=0, in_flight=0)


def first_sends(prepared: Prepared) -> list[tuple[Any, int]]:
    """(trial, 1) for every planned trial, in order: a new study's messages, built straight
    from the plan with no read-back (each trial a named tuple of TrialRow's columns)."""
    if not prepared.trials:
        return []
    as_row = partial(tuple.__new__, row_type(tuple(prepared.trials[0])))  # for message_for
    return [(as_row(t.values()), 1) for t in prepared.trials]


def settings_for_study(settings: Settings, study: Study) -> Settings:
    """Settings whose visibility timeout covers the study's longest trial (about twice it).

    An explicit EVALQ_VISIBILITY_TIMEOUT is kept as given (tests use a short one on purpose).
    """
    longest = longest_trial_seconds(study)
    if longest <= settings.max_trial_seconds:
        return settings
    return settings.model_copy(update={"max_trial_seconds": longest})


#: trials whose rows are committed, and then messages pushed, at a time: the database writes
#: the next rows while the previous messages are built and pushed (bench/ scale)
WRITE_CHUNK = 10_000
#: `write_rows(start, stop)` commits the rows that to_send[start:stop]'s messages name
RowWriter = Callable[[int, int], None]


def send_run_messages(app, study: Study, to_send: list[tuple[TrialRow, int]],
                      write_rows: Optional[RowWriter] = None) -> int:
    """run_trial messages for (trial, attempt) pairs, with time limits from the budgets."""
    return publish_run_messages(app, to_send, lambda fixture_id: task_limits(study, fixture_id),
                                study.manifest.max_attempts,
                                visibility_for(longest_trial_seconds(study)), write_rows)


def publish_run_messages(app, to_send: list[tuple[TrialRow, int]],
                         limits_of: Callable[[str], tuple[float, float]], max_claims: int,
                         visibility: int, write_rows: Optional[RowWriter] = None) -> int:
    """Send run_trial messages; `limits_of(fixture_id)` gives (soft, hard), asked once a fixture.

    No message is sent before `write_rows` has committed the rows it names. On Redis the rows
    are written WRITE_CHUNK trials at a time in a thread, while the messages are built and
    held; each chunk's messages are pushed once its rows have committed, so the database,
    the building and the pushing overlap (bench/ scale). If a write fails, no message of its
    chunk or any later one is sent; the trials already sent are in the database, and the
    rest are pending for `evalq run --resume`.
    """
    limits: dict[str, tuple[float, float]] = {}  # per fixture, not per message (bench/)
    chunks = [(at, min(at + WRITE_CHUNK, len(to_send)))
              for at in range(0, len(to_send), WRITE_CHUNK)]
    with batch_sender(app, hold=write_rows is not None) as sender:
        if write_rows is not None and not sender.held:  # this broker sends at once
            for start, stop in chunks:
                write_rows(start, stop)
            write_rows = None
        with _writing(write_rows, chunks) as written:
            for chunk, (start, stop) in enumerate(chunks):
                for trial, attempt in to_send[start:stop]:
                    if trial.fixture_id not in limits:
                        limits[trial.fixture_id] = limits_of(trial.fixture_id)
                    soft, hard = limits[trial.fixture_id]
                    message = message_for(trial, attempt, max_claims, visibility)
                    shown = shown_as("evalq.run_trial", message)
                    sender.send("evalq.run_trial", [message], shown["argsrepr"], soft, hard,
                                shown["shadow"])
                written(chunk)
                sender.flush()
    return len(to_send)


@contextmanager
def _writing(write_rows: Optional[RowWriter],
             chunks: list[tuple[int, int]]) -> Iterator[Callable[[int], None]]:
    """Write the chunks' rows in order in a thread during the block. The block gets a function
    that returns once chunk i is committed, or raises the writer's error if chunk i never
    will be; leaving the block stops the writer after its current chunk and waits for it."""
    if write_rows is None:
        yield lambda chunk: None
        return
    done = [threading.Event() for _ in chunks]
    written_ok = [False] * len(chunks)
    failed: list[BaseException] = []
    stop = threading.Event()

    def run() -> None:
        try:
            for chunk, (start, end) in enumerate(chunks):
                if stop.is_set():
                    return
                write_rows(start, end)
                written_ok[chunk] = True
                done[chunk].set()
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            failed.append(exc)
        finally:
            for event in done:
                event.set()

    def written(chunk: int) -> None:
        done[chunk].wait()
        if not written_ok[chunk]:
            raise failed[0] if failed else RuntimeError("the row writer stopped early")

    thread = threading.Thread(target=run, name="evalq-write-rows")
    thread.start()
    try:
        yield written
    finally:
        stop.set()
        thread.join()


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


def _log_sent(study_id: str, to_send: list) -> None:
    if to_send:
        log.info("study %s: sent %d run_trial message(s), first %s", study_id, len(to_send),
                 trial_label(to_send[0][0].id, to_send[0][1]))


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
    def write_rows(start: int, stop: int) -> None:  # the rows the messages name
        chunk = to_send[start:stop]
        create_attempts(engine, [t.id for t, a in chunk], {t.id: a for t, a in chunk},
                        study.id)
        if resume:
            with Session(engine) as session:
                for trial, attempt in chunk:
                    session.execute(update(AttemptRow).where(
                        AttemptRow.trial_id == trial.id, AttemptRow.attempt == attempt,
                        AttemptRow.state == "cancelled").values(state="queued"))
                session.commit()

    send_run_messages(app, study, to_send, write_rows)
    _log_sent(study.id, to_send)
    if resume:  # attempts stuck in grading (message lost): grade the stored artifacts again
        from evalq.ops.recovery import send_grading

        by_id = {t.id: t for t in trials}
        stuck = [(by_id[r.trial_id], r) for r in latest.values()
                 if r.outcome is None and r.state == "grading" and r.artifacts]
        send_grading(app, stuck)
    return LaunchSummary(planned=len(trials), sent=len(to_send), finished=finished,
                         in_flight=in_flight)
