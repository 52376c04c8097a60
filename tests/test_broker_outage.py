"""Riding out a broker outage (queue/outage.py, queue/sending.py) against a real redis-server:
a send waits through a restart and arrives once; past the window it gives up, and an agent
run whose hand-off to grading gave up is left pending for the grading sweep, not failed."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "distributed"))
from dist_support import RedisServer, free_port, wait_for  # noqa: E402
from evalq.queue.outage import BrokerUnavailable, Outage  # noqa: E402


@pytest.fixture
def broker_at(monkeypatch):
    """Point evalq's Celery app (what send() publishes through) at a URL; put it back after."""
    from evalq.config import load_settings
    from evalq.queue.app import app, configure

    def point(url: str, window: float = 300):
        monkeypatch.setenv("EVALQ_BROKER_URL", url)
        monkeypatch.setenv("EVALQ_BROKER_RETRY_SECONDS", str(window))
        configure(app, load_settings())

    yield point
    monkeypatch.undo()
    configure(app, load_settings(), create=False)


def test_an_outage_is_logged_when_it_starts_and_when_it_ends(caplog):
    caplog.set_level(logging.WARNING, logger="evalq")
    outage = Outage("gateway slot notifications")
    for _ in range(2):
        for _ in range(5):
            outage.failed(ConnectionError("Connection closed by server."))
        outage.passed()
        outage.passed()  # running normally: nothing more to say
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 4, messages
    assert messages[0] == messages[2] == (
        "gateway slot notifications: broker unreachable (ConnectionError: Connection closed "
        "by server.); retrying quietly")
    assert messages[1].startswith("gateway slot notifications: broker reachable again after")
    assert messages[1].endswith("(5 failed tries)")


def test_a_send_rides_out_a_redis_restart_and_arrives_once(tmp_path, broker_at, caplog):
    from evalq.queue.sending import send

    caplog.set_level(logging.WARNING, logger="evalq")
    server = RedisServer(free_port(), tmp_path).start()
    broker_at(server.url)
    server.stop()
    failed: list[BaseException] = []

    def sending():
        try:
            send("evalq.record_result", {"trial_id": "s/f/c/r1", "attempt": 1, "n": 7})
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            failed.append(exc)

    thread = threading.Thread(target=sending)
    thread.start()
    try:
        wait_for(lambda: any("broker unreachable" in r.getMessage() for r in caplog.records),
                 30, "the send to notice the broker is down")
        assert thread.is_alive()  # still trying
        server.start()  # same port
        thread.join(60)
        assert not thread.is_alive() and not failed, failed
        import redis

        client = redis.Redis.from_url(server.url)
        messages = client.lrange("results", 0, -1)
        assert len(messages) == 1
        body = json.loads(messages[0])
        assert body["headers"]["argsrepr"] == "s/f/c/r1#1"
        assert any("broker reachable again" in r.getMessage() for r in caplog.records)
    finally:
        thread.join(60)
        server.stop()


def test_a_send_past_the_window_gives_up(broker_at):
    from evalq.queue.sending import send

    broker_at(f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there
    started = time.monotonic()
    with pytest.raises(BrokerUnavailable, match="sending record_result s/f/c/r1#1"):
        send("evalq.record_result", {"trial_id": "s/f/c/r1", "attempt": 1}, window=2.0)
    assert time.monotonic() - started < 30


def test_a_hand_off_to_grading_that_gives_up_leaves_the_trial_pending(
        tmp_path, fixture_copies, broker_at, monkeypatch):
    """Not an infrastructure_failure: the attempt stays in grading with an expired lease,
    which the grading sweep of every grading and results worker re-sends."""
    from conftest import write_study
    from evalq.config import load_settings
    from evalq.queue.launch import register_study
    from evalq.queue.messages import message_for
    from evalq.queue.sending import send
    from evalq.results.store import (attempts_of, create_attempts, reserve_stranded_gradings,
                                     trials_of)
    from evalq.study.manifest import load_manifest
    from evalq.workers.runner import run_trial_message

    monkeypatch.setenv("EVALQ_HOME", str(tmp_path / "home"))
    broker_at(f"redis://127.0.0.1:{free_port()}/0", window=2.0)  # nothing listens there
    settings = load_settings()
    study = load_manifest(write_study(tmp_path / "s", fixture_copies, repetitions=1))
    engine, _, study = register_study(study, settings)
    trial = trials_of(engine, study.id)[0]
    create_attempts(engine, [trial.id], {trial.id: 1}, study.id)

    outcome = run_trial_message(message_for(trial, 1, 3), send, hostname="t@test",
                                settings=settings)
    assert outcome == "left pending: broker unavailable"
    [row] = [a for a in attempts_of(engine, study.id) if a.trial_id == trial.id]
    assert row.outcome is None and row.state == "grading" and row.artifacts
    assert row.lease_expires_at is not None and row.lease_expires_at <= time.time()
    assert reserve_stranded_gradings(engine, 60) == [(trial.id, 1)]
