"""Group commit: many callers' writes in one transaction, each caller told its own outcome.

A results worker runs its tasks in threads; each hands its payload here and waits. One
flusher thread writes whatever is pending (up to `limit`) with one call, so while one batch
commits the next one gathers. A caller returns only after its batch committed, so its
message is acknowledged only then (acks_late: a worker killed before the commit leaves the
message unacknowledged and the broker re-delivers it).

When a batch fails, each of its items is written again alone: one bad payload gets its own
error (and its task retries or fails as it would alone); the others are not lost.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from typing import Any, Callable, Generic, Sequence, TypeVar

Item = TypeVar("Item")
Outcome = TypeVar("Outcome")


class _Waiter:
    __slots__ = ("item", "done", "outcome", "error")

    def __init__(self, item: Any):
        self.item = item
        self.done = threading.Event()
        self.outcome: Any = None
        self.error: BaseException | None = None


class GroupCommit(Generic[Item, Outcome]):
    """`submit(item)` returns `write([..., item, ...])`'s outcome for it, or raises its error."""

    def __init__(self, write: Callable[[Sequence[Item]], Sequence[Outcome]], limit: int = 500):
        self._write = write
        self._limit = limit
        self._pending: deque[_Waiter] = deque()
        self._ready = threading.Condition()
        self._owner_pid: int | None = None  # a forked child starts its own flusher

    def submit(self, item: Item) -> Outcome:
        waiter = _Waiter(item)
        with self._ready:
            if self._owner_pid != os.getpid():
                self._pending.clear()  # a parent's waiters are not this process's
                self._owner_pid = os.getpid()
                threading.Thread(target=self._flush_forever, name="evalq-group-commit",
                                 daemon=True).start()
            self._pending.append(waiter)
            self._ready.notify()
        waiter.done.wait()
        if waiter.error is not None:
            raise waiter.error
        return waiter.outcome

    def _flush_forever(self) -> None:
        while True:
            with self._ready:
                while not self._pending:
                    self._ready.wait()
                batch = [self._pending.popleft()
                         for _ in range(min(self._limit, len(self._pending)))]
            self._flush(batch)

    def _flush(self, batch: list[_Waiter]) -> None:
        try:
            outcomes = self._write([w.item for w in batch])
        except BaseException as exc:  # noqa: BLE001 - it is the callers' to raise
            if len(batch) == 1:
                batch[0].error = exc
                batch[0].done.set()
                return
            for waiter in batch:  # find the bad one(s): each alone
                self._flush([waiter])
            return
        for waiter, outcome in zip(batch, outcomes, strict=True):
            waiter.outcome = outcome
            waiter.done.set()
