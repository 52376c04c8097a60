"""The embedded broker's transport (evalq.queue.filebus) with real kombu connections and files.

Each wake-up test sets the safety rescan and the polling fallback to a minute and waits at
most 30 s: a consumer that only found the message by rescanning the folder would miss the
deadline, so passing means it was woken by the file itself or by its own ack.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from kombu import Connection, Consumer, Exchange, Producer, Queue

from evalq.queue import filebus
from evalq.queue.app import broker_options, configure
from evalq.config import Settings

ROOT = Path(__file__).resolve().parents[1]
SLOW = 60.0  # seconds: longer than any deadline below
DEADLINE = 30.0


def connect(root: Path, polling: float = SLOW) -> Connection:
    options = {**filebus.transport_options(root), "polling_interval": polling}
    return Connection("filesystem://", transport=filebus.Transport, transport_options=options)


def queue(name: str = "agents") -> Queue:
    return Queue(name, Exchange(name, type="direct"), routing_key=name)


def publish(conn: Connection, bodies, name: str = "agents") -> None:
    with conn.channel() as channel:
        queue(name).bind(channel).declare()
        producer = Producer(channel)
        for body in bodies:
            producer.publish(body, exchange=queue(name).exchange, routing_key=name,
                             serializer="json")


@pytest.fixture
def slow_rescan(monkeypatch):
    monkeypatch.setattr(filebus, "RESCAN_SECONDS", SLOW)


def test_the_app_uses_this_transport_for_the_embedded_default(tmp_path):
    settings = Settings(home=tmp_path / "home")
    from celery import Celery

    app = configure(Celery("t"), settings)
    with app.connection_for_write() as conn:
        assert isinstance(conn.transport, filebus.Transport)
    url, options = broker_options(settings)
    assert url == "filesystem://" and options["claimed_folder"].startswith(str(tmp_path))


def test_a_waiting_consumer_wakes_on_a_new_message(tmp_path, slow_rescan):
    conn = connect(tmp_path / "broker")
    got: list = []
    ready = threading.Event()

    def consume():
        with conn.channel() as channel:
            consumer = Consumer(channel, [queue()], accept=["json"],
                                callbacks=[lambda body, m: (got.append(body), m.ack())])
            with consumer:
                ready.set()
                conn.drain_events(timeout=DEADLINE)

    worker = threading.Thread(target=consume)
    worker.start()
    assert ready.wait(DEADLINE)
    publish(connect(tmp_path / "broker"), [{"n": 1}])
    worker.join(DEADLINE + 5)
    assert got == [{"n": 1}]
    assert not list((tmp_path / "broker" / "incoming").iterdir()), "staging files are renamed"
    assert not list((tmp_path / "broker" / "claimed").iterdir()), "a read message is removed"


def test_an_ack_frees_the_prefetch_slot_without_a_poll(tmp_path, slow_rescan):
    publish(connect(tmp_path / "broker"), [{"n": 1}, {"n": 2}])
    conn = connect(tmp_path / "broker")
    got: list = []
    with conn.channel() as channel:
        channel.basic_qos(prefetch_count=1)
        consumer = Consumer(channel, [queue()], accept=["json"],
                            callbacks=[lambda body, m: got.append((body, m))])
        with consumer:
            conn.drain_events(timeout=DEADLINE)
            assert [body for body, _ in got] == [{"n": 1}]
            # the window is full: the next drain blocks; another thread acks once it does
            watch, blocked = conn.transport.watch, threading.Event()
            wait = watch.wait
            watch.wait = lambda *a, **k: (blocked.set(), wait(*a, **k))[1]
            acker = threading.Thread(target=lambda: blocked.wait(DEADLINE) and got[0][1].ack())
            acker.start()
            conn.drain_events(timeout=DEADLINE)
            acker.join()
            assert blocked.is_set(), "the second drain did block before the ack"
    assert [body for body, _ in got] == [{"n": 1}, {"n": 2}]


CONSUMER = """
import json, sys
from pathlib import Path
from kombu import Connection, Consumer, Exchange, Queue
from evalq.queue import filebus
root, out = Path(sys.argv[1]), open(sys.argv[2], "w")
options = {**filebus.transport_options(root)}
conn = Connection("filesystem://", transport=filebus.Transport, transport_options=options)
q = Queue("agents", Exchange("agents", type="direct"), routing_key="agents")
def take(body, message):
    out.write(json.dumps(body) + "\\n"); message.ack()
with conn.channel() as channel:
    channel.basic_qos(prefetch_count=1)
    with Consumer(channel, [q], accept=["json"], callbacks=[take]):
        while True:
            try:
                conn.drain_events(timeout=2)
            except TimeoutError:
                break  # every message was written before the consumers started
out.close()
"""


def test_two_processes_never_take_one_message(tmp_path):
    root = tmp_path / "broker"
    bodies = [{"n": i} for i in range(300)]
    publish(connect(root), bodies)
    outs = [tmp_path / f"took-{i}.jsonl" for i in range(2)]
    procs = [subprocess.Popen([sys.executable, "-c", CONSUMER, str(root), str(out)], cwd=ROOT)
             for out in outs]
    for proc in procs:
        assert proc.wait(120) == 0
    taken = [json.loads(line)["n"] for out in outs for line in out.read_text().splitlines()]
    assert sorted(taken) == list(range(300)), "each message exactly once"
    assert not [p for p in (root / "queue").iterdir()], "the queue is empty"


def test_an_unreadable_message_is_set_aside_and_the_next_one_delivered(tmp_path, slow_rescan):
    root = tmp_path / "broker"
    conn = connect(root)
    publish(conn, [{"n": 1}])
    broken = "0" * 32 + "_broken.agents.msg"  # sorts before any name a sender gives
    (root / "queue" / broken).write_bytes(b"{not json")
    got: list = []
    with conn.channel() as channel:
        with Consumer(channel, [queue()], accept=["json"],
                      callbacks=[lambda body, m: (got.append(body), m.ack())]):
            conn.drain_events(timeout=DEADLINE)
    assert got == [{"n": 1}]
    kept = [p.name for p in (root / "claimed").iterdir()]
    assert len(kept) == 1 and kept[0].endswith(broken + ".unreadable"), kept


def test_two_broker_folders_in_one_process_each_get_their_messages(tmp_path):
    for name in ("first", "second"):  # stock kombu cached bindings process-wide: dropped these
        publish(connect(tmp_path / name), [{"home": name}])
        files = list((tmp_path / name / "queue").iterdir())
        assert len(files) == 1 and json.loads(files[0].read_bytes())["body"], name


def test_messages_come_out_in_the_order_they_were_sent(tmp_path, slow_rescan):
    """Many messages within one millisecond, and counts that gain a digit: the queue is still
    first in, first out (the embedded default runs a study's trials in planned order)."""
    publish(connect(tmp_path / "broker"), [{"n": n} for n in range(1200)])
    conn = connect(tmp_path / "broker")
    got: list = []
    with conn.channel() as channel:
        consumer = Consumer(channel, [queue()], accept=["json"],
                            callbacks=[lambda body, m: (got.append(body["n"]), m.ack())])
        with consumer:
            while len(got) < 1200:
                conn.drain_events(timeout=DEADLINE)
    assert got == list(range(1200))
