"""Concurrency per provider: at most N requests in flight to one upstream origin at a time.

`LocalSlots` counts within one process (the embedded default). `RedisSlots` shares the count
across every worker through one sorted set per origin: members are slot tokens, scores their
lease expiry (Redis server time), renewed while a request runs, so a dead worker's slots come
back when their lease ends. A release is published so waiters elsewhere retry at once; a poll
covers lost messages and expired leases.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict
from typing import Optional


class LocalSlots:
    def __init__(self) -> None:
        self.held: dict[str, int] = defaultdict(int)
        self.waiters: dict[str, int] = defaultdict(int)
        self.changed: Optional[asyncio.Condition] = None

    async def start(self) -> None:
        self.changed = asyncio.Condition()

    async def acquire(self, key: str, limit: int) -> str:
        async with self.changed:
            self.waiters[key] += 1
            try:
                await self.changed.wait_for(lambda: self.held[key] < limit)
            finally:
                self.waiters[key] -= 1
            self.held[key] += 1
        return key

    async def release(self, key: str, token: str) -> None:
        async with self.changed:
            self.held[key] -= 1
            self.changed.notify_all()

    def waiting(self, key: str) -> int:
        return self.waiters[key]

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
                 prefix: str = "evalq:gateway:slots:"):
        self.url, self.lease, self.poll, self.prefix = url, lease, poll, prefix
        self.held: dict[str, tuple[str, str]] = {}        # token -> (redis key, origin)
        self.waiters: dict[str, int] = defaultdict(int)
        self.versions: dict[str, int] = defaultdict(int)
        self.tasks: list[asyncio.Task] = []

    async def start(self) -> None:
        import redis.asyncio as aioredis

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
        while True:
            message = await self.pubsub.get_message(ignore_subscribe_messages=True,
                                                    timeout=self.poll)
            if message and message.get("type") == "pmessage":
                channel = message["channel"]
                await self._wake(channel.decode() if isinstance(channel, bytes) else channel)

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self.lease / 3)
            if self.held:
                tokens = list(self.held)
                await self.renew_script(keys=[self.held[t][0] for t in tokens],
                                        args=[self.lease, *tokens])

    async def acquire(self, origin: str, limit: int) -> str:
        key, token = self._key(origin), uuid.uuid4().hex
        self.waiters[origin] += 1
        try:
            while True:
                seen = self.versions[key]
                if await self.acquire_script(keys=[key], args=[limit, self.lease, token]):
                    self.held[token] = (key, origin)
                    return token
                async with self.changed:
                    try:
                        await asyncio.wait_for(
                            self.changed.wait_for(lambda: self.versions[key] != seen),
                            self.poll)
                    except asyncio.TimeoutError:
                        pass
        finally:
            self.waiters[origin] -= 1

    async def release(self, origin: str, token: str) -> None:
        key, _ = self.held.pop(token, (self._key(origin), origin))
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.zrem(key, token)
            pipe.publish(key, b"1")
            await pipe.execute()

    def waiting(self, origin: str) -> int:
        return self.waiters[origin]

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
