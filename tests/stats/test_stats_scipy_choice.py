"""Why evalq keeps its numpy bootstrap and sign-flip test beside scipy.stats (issue 18): they give
the same numbers as scipy.stats.bootstrap / permutation_test, and bench/ measures them faster.

Same seed, same draws: where tasks are resampled by index, the percentile bootstrap equals
scipy's to the last bit; where few classes of values make class counts the cheaper draw, it is
the same bootstrap distribution drawn another way, and agrees with scipy to Monte Carlo error.
The exact sign-flip p-value equals scipy's exact enumeration, so nothing is lost in exactness.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from evalq.stats import bootstrap_ci, paired_permutation_test


@pytest.mark.parametrize("n, seed, discrete", [(5, 0, True), (30, 1, True), (200, 2, False),
                                              (1000, 3, False)])
def test_bootstrap_equals_scipy_percentile_with_the_same_seed(n, seed, discrete):
    rng = np.random.default_rng(40 + seed)
    x = ((rng.binomial(5, 0.5, size=n) - rng.binomial(5, 0.5, size=n)) / 5 if discrete
         else rng.normal(0.1, 0.3, size=n))  # classes as many as tasks: resampled by index
    ours = bootstrap_ci(x, n_resamples=10_000, seed=seed)
    ref = sps.bootstrap((x,), np.mean, n_resamples=10_000, method="percentile",
                        vectorized=True, rng=np.random.default_rng(seed))
    assert (ours.low, ours.high) == (ref.confidence_interval.low, ref.confidence_interval.high)


@pytest.mark.parametrize("n, seed", [(200, 2), (1000, 3), (20_000, 4)])
def test_bootstrap_over_few_classes_agrees_with_scipy(n, seed):
    rng = np.random.default_rng(40 + seed)
    x = (rng.binomial(5, 0.5, size=n) - rng.binomial(5, 0.5, size=n)) / 5  # 11 classes
    ours = bootstrap_ci(x, n_resamples=20_000, seed=seed)
    ref = sps.bootstrap((x,), np.mean, n_resamples=20_000, method="percentile",
                        vectorized=True, rng=np.random.default_rng(seed + 50))
    width = ref.confidence_interval.high - ref.confidence_interval.low
    assert ours.low == pytest.approx(ref.confidence_interval.low, abs=0.03 * width)
    assert ours.high == pytest.approx(ref.confidence_interval.high, abs=0.03 * width)


@pytest.mark.parametrize("n", [2, 4, 9, 16])
def test_exact_sign_flip_equals_scipy_exact_enumeration(n):
    rng = np.random.default_rng(n)
    d = (rng.integers(0, 4, size=n) - rng.integers(0, 4, size=n)) / 3  # many ties
    ours = paired_permutation_test(d)
    ref = sps.permutation_test((d,), lambda v, axis: np.mean(v, axis=axis),
                               permutation_type="samples", n_resamples=np.inf,
                               vectorized=True, alternative="two-sided")
    assert ours.method == "exact"
    assert ours.p_value == pytest.approx(ref.pvalue, abs=1e-12)


def test_one_task_gets_a_p_value_where_scipy_refuses():
    assert paired_permutation_test([0.5]).p_value == 1.0  # both sign flips are as extreme
    with pytest.raises(ValueError):
        sps.permutation_test(([0.5],), lambda v, axis: np.mean(v, axis=axis),
                             permutation_type="samples", n_resamples=np.inf, vectorized=True)
