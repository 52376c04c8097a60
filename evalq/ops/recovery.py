"""Re-sending what the queue lost, decided from the database (DESIGN: the DB is the truth).

* a running attempt whose lease expired (its worker died, its host lost the network) gets its
  run_trial message again; the claim lets exactly one delivery take it; so does a queued
  attempt whose message an agent worker took more than a lease ago and never claimed (it
  died in between: ops/held_deliveries.py);
* a grading whose grader died (its lease expired) is re-sent within about a lease, as grading
  and results workers do without a launcher (ops/grading_sweep.py; one sender per expiry);
* an attempt stuck in 'grading' that no grader ever took (agent done, artifacts stored,
  grading message lost) gets a grade_trial message rebuilt from the stored row, without
  re-running the agent, after a grace long enough for a grading backlog;
* when the broker restarted (Redis run id changed) every pending trial is re-sent, since a
  broker without persistence forgets its queues.
Duplicates are harmless: claims and idempotent upserts absorb them.
"""

from __future__ import annotations

import logging
import time
from typing import Optional

from evalq.ops.grading_sweep import resend_stranded_gradings
from evalq.ops.held_deliveries import GRADE_TASK, RUN_TASK, held_messages
from evalq.queue.messages import grading_payload, shown_as
from evalq.results.store import latest_attempts

log = logging.getLogger("evalq.recovery")

def stranded(engine, study_id: str, grading_grace: float, now: Optional[float] = None,
             held_runs: frozenset = frozenset()) -> tuple[list, list]:
    """(expired running attempts, never-claimed gradings older than grading_grace) as (trial, row).

    Queued attempts whose (trial_id, attempt) is in `held_runs` (a dead worker took their
    message) count as expired. Gradings a grader claimed are the lease sweep's
    (resend_stranded_gradings), not this."""
    now = time.time() if now is None else now
    trials, latest = latest_attempts(engine, study_id)
    expired, grading = [], []
    for trial_id, row in latest.items():
        if row.outcome is not None or trial_id not in trials:
            continue
        if row.state == "running" and (row.lease_expires_at or 0) < now or \
                row.state == "queued" and (trial_id, row.attempt) in held_runs:
            expired.append((trials[trial_id], row))
        elif row.state == "grading" and row.artifacts and row.lease_expires_at is None and \
                (row.agent_finished_at or 0) < now - grading_grace:
            grading.append((trials[trial_id], row))
    return expired, grading


def send_grading(app, items: list, regrade: bool = False) -> int:
    """grade_trial messages for stored (trial, attempt row) pairs, named by their trial."""
    with app.producer_or_acquire() as producer:
        for trial, row in items:
            payload = grading_payload(trial, row, regrade=regrade)
            app.send_task("evalq.grade_trial", args=[payload], producer=producer,
                          **shown_as("evalq.grade_trial", payload))
    return len(items)


def broker_run_id(broker_url: Optional[str]) -> Optional[str]:
    """The Redis server's run id (changes on restart); None for other brokers or when down."""
    if not broker_url or not broker_url.startswith(("redis://", "rediss://")):
        return None
    try:
        import redis

        client = redis.Redis.from_url(broker_url, socket_connect_timeout=2, socket_timeout=2)
        try:
            return str(client.info("server").get("run_id"))
        finally:
            client.close()
    except Exception:
        return None


class Sweeper:
    """Called from the launcher's wait loop; at most every `every` seconds it re-sends what was lost.

    `resend_all()` re-sends every pending trial (launch.send_trials with resume=True);
    `resend_expired(expired)` re-sends run_trial for attempts whose lease expired.
    """

    def __init__(self, app, engine, study_id: str, broker_url: Optional[str], every: float,
                 grading_grace: float, resend_all, resend_expired, lease_seconds: float = 60.0):
        self.app, self.engine, self.study_id = app, engine, study_id
        self.broker_url, self.every, self.grading_grace = broker_url, every, grading_grace
        self.resend_all, self.resend_expired = resend_all, resend_expired
        self.lease_seconds = lease_seconds
        self.last = time.monotonic()
        self.run_id = broker_run_id(broker_url)
        self.sent_for: dict[tuple[str, int, str], float] = {}

    def __call__(self) -> None:
        if time.monotonic() - self.last < self.every:
            return
        self.last = time.monotonic()
        try:
            self._sweep()
        except Exception as exc:  # broker or database blip: try again next time
            log.warning("recovery sweep failed (will retry): %s", exc)

    def _send(self, task_name: str, payload: dict) -> None:
        self.app.send_task(task_name, args=[payload], **shown_as(task_name, payload))

    def _fresh(self, items: list, kind: str) -> list:
        """Leave out what this sweeper re-sent less than a grace ago (give it time to run)."""
        now = time.monotonic()
        return [(t, r) for t, r in items
                if now - self.sent_for.get((t.id, r.attempt, kind), -1e9) > self.grading_grace]

    def _sent(self, items: list, kind: str) -> None:
        """Remember what was re-sent, once it was (a send that failed is tried next sweep)."""
        now = time.monotonic()
        for t, r in items:
            self.sent_for[(t.id, r.attempt, kind)] = now

    def _sweep(self) -> None:
        run_id = broker_run_id(self.broker_url)
        if run_id is not None and self.run_id is not None and run_id != self.run_id:
            log.warning("the broker restarted; re-sending every pending trial")
            self.resend_all()
            _, grading = stranded(self.engine, self.study_id, 0.0)
            send_grading(self.app, grading)
            self.run_id = run_id  # only now: a sweep that failed half-way is done again
            return
        if run_id is not None:
            self.run_id = run_id
        held = held_messages(self.broker_url, self.lease_seconds)
        resend_stranded_gradings(self.engine, self._send, self.lease_seconds,
                                 held=held[GRADE_TASK])
        expired, grading = stranded(self.engine, self.study_id, self.grading_grace,
                                    held_runs=frozenset(held[RUN_TASK]))
        expired = self._fresh(expired, "run")
        if expired:
            log.warning("re-sending %d trial(s) whose worker is gone (lease expired, or message "
                        "taken and never claimed)", len(expired))
            self.resend_expired(expired)
            self._sent(expired, "run")
        grading = self._fresh(grading, "grade")
        if grading:
            send_grading(self.app, grading)
            self._sent(grading, "grade")
