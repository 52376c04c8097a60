"""`evalq status --watch`: counts kept current from the attempts changed since the last tick.

The first tick reads the study once; each later one reads only attempts whose `updated_at` is
within MARGIN of the newest already seen (writers on other machines stamp with their own
clocks, so a margin absorbs skew and commit delay; re-reading a row is harmless), and
re-counts only their trials. A tick costs O(changes), not O(trials) (bench/ticks.py). The
rules are report/attempts.py's, as in results/tallies.py.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Optional

from sqlalchemy import String, cast, select

from evalq.models import VALID_OUTCOMES
from evalq.ops.status import NO_HOST, StudyStatus, status_from_counts
from evalq.results.store import AttemptRow, Record, TrialRow, read_study

MARGIN = 30.0
VALID = {o.value for o in VALID_OUTCOMES}
_COLUMNS = ("trial_id", "attempt", "state", "outcome", "worker_host", "lease_expires_at",
            "updated_at")


def trial_counts(attempts: dict[int, tuple]) -> tuple[tuple[str, str], Optional[str], str]:
    """((kind, name), host, first outcome) of one trial from its attempts (by number)."""
    if not attempts:
        return ("state", "unsent"), None, "pending"
    numbers = sorted(attempts)
    latest = attempts[numbers[-1]]
    if latest[3] is None:
        bucket = ("state", latest[2])
    else:
        valid = [attempts[n][3] for n in numbers if attempts[n][3] in VALID]
        bucket = ("outcome", valid[0] if valid else latest[3])
    hosts = [attempts[n][4] for n in numbers if attempts[n][4]]
    first = attempts[1][3] if 1 in attempts and attempts[1][3] is not None else "pending"
    return bucket, (hosts[-1] if hosts else None), first


class StatusWatch:
    """Call `tick()` for a current StudyStatus; the first call reads the whole study."""

    def __init__(self, engine, study_id: str):
        self.engine, self.study_id = engine, study_id
        self.trials: dict[str, dict[int, tuple]] = {}
        self.buckets, self.hosts, self.firsts = Counter(), Counter(), Counter()
        self.running: dict[tuple[str, int], Optional[float]] = {}
        self.envs: set[tuple[Optional[str], str]] = set()
        self.cursor: Optional[float] = None
        self.attempts = 0

    def _columns(self):
        c = AttemptRow.__table__.c
        return [getattr(c, name) for name in _COLUMNS]

    def _load(self, conn) -> None:
        t = TrialRow.__table__.c
        for (trial_id,) in conn.execute(select(t.id).where(t.study_id == self.study_id)):
            self.trials[trial_id] = {}
        c = AttemptRow.__table__.c
        self._apply(conn.execute(select(*self._columns()).where(c.study_id == self.study_id)))
        self._read_envs(conn, None)

    def _read_envs(self, conn, since: Optional[float]) -> None:
        c = AttemptRow.__table__.c
        where = [c.study_id == self.study_id, c.worker_env.isnot(None)]
        if since is not None:
            where.append(c.updated_at >= since)
        for host, env in conn.execute(select(c.worker_host, cast(c.worker_env, String))
                                      .where(*where).distinct()):
            self.envs.add((host, env))

    def _count(self, trial_id: str, sign: int) -> None:
        bucket, host, first = trial_counts(self.trials[trial_id])
        self.buckets[bucket] += sign
        self.hosts[host] += sign
        self.firsts[first] += sign

    def _apply(self, rows, initial: bool = True) -> None:
        changed: dict[str, list[tuple]] = {}
        for row in rows:
            row = tuple(row)
            if row[0] in self.trials:
                changed.setdefault(row[0], []).append(row)
            if row[6] is not None and (self.cursor is None or row[6] > self.cursor):
                self.cursor = row[6]
        for trial_id, new in changed.items():
            if not initial:
                self._count(trial_id, -1)
            for row in new:
                self.attempts += row[1] not in self.trials[trial_id]
                self.trials[trial_id][row[1]] = row
                key = (trial_id, row[1])
                if row[2] == "running" and row[3] is None:
                    self.running[key] = row[5]
                else:
                    self.running.pop(key, None)
            if not initial:
                self._count(trial_id, +1)
        if initial:
            for trial_id in self.trials:
                self._count(trial_id, +1)

    def tick(self, now: Optional[float] = None) -> StudyStatus:
        now = time.time() if now is None else now
        study = read_study(self.engine, self.study_id)
        with self.engine.connect() as conn:
            if self.cursor is None and not self.trials:
                self._load(conn)
            else:
                since = (self.cursor or 0.0) - MARGIN
                c = AttemptRow.__table__.c
                self._apply(conn.execute(select(*self._columns()).where(
                    c.study_id == self.study_id, c.updated_at >= since)), initial=False)
                self._read_envs(conn, since)
        return status_from_counts(self.study_id, bool(study.cancelled), self._counts(now))

    def _counts(self, now: float) -> dict:
        states = {name: n for (kind, name), n in self.buckets.items()
                  if kind == "state" and name != "unsent"}
        outcomes = {name: n for (kind, name), n in self.buckets.items() if kind == "outcome"}
        return {"planned": len(self.trials), "states": states, "outcomes": outcomes,
                "hosts": {h: n for h, n in self.hosts.items() if h is not None and h != NO_HOST},
                "first": {f: n for f, n in self.firsts.items() if f != "pending"},
                "attempts": self.attempts, "unsent": self.buckets[("state", "unsent")],
                "expired": sum(1 for lease in self.running.values()
                               if lease is not None and lease < now),
                "environments": [Record({"worker_host": h, "worker_env": json.loads(e)})
                                 for h, e in self.envs]}
