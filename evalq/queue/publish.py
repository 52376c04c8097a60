"""Sending many task messages at once: pipelined on Redis, one by one elsewhere.

Celery builds each message with several layers of routing, header and serialisation code and
sends it with its own round trips; for a study of 100,000 trials that dominates enqueueing.
On the Redis transport a Batch sends the first message of a kind through `app.send_task`,
keeps what Celery and kombu made of it as a template, and fills that template for the others:
a fresh task id and delivery tag, the arguments, their readable form and the time limits. The
template is rendered once into a format string with a slot for each of those (a Stencil), so a
message costs one JSON encoding of its arguments, a base64 and one str.format. The pushes go
through one non-transactional pipeline, many messages per LPUSH (the order a worker's BRPOP
takes them in is the order they were sent). `test_filled_messages_equal_celerys_own`
(tests/test_publish.py) compares a filled message with one Celery builds itself, so an upgrade that changes the
format is caught.
"""

from __future__ import annotations

import copy
import os
import re
from contextlib import contextmanager
from typing import Any, Iterator, Optional
from uuid import uuid4

import numpy as np
from celery import signals
from json.encoder import encode_basestring_ascii
from kombu.utils.json import JSONEncoder, loads

BATCH = 2000
# kombu's dumps builds a new encoder per call; one instance gives the same text at a third of
# the cost, which matters at two encodings per message (bench/)
dumps = JSONEncoder().encode


class Batch:
    """Sends tasks through one producer; on Redis, pipelined and from a template per task name."""

    def __init__(self, app, producer, channel=None, batch: int = BATCH, hold: bool = False):
        self.app, self.producer, self.channel, self.batch = app, producer, channel, batch
        #: on Redis with `hold`, nothing is pushed before flush(); elsewhere send() sends at once
        self.held = hold and channel is not None
        self.templates: dict[str, dict[str, Any]] = {}
        self._captured: Optional[dict[str, Any]] = None
        self._pipe = channel.client.pipeline(transaction=False) if channel is not None else None
        self._pending: list[tuple[str, str]] = []  # (Redis list, message text), in send order
        self._declared: set[str] = set()
        self.stencils: dict[str, Optional[Stencil]] = {}

    def send(self, name: str, args: list, argsrepr: str, soft: float, hard: float,
             shadow: Optional[str] = None) -> None:
        """One message; `argsrepr` and `shadow` are what Flower and worker logs show for it."""
        template = self.templates.get(name)
        if template is not None and _no_publish_hooks():
            stencil = self.stencils.get(name)
            text = stencil.fill(args, argsrepr, soft, hard, shadow) if stencil else \
                dumps(_filled(template, args, argsrepr, soft, hard, self.channel, shadow))
            self.push_text(template["list_key"], text)
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
        self.push_text(self._list_key(queue, message), dumps(message))

    def push_text(self, list_key: str, text: str) -> None:
        """Queue one encoded message for the Redis list; sent with the next flush."""
        self._pending.append((list_key, text))
        if len(self._pending) >= self.batch and not self.held:
            self.flush()

    def flush(self) -> None:
        """A pipeline round trip per `batch` messages: an LPUSH per run of them for one list.

        LPUSH key a b c leaves c at the head, and kombu's BRPOP takes from the tail: a first,
        as if each had been pushed alone."""
        if self._pipe is None:
            return
        for at in range(0, len(self._pending), self.batch):
            chunk = self._pending[at:at + self.batch]
            start = 0
            for i in range(1, len(chunk) + 1):
                if i == len(chunk) or chunk[i][0] != chunk[start][0]:
                    self._pipe.lpush(chunk[start][0], *(text for _, text in chunk[start:i]))
                    start = i
            self._pipe.execute()
        self._pending.clear()

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
            self.stencils[name] = Stencil.of(self.templates[name], self.channel)


