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
        for waiter, outcome in zip(batch, write_each(self._write, [w.item for w in batch])):
            if isinstance(outcome, Failed):
                waiter.error = outcome.error
            else:
                waiter.outcome = outcome
            waiter.done.set()


class Failed:
    """An item's write raised `error` (alone, after its batch failed)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException):
        self.error = error


def write_each(write: Callable[[Sequence[Item]], Sequence[Outcome]],
               items: Sequence[Item]) -> list[Outcome | Failed]:
    """`write(items)` in one go; if that fails, each item alone, so only the bad ones fail."""
    try:
        return list(write(items))
    except BaseException as exc:  # noqa: BLE001 - it is the items' to report
        if len(items) == 1:
            return [Failed(exc)]
        return [write_each(write, [item])[0] for item in items]
