"""Requests in flight to one provider stay within the limit across gateways: two Gateway
objects share it through the real Redis (and two runs share it in one process without Redis).
The server holds every reply behind a gate, so the count is read while requests pile up."""

from __future__ import annotations

import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from gateway_support import gateway, send, sock_dir  # noqa: F401 (fixtures)
from evalq.modelserver import ModelServer
from evalq.modelserver.script import parse_script
from evalq.workers.gateway import Gateway, Upstream
from evalq.workers.gateway.slots import RedisSlots

LIMIT, PER_RUN = 2, 3
BODY = {"model": "claude-haiku-4-5", "messages": []}


@pytest.mark.parametrize("shared", ["redis", "in-process"])
def test_the_limit_holds_across_gateways(shared, request, sock_dir):
    redis_url = request.getfixturevalue("redis_url") if shared == "redis" else None
    gate = threading.Event()
    script = parse_script({"fallback": {"text": "ok",
                                        "usage": {"input_tokens": 1, "output_tokens": 1}}})
    with ModelServer(script, gate=gate) as server:
        first = Gateway(redis_url=redis_url)
        second = Gateway(redis_url=redis_url) if redis_url else first
        try:
            for name, gw in (("one", first), ("two", second)):
                gw.open_run(name, sock_dir / f"{name}.sock", upstreams=[Upstream(server.url)],
                            concurrency=LIMIT)
            with ThreadPoolExecutor(2 * PER_RUN) as pool:
                futures = [pool.submit(send, str(sock_dir / "one.sock"), "/v1/messages", BODY)
                           for _ in range(PER_RUN)]
                # run one fills the limit; its other requests wait for a slot
                assert server.wait_in_flight(LIMIT)
                assert first.wait_queued(server.url, PER_RUN - LIMIT)
                futures += [pool.submit(send, str(sock_dir / "two.sock"), "/v1/messages", BODY)
                            for _ in range(PER_RUN)]
                # run two (on the other gateway, when shared through Redis) waits for them too
                queued_two = PER_RUN if second is not first else 2 * PER_RUN - LIMIT
                assert second.wait_queued(server.url, queued_two)
                assert server.in_flight == LIMIT
                gate.set()
                statuses = [f.result(30).status for f in futures]
            assert statuses == [200] * 2 * PER_RUN
            assert server.max_in_flight == LIMIT
            assert len(server.exchanges) == 2 * PER_RUN
            queued = [r["queued_ms"] for gw in {first, second} for run in gw.runs.values()
                      for r in run.records()]
            assert len(queued) == 2 * PER_RUN and all(q is not None for q in queued)
        finally:
            gate.set()
            first.close()
            if second is not first:
                second.close()
        if redis_url:  # every slot was given back
            import redis

            client = redis.Redis.from_url(redis_url)
            assert client.keys("evalq:gateway:slots:*") == []


def test_a_dead_workers_slots_come_back_and_a_live_ones_are_respected(redis_url, sock_dir):
    import redis

    script = parse_script({"fallback": {"text": "ok"}})
    with ModelServer(script) as server:
        key = "evalq:gateway:slots:" + Upstream(server.url).origin
        client = redis.Redis.from_url(redis_url)
        now = float(client.time()[0])
        client.zadd(key, {"dead-1": now - 5, "dead-2": now - 1})  # leases that ran out
        with Gateway(redis_url=redis_url) as gw:
            gw.open_run("d", sock_dir / "g.sock", upstreams=[Upstream(server.url)],
                        concurrency=2)
            assert send(str(sock_dir / "g.sock"), "/v1/messages", BODY).status == 200
            assert client.zcard(key) == 0
            # another worker holds both slots with live leases: the request waits ...
            client.zadd(key, {"live-1": now + 60, "live-2": now + 60})
            with ThreadPoolExecutor(1) as pool:
                pending = pool.submit(send, str(sock_dir / "g.sock"), "/v1/messages", BODY)
                assert gw.wait_queued(server.url, 1)
                assert not pending.done() and len(server.exchanges) == 1
                # ... until that worker releases one (and says so)
                client.zrem(key, "live-1")
                client.publish(key, b"1")
                assert pending.result(30).status == 200
            assert len(server.exchanges) == 2


