"""Re-sending gradings whose grader died, decided from the database; no launcher needed.

Who sweeps: every worker that consumes the grading or results queue (a daemon thread started
when the worker is ready), and the launcher's Sweeper while one runs. Those workers are what a
grading needs anyway, so a study with no launcher (`evalq run --no-wait`) still recovers; the
reservation in `reserve_stranded_gradings` lets exactly one of many sweepers re-send each.
It runs every quarter lease, so a dead grader's trial is re-sent within lease + lease/4 (its
last renewal was at most a third of a lease before it died).
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Optional, Sequence

from evalq.ops.held_deliveries import held_gradings
from evalq.queue.messages import grading_payload, trial_label
from evalq.results.store import (grading_items, reserve_stranded_gradings,
                                 reserve_unclaimed_gradings)

log = logging.getLogger("evalq.recovery")


def resend_stranded_gradings(engine, send: Callable[[str, dict], None], lease_seconds: float,
                             unclaimed: bool = False,
                             held: Sequence[tuple[str, int]] = ()) -> int:
    """Reserve and re-send gradings with an expired lease (and with `unclaimed`, unstarted
    ones), and those of `held` that are still unclaimed: messages a grader took and died with
    (ops/held_deliveries.py)."""
    keys = reserve_stranded_gradings(engine, lease_seconds, unclaimed=unclaimed)
    if held:
        keys += reserve_unclaimed_gradings(engine, list(held), lease_seconds)
    items = grading_items(engine, keys)
    for trial, row in items:
        send("evalq.grade_trial", grading_payload(trial, row))
    if items:
        log.warning("re-sent %d grading(s) whose grader is gone or refused them: %s", len(items),
                    ", ".join(trial_label(t.id, r.attempt) for t, r in items[:5])
                    + (" …" if len(items) > 5 else ""))
    return len(items)


def start_worker_sweep(engine_of: Callable[[], object], send: Callable[[str, dict], None],
                       lease_seconds: float, broker_run_id: Callable[[], object],
                       stop: threading.Event,
                       broker_url: Optional[str] = None) -> threading.Thread:
    """A daemon thread: stranded gradings every quarter lease; after a broker restart (its run id
    changed) also gradings never started, whose messages the restart may have dropped; and
    gradings whose message a grader took more than a lease ago without claiming them."""

    def loop() -> None:
        last_run_id = broker_run_id()
        while not stop.wait(max(0.5, lease_seconds / 4)):
            try:
                run_id = broker_run_id()
                restarted = None not in (run_id, last_run_id) and run_id != last_run_id
                if run_id is not None:
                    last_run_id = run_id
                resend_stranded_gradings(engine_of(), send, lease_seconds, unclaimed=restarted,
                                         held=held_gradings(broker_url, lease_seconds))
            except Exception as exc:  # database or broker away: next round
                log.warning("grading sweep failed (will retry): %s", exc)

    thread = threading.Thread(target=loop, name="evalq-grading-sweep", daemon=True)
    thread.start()
    return thread
