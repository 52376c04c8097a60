"""The grading worker's task body: claim the grading, grade the stored workspace, send the result.

Like an agent run, a grading holds a database lease renewed by a heartbeat: a grader that dies
mid-grade stops renewing, and a sweeper (ops/grading_sweep.py in grading and results workers,
or the launcher's) re-sends the grading soon after the lease expires, whatever the broker's
visibility timeout. A duplicate delivery finds the live lease and leaves. Regrades of finished
attempts are operator actions and take no lease.

Before a process grades its first trial of a fixture it checks itself on the fixture's
reference solutions (graders/selfcheck.py). A grader that fails that check refuses the trial:
no outcome is sent, and the claimed lease passes to "(refused by GRADER)" for a lease's time,
after which the grading sweep re-sends it like any stranded grading, to whichever grader takes
it (results/store.py refuse_grading). The message itself is acknowledged and the task fails
with the reason (Flower shows it): a message put back at once would come straight back to the
same grader, and the database, not the queue, knows what is pending.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from typing import Callable

from evalq.artifacts import open_store
from evalq.config import Settings, load_settings
from evalq.criteria.evaluate import graded as graded_criteria
from evalq.errors import EvalqError
from evalq.fixtures.cache import cached_fixture
from evalq.graders.first_check import ended_run, graded_first_check
from evalq.graders.grade import GRADER_VERSION, grade_archive
from evalq.graders.sandbox import get_sandbox
from evalq.graders.selfcheck import GATE, GraderRefused
from evalq.queue.messages import trial_label
from evalq.results.grader_checks import record_check
from evalq.results.lease import Heartbeat
from evalq.results.store import claim_grading, ready_engine, refuse_grading
from evalq.models import GradeResult

log = logging.getLogger("evalq.grading")


def result_fields(result: GradeResult, hostname: str = "") -> tuple[str, str | None, list, dict]:
    """(outcome, reason, criteria, grade record) of a result message; the grade record goes to
    the attempt row as it is, `tampered`, `verdict` and the digests included."""
    criteria = [c.model_dump(mode="json") for c in result.criteria]
    grade = {"exit_code": result.exit_code, "duration_seconds": result.duration_seconds,
             "sandbox": result.sandbox, "grader_version": GRADER_VERSION,
             "output_tail": result.output_tail[-4000:], "grader_host": hostname or None,
             "verdict": result.verdict, "tampered": result.tampered, "digests": result.digests,
             "toolchain": result.toolchain}
    return result.outcome.value, result.reason, criteria, grade


def grade_message(payload: dict, send: Callable[[str, dict], None], hostname: str = "",
                  settings: Settings | None = None) -> str:
    """Grade one attempt; `send(task_name, payload)` hands the result to the results queue.
    GraderRefused (no result sent) if this grader's self-check of the fixture failed."""
    settings = settings or load_settings()
    label = trial_label(payload["trial_id"], payload["attempt"])
    grader = hostname or os.uname().nodename
    heartbeat = owner = None
    if not payload.get("regrade"):
        engine = ready_engine(settings.database_url)
        owner = f"grader:{grader}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        ok, why = claim_grading(engine, payload["trial_id"], payload["attempt"], owner,
                                settings.lease_seconds)
        if not ok:
            log.info("not grading %s: %s", label, why)
            return why
        heartbeat = Heartbeat(engine, payload, owner, settings.lease_seconds)
        heartbeat.start()
    log.info("grading %s", label)
    try:
        message = _graded(payload, hostname, settings)
    except GraderRefused as refused:
        if heartbeat is None:  # a regrade: the attempt keeps its earlier grade
            log.error("not regrading %s: %s", label, refused)
            raise
        heartbeat.stop()
        try:
            refuse_grading(engine, payload["trial_id"], payload["attempt"], owner, grader,
                           settings.lease_seconds)
        except Exception as exc:  # noqa: BLE001 - the lease then expires by itself: same end
            log.warning("could not hand %s back: %s", label, exc)
        log.error("not grading %s, which stays pending (re-sent in about %.0f s): %s", label,
                  settings.lease_seconds * 1.25, refused)
        raise
    finally:
        if heartbeat is not None:
            heartbeat.stop()
    log.info("graded %s: %s; sending the result", label, message["outcome"])
    send("evalq.record_result", message)  # retried while the broker is away (queue/sending.py)
    return message["outcome"]


