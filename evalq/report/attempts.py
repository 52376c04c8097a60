"""Which attempt of a trial counts (SPEC D3): the first valid one, else the latest failure.

A valid attempt is one that says something about the agent (correct, incorrect, timed_out).
The first attempt and the eventual (counted) attempt are both kept for reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Optional

from evalq.models import VALID_OUTCOMES, Outcome
from evalq.results.store import AttemptRow

VALID = {o.value for o in VALID_OUTCOMES}


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
        done = [a for a in self.attempts if a.attempt == 1 and a.outcome is not None]
        return done[0] if done else None

    @cached_property
    def counted(self) -> Optional[AttemptRow]:
        """Computed once: reports ask for it many times per trial (attempts are sorted)."""
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
        return outcome == Outcome.correct.value


def trial_views(trials, attempts) -> list[TrialView]:
    by_trial: dict[str, list[AttemptRow]] = {}
    for attempt in attempts:
        by_trial.setdefault(attempt.trial_id, []).append(attempt)
    return [TrialView(trial_id=t.id, fixture_id=t.fixture_id, condition=t.condition,
                      repetition=t.repetition, order_index=t.order_index,
                      attempts=sorted(by_trial.get(t.id, []), key=lambda a: a.attempt))
            for t in trials]
