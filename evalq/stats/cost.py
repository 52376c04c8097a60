"""Cost per successful task, and the split between runs with complete and incomplete cost accounting.

A cost of ``None`` means the run's accounting is incomplete; it is never read as 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple


class CostPerSuccess(NamedTuple):
    """The value, or ``None`` with the reason it is unavailable."""

    value: float | None
    reason: str | None


class CostAccounting(NamedTuple):
    """Totals over runs with complete accounting, and which runs were left out."""

    total_cost: float | None  # None when no run has complete accounting
    n_complete: int
    n_incomplete: int
    incomplete: list[int]  # indices of runs whose cost is None
    n_correct: int | None  # correct runs among the complete ones; None if correctness not given


def _check_costs(costs: Sequence[float | None]) -> None:
    for i, c in enumerate(costs):
        if c is not None and (isinstance(c, bool) or not math.isfinite(c) or c < 0):
            raise ValueError(f"cost of run #{i} is {c!r}; a cost must be a finite number >= 0, or None if unknown")


def cost_per_success(costs: Sequence[float | None], correct: Sequence[bool | None]) -> CostPerSuccess:
    """Total cost of all attempts / number of correct runs; unavailable if none is correct or any cost is None.

    Pass every attempt (failed, timed out and resubmitted ones too): they all cost money.
    """
    if len(costs) != len(correct):
        raise ValueError(f"costs and correct differ in length ({len(costs)} vs {len(correct)}); give one of each per attempt")
    _check_costs(costs)
    if not costs:
        return CostPerSuccess(None, "no attempts")
    problems = []
    missing = sum(c is None for c in costs)
    if missing:
        problems.append(f"incomplete cost accounting: {missing} of {len(costs)} attempts have no cost")
    n_correct = sum(bool(x) for x in correct if x is not None)
    if n_correct == 0:
        problems.append("no correct run")
    if problems:
        return CostPerSuccess(None, "; ".join(problems))
    total = math.fsum(c for c in costs if c is not None)
    return CostPerSuccess(total / n_correct, None)


def split_cost_accounting(costs: Sequence[float | None],
                          correct: Sequence[bool | None] | None = None) -> CostAccounting:
    """Sum cost over runs with complete accounting only and count the incomplete ones, for aggregate comparisons."""
    if correct is not None and len(correct) != len(costs):
        raise ValueError(f"costs and correct differ in length ({len(costs)} vs {len(correct)}); give one of each per attempt")
    _check_costs(costs)
    incomplete = [i for i, c in enumerate(costs) if c is None]
    complete = [i for i, c in enumerate(costs) if c is not None]
    total = math.fsum(costs[i] for i in complete) if complete else None  # type: ignore[misc]
    n_correct = None if correct is None else sum(bool(correct[i]) for i in complete if correct[i] is not None)
    return CostAccounting(total_cost=total, n_complete=len(complete), n_incomplete=len(incomplete),
                          incomplete=incomplete, n_correct=n_correct)
