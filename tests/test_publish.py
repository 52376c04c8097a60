"""Batched sending on Redis: messages filled from a template are the messages Celery would send.

The launcher sends the first run_trial through `app.send_task` and fills a template for the
rest (evalq.queue.publish). If a Celery or kombu upgrade changes the message format, the comparison
here fails before any worker sees a malformed message.
"""

from __future__ import annotations

import base64
import json

import redis
from celery import Celery, signals

from evalq.config import load_settings
from evalq.queue.publish import batch_sender
from evalq.queue.app import configure

IDS = ("id", "root_id", "correlation_id", "delivery_tag")


def _app(redis_url: str, monkeypatch) -> Celery:
    monkeypatch.setenv("EVALQ_BROKER_URL", redis_url)
    return configure(Celery("publish-test"), load_settings())


def _queued(redis_url: str) -> list[dict]:
    """The agents queue, oldest first (kombu LPUSHes and workers BRPOP)."""
    return [json.loads(m) for m in reversed(redis.Redis.from_url(redis_url).lrange("agents", 0, -1))]


def _without_ids(message: dict) -> dict:
    headers = {k: v for k, v in message["headers"].items() if k not in IDS}
    props = {k: v for k, v in message["properties"].items() if k not in IDS}
    return dict(message, headers=headers, properties=props)


def _payload(n: int) -> list:
    return [{"trial_id": f"s/f{n % 3}/c/r{n}", "attempt": 1, "note": "tab\t \u00fcnicode ✓"}]


def test_filled_messages_equal_celerys_own(redis_url, monkeypatch):
    app = _app(redis_url, monkeypatch)
    with batch_sender(app, batch=7) as sender:  # a small batch: several pipeline flushes
        for n in range(20):
            sender.send("evalq.run_trial", _payload(n), f"trial={n}", 100.0 + n % 3, 200.0 + n % 3,
                        f"run_trial s/f/c/r{n}#1")
        assert set(sender.templates) == {"evalq.run_trial"}
        assert sender.stencils["evalq.run_trial"] is not None  # messages 2..20 are stencilled
    batched = _queued(redis_url)
    redis.Redis.from_url(redis_url).delete("agents")

    with app.producer_or_acquire() as producer:  # the same messages, each built by Celery
        for n in range(20):
            app.send_task("evalq.run_trial", args=_payload(n), soft_time_limit=100.0 + n % 3,
                          time_limit=200.0 + n % 3, argsrepr=f"trial={n}",
                          shadow=f"run_trial s/f/c/r{n}#1", producer=producer)
    plain = _queued(redis_url)

    assert len(batched) == len(plain) == 20
    for mine, celerys in zip(batched, plain):
        assert _without_ids(mine) == _without_ids(celerys)
        body = json.loads(base64.b64decode(mine["body"]))
        assert body[0] == json.loads(base64.b64decode(celerys["body"]))[0]
        headers = mine["headers"]
        assert headers["shadow"] == celerys["headers"]["shadow"]  # a trial name per message
        assert headers["id"] == headers["root_id"] == mine["properties"]["correlation_id"]
    ids = [m["headers"]["id"] for m in batched]
    tags = [m["properties"]["delivery_tag"] for m in batched]
    assert len(set(ids)) == len(set(tags)) == 20


def test_publish_signal_receivers_see_every_message(redis_url, monkeypatch):
    app = _app(redis_url, monkeypatch)
    seen = []

    def receiver(sender=None, headers=None, **_kwargs):
        seen.append(headers["argsrepr"])

    signals.before_task_publish.connect(receiver, weak=False)
    try:
        with batch_sender(app) as sender:
            for n in range(5):
                sender.send("evalq.run_trial", _payload(n), f"trial={n}", 10.0, 20.0)
    finally:
        signals.before_task_publish.disconnect(receiver)
    assert seen == [f"trial={n}" for n in range(5)]
    assert len(_queued(redis_url)) == 5


