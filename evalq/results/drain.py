"""The results worker on Redis: record_result messages taken off the queue many at a time.

Celery's consumer takes one message per Redis round trip and spends several more per message
on acknowledgement bookkeeping and events, so it records a few hundred results a second
however the database is written (bench/results_bench.py). This loop serves the same Celery
queue, messages and task events with a few round trips per batch:

1. one Lua call takes up to BATCH messages and files each as unacknowledged exactly as kombu
   does (hash `unacked` + index `unacked_index`), so if this process dies before step 3 kombu's
   restore (here, or in any worker on the broker) re-delivers them after the visibility timeout;
2. their results are written in one transaction (results/service.py; a bad payload alone);
3. one MULTI acknowledges them all and re-publishes the ones to retry (a database error, as
   the Celery task's autoretry does: same backoff, same cap), and their task events leave as
   one `task.multi` message, so Flower keeps listing each record_result.

Messages whose retry time (eta) has not come are held, still unacknowledged, until it has.
"""

from __future__ import annotations

import base64
import heapq
import itertools
import json
import logging
import os
import signal
import socket
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Optional

from sqlalchemy.exc import DBAPIError

from evalq.report.json_text import dumps
from evalq.queue.outage import Outage, broker_errors, pauses
from evalq.results.batch import Failed
from evalq.results.service import (MAX_RETRIES, RETRY_BACKOFF, RETRY_BACKOFF_MAX,
                                    record_payloads)

log = logging.getLogger("evalq.results.drain")

QUEUE = "results"
TASK = "evalq.record_result"
BATCH = 500
HEARTBEAT_SECONDS = 2.0

#: pop up to ARGV[1] messages from the queue keys (highest priority first) and file each as
#: unacknowledged, as kombu's QoS.append does: [message, exchange, routing_key] by delivery tag
_TAKE = """
local taken = {}
local limit = tonumber(ARGV[1])
for i = 3, #KEYS do
  while #taken < limit do
    local item = redis.call('RPOP', KEYS[i])
    if not item then break end
    local properties = cjson.decode(item)['properties']
    local info = properties['delivery_info']
    redis.call('ZADD', KEYS[2], ARGV[2], properties['delivery_tag'])
    redis.call('HSET', KEYS[1], properties['delivery_tag'], '[' .. item .. ',' ..
               cjson.encode(info['exchange']) .. ',' .. cjson.encode(info['routing_key']) .. ']')
    table.insert(taken, {KEYS[i], item})
  end
end
return taken
"""


@dataclass(order=True)
class Delivery:
    due: float  # when it may be handled (its eta); ties in the order taken (FIFO)
    seq: int
    tag: str = field(compare=False)
    key: str = field(compare=False)
    message: dict = field(compare=False)
    payload: Optional[dict] = field(compare=False, default=None)
    problem: Optional[str] = field(compare=False, default=None)

    @property
    def headers(self) -> dict:
        return self.message.get("headers") or {}


_taken = itertools.count()


def parse(key: str, raw: bytes) -> Delivery:
    """A kombu envelope of a Celery (protocol 2) task message; `problem` says why it is unusable."""
    message = json.loads(raw)
    properties = message.get("properties") or {}
    delivery = Delivery(0.0, next(_taken), properties.get("delivery_tag", ""), key, message)
    headers = delivery.headers
    try:
        body = message["body"]
        if properties.get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args, kwargs, _embed = json.loads(body)
        delivery.payload = args[0] if args else kwargs["payload"]
        if headers.get("task") != TASK or not isinstance(delivery.payload, dict):
            raise ValueError(f"not a {TASK} message: {headers.get('task')!r}")
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        delivery.problem = f"{type(exc).__name__}: {exc}"
    if headers.get("eta"):
        try:
            delivery.due = datetime.fromisoformat(headers["eta"]).timestamp()
        except (TypeError, ValueError):
            pass
    return delivery