class Stencil:
    """A template message as a format string: what _filled makes, without building dicts.

    Made by filling the template with markers and finding each marker in its JSON text; if any
    marker is not where it must be (a format this module does not know), there is no stencil
    and messages are filled as dicts instead. tests/test_publish.py compares the two.
    """

    MARKS = {"id": 3, "tag": 1, "argsrepr": 2, "shadow": 1, "timelimit": 1, "body": 1}

    def __init__(self, form: str, body_rest: str, channel, encoding: Optional[str]):
        self.form, self.body_rest, self.channel, self.encoding = form, body_rest, channel, encoding
        self._limits: dict[tuple[float, float], str] = {}  # a few distinct limits per study
        self._uuid = _QuotedUuid4s()

    @classmethod
    def of(cls, template: dict[str, Any], channel) -> Optional["Stencil"]:
        mark = {name: f"@@evalq-{name}@@" for name in cls.MARKS}
        message = _with_fields(template, mark["id"], mark["tag"], mark["argsrepr"],
                               mark["shadow"], mark["timelimit"], mark["body"])
        text = dumps(message)
        for name, count in cls.MARKS.items():
            if text.count(f'"{mark[name]}"') != count or text.count(mark[name]) != count:
                return None
        form = re.sub(r'"@@evalq-(\w+)@@"', r"{\1}",
                      text.replace("{", "{{").replace("}", "}}"))
        rest = dumps(template["body_rest"])[1:-1]
        return cls(form, ", " + rest if rest else "", channel,
                   template["properties"].get("body_encoding"))

    def fill(self, args: list, argsrepr: str, soft: float, hard: float,
             shadow: Optional[str]) -> str:
        body = "[" + dumps(args) + self.body_rest + "]"
        encoded, _ = self.channel.encode_body(body, self.encoding)
        limits = self._limits.get((hard, soft))
        if limits is None:
            limits = self._limits[(hard, soft)] = dumps([hard, soft])
        return self.form.format(id=self._uuid(), tag=self._uuid(),
                                argsrepr=_string(argsrepr), shadow=_string(shadow),
                                timelimit=limits, body=_string(encoded))


def _string(value: Optional[str]) -> str:
    """A str or None as JSON text, by the C function the JSON encoder itself uses for str."""
    return "null" if value is None else encode_basestring_ascii(value)


class _QuotedUuid4s:
    """str(uuid.uuid4()) in quotes, two a message: random bytes for 4,096 at a time from one
    os.urandom call, version and variant bits set on all of them at once (bench/ scale).
    One per Stencil, so no two threads share one."""

    PER_DRAW = 4096

    def __init__(self) -> None:
        self._hex, self._at = "", 0

    def __call__(self) -> str:
        if self._at == len(self._hex):
            raw = np.frombuffer(os.urandom(16 * self.PER_DRAW), dtype=np.uint8).reshape(-1, 16)
            raw = raw.copy()
            raw[:, 6] = (raw[:, 6] & 0x0F) | 0x40  # version 4
            raw[:, 8] = (raw[:, 8] & 0x3F) | 0x80  # the RFC 4122 variant, as uuid.uuid4
            self._hex, self._at = raw.tobytes().hex(), 0
        h, self._at = self._hex[self._at:self._at + 32], self._at + 32
        return f'"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"'


def _filled(template: dict[str, Any], args: list, argsrepr: str, soft: float, hard: float,
            channel, shadow: Optional[str] = None) -> dict[str, Any]:
    body = dumps([args, *template["body_rest"]])
    encoded, _ = channel.encode_body(body, template["properties"].get("body_encoding"))
    return _with_fields(template, str(uuid4()), str(uuid4()), argsrepr, shadow, [hard, soft],
                        encoded)


def _with_fields(template: dict[str, Any], task_id: str, tag: str, argsrepr, shadow, timelimit,
                 body: str) -> dict[str, Any]:
    """The template message with one message's own fields: what a Stencil is made from too."""
    headers = dict(template["headers"], id=task_id, root_id=task_id, argsrepr=argsrepr,
                   shadow=shadow, timelimit=timelimit)
    props = dict(template["properties"], correlation_id=task_id, argsrepr=argsrepr,
                 delivery_tag=tag, delivery_info=dict(template["properties"]["delivery_info"]))
    return {"body": body, "content-encoding": template["content-encoding"],
            "content-type": template["content-type"], "headers": headers, "properties": props}


def _no_publish_hooks() -> bool:
    """Celery's publish signals must see every message: with receivers, take the slow path."""
    return not (signals.before_task_publish.receivers or signals.after_task_publish.receivers)


@contextmanager
def batch_sender(app, batch: int = BATCH, hold: bool = False) -> Iterator[Batch]:
    """A Batch over one producer; pipelined and templated on Redis, plain send_task elsewhere.

    With `hold` (Redis only, see Batch.held), every message waits until the block ends without
    an exception: one that raises sends nothing."""
    with app.producer_or_acquire() as producer:
        channel = producer.channel
        redis = str(app.conf.broker_url or "").startswith(("redis://", "rediss://")) and \
            hasattr(channel, "_q_for_pri")
        if not redis:
            yield Batch(app, producer)
            return
        sender = Batch(app, producer, channel, batch, hold)
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
