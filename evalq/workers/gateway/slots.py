"""Concurrency per provider: at most N requests in flight to one upstream origin at a time.

`LocalSlots` counts within one process (the embedded default). `RedisSlots` shares the count
across every worker through one sorted set per origin: members are slot tokens, scores their
lease expiry (Redis server time), renewed while a request runs, so a dead worker's slots come
back when their lease ends. A release is published so waiters elsewhere retry at once; a poll
covers lost messages and expired leases.

While Redis is away (a restart) a request waits for its slot through the outage window
(queue/outage.py) instead of failing the agent's call, and a release that cannot reach Redis is
left to the slot's lease.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections import defaultdict
from typing import Optional

from evalq.queue.outage import Outage, broker_errors, outage_window, pauses

log = logging.getLogger("evalq.gateway")


class Waiters:
    """How many requests wait for a slot, per origin; other threads can wait for a count."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = defaultdict(int)
        self.watch = threading.Condition()

    def add(self, origin: str, delta: int) -> None:
        with self.watch:
            self.counts[origin] += delta
            self.watch.notify_all()

    def wait_for(self, origin: str, count: int, timeout: float) -> bool:
        with self.watch:
            return self.watch.wait_for(lambda: self.counts[origin] == count, timeout)


class LocalSlots:
    def __init__(self) -> None:
        self.held: dict[str, int] = defaultdict(int)
        self.waiters = Waiters()
        self.changed: Optional[asyncio.Condition] = None

    async def start(self) -> None:
        self.changed = asyncio.Condition()

    async def acquire(self, key: str, limit: int) -> str:
        async with self.changed:
            if self.held[key] >= limit:
                self.waiters.add(key, 1)
                try:
                    await self.changed.wait_for(lambda: self.held[key] < limit)
                finally:
                    self.waiters.add(key, -1)
            self.held[key] += 1
        return key

    async def release(self, key: str, token: str) -> None:
        async with self.changed:
            self.held[key] -= 1
            self.changed.notify_all()

    async def close(self) -> None:
        return None


ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
  redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2]) * 2000))
  return 1
end
return 0
"""
RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
for i, token in ipairs(ARGV) do
  if i > 1 then redis.call('ZADD', KEYS[i - 1], 'XX', now + tonumber(ARGV[1]), token) end
end
for i, key in ipairs(KEYS) do
  redis.call('PEXPIRE', key, math.ceil(tonumber(ARGV[1]) * 2000))
end
return 1
"""


class RedisSlots:
    """Slots shared by every gateway on one Redis. `lease` seconds without renewal frees one."""

    def __init__(self, url: str, lease: float = 30.0, poll: float = 0.5,
                 prefix: str = "evalq:gateway:slots:", window: Optional[float] = None):
        self.url, self.lease, self.poll, self.prefix = url, lease, poll, prefix
        self.window = window  # the outage window; EVALQ_BROKER_RETRY_SECONDS when None
        self.releases = Outage("gateway slot releases", log)
        self.held: dict[str, tuple[str, str]] = {}        # token -> (redis key, origin)
        self.waiters = Waiters()
        self.versions: dict[str, int] = defaultdict(int)
        self.tasks: list[asyncio.Task] = []

    async def start(self) -> None:
        import redis.asyncio as aioredis

        if self.window is None:
            self.window = outage_window()
        self.client = aioredis.Redis.from_url(self.url)
        await self.client.ping()
        self.acquire_script = self.client.register_script(ACQUIRE)
        self.renew_script = self.client.register_script(RENEW)
        self.changed = asyncio.Condition()
        self.pubsub = self.client.pubsub()
        await self.pubsub.psubscribe(self.prefix + "*")
        self.tasks = [asyncio.create_task(self._listen()), asyncio.create_task(self._renew())]

    def _key(self, origin: str) -> str:
        return self.prefix + origin

    async def _wake(self, key: str) -> None:
        async with self.changed:
            self.versions[key] += 1
            self.changed.notify_all()

    async def _listen(self) -> None:
        outage = Outage("gateway slot notifications", log)
        while True:
            try:
                message = await self.pubsub.get_message(ignore_subscribe_messages=True,
                                                        timeout=self.poll)
            except Exception as exc:  # noqa: BLE001 - waiters still poll; listen again shortly
                outage.failed(exc)
                await asyncio.sleep(self.poll)
                continue
            outage.passed()
            if message and message.get("type") == "pmessage":
                channel = message["channel"]
                await self._wake(channel.decode() if isinstance(channel, bytes) else channel)

    async def _renew(self) -> None:
        outage = Outage("gateway slot lease renewals", log)
        while True:
            await asyncio.sleep(self.lease / 3)
            try:
                await self.renew()
            except Exception as exc:  # noqa: BLE001 - Redis away for a moment: next round
                outage.failed(exc)
                continue
            outage.passed()

    async def renew(self) -> None:
        """Push every held slot's expiry to Redis time + lease."""
        if self.held:
            tokens = list(self.held)
            await self.renew_script(keys=[self.held[t][0] for t in tokens],
                                    args=[self.lease, *tokens])

    async def acquire(self, origin: str, limit: int) -> str:
        key, token = self._key(origin), uuid.uuid4().hex
        waiting = False
        try:
            while True:
                seen = self.versions[key]
                if await self._try_acquire(key, origin, limit, token):
                    self.held[token] = (key, origin)
                    return token
                if not waiting:
                    waiting = True
                    self.waiters.add(origin, 1)
                async with self.changed:
                    try:
                        await asyncio.wait_for(
                            self.changed.wait_for(lambda: self.versions[key] != seen),
                            self.poll)
                    except asyncio.TimeoutError:
                        pass
        finally:
            if waiting:
                self.waiters.add(origin, -1)

    async def _try_acquire(self, key: str, origin: str, limit: int, token: str) -> bool:
        """One try at a free slot, repeated while Redis is unreachable, for the outage window;
        BrokerUnavailable past it (queue/outage.py ride_out, awaited)."""
        outage = Outage(f"gateway slot for {origin}", log)
        for pause in pauses():
            try:
                got = bool(await self.acquire_script(keys=[key], args=[limit, self.lease, token]))
            except broker_errors() as exc:
                outage.failed_within(exc, pause, self.window)
                await asyncio.sleep(pause)
                continue
            outage.passed()
            return got
        raise AssertionError("unreachable")  # pauses() never ends

    async def release(self, origin: str, token: str) -> None:
        key, _ = self.held.pop(token, (self._key(origin), origin))
        try:
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.zrem(key, token)
                pipe.publish(key, b"1")
                await pipe.execute()
        except broker_errors() as exc:  # the slot's lease frees it once Redis is back
            self.releases.failed(exc)
            return
        self.releases.passed()

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        if self.held:
            async with self.client.pipeline(transaction=False) as pipe:
                for token, (key, _) in self.held.items():
                    pipe.zrem(key, token)
                    pipe.publish(key, b"1")
                await pipe.execute()
            self.held.clear()
        await self.pubsub.aclose()
        await self.client.aclose()
