"""Sending many task messages at once: pipelined on Redis, one by one elsewhere.

Celery builds each message with several layers of routing, header and serialisation code and
sends it with its own round trips; for a study of 100,000 trials that dominates enqueueing.
On the Redis transport a Batch sends the first message of a kind through `app.send_task`,
keeps what Celery and kombu made of it as a template, and fills that template for the others:
a fresh task id and delivery tag, the arguments, their readable form and the time limits. The
pushes go through one non-transactional pipeline. `test_filled_messages_equal_celerys_own`
(tests/test_publish.py) compares a filled message with one Celery builds itself, so an upgrade that changes the
format is caught.
"""

from __future__ import annotations

import copy
from contextlib import contextmanager
from typing import Any, Iterator, Optional
from uuid import uuid4

from celery import signals
from kombu.utils.json import JSONEncoder, loads

BATCH = 2000
# kombu's dumps builds a new encoder per call; one instance gives the same text at a third of
# the cost, which matters at two encodings per message (bench/)
dumps = JSONEncoder().encode


class Batch:
    """Sends tasks through one producer; on Redis, pipelined and from a template per task name."""

    def __init__(self, app, producer, channel=None, batch: int = BATCH):
        self.app, self.producer, self.channel, self.batch = app, producer, channel, batch
        self.templates: dict[str, dict[str, Any]] = {}
        self._captured: Optional[dict[str, Any]] = None
        self._pipe = channel.client.pipeline(transaction=False) if channel is not None else None
        self._queued = 0
        self._declared: set[str] = set()

    def send(self, name: str, args: list, argsrepr: str, soft: float, hard: float,
             shadow: Optional[str] = None) -> None:
        """One message; `argsrepr` and `shadow` are what Flower and worker logs show for it."""
        template = self.templates.get(name)
        if template is not None and _no_publish_hooks():
            self._push_to(template["list_key"], _filled(template, args, argsrepr, soft, hard,
                                                        self.channel, shadow))
            return
        declare = {"declare": []} if name in self._declared else {}
        self.app.send_task(name, args=args, soft_time_limit=soft, time_limit=hard,
                           producer=self.producer, argsrepr=argsrepr, shadow=shadow, **declare)
        self._declared.add(name)  # kombu re-declares the queue per message unless told not to
        if self._captured is not None:
            self._remember(name, args, self._captured)

    # ---------------------------------------------------------------- the Redis fast path
    def put(self, queue: str, message: dict[str, Any], **_kwargs) -> None:
        """Replaces the channel's _put: keep the message (for a template) and push it."""
        self._captured = dict(copy.deepcopy(message), queue=queue)
        self._push(queue, message)

    def _list_key(self, queue: str, message: dict[str, Any]) -> str:
        """The Redis list kombu keeps the queue's messages of this priority in."""
        priority = self.channel._get_message_priority(message, reverse=False)
        return self.channel._q_for_pri(queue, priority)

    def _push(self, queue: str, message: dict[str, Any]) -> None:
        self._push_to(self._list_key(queue, message), message)

    def _push_to(self, list_key: str, message: dict[str, Any]) -> None:
        self._pipe.lpush(list_key, dumps(message))
        self._queued += 1
        if self._queued >= self.batch:
            self.flush()

    def flush(self) -> None:
        if self._pipe is not None and self._queued:
            self._pipe.execute()
            self._queued = 0

    def _remember(self, name: str, args: list, message: dict[str, Any]) -> None:
        """Keep a message as a template only in the plain form this module knows how to fill."""
        headers, props = message["headers"], message["properties"]
        body = loads(self.channel.decode_body(message["body"], props.get("body_encoding")))
        plain = (headers.get("task") == name and headers.get("root_id") == headers.get("id")
                 and headers.get("parent_id") is None and headers.get("eta") is None
                 and headers.get("expires") is None and headers.get("group") is None
                 and props.get("correlation_id") == headers.get("id")
                 and message.get("content-type") == "application/json"
                 and isinstance(body, list) and len(body) == 3 and body[0] == args)
        if plain:  # filled messages share the template's priority, hence its Redis list
            self.templates[name] = dict(message, body_rest=body[1:],
                                        list_key=self._list_key(message["queue"], message))


def _filled(template: dict[str, Any], args: list, argsrepr: str, soft: float, hard: float,
            channel, shadow: Optional[str] = None) -> dict[str, Any]:
    task_id = str(uuid4())
    headers = dict(template["headers"], id=task_id, root_id=task_id, argsrepr=argsrepr,
                   shadow=shadow, timelimit=[hard, soft])
    props = dict(template["properties"], correlation_id=task_id, argsrepr=argsrepr,
                 delivery_tag=str(uuid4()),
                 delivery_info=dict(template["properties"]["delivery_info"]))
    body = dumps([args, *template["body_rest"]])
    encoded, _ = channel.encode_body(body, props.get("body_encoding"))
    return {"body": encoded, "content-encoding": template["content-encoding"],
            "content-type": template["content-type"], "headers": headers, "properties": props}


def _no_publish_hooks() -> bool:
    """Celery's publish signals must see every message: with receivers, take the slow path."""
    return not (signals.before_task_publish.receivers or signals.after_task_publish.receivers)


@contextmanager
def batch_sender(app, batch: int = BATCH) -> Iterator[Batch]:
    """A Batch over one producer; pipelined and templated on Redis, plain send_task elsewhere."""
    with app.producer_or_acquire() as producer:
        channel = producer.channel
        redis = str(app.conf.broker_url or "").startswith(("redis://", "rediss://")) and \
            hasattr(channel, "_q_for_pri")
        if not redis:
            yield Batch(app, producer)
            return
        sender = Batch(app, producer, channel, batch)
        tables: dict[str, object] = {}
        original_table = channel.get_table

        def get_table(exchange):  # the exchange's bindings, looked up once
            if exchange not in tables:
                tables[exchange] = original_table(exchange)
            return tables[exchange]

        channel._put, channel.get_table = sender.put, get_table
        try:
            yield sender
            sender.flush()
        finally:
            del channel._put, channel.get_table  # the pooled channel gets its own methods back
