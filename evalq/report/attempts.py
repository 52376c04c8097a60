"""Which attempt of a trial counts: the first valid one, else the latest failure.

A valid attempt is one that says something about the agent (correct, incorrect, timed_out).
The first attempt and the eventual (counted) attempt are both kept for reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import Optional

from evalq.models import VALID_OUTCOMES, Outcome
from evalq.results.store import AttemptRow

VALID = {o.value for o in VALID_OUTCOMES}
CORRECT = Outcome.correct.value  # an enum member's .value is a Python call; read per trial


class _computed_once:
    """functools.cached_property without its lock (Python 3.11 takes one per first read:
    a second of a report over 100,000 trials); a view is read by one thread."""

    def __init__(self, func):
        self.func, self.name, self.__doc__ = func, func.__name__, func.__doc__

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.func(obj)  # later reads skip this descriptor
        return value


@dataclass
class TrialView:
    trial_id: str
    fixture_id: str
    condition: str
    repetition: int
    order_index: int
    attempts: list[AttemptRow]

    @property
    def first(self) -> Optional[AttemptRow]:
        """The first attempt, if it has an outcome."""
        for attempt in self.attempts:
            if attempt.attempt == 1 and attempt.outcome is not None:
                return attempt
        return None

    @_computed_once
    def counted(self) -> Optional[AttemptRow]:
        """Computed once: reports ask for it many times per trial (attempts are sorted)."""
        if len(self.attempts) == 1:  # most trials: no list to build (100,000 in bench/ report)
            only = self.attempts[0]
            return only if only.outcome is not None else None
        finished = [a for a in self.attempts if a.outcome is not None]
        for attempt in finished:
            if attempt.outcome in VALID:
                return attempt
        return finished[-1] if finished else None

    @property
    def settled(self) -> bool:
        """True when the latest attempt has an outcome (a resubmitted attempt may still run)."""
        return bool(self.attempts) and self.attempts[-1].outcome is not None

    @property
    def outcome(self) -> Optional[str]:
        counted = self.counted
        return counted.outcome if counted else None

    @property
    def passed(self) -> Optional[bool]:
        """True/False for a valid outcome; None for failures and pending trials."""
        outcome = self.outcome
        if outcome not in VALID:
            return None
        return outcome == CORRECT


def trial_views(trials, attempts) -> list[TrialView]:
    by_trial: dict[str, list[AttemptRow]] = {}
    for attempt in attempts:
        by_trial.setdefault(attempt.trial_id, []).append(attempt)
    views = []
    for t in trials:
        mine = by_trial.get(t.id)
        if mine is None:
            mine = []
        elif len(mine) > 1:  # each list is this function's own: sorted in place
            mine.sort(key=_attempt_number)
        views.append(TrialView(trial_id=t.id, fixture_id=t.fixture_id, condition=t.condition,
                               repetition=t.repetition, order_index=t.order_index,
                               attempts=mine))
    return views


_attempt_number = attrgetter("attempt")
