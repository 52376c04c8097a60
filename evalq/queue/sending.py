"""Publishing one hop's message (agents → grading → results) so it survives a broker restart.

Every hop sends through `send`: retried for about a minute while the broker is away (a Redis
restart), and named by its trial for Flower and worker logs.
"""

from __future__ import annotations

from evalq.queue.app import app
from evalq.queue.messages import shown_as

#: while the broker is away (a Redis restart), a hop keeps trying for about a minute
RETRY_POLICY = {"max_retries": 30, "interval_start": 0.5, "interval_step": 0.5,
                "interval_max": 2.0}


def send(task_name: str, payload: dict) -> None:
    """Publish the next hop's message; every hop (agents, grading, sweeps) retries the same way."""
    app.send_task(task_name, args=[payload], retry=True, retry_policy=RETRY_POLICY,
                  **shown_as(task_name, payload))