def _recorder(settings: Settings) -> Callable[[dict], None]:
    """Writes a self-check verdict where `evalq status` reads it; a database away loses only
    that record (the verdict itself lives in this process)."""
    def record(row: dict) -> None:
        try:
            record_check(ready_engine(settings.database_url), row)
        except Exception as exc:  # noqa: BLE001 - people's view only; grading goes on
            log.warning("could not record the self-check of %s: %s", row["fixture_id"], exc)
    return record


def _graded(payload: dict, hostname: str, settings: Settings) -> dict:
    """The record_result message: the payload plus outcome, reason, criteria and grade.
    GraderRefused when this grader's self-check of the fixture fails."""
    started = time.time()
    first: dict = {}
    try:
        store = open_store(settings.artifacts_url)
        fixture = cached_fixture(store, settings.home / "cache" / "fixtures",
                                 payload["fixture_ref"], payload["fixture_digest"])
        backend = get_sandbox(settings.sandbox)
        GATE.require(fixture, backend, hostname or os.uname().nodename, settings.lease_seconds,
                     _recorder(settings))
        transcript = payload["artifacts"].get("transcript")
        trace = store.get(transcript) if fixture.spec.criteria and transcript else None
        ended = ended_run(fixture, payload, trace)

        def grade_one(archive: bytes, label: str):
            result = grade_archive(fixture, archive, sandbox=backend, label=label)
            outcome, reason, criteria, grade = result_fields(result, hostname)
            outcome, reason, named = graded_criteria(fixture.spec.criteria, outcome, reason,
                                                     criteria, result.tampered, trace)
            return outcome, reason, criteria, grade, named

        # the workspace at the agent's first visible check: the same grading, kept apart
        first = graded_first_check(fixture, payload, store.get, lambda snapshot: _as_first(
            grade_one(snapshot, f"{payload['trial_id']}#first-check")))
        if ended is not None:  # a timed-out run: its first check alone was to grade
            return dict(payload, **ended, grade={"grader_version": GRADER_VERSION,
                                                 "grader_host": hostname or None,
                                                 "started_at": started},
                        graded_at=time.time(), **first)
        archive = store.get(payload["artifacts"]["workspace"])
        outcome, reason, criteria, grade, named = grade_one(archive, payload["trial_id"])
    except EvalqError as exc:
        outcome, reason, criteria = "grading_failure", f"{type(exc).__name__}: {exc}", []
        grade = {"grader_version": GRADER_VERSION, "grader_host": hostname or None}
        named = None
        if payload.get("session_checks") is not None and not first:
            first = {"first_check_result": None,
                     "first_check_reason": "not graded: the grading of the run failed"}
        ended = (payload.get("session_checks") or {}).get("ended")
        if isinstance(ended, dict):  # the agent's timeout stands, whatever befell its grading
            outcome, reason = ended.get("outcome") or "timed_out", ended.get("reason")
    grade["started_at"] = started
    extra = {"criterion_results": named} if named is not None else {}
    return dict(payload, outcome=outcome, reason=reason, criteria=criteria, grade=grade,
                tampered=grade.get("tampered"), graded_at=time.time(), **first, **extra)


def _as_first(graded: tuple) -> tuple:
    """(outcome, reason, grade record) of the first check's grading: the record holds its
    checks and criterion results too, as the attempt's own columns do for the final one."""
    outcome, reason, criteria, grade, named = graded
    return outcome, reason, dict(grade, criteria=criteria, criterion_results=named)
