"""The heartbeat that keeps a database lease (agent run or grading) alive while work goes on.

A process that dies stops renewing; once the lease expires a sweeper re-sends the work and the
next delivery claims it (results/store.py claim, claim_grading).

One renewer thread per process renews every lease the process holds in one UPDATE per tick:
a threads-pool agent worker holding hundreds of trials must not spend a thread and a database
connection on each lease (the engine's small pool would be exhausted, PostgreSQL's connection
limit after it).
"""

from __future__ import annotations

import logging
import os
import threading
import time

from sqlalchemy import tuple_, update
from sqlalchemy.orm import Session

from evalq.results.store import AttemptRow

log = logging.getLogger("evalq.lease")

#: lease keys per UPDATE (three bound values each: well inside SQLite's variable limit)
CHUNK = 300


def renew_many(connection, keys: list[tuple[str, int, str]], lease_seconds: float) -> set:
    """Extend every (trial_id, attempt, owner) lease still held; returns the (trial_id,
    attempt) pairs renewed. A pair missing from the answer was taken or finished.

    `connection` is an Engine or a Connection (the renewer keeps one of its own)."""
    renewed: set = set()
    until = time.time() + lease_seconds
    with Session(connection) as session:
        for start in range(0, len(keys), CHUNK):
            chunk = keys[start:start + CHUNK]
            rows = session.execute(
                update(AttemptRow)
                .where(tuple_(AttemptRow.trial_id, AttemptRow.attempt,
                              AttemptRow.lease_owner).in_(chunk),
                       AttemptRow.outcome.is_(None))
                .values(lease_expires_at=until)
                .returning(AttemptRow.trial_id, AttemptRow.attempt))
            renewed.update((r[0], r[1]) for r in rows)
        session.commit()
    return renewed


class _Renewer:
    """This process's renewer: every registered heartbeat, grouped by (engine, lease length),
    renewed together every third of the lease, over a connection the renewer keeps: hundreds
    of trial threads busy with the engine's pool must not make a renewal wait (a late renewal
    is an expired lease, and the trial runs twice)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Empty state: at start, and in a forked child (which inherits the parent's leases
        and maybe a held lock, but not its thread or its connections' sockets)."""
        self.lock = threading.Lock()
        self.wake = threading.Condition(self.lock)
        self.beats: set[Heartbeat] = set()
        self.due: dict[tuple, float] = {}  # (engine, lease) -> next renewal (monotonic)
        self.thread: threading.Thread | None = None
        self.connections: dict = {}  # engine -> the renewer's own Connection (its thread only)

    def add(self, beat: "Heartbeat") -> None:
        with self.lock:
            self.beats.add(beat)
            self.due.setdefault((beat.engine, beat.lease), time.monotonic() + beat.lease / 3)
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._loop, name="evalq-lease",
                                               daemon=True)
                self.thread.start()
            self.wake.notify()

    def remove(self, beat: "Heartbeat") -> None:
        with self.lock:
            self.beats.discard(beat)

    def _loop(self) -> None:
        while True:
            batches, idle = self._next_batches()
            for engine in idle:  # no lease left on it: give its connection back
                try:
                    self.connections.pop(engine).close()
                except Exception:  # noqa: BLE001 - a dropped database: nothing to give back
                    pass
            for (engine, lease), beats in batches.items():  # outside the lock: DB round trip
                self._renew(engine, lease, beats)

    def _next_batches(self) -> tuple[dict, list]:
        """Wait for the next due group; (the groups due now, engines no lease uses any more)."""
        with self.lock:
            while True:
                groups: dict[tuple, list[Heartbeat]] = {}
                for beat in self.beats:
                    groups.setdefault((beat.engine, beat.lease), []).append(beat)
                for key in [k for k in self.due if k not in groups]:
                    del self.due[key]
                used = {key[0] for key in groups}
                idle = [e for e in self.connections if e not in used]
                now = time.monotonic()
                ready = [key for key, when in self.due.items() if when <= now]
                if ready or idle:
                    for key in ready:
                        self.due[key] = now + key[1] / 3
                    return {key: groups[key] for key in ready}, idle
                wait = min(self.due.values(), default=now + 5.0) - now
                self.wake.wait(max(0.01, wait))

    def _renew(self, engine, lease: float, beats: list["Heartbeat"]) -> None:
        try:
            connection = self.connections.get(engine)
            if connection is None:
                connection = self.connections[engine] = engine.connect()
            held = renew_many(connection, [(b.trial_id, b.attempt, b.owner) for b in beats],
                              lease)
        except Exception as exc:  # database blip: keep trying until the leases run out
            log.warning("lease renewal of %d lease(s) failed: %s", len(beats), exc)
            dead = self.connections.pop(engine, None)
            if dead is not None:
                try:
                    dead.invalidate()  # a fresh connection next tick (a server restart)
                except Exception:  # noqa: BLE001 - it is being dropped anyway
                    pass
            return
        for beat in beats:
            if (beat.trial_id, beat.attempt) not in held and not beat.stopped.is_set():
                beat.lost = True


_renewer = _Renewer()
os.register_at_fork(after_in_child=_renewer.reset)


class Heartbeat:
    """Keeps one lease alive from `start` to `stop`; `lost` once someone else took it."""

    def __init__(self, engine, ref: dict, owner: str, lease_seconds: float):
        self.engine, self.owner, self.lease = engine, owner, lease_seconds
        self.trial_id, self.attempt = ref["trial_id"], ref["attempt"]
        self.stopped = threading.Event()
        self.lost = False

    def start(self) -> None:
        _renewer.add(self)

    def stop(self) -> None:
        self.stopped.set()
        _renewer.remove(self)
