"""The heartbeat that keeps a database lease (agent run or grading) alive while work goes on.

A process that dies stops renewing; once the lease expires a sweeper re-sends the work and the
next delivery claims it (results/store.py claim, claim_grading, renew).
"""

from __future__ import annotations

import logging
import threading

from evalq.queue.messages import trial_label
from evalq.results.store import renew

log = logging.getLogger("evalq.lease")


class Heartbeat(threading.Thread):
    """Renews the lease every third of its length until stopped; `lost` once someone took it."""

    def __init__(self, engine, ref: dict, owner: str, lease_seconds: float):
        super().__init__(daemon=True, name="evalq-lease")
        self.engine, self.ref, self.owner, self.lease = engine, ref, owner, lease_seconds
        self.stopped = threading.Event()
        self.lost = False

    def run(self) -> None:
        while not self.stopped.wait(self.lease / 3):
            try:
                if not renew(self.engine, self.ref["trial_id"], self.ref["attempt"], self.owner,
                             self.lease):
                    self.lost = True
            except Exception as exc:  # database blip: keep trying until the lease runs out
                log.warning("lease renewal of %s failed: %s", trial_label(self.ref["trial_id"], self.ref["attempt"]), exc)

    def stop(self) -> None:
        self.stopped.set()

