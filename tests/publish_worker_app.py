"""A Celery app with evalq's settings and one task named evalq.run_trial that only records
what it was given: what test_publish runs a real worker on, to show that stencilled messages
are ones a worker accepts and runs with their own arguments and time limits."""

from __future__ import annotations

import json
import os

import redis
from celery import Celery

from evalq.config import load_settings
from evalq.queue.app import configure

app = configure(Celery("publish-worker-test"), load_settings())


@app.task(name="evalq.run_trial", bind=True)
def run_trial(self, ref: dict) -> None:
    seen = {"trial_id": ref["trial_id"], "timelimit": list(self.request.timelimit or []),
            "id": self.request.id, "argsrepr": self.request.argsrepr}
    redis.Redis.from_url(os.environ["EVALQ_BROKER_URL"]).rpush("publish-test:ran",
                                                              json.dumps(seen))
