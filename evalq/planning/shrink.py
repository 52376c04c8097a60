"""Separate a pilot's run-to-run noise from its task-to-task spread before simulating from it.

A pilot task's observed pass rate from k runs is its true rate plus binomial noise, so the
spread of observed rates overstates the spread of true rates by the mean of p(1-p)/k. A
simulation that draws k new runs from the observed rates adds that noise a second time and
asks for too many tasks. Method of moments: true variance = observed variance (ddof 1) minus
the mean noise variance, floored at 0; each rate is then pulled toward the pilot mean so the
rates' spread equals that estimate. A convex pull keeps every rate inside [0, 1] and keeps the
pilot's ranking of tasks.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Optional

import numpy as np


@dataclass(frozen=True)
class Shrinkage:
    """How a set of observed per-task rates was turned into assumed true rates."""

    tasks: int
    mean_rate: Optional[float]
    observed_variance: Optional[float]  # sample variance (ddof 1) of the observed rates
    noise_variance: Optional[float]  # estimated mean binomial variance of a task's observed rate
    true_variance: Optional[float]  # observed - noise, floored at 0
    factor: float  # deviations from the mean are multiplied by this (1 = no shrinkage)
    note: Optional[str] = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def noise_variance(rates: np.ndarray, runs: np.ndarray) -> Optional[float]:
    """Mean over tasks of an unbiased estimate of p(1-p)/k_i.

    r(1-r)/(k-1) is unbiased for p(1-p)/k when k >= 2. A task with one run cannot estimate its
    own p(1-p); it borrows the pooled unbiased p(1-p) of the tasks that can. None when no task
    has two runs.
    """
    multi = runs >= 2
    if not multi.any():
        return None
    per_task = np.empty(len(rates))
    per_task[multi] = rates[multi] * (1 - rates[multi]) / (runs[multi] - 1)
    pooled_pq = float(np.mean(rates[multi] * (1 - rates[multi]) * runs[multi] / (runs[multi] - 1)))
    per_task[~multi] = pooled_pq / runs[~multi]
    return float(per_task.mean())


def shrink_rates(rates: np.ndarray, runs: np.ndarray) -> tuple[np.ndarray, Shrinkage]:
    """(assumed true rates, how): observed ``rates`` from ``runs`` valid runs per task."""
    rates = np.asarray(rates, dtype=float)
    runs = np.asarray(runs, dtype=float)
    n = len(rates)
    if n < 2:
        return rates, Shrinkage(n, float(rates.mean()) if n else None, None, None, None, 1.0,
                                "fewer than 2 pilot tasks: the spread cannot be estimated")
    mean = float(rates.mean())
    observed = float(np.var(rates, ddof=1))
    noise = noise_variance(rates, runs)
    if noise is None:
        return rates, Shrinkage(n, mean, observed, None, None, 1.0,
                                "every pilot task has one valid run: its run noise cannot be "
                                "told from task spread, so the observed rates are used as they "
                                "are (power is understated)")
    true = max(0.0, observed - noise)
    spread = float(np.var(rates))  # what resampling these tasks reproduces (ddof 0)
    factor = 1.0 if spread == 0 else min(1.0, float(np.sqrt(true / spread)))
    note = None if true > 0 else ("the pilot's spread is no larger than its run noise: every "
                                  "task is assumed to share the pilot's mean rate")
    return mean + factor * (rates - mean), Shrinkage(n, mean, observed, noise, true, factor, note)