def test_a_slot_lease_is_renewed_while_the_request_runs(redis_url):
    """A renewal moves a held slot's expiry forward, past Redis's own clock."""
    import asyncio

    async def scenario() -> tuple[float, float, float]:
        slots = RedisSlots(redis_url, lease=5.0)
        await slots.start()
        try:
            token = await slots.acquire("http://127.0.0.1:1", 1)
            key = slots.held[token][0]
            first = await slots.client.zscore(key, token)
            await slots.renew()
            later = await slots.client.zscore(key, token)
            seconds, micros = await slots.client.time()
            await slots.release("http://127.0.0.1:1", token)
            return first, later, seconds + micros / 1e6
        finally:
            await slots.close()

    first, later, now = asyncio.run(scenario())
    assert later > first and later > now


def test_one_gateway_serves_many_runs_at_once(gateway, sock_dir):
    """Forty runs, each on its own socket with its own key, asked all at once: every request is
    recorded on the run whose socket it came in on, and carried that run's key."""
    runs = 40
    script = parse_script({"fallback": {"text": "ok",
                                        "usage": {"input_tokens": 2, "output_tokens": 1}}})
    with ModelServer(script) as server:
        handles = [gateway.open_run(f"r{i}", sock_dir / f"{i}.sock", credentials={
            "K": f"key-{i}"}, upstreams=[Upstream(server.url, auth="x-api-key",
                                                  credential="K")]) for i in range(runs)]
        with ThreadPoolExecutor(20) as pool:
            replies = list(pool.map(lambda i: send(str(sock_dir / f"{i}.sock"), "/v1/messages",
                                                   {"model": "m", "messages": [], "n": i}),
                                    range(runs)))
        assert [r.status for r in replies] == [200] * runs
        assert sorted(e.headers["x-api-key"] for e in server.exchanges) == \
            sorted(f"key-{i}" for i in range(runs))
        for i, run in enumerate(handles):
            assert len(run.records()) == 1 and run.totals()["input_tokens"] == 2
            exchange = next(e for e in server.exchanges if e.body["n"] == i)
            assert exchange.headers["x-api-key"] == f"key-{i}"


def test_a_broker_that_is_not_redis_means_in_process_slots():
    from evalq.workers.gateway.slots import LocalSlots

    with Gateway(redis_url="filesystem:///tmp/evalq-broker") as gw:
        assert isinstance(gw.slots, LocalSlots)


def test_no_redis_is_a_clear_error():
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(RuntimeError, match="cannot reach Redis"):
        Gateway(redis_url=f"redis://127.0.0.1:{port}/0")


@pytest.mark.parametrize("shared", ["redis", "in-process"])
def test_closing_a_run_ends_its_requests_in_flight_and_frees_their_slots(shared, request,
                                                                         sock_dir):
    redis_url = request.getfixturevalue("redis_url") if shared == "redis" else None
    gate = threading.Event()
    with ModelServer(parse_script({"fallback": {"text": "late"}}), gate=gate) as server, \
            Gateway(redis_url=redis_url) as gw:
        run = gw.open_run("c", sock_dir / "g.sock", upstreams=[Upstream(server.url)],
                          concurrency=1)
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(send, str(sock_dir / "g.sock"), "/v1/messages", BODY)
            assert server.wait_in_flight(1)
            run.close()
            with pytest.raises(Exception):  # the agent's connection is gone, no reply
                pending.result(30)
        gate.set()
        assert run.records()[0]["error"] == "the run was closed while this request was in flight"
        assert not (sock_dir / "g.sock").exists()
        # the slot came back: another run at the same provider gets through at once
        other = gw.open_run("d", sock_dir / "h.sock", upstreams=[Upstream(server.url)],
                            concurrency=1)
        assert send(str(sock_dir / "h.sock"), "/v1/messages", BODY).status == 200
        other.close()
