"""Publishing one hop's message (agents → grading → results) so it survives a broker outage.

Every hop sends through `send`: while the broker is unreachable (a Redis restart, a failover)
it keeps trying for the outage window (queue/outage.py: EVALQ_BROKER_RETRY_SECONDS, five
minutes unless set), logging the first failure and the recovery; past it, BrokerUnavailable,
and the caller leaves the trial pending in the database for the sweeps to send again.

Each try publishes over a connection of its own, closed when the try ends. Celery's pooled
producers hand one connection and its channel from thread to thread, and kombu's retry closes
that channel in place when the broker drops (the channel's connection becomes None); a channel
closed that way and used again fails with "'NoneType' object has no attribute 'client'" instead
of a connection error, so it was neither retried nor recognised. A hop sends one message per
trial, so a connection per message costs nothing that matters. (The embedded default's
folder broker cannot go away, and keeps Celery's pooled producers.)
"""

from __future__ import annotations

from typing import Optional

from evalq.queue.app import app
from evalq.queue.messages import shown_as, trial_label
from evalq.queue.outage import ride_out


def send(task_name: str, payload: dict, window: Optional[float] = None) -> None:
    """Publish the next hop's message; every hop (agents, grading, sweeps) retries the same way."""
    shown = shown_as(task_name, payload)

    def publish_once() -> None:
        if not str(app.conf.broker_url or "").startswith(("redis://", "rediss://")):
            app.send_task(task_name, args=[payload], **shown)  # the embedded folder: no outage
            return
        connection = app.connection_for_write()
        try:
            app.send_task(task_name, args=[payload], connection=connection, **shown)
        finally:
            connection.release()

    ride_out(publish_once, f"sending {task_name.removeprefix('evalq.')} "
                           f"{trial_label(payload['trial_id'], payload['attempt'])}", window)