def test_a_worker_runs_every_stencilled_message_in_order(redis_url, monkeypatch, tmp_path):
    """A real `celery worker` takes the pipelined, stencilled messages and runs each one."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    app = _app(redis_url, monkeypatch)
    count = 30
    with batch_sender(app, batch=8) as sender:
        for n in range(count):
            sender.send("evalq.run_trial", _payload(n), f"trial={n}", 50.0 + n, 90.0 + n)
        assert sender.stencils["evalq.run_trial"] is not None  # the fast path was taken
    env = dict(os.environ, EVALQ_BROKER_URL=redis_url,
               PYTHONPATH=os.pathsep.join([str(Path(__file__).parent),
                                           os.environ.get("PYTHONPATH", "")]))
    log = open(tmp_path / "worker.log", "wb")
    worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "publish_worker_app",
                               "worker", "-Q", "agents", "-c", "1", "-P", "solo",
                               "-n", "publish-test@host", "-l", "INFO"], env=env, stdout=log,
                              stderr=subprocess.STDOUT, start_new_session=True)
    client = redis.Redis.from_url(redis_url)
    try:
        deadline = time.monotonic() + 60
        while client.llen("publish-test:ran") < count and time.monotonic() < deadline:
            assert worker.poll() is None, (tmp_path / "worker.log").read_text()
            time.sleep(0.1)
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(30)
    ran = [json.loads(m) for m in client.lrange("publish-test:ran", 0, -1)]
    assert len(ran) == count, (tmp_path / "worker.log").read_text()[-3000:]
    assert [r["trial_id"] for r in ran] == [_payload(n)[0]["trial_id"] for n in range(count)]
    assert [r["timelimit"] for r in ran] == [[90.0 + n, 50.0 + n] for n in range(count)]
    assert [r["argsrepr"] for r in ran] == [f"trial={n}" for n in range(count)]
    assert len({r["id"] for r in ran}) == count
    assert client.llen("agents") == 0


def _trials(count: int):
    from evalq.results.store import TrialRow

    return [(TrialRow(id=f"s/f{n % 4}/c/r{n}", study_id="s", fixture_id=f"f{n % 4}",
                      fixture_digest="d", fixture_ref="r", condition="c", repetition=n,
                      block=0, order_index=n), 1) for n in range(count)]


def test_messages_are_held_until_their_rows_exist(redis_url, monkeypatch):
    """The launcher builds messages while the database writes the rows they name, a chunk at
    a time: no message reaches Redis before its chunk's rows are written, and when a write
    fails, no message of that chunk or a later one does."""
    import threading

    import pytest

    from evalq.queue import launch
    from evalq.queue.launch import publish_run_messages

    monkeypatch.setattr(launch, "WRITE_CHUNK", 10)
    app = _app(redis_url, monkeypatch)
    client = redis.Redis.from_url(redis_url)
    asked: list[str] = []
    all_asked = threading.Event()

    def limits(fixture_id: str):
        asked.append(fixture_id)
        if len(asked) == 4:  # every fixture's first message is being built
            all_asked.set()
        return 10.0, 20.0

    queued_at_write: list[tuple[int, int, int]] = []

    def write_rows(start: int, stop: int) -> None:
        if start == 0:
            assert all_asked.wait(30)  # the first chunk's messages are built meanwhile
        queued_at_write.append((start, stop, client.llen("agents")))

    assert publish_run_messages(app, _trials(45), limits, 3, 100, write_rows) == 45
    # every chunk was written before its own messages, and only after the chunks before it
    assert [(a, b) for a, b, _ in queued_at_write] == [(0, 10), (10, 20), (20, 30), (30, 40),
                                                       (40, 45)]
    assert all(queued <= start for start, _, queued in queued_at_write)
    assert [m["headers"]["argsrepr"] for m in _queued(redis_url)] == \
        [f"s/f{n % 4}/c/r{n}#1" for n in range(45)]
    client.delete("agents")

    def fail_third(start: int, stop: int) -> None:
        if start == 20:
            raise RuntimeError("database refused")

    with pytest.raises(RuntimeError, match="database refused"):
        publish_run_messages(app, _trials(45), lambda f: (10.0, 20.0), 3, 100, fail_third)
    assert [m["headers"]["argsrepr"] for m in _queued(redis_url)] == \
        [f"s/f{n % 4}/c/r{n}#1" for n in range(20)]


def test_filled_ids_are_distinct_version_4_uuids_across_draws():
    """Task ids and delivery tags come from random bytes drawn 4,096 ids at a time: every one
    must still be what uuid.uuid4() makes (version 4, RFC 4122 variant), and none repeat."""
    import uuid

    from evalq.queue.publish import _QuotedUuid4s

    make = _QuotedUuid4s()
    texts = [make() for _ in range(3 * _QuotedUuid4s.PER_DRAW + 7)]
    assert len(set(texts)) == len(texts)
    for text in texts:
        assert text[0] == text[-1] == '"'
        parsed = uuid.UUID(text[1:-1])
        assert (parsed.version, parsed.variant) == (4, uuid.RFC_4122)
        assert str(parsed) == text[1:-1]
