"""The three Celery tasks. Messages carry ids and artifact references only (JSON)."""

from __future__ import annotations

import logging

from sqlalchemy.exc import DBAPIError

from evalq.graders import janitor  # noqa: F401  (grading workers sweep orphans of crashed runs)
from evalq.graders.selfcheck import GraderRefused
from evalq.graders.service import grade_message
from evalq.ops import worker_sweeps  # noqa: F401  (run folders, stranded gradings)
from evalq.queue.app import app
from evalq.queue.messages import trial_label
from evalq.queue.outage import BrokerUnavailable
from evalq.queue.sending import send
from evalq.results.service import (MAX_RETRIES, RETRY_BACKOFF, RETRY_BACKOFF_MAX,
                                    record_message)
from evalq.workers.runner import run_trial_message

log = logging.getLogger("evalq.queue.tasks")


@app.task(name="evalq.run_trial", bind=True)
def run_trial(self, ref: dict) -> str:
    """Agents queue: claim the attempt, run the agent in a fresh profile, hand off to grading."""
    return run_trial_message(ref, send, hostname=self.request.hostname or "")


@app.task(name="evalq.grade_trial", bind=True, throws=(GraderRefused,))
def grade_trial(self, payload: dict) -> str:
    """Grading queue: hidden tests over the stored final workspace, in the sandbox. A grader
    whose self-check of the fixture failed fails the task with the reason (Flower shows it)
    and leaves the trial pending (graders/service.py)."""
    try:
        return grade_message(payload, send, hostname=self.request.hostname or "")
    except BrokerUnavailable as exc:  # the grading lease runs out and a sweep re-sends it
        log.warning("%s left pending for the sweeps to grade again: %s",
                    trial_label(payload["trial_id"], payload["attempt"]), exc)
        return "left pending: broker unavailable"


@app.task(name="evalq.record_result", autoretry_for=(DBAPIError,),
          retry_backoff=RETRY_BACKOFF, retry_backoff_max=RETRY_BACKOFF_MAX, retry_jitter=False,
          max_retries=MAX_RETRIES)
def record_result(payload: dict) -> str:
    """Results queue: the only writer of outcomes (an idempotent upsert)."""
    return record_message(payload)
