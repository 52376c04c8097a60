"""The Celery app as Flower should load it (`celery -A evalq.ops.flower_app flower`).

Flower's event thread and its inspect calls each hold broker connections; evalq's small
connection pool (sized for workers) would make them wait on one another, so it is lifted here.
"""

from __future__ import annotations

from evalq.queue.app import app

app.conf.broker_pool_limit = None

__all__ = ["app"]
