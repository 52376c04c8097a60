"""Two-sided paired permutation (sign-flip) test on per-task differences.

Under the null the two condition labels of a task are exchangeable, so each task's
difference is equally likely to carry either sign. Small studies are enumerated
exactly; larger ones use seeded random sign flips.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from evalq.stats._arrays import chunk_rows, defined_pairs, defined_values
from evalq.stats.bootstrap import uses_class_counts

DEFAULT_EXACT_MAX_N = 16
DEFAULT_PERMUTATIONS = 10_000
DEFAULT_SEED = 0
MAX_EXACT_N = 30  # 2**30 sign vectors is the most worth enumerating
EXACT = "exact"
MONTE_CARLO = "monte_carlo"


@dataclass(frozen=True)
class PermutationTest:
    """A permutation p-value and what a report must state about it."""

    p_value: float
    mean_difference: float
    n_tasks: int
    method: str  # "exact" (all 2**n sign flips) or "monte_carlo"
    n_permutations: int
    seed: int | None  # None for the exact method
    alternative: str = "two-sided"

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for JSON reports."""
        return asdict(self)


def _tolerance(d: np.ndarray) -> float:
    # Sums of the same numbers in another order may differ by rounding; count those as ties.
    return 1e-9 * max(1.0, float(np.abs(d).sum()))


def _exact_count(d: np.ndarray, threshold: float) -> int:
    n = d.size
    total = 1 << n
    bits = np.arange(n, dtype=np.int64)
    count = 0
    step = chunk_rows(n)
    for start in range(0, total, step):
        codes = np.arange(start, min(total, start + step), dtype=np.int64)
        signs = 1.0 - 2.0 * ((codes[:, None] >> bits) & 1)
        count += int(np.count_nonzero(np.abs(signs @ d) >= threshold))
    return count


def _class_count(sizes: np.ndarray, magnitudes: np.ndarray, threshold: float,
                 n_permutations: int, seed: int) -> int:
    """_random_count for differences in few classes of equal |d|: a flip's sum only depends on
    how many of each class's tasks keep their sign, Binomial(class size, 1/2), drawn directly
    (resamples x classes instead of resamples x tasks; zero differences add nothing)."""
    rng = np.random.default_rng(seed)
    count = 0
    step = chunk_rows(max(1, sizes.size))
    for start in range(0, n_permutations, step):
        kept = rng.binomial(sizes, 0.5, size=(min(step, n_permutations - start), sizes.size))
        count += int(np.count_nonzero(np.abs((2 * kept - sizes) @ magnitudes) >= threshold))
    return count


def _random_count(d: np.ndarray, threshold: float, n_permutations: int, seed: int) -> int:
    n = d.size
    magnitudes, sizes = np.unique(np.abs(d[d != 0]), return_counts=True)
    if uses_class_counts(magnitudes.size, n):
        return _class_count(sizes, magnitudes, threshold, n_permutations, seed)
    rng = np.random.default_rng(seed)
    count = 0
    step = chunk_rows(n)
    for start in range(0, n_permutations, step):
        rows = min(step, n_permutations - start)
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(rows, n))
        count += int(np.count_nonzero(np.abs(signs @ d) >= threshold))
    return count


def paired_permutation_test(differences: ArrayLike | Sequence[float | None], *,
                            exact_max_n: int = DEFAULT_EXACT_MAX_N,
                            n_permutations: int = DEFAULT_PERMUTATIONS,
                            seed: int | None = DEFAULT_SEED) -> PermutationTest | None:
    """Two-sided sign-flip test of mean difference 0; ``None`` entries dropped, ``None`` if no difference.

    Exact (share of all 2**n flips with |T*| >= |T_obs|) when n <= exact_max_n, else
    Monte Carlo with p = (hits + 1) / (n_permutations + 1). All-zero differences give 1.0.
    """
    if isinstance(exact_max_n, bool) or not isinstance(exact_max_n, int) or not 0 <= exact_max_n <= MAX_EXACT_N:
        raise ValueError(f"exact_max_n={exact_max_n!r} must be an integer from 0 to {MAX_EXACT_N}")
    if isinstance(n_permutations, bool) or not isinstance(n_permutations, int) or n_permutations < 1:
        raise ValueError(f"n_permutations={n_permutations!r} must be a positive integer (10,000 by the analysis plan)")
    d = defined_values(differences, "differences")
    n = d.size
    if n == 0:
        return None
    observed = float(d.sum())
    threshold = abs(observed) - _tolerance(d)
    if n <= exact_max_n:
        total = 1 << n
        hits = _exact_count(d, threshold)
        return PermutationTest(p_value=hits / total, mean_difference=observed / n, n_tasks=n,
                               method=EXACT, n_permutations=total, seed=None)
    if seed is None:
        seed = int(np.random.SeedSequence().entropy)  # type: ignore[arg-type]
    hits = _random_count(d, threshold, n_permutations, seed)
    return PermutationTest(p_value=(hits + 1) / (n_permutations + 1), mean_difference=observed / n,
                           n_tasks=n, method=MONTE_CARLO, n_permutations=n_permutations, seed=seed)


def paired_permutation_test_between(treatment: ArrayLike | Sequence[float | None],
                                    control: ArrayLike | Sequence[float | None], *,
                                    exact_max_n: int = DEFAULT_EXACT_MAX_N,
                                    n_permutations: int = DEFAULT_PERMUTATIONS,
                                    seed: int | None = DEFAULT_SEED) -> PermutationTest | None:
    """The same test on two task-aligned value lists (treatment - control); tasks missing either side dropped."""
    return paired_permutation_test(defined_pairs(treatment, control), exact_max_n=exact_max_n,
                                   n_permutations=n_permutations, seed=seed)
