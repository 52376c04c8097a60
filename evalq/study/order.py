"""Blocked randomization of trial order (SPEC S4).

Each repetition is a block holding every fixture × condition cell once, so order, drift and
fatigue spread evenly over conditions. Within a block the order is a sort on
sha256(seed, block, fixture, condition): the same seed gives the same order on any machine
and Python version, with no dependence on a library's random stream.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class PlannedTrial:
    trial_id: str
    fixture_id: str
    condition: str
    repetition: int
    block: int
    order_index: int


def trial_id(study_id: str, fixture_id: str, condition: str, repetition: int) -> str:
    """Readable ids (they show in Flower and logs)."""
    return f"{study_id}/{fixture_id}/{condition}/r{repetition}"


def _key(seed: int, block: int, fixture_id: str, condition: str) -> str:
    return hashlib.sha256(f"{seed}\0{block}\0{fixture_id}\0{condition}".encode()).hexdigest()


def plan_trials(study_id: str, fixture_ids: list[str], conditions: list[str],
                repetitions: int, seed: int) -> list[PlannedTrial]:
    planned: list[PlannedTrial] = []
    for block in range(repetitions):
        cells = [(f, c) for f in fixture_ids for c in conditions]
        cells.sort(key=lambda cell: _key(seed, block, *cell))
        for fixture_id, condition in cells:
            planned.append(PlannedTrial(
                trial_id=trial_id(study_id, fixture_id, condition, block + 1),
                fixture_id=fixture_id, condition=condition, repetition=block + 1,
                block=block, order_index=len(planned)))
    return planned
