"""pass@k and pass^k for every k = 1 … K and every task at once, as (tasks x K) arrays.

A report shows both estimators for every k up to the study's repetitions, over thousands of
tasks. Each task's estimate depends only on its run count n and correct count c, and tasks
share few distinct (n, c), so each distinct pair's row of K values is computed once, by the
binomials' multiplicative recurrence in exact integers, and then gathered per task. Every
value is the float of the exact ratio, the same number as pass_at_k_estimate's math.comb.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def _rows(n: int, c: int, k_max: int) -> tuple[list[float], list[float]]:
    """(pass@k, pass^k) for k = 1 … k_max of one (n, c); nan where k > n."""
    at, hat = [np.nan] * k_max, [np.nan] * k_max
    all_runs, failing, passing = 1, 1, 1  # C(n, k), C(n - c, k), C(c, k) at k = 0
    for k in range(1, min(n, k_max) + 1):
        all_runs = all_runs * (n - k + 1) // k
        failing = failing * max(n - c - k + 1, 0) // k
        passing = passing * max(c - k + 1, 0) // k
        at[k - 1] = 1.0 - failing / all_runs
        hat[k - 1] = passing / all_runs
    return at, hat


def pass_k_arrays(n: ArrayLike, c: ArrayLike, k_max: int) -> tuple[np.ndarray, np.ndarray]:
    """Per task (rows) and k = 1 … k_max (columns): the unbiased pass@k, 1 - C(n-c, k)/C(n, k),
    and pass^k, C(c, k)/C(n, k). nan where the task has fewer than k valid runs (n = 0: none)."""
    if isinstance(k_max, bool) or not isinstance(k_max, int) or k_max < 1:
        raise ValueError(f"k_max={k_max!r} must be a positive integer (the study's repetitions)")
    n_arr = np.asarray(n, dtype=np.int64).reshape(-1)
    c_arr = np.asarray(c, dtype=np.int64).reshape(-1)
    if n_arr.shape != c_arr.shape:
        raise ValueError(f"n and c differ in length ({n_arr.size} vs {c_arr.size})")
    if np.any(c_arr < 0) or np.any(c_arr > n_arr):
        raise ValueError("every correct count c must lie between 0 and its run count n")
    if n_arr.size == 0:
        return np.empty((0, k_max)), np.empty((0, k_max))
    pairs, which = np.unique(np.stack([n_arr, c_arr], axis=1), axis=0, return_inverse=True)
    rows = [_rows(int(pn), int(pc), k_max) for pn, pc in pairs]
    at = np.asarray([r[0] for r in rows], dtype=float)
    hat = np.asarray([r[1] for r in rows], dtype=float)
    which = which.reshape(-1)
    return at[which], hat[which]
