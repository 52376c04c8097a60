"""Percentile bootstrap confidence intervals over tasks, the interval every metric is reported with.

Tasks are the resampling unit: pass one value per task (already reduced
from its runs). Resampling is vectorised in bounded chunks, so 10,000 resamples of
1,000 tasks take a fraction of a second.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from typing import Any, Optional

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


#: within `shared_resamples`, the index draws already made, by (seed, tasks, resamples): a
#: report bootstraps dozens of metrics over the same tasks with one seed, and every one of
#: them would draw the same 10,000 x 1,000 indices again (bench/ report)
_DRAWS: ContextVar[Optional[dict]] = ContextVar("evalq_bootstrap_draws", default=None)
_KEPT_DRAWS = 3  # at 1,000 tasks a kept draw is 20 MB (uint16)


@contextmanager
def shared_resamples() -> Iterator[None]:
    """Within the block, resample indices for the same (seed, tasks, resamples) are drawn once
    and reused: the very numbers a fresh generator would draw, so no result changes."""
    token = _DRAWS.set({})
    try:
        yield
    finally:
        _DRAWS.reset(token)


def resample_chunks(seed: int | None, n: int, n_resamples: int) -> Iterator[np.ndarray]:
    """The (rows x n) index matrices that np.random.default_rng(seed) draws in chunks of
    chunk_rows(n) rows, in order (drawing them in chunks or at once gives the same numbers)."""
    kept = _DRAWS.get()
    key = (seed, n, n_resamples)
    if kept is not None and seed is not None and key in kept:
        yield from kept[key]
        return
    rng = np.random.default_rng(seed)
    step = chunk_rows(n)
    chunks = []
    for start in range(0, n_resamples, step):
        idx = rng.integers(0, n, size=(min(step, n_resamples - start), n))
        if kept is not None and seed is not None:
            chunks.append(idx.astype(np.uint16) if n <= np.iinfo(np.uint16).max else idx)
        yield idx
    if kept is not None and seed is not None:
        if len(kept) >= _KEPT_DRAWS:
            kept.pop(next(iter(kept)))
        kept[key] = chunks


#: a resample's mean depends only on how many of its n draws fall in each class of equal
#: values; those counts are Multinomial(n, class sizes / n), the very distribution resampling
#: n tasks with replacement gives them. Drawn directly they cost resamples x classes instead of
#: resamples x tasks: 20,000 tasks at k = 3 are a handful of classes. Used where it is the
#: cheaper draw: at most one class per CLASS_SHARE tasks.
CLASS_SHARE = 6


def uses_class_counts(n_classes: int, n_tasks: int) -> bool:
    """Whether resamples are drawn as class counts (few classes) rather than task indices."""
    return n_classes * CLASS_SHARE <= n_tasks


def class_count_chunks(seed: int | None, sizes: np.ndarray, n_resamples: int
                       ) -> Iterator[np.ndarray]:
    """(rows x classes) counts of each class in each resample of sum(sizes) tasks drawn with
    replacement, by np.random.default_rng(seed), in chunks."""
    sizes = np.asarray(sizes, dtype=np.int64)
    n = int(sizes.sum())
    shares = sizes / n
    rng = np.random.default_rng(seed)
    step = chunk_rows(sizes.size)
    for start in range(0, n_resamples, step):
        yield rng.multinomial(n, shares, size=min(step, n_resamples - start))


def _class_means(values: np.ndarray, sizes: np.ndarray, n_resamples: int,
                 seed: int | None) -> np.ndarray:
    """(n_resamples x columns) resample means from the classes' values (classes x columns)."""
    n = int(sizes.sum())
    return np.concatenate([counts @ values / n
                           for counts in class_count_chunks(seed, sizes, n_resamples)])


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
    if statistic is np.mean:
        classes, sizes = np.unique(x, return_counts=True)
        if uses_class_counts(classes.size, n):
            return _class_means(classes[:, None], sizes, n_resamples, seed)[:, 0]
    out = np.empty(n_resamples, dtype=float)
    start = 0
    for idx in resample_chunks(seed, n, n_resamples):
        out[start:start + idx.shape[0]] = statistic(x[idx], axis=-1)
        start += idx.shape[0]
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


