"""The gateway's shared provider slots through a Redis restart: a request waits for its slot
while Redis is away instead of failing the agent's call, and a release Redis cannot take is
left to the slot's lease. The outage is logged when it starts and when it ends."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "distributed"))
from dist_support import RedisServer, free_port  # noqa: E402
from evalq.workers.gateway.slots import RedisSlots  # noqa: E402

ORIGIN = "http://127.0.0.1:1"


def test_a_slot_waits_through_a_redis_restart(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="evalq")
    server = RedisServer(free_port(), tmp_path).start()

    def logged(text: str) -> bool:
        return any(text in r.getMessage() for r in caplog.records)

    async def until(condition, seconds: float, what: str) -> None:
        end = time.monotonic() + seconds
        while not condition():
            assert time.monotonic() < end, f"timed out waiting for {what}"
            await asyncio.sleep(0.05)

    async def scenario() -> None:
        slots = RedisSlots(server.url, lease=5.0, window=120)
        await slots.start()
        try:
            await asyncio.to_thread(server.stop)
            acquiring = asyncio.create_task(slots.acquire(ORIGIN, 1))
            await until(lambda: logged(f"gateway slot for {ORIGIN}: broker unreachable"), 30,
                        "the acquire to notice Redis is down")
            assert not acquiring.done()
            await asyncio.to_thread(server.start)  # same port, empty
            token = await asyncio.wait_for(acquiring, 60)
            assert logged(f"gateway slot for {ORIGIN}: broker reachable again")
            assert await slots.client.zscore(slots.held[token][0], token) is not None

            await asyncio.to_thread(server.stop)
            await slots.release(ORIGIN, token)  # no error: the lease gives it back
            assert token not in slots.held and logged("gateway slot releases: broker unreachable")
            await asyncio.to_thread(server.start)
        finally:
            await slots.close()

    try:
        asyncio.run(scenario())
    finally:
        server.stop()
