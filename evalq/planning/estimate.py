"""What a pilot says about variability: per-task variance of each condition and the between-condition correlation.

Reported beside the simulation as its assumptions. Values that cannot be computed (too few
tasks, a constant condition) are None, never 0.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Optional

import numpy as np

from evalq.stats import mean_of_defined, task_rates, valid_runs
from evalq.planning.pilot import Pilot


@dataclass(frozen=True)
class ConditionSpread:
    """One condition's TPR, the spread of its per-task pass rates, and the mean within-task run variance."""

    condition: str
    tasks: int
    runs_per_task: Optional[float]
    tpr: Optional[float]
    between_task_variance: Optional[float]  # sample variance of per-task pass rates
    within_task_variance: Optional[float]  # mean over tasks of the unbiased run variance (tasks with >= 2 runs)


@dataclass(frozen=True)
class PairEstimates:
    """The paired view: per-task differences candidate - baseline and how the two conditions co-vary."""

    baseline: ConditionSpread
    candidate: ConditionSpread
    paired_tasks: int
    mean_difference: Optional[float]
    difference_variance: Optional[float]
    correlation: Optional[float]  # Pearson, across tasks, of the two conditions' pass rates

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _sample_variance(values: list[float]) -> Optional[float]:
    return float(np.var(values, ddof=1)) if len(values) >= 2 else None


def condition_spread(pilot: Pilot, condition: str) -> ConditionSpread:
    runs = pilot.outcomes(condition)
    rates = {t: r for t, r in task_rates(runs).items() if r is not None}
    within = []
    counts = []
    for task, outcomes in runs.items():
        ok = valid_runs(outcomes)
        if ok:
            counts.append(len(ok))
        if len(ok) >= 2:
            within.append(float(np.var(np.asarray(ok, dtype=float), ddof=1)))
    return ConditionSpread(condition=condition, tasks=len(rates),
                           runs_per_task=float(np.mean(counts)) if counts else None,
                           tpr=mean_of_defined(rates.values()),
                           between_task_variance=_sample_variance(list(rates.values())),
                           within_task_variance=mean_of_defined(within))


def pair_estimates(pilot: Pilot, baseline: str, candidate: str) -> PairEstimates:
    """Estimates for the pair; with baseline == candidate the pilot has one condition and correlation is None."""
    base = task_rates(pilot.outcomes(baseline))
    cand = task_rates(pilot.outcomes(candidate))
    both = sorted(t for t in base if base[t] is not None and cand.get(t) is not None)
    x = np.asarray([base[t] for t in both], dtype=float)
    y = np.asarray([cand[t] for t in both], dtype=float)
    correlation = None
    if baseline != candidate and len(both) >= 3 and x.std() > 0 and y.std() > 0:
        correlation = float(np.corrcoef(x, y)[0, 1])
    paired = baseline != candidate and len(both) > 0
    d = list(y - x) if paired else []
    return PairEstimates(baseline=condition_spread(pilot, baseline),
                         candidate=condition_spread(pilot, candidate),
                         paired_tasks=len(both) if paired else 0,
                         mean_difference=float(np.mean(d)) if d else None,
                         difference_variance=_sample_variance(d), correlation=correlation)