class ResultsDrain:
    """One results worker process: take, write, acknowledge, in batches, until stopped."""

    def __init__(self, app, database_url: str, hostname: Optional[str] = None,
                 batch: int = BATCH):
        self.app = app
        self.url = database_url
        self.hostname = hostname or f"results@{socket.gethostname()}"
        self.batch = batch
        self.stop = threading.Event()
        self.held: list[Delivery] = []  # eta not yet come: unacknowledged, in a heap
        self.processed = 0

    # ------------------------------------------------------------------ connection
    def _connect(self) -> None:
        from kombu import Connection

        self.connection = Connection(self.app.conf.broker_url,
                                     transport_options=self.app.conf.broker_transport_options)
        self.channel = self.connection.default_channel
        self.client = self.channel.client
        keys = [self.channel._q_for_pri(QUEUE, p) for p in self.channel.priority_steps]
        self.keys = list(dict.fromkeys(keys))
        self.take = self.client.register_script(_TAKE)
        self.events = self.app.events.Dispatcher(self.connection, hostname=self.hostname,
                                                 buffer_group=["task"], buffer_limit=10 ** 9)
        self.client.ping()
        log.info("Connected to %s", self.connection.as_uri())  # kombu masks the password

    def _close(self) -> None:
        for closing in (self.events.close, self.connection.release):
            try:
                closing()
            except Exception:  # noqa: BLE001 - going away anyway
                pass

    # ------------------------------------------------------------------ the loop
    def run(self) -> None:
        """Serve until SIGTERM/SIGINT; reconnect (with backoff) while the broker is away."""
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: self.stop.set())
        waits = pauses()
        online = False
        outage = Outage(self.hostname, log)
        while not self.stop.is_set():
            try:
                self._connect()
                outage.passed()
                if not online:
                    log.warning("%s ready.", self.hostname)
                    online = True
                self.events.send("worker-online", **self._worker_fields())
                waits = pauses()
                self._serve()
            except broker_errors() as exc:  # the broker went away: connect again, for ever
                outage.failed(exc)
                self.stop.wait(next(waits))
            finally:
                if hasattr(self, "connection"):
                    self._shutdown_connection()

    def _serve(self) -> None:
        restore_every = float(self.app.conf.broker_transport_options.get(
            "unacked_restore_interval", 10))
        next_restore = next_beat = 0.0
        while not self.stop.is_set():
            now = time.time()
            if now >= next_beat:
                self.events.send("worker-heartbeat", **self._worker_fields())
                next_beat = now + HEARTBEAT_SECONDS
            if now >= next_restore:  # others' (and our own earlier life's) expired unacked
                self.channel.qos.restore_visible(num=self.batch, interval=1)
                next_restore = now + restore_every
            deliveries = self._take(timeout=0 if self._due_soon() else 1)
            for delivery in deliveries:
                heapq.heappush(self.held, delivery)
            ready = []
            while self.held and self.held[0].due <= time.time():
                ready.append(heapq.heappop(self.held))
            if ready:
                self._handle(ready)

    def _due_soon(self) -> bool:
        return bool(self.held) and self.held[0].due <= time.time() + 1

    def _take(self, timeout: float) -> list[Delivery]:
        taken = self.take(keys=[self.channel.unacked_key, self.channel.unacked_index_key,
                                *self.keys], args=[self.batch, time.time()])
        if not taken and timeout:
            popped = self.client.brpop(self.keys, timeout=timeout)
            if popped:  # file it as unacknowledged as kombu does after its own BRPOP
                key, raw = popped
                delivery = parse(key.decode(), raw)
                self.client.pipeline().zadd(self.channel.unacked_index_key,
                                            {delivery.tag: time.time()}).hset(
                    self.channel.unacked_key, delivery.tag,
                    dumps([delivery.message, *_route(delivery.message)])).execute()
                return [delivery] + self._take(timeout=0)
        return [parse(key.decode(), raw) for key, raw in taken or []]

    # ------------------------------------------------------------------ one batch
    def _handle(self, deliveries: list[Delivery]) -> None:
        started = time.time()
        usable = [d for d in deliveries if d.problem is None]
        outcomes = dict(zip(map(id, usable), record_payloads(self.url, [d.payload for d in
                                                                          usable])))
        runtime = time.time() - started
        pipe = self.client.pipeline(transaction=True)
        for delivery in deliveries:
            self._received(delivery)
            outcome = outcomes.get(id(delivery))
            if delivery.problem is not None:
                log.error("discarding an unusable message on %s: %s", QUEUE, delivery.problem)
                self._failed(delivery, delivery.problem, "")
            elif isinstance(outcome, Failed):
                self._settle_failure(delivery, outcome.error, pipe)
            else:
                self.events.send("task-succeeded", uuid=delivery.headers.get("id"),
                                 result=repr(outcome), runtime=runtime)
        tags = [d.tag for d in deliveries]  # two commands for the batch, not two a message
        pipe.zrem(self.channel.unacked_index_key, *tags)
        pipe.hdel(self.channel.unacked_key, *tags)
        pipe.execute()  # acknowledged (and retries re-published) only after the commit
        self.processed += len(deliveries)
        self.events.flush()

    def _received(self, delivery: Delivery) -> None:
        headers = delivery.headers
        self.events.send("task-received", uuid=headers.get("id"),
                         name=headers.get("shadow") or headers.get("task"),
                         args=headers.get("argsrepr"), kwargs=headers.get("kwargsrepr"),
                         root_id=headers.get("root_id"), parent_id=headers.get("parent_id"),
                         retries=headers.get("retries", 0), eta=headers.get("eta"),
                         expires=headers.get("expires"))

    def _settle_failure(self, delivery: Delivery, error: BaseException, pipe) -> None:
        """As the task's autoretry would: a database error is retried with backoff (a new
        message with retries + 1 and an eta), up to MAX_RETRIES; anything else fails."""
        retries = int(delivery.headers.get("retries") or 0)
        text = "".join(traceback.format_exception_only(type(error), error)).strip()
        label = f"{delivery.payload.get('trial_id')}#{delivery.payload.get('attempt')}"
        if isinstance(error, DBAPIError) and retries < MAX_RETRIES:
            countdown = min(RETRY_BACKOFF_MAX, RETRY_BACKOFF * 2 ** retries)
            again = json.loads(dumps(delivery.message))
            eta = datetime.now(timezone.utc) + timedelta(seconds=countdown)
            again["headers"].update(retries=retries + 1, eta=eta.isoformat())
            again["properties"]["delivery_tag"] = str(uuid.uuid4())
            pipe.lpush(delivery.key, dumps(again))
            log.warning("result %s: retry %d in %ss: %s", label, retries + 1, countdown, text)
            self.events.send("task-retried", uuid=delivery.headers.get("id"), exception=text,
                             traceback="")
            return
        log.error("result %s not recorded: %s", label, text)
        self._failed(delivery, text, "".join(traceback.format_exception(error)))

    def _failed(self, delivery: Delivery, text: str, trace: str) -> None:
        self.events.send("task-failed", uuid=delivery.headers.get("id"), exception=text,
                         traceback=trace)

    # ------------------------------------------------------------------ shutdown
    def _shutdown_connection(self) -> None:
        try:
            for delivery in self.held:  # not yet due: back to the queue now, not after a timeout
                self.channel.qos.restore_by_tag(delivery.tag)
            self.held.clear()
            self.events.send("worker-offline", **self._worker_fields())
            self.events.flush()
        except Exception as exc:  # noqa: BLE001 - kombu's restore brings them back later
            log.warning("could not hand back held messages: %s", exc)
        self._close()

    def _worker_fields(self) -> dict[str, Any]:
        return dict(freq=HEARTBEAT_SECONDS, active=0, processed=self.processed,
                    loadavg=list(os.getloadavg()), sw_ident="evalq-results",
                    sw_ver="1", sw_sys=os.uname().sysname)


def _route(message: dict) -> tuple[str, str]:
    info = (message.get("properties") or {}).get("delivery_info") or {}
    return info.get("exchange", QUEUE), info.get("routing_key", QUEUE)


def serve_results(app, settings, hostname: Optional[str], loglevel: str) -> None:
    """`evalq worker --queues results` on Redis: this loop, with the results worker's sweeps."""
    from evalq.ops.worker_sweeps import start_sweeps, stop_sweeps

    logging.basicConfig(level=getattr(logging, loglevel.upper(), logging.INFO),
                        format="[%(asctime)s: %(levelname)s/%(processName)s] %(message)s")
    name = (hostname or f"results@{socket.gethostname()}").replace("%h", socket.gethostname())
    start_sweeps([QUEUE])
    try:
        ResultsDrain(app, settings.database_url, name).run()
    finally:
        stop_sweeps()
