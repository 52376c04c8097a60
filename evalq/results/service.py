"""The results service: turns result messages into attempt rows, exactly once per key."""

from __future__ import annotations

import logging
import time

from evalq.config import load_settings
from evalq.results.store import init_db, record_attempt

log = logging.getLogger("evalq.results.service")


def record_message(payload: dict) -> str:
    engine = init_db(load_settings().database_url)
    payload.setdefault("finished_at", time.time())
    written = record_attempt(engine, payload, regrade=bool(payload.get("regrade")))
    what = "recorded" if written else "already recorded"
    log.info("%s %s#%s: %s", what, payload["trial_id"], payload["attempt"], payload["outcome"])
    return what
