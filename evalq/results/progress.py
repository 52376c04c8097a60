"""How many planned trials have settled, kept up to date from the attempt events alone.

The launcher asks this several times a second; reading every trial and attempt on each tick
made it O(trials) (100,000 rows a tick). The counter reads the study once, then on each tick
only the events after its cursor: O(changes). A trial is settled when its latest attempt has
an outcome; a resubmitted attempt (a newer one, outcome None) makes it pending again.
"""

from __future__ import annotations

from sqlalchemy import func, select

from evalq.results.store import AttemptEvent, latest_attempts


class SettledCounter:
    """Callable giving (settled, planned) for one study; each call reads only new events."""

    def __init__(self, engine, study_id: str):
        self.engine, self.study_id = engine, study_id
        events = AttemptEvent.__table__.c
        with engine.connect() as conn:  # cursor first: an event racing the load is re-applied
            self.cursor = conn.execute(select(func.max(events.id)).where(
                events.study_id == study_id)).scalar() or 0
        trials, latest = latest_attempts(engine, study_id)
        self.planned = len(trials)
        self.latest: dict[str, tuple[int, bool, str | None]] = {
            t: (r.attempt, r.outcome is not None, r.outcome) for t, r in latest.items()
            if t in trials}
        self.settled = sum(done for _, done, _ in self.latest.values())
        #: settled trials by their latest attempt's outcome (a live tally, not the report's)
        self.tally: dict[str, int] = {}
        for _, done, outcome in self.latest.values():
            if done:
                self.tally[outcome] = self.tally.get(outcome, 0) + 1
        #: durations (start to result) of the attempts that finished while this counter ran
        self.durations: list[float] = []

    def _apply(self, trial_id: str, attempt: int, outcome: str | None) -> bool:
        """Take one event; True when it changed the trial's latest attempt or its outcome."""
        done = outcome is not None
        before = self.latest.get(trial_id)
        if before is not None and (attempt, done) <= before[:2]:
            return False  # older, or the same attempt without news (outcome outranks creation)
        self.settled += done - (before[1] if before else False)
        if before is not None and before[1]:
            self.tally[before[2]] -= 1
        if done:
            self.tally[outcome] = self.tally.get(outcome, 0) + 1
        self.latest[trial_id] = (attempt, done, outcome)
        return True

    def __call__(self) -> tuple[int, int]:
        events = AttemptEvent.__table__.c
        statement = (select(events.id, events.trial_id, events.attempt, events.outcome,
                            events.duration)
                     .where(events.study_id == self.study_id, events.id > self.cursor)
                     .order_by(events.id))
        with self.engine.connect() as conn:
            for event_id, trial_id, attempt, outcome, duration in conn.execute(statement):
                if self._apply(trial_id, attempt, outcome) and duration is not None:
                    self.durations.append(duration)
                self.cursor = event_id
        return self.settled, self.planned
