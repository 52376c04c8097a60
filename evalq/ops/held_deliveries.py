"""Messages a dead worker took off the queue but never started.

Redis hands a message to a consumer by moving it into kombu's `unacked` hash (indexed by
delivery time in `unacked_index`); it comes back only when the visibility timeout runs out,
which is set to about twice the longest trial. Agent workers and graders claim their work (a
database lease) as the first thing they do with a message, so a message delivered longer than
a lease ago whose attempt is still unclaimed was taken by a worker that died first (killed,
out of memory, its host off the network): the sweeps re-send it now rather than after hours.
The stale copy, restored at its timeout, finds the work done or held and does nothing.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Optional

#: kombu's Redis transport defaults (evalq does not rename them)
UNACKED, UNACKED_INDEX = "unacked", "unacked_index"
GRADE_TASK, RUN_TASK = "evalq.grade_trial", "evalq.run_trial"
#: delivery tags read per sweep: a bounded look, oldest first
MAX_LOOKED_AT = 2000


def _message_key(raw: bytes) -> Optional[tuple[str, str, int]]:
    """(task name, trial_id, attempt) of a filed [message, exchange, routing_key] of ours."""
    try:
        message = json.loads(raw)[0]
        task = (message.get("headers") or {}).get("task")
        if task not in (GRADE_TASK, RUN_TASK):
            return None
        body = message["body"]
        if (message.get("properties") or {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = json.loads(body)[0]
        payload = args[0]
        return task, str(payload["trial_id"]), int(payload["attempt"])
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None


def held_gradings(broker_url: Optional[str], older_than: float) -> list[tuple[str, int]]:
    """(trial_id, attempt) of grading messages delivered to some consumer more than
    `older_than` seconds ago and not yet acknowledged; [] for other brokers or when away."""
    return held_messages(broker_url, older_than)[GRADE_TASK]


def held_messages(broker_url: Optional[str],
                  older_than: float) -> dict[str, list[tuple[str, int]]]:
    """Per task name (GRADE_TASK, RUN_TASK): the (trial_id, attempt) of its messages delivered
    more than `older_than` s ago and unacknowledged, from one read of the unacked index (the
    launcher's sweep needs both); empty lists for other brokers or when away."""
    held: dict[str, set] = {GRADE_TASK: set(), RUN_TASK: set()}
    if not broker_url or not broker_url.startswith(("redis://", "rediss://")):
        return {task: [] for task in held}
    import redis

    client = redis.Redis.from_url(broker_url, socket_connect_timeout=2, socket_timeout=5)
    try:
        tags = client.zrangebyscore(UNACKED_INDEX, "-inf", time.time() - older_than,
                                    start=0, num=MAX_LOOKED_AT)
        for raw in client.hmget(UNACKED, tags) if tags else ():
            key = _message_key(raw) if raw is not None else None
            if key is not None:
                held[key[0]].add(key[1:])
    except redis.RedisError:
        pass
    finally:
        client.close()
    return {task: sorted(keys) for task, keys in held.items()}