def _mean_distributions(x: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """Means of every column of x (tasks x columns) over the very resamples that
    bootstrap_distribution draws for that seed. Tasks with identical rows are counted as one
    class (per-k pass estimates depend only on a task's run counts, so 1,000 tasks are a few
    dozen classes): each resample's mean is its class counts times the class values."""
    n = x.shape[0]
    values, classes, sizes = np.unique(x, axis=0, return_inverse=True, return_counts=True)
    classes = classes.reshape(-1)
    width = values.shape[0]
    if width > 1 and uses_class_counts(width, n):
        return _class_means(values, sizes, n_resamples, seed)
    if width == 1:  # every task alike (pass^k = 0 at a high k): each resample's mean is theirs,
        # by the very arithmetic the counts below would do, with no draw at all
        return np.repeat(np.array([[n]], dtype=float) @ values / n, n_resamples, axis=0)
    out = np.empty((n_resamples, x.shape[1]), dtype=float)
    start = 0
    for idx in resample_chunks(seed, n, n_resamples):
        rows = idx.shape[0]
        flat = classes[idx]  # a new array: offset in place, not copied again (10M entries)
        flat += (np.arange(rows) * width)[:, None]
        counts = np.bincount(flat.ravel(), minlength=rows * width).reshape(rows, width)
        out[start:start + rows] = counts @ values / n
        start += rows
    return out


def bootstrap_ci_columns(columns: Sequence[Sequence[float | None]], *,
                         n_resamples: int = DEFAULT_RESAMPLES,
                         confidence: float = DEFAULT_CONFIDENCE,
                         seed: int = DEFAULT_SEED) -> list[BootstrapCI | None]:
    """bootstrap_ci (of the mean) of each column, with one set of resamples shared by the
    columns defined on the same tasks: the same intervals for a fraction of the work when a
    report needs one per k (pass@1 ... pass@50). ``None`` for a column with no value."""
    matrix = np.full((len(columns[0]) if columns else 0, len(columns)), np.nan)
    for j, column in enumerate(columns):
        defined = [(i, float(v)) for i, v in enumerate(column) if v is not None]
        if len(column) != matrix.shape[0]:
            raise ValueError(f"column {j} has {len(column)} tasks, the first {matrix.shape[0]}: "
                             "align every column on the same task order")
        if defined and not np.all(np.isfinite([v for _, v in defined])):
            raise ValueError("values contain nan or inf; pass None for a missing task value instead")
        for i, v in defined:
            matrix[i, j] = v
    return bootstrap_ci_matrix(matrix, n_resamples=n_resamples, confidence=confidence, seed=seed)


def bootstrap_ci_matrix(x: np.ndarray, *, n_resamples: int = DEFAULT_RESAMPLES,
                        confidence: float = DEFAULT_CONFIDENCE,
                        seed: int = DEFAULT_SEED) -> list[BootstrapCI | None]:
    """bootstrap_ci_columns for a (tasks x columns) float array whose nan marks a task without
    a value (pass@k at a k above its runs): columns defined on the same tasks are grouped and
    share their resamples, and no per-value Python object is made."""
    _check_resamples(n_resamples)
    _check_confidence(confidence)
    x = np.asarray(x, dtype=float)
    if x.ndim != 2:
        raise ValueError(f"expected a (tasks x columns) array, got shape {x.shape}")
    if np.any(np.isinf(x)):
        raise ValueError("values contain inf; mark a missing task value with nan")
    defined = ~np.isnan(x)
    out: list[BootstrapCI | None] = [None] * x.shape[1]
    if x.shape[1] == 0:
        return out
    masks, group_of = np.unique(defined.T, axis=0, return_inverse=True)
    group_of = group_of.reshape(-1)
    alpha = (1.0 - confidence) / 2.0
    for g, mask in enumerate(masks):
        keep = np.flatnonzero(mask)
        if keep.size == 0:
            continue
        members = np.flatnonzero(group_of == g)
        values = x[np.ix_(keep, members)]
        low, high = np.quantile(_mean_distributions(values, n_resamples, seed),
                                [alpha, 1 - alpha], axis=0)
        for position, j in enumerate(members):  # each mean over its own column, as bootstrap_ci
            out[j] = BootstrapCI(low=float(low[position]), high=float(high[position]),
                                 estimate=float(values[:, position].mean()), n_tasks=int(keep.size),
                                 n_resamples=n_resamples, confidence=confidence, seed=seed)
    return out
