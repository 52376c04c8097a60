"""The grading worker's task body: claim the grading, grade the stored workspace, send the result.

Like an agent run, a grading holds a database lease renewed by a heartbeat: a grader that dies
mid-grade stops renewing, and a sweeper (ops/grading_sweep.py in grading and results workers,
or the launcher's) re-sends the grading soon after the lease expires, whatever the broker's
visibility timeout. A duplicate delivery finds the live lease and leaves. Regrades of finished
attempts are operator actions and take no lease.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from typing import Callable

from evalq.artifacts import open_store
from evalq.config import Settings, load_settings
from evalq.errors import EvalqError
from evalq.fixtures.cache import cached_fixture
from evalq.graders.grade import GRADER_VERSION, grade_archive
from evalq.queue.messages import trial_label
from evalq.results.lease import Heartbeat
from evalq.results.store import claim_grading, ready_engine
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
    """Grade one attempt; `send(task_name, payload)` hands the result to the results queue."""
    settings = settings or load_settings()
    label = trial_label(payload["trial_id"], payload["attempt"])
    heartbeat = None
    if not payload.get("regrade"):
        engine = ready_engine(settings.database_url)
        owner = f"grader:{hostname or os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
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
    finally:
        if heartbeat is not None:
            heartbeat.stop()
    log.info("graded %s: %s; sending the result", label, message["outcome"])
    send("evalq.record_result", message)  # retried while the broker is away (queue/tasks.py)
    return message["outcome"]


def _graded(payload: dict, hostname: str, settings: Settings) -> dict:
    """The record_result message: the payload plus outcome, reason, criteria and grade."""
    started = time.time()
    try:
        store = open_store(settings.artifacts_url)
        fixture = cached_fixture(store, settings.home / "cache" / "fixtures",
                                 payload["fixture_ref"], payload["fixture_digest"])
        archive = store.get(payload["artifacts"]["workspace"])
        result = grade_archive(fixture, archive, sandbox=settings.sandbox,
                               label=payload["trial_id"])
        outcome, reason, criteria, grade = result_fields(result, hostname)
    except EvalqError as exc:
        outcome, reason, criteria = "grading_failure", f"{type(exc).__name__}: {exc}", []
        grade = {"grader_version": GRADER_VERSION, "grader_host": hostname or None}
    grade["started_at"] = started
    return dict(payload, outcome=outcome, reason=reason, criteria=criteria, grade=grade,
                tampered=grade.get("tampered"), graded_at=time.time())
