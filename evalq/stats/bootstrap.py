"""Percentile bootstrap confidence intervals over tasks, the interval every metric is reported with.

Tasks are the resampling unit [seed 003 §7.1]: pass one value per task (already reduced
from its runs). Resampling is vectorised in bounded chunks, so 10,000 resamples of
1,000 tasks take a fraction of a second.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from evalq.stats._arrays import chunk_rows, defined_pairs, defined_values

BOOTSTRAP_METHOD = "percentile"
DEFAULT_RESAMPLES = 10_000
DEFAULT_CONFIDENCE = 0.95
DEFAULT_SEED = 0

# statistic(matrix, axis=-1) -> one value per row, like np.mean or np.median.
Statistic = Callable[..., Any]


@dataclass(frozen=True)
class BootstrapCI:
    """A bootstrap interval plus what a report must state about it (method, seed, resamples).

    Iterating yields ``(low, high)``, so ``low, high = bootstrap_ci(x)`` works.
    """

    low: float
    high: float
    estimate: float
    n_tasks: int
    n_resamples: int
    confidence: float
    seed: int | None
    method: str = BOOTSTRAP_METHOD

    def __iter__(self) -> Iterator[float]:
        yield self.low
        yield self.high

    @property
    def half_width(self) -> float:
        """Half the interval's width, the precision figure checked by the power warning."""
        return (self.high - self.low) / 2.0

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for JSON reports."""
        return asdict(self)


def _check_resamples(n_resamples: int) -> None:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 1:
        raise ValueError(f"n_resamples={n_resamples!r} must be a positive integer (10,000 by the analysis plan)")


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence={confidence!r} must lie strictly between 0 and 1, e.g. 0.95")


def bootstrap_distribution(values: ArrayLike | Sequence[float | None], *,
                           statistic: Statistic = np.mean,
                           n_resamples: int = DEFAULT_RESAMPLES,
                           seed: int | None = DEFAULT_SEED) -> np.ndarray | None:
    """The statistic on n_resamples resamples (with replacement) of the tasks; ``None`` if no task has a value."""
    _check_resamples(n_resamples)
    x = defined_values(values)
    n = x.size
    if n == 0:
        return None
    rng = np.random.default_rng(seed)
    out = np.empty(n_resamples, dtype=float)
    step = chunk_rows(n)
    for start in range(0, n_resamples, step):
        rows = min(step, n_resamples - start)
        idx = rng.integers(0, n, size=(rows, n))
        out[start:start + rows] = statistic(x[idx], axis=-1)
    return out


def bootstrap_ci(values: ArrayLike | Sequence[float | None], *,
                 statistic: Statistic = np.mean,
                 n_resamples: int = DEFAULT_RESAMPLES,
                 confidence: float = DEFAULT_CONFIDENCE,
                 seed: int | None = DEFAULT_SEED) -> BootstrapCI | None:
    """Percentile bootstrap CI of statistic over per-task values; ``None`` values dropped, ``None`` if none left.

    ``statistic`` must be vectorised like ``np.mean``: ``statistic(matrix, axis=-1)``.
    ``seed=None`` draws fresh entropy and records it, so the result stays reproducible.
    """
    _check_resamples(n_resamples)
    _check_confidence(confidence)
    x = defined_values(values)
    if x.size == 0:
        return None
    if seed is None:
        seed = int(np.random.SeedSequence().entropy)  # type: ignore[arg-type]
    dist = bootstrap_distribution(x, statistic=statistic, n_resamples=n_resamples, seed=seed)
    assert dist is not None
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(dist, [alpha, 1.0 - alpha])
    return BootstrapCI(low=float(low), high=float(high), estimate=float(statistic(x, axis=-1)),
                       n_tasks=int(x.size), n_resamples=n_resamples, confidence=confidence, seed=seed)


def paired_bootstrap_ci(treatment: ArrayLike | Sequence[float | None],
                        control: ArrayLike | Sequence[float | None], *,
                        statistic: Statistic = np.mean,
                        n_resamples: int = DEFAULT_RESAMPLES,
                        confidence: float = DEFAULT_CONFIDENCE,
                        seed: int | None = DEFAULT_SEED) -> BootstrapCI | None:
    """CI of the mean per-task difference treatment - control (aligned by task); tasks missing either side dropped."""
    diffs = defined_pairs(treatment, control)
    return bootstrap_ci(diffs, statistic=statistic, n_resamples=n_resamples,
                        confidence=confidence, seed=seed)
