"""Sign-flip permutation test checked against brute-force enumeration and scipy.stats.permutation_test."""

import itertools

import numpy as np
import pytest
from scipy import stats as sps

from evalq.stats import paired_permutation_test, paired_permutation_test_between


def brute_force_p(d):
    """Exact two-sided p: share of all sign assignments with |sum| >= |observed sum|."""
    d = [float(x) for x in d]
    observed = abs(sum(d))
    hits = total = 0
    for signs in itertools.product((1, -1), repeat=len(d)):
        total += 1
        hits += abs(sum(s * x for s, x in zip(signs, d))) >= observed - 1e-9
    return hits / total


def scipy_paired_p(treatment, control, n_resamples, seed=0):
    res = sps.permutation_test(
        (treatment, control), lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples", alternative="two-sided", vectorized=True,
        n_resamples=n_resamples, rng=np.random.default_rng(seed))
    return res.pvalue


def paired_rates(seed, n, k=3):
    rng = np.random.default_rng(seed)
    return rng.binomial(k, 0.65, size=n) / k, rng.binomial(k, 0.45, size=n) / k


@pytest.mark.parametrize("d", [
    [0.5, 1.0, -0.25, 0.75, 0.0],
    [1 / 3, 2 / 3, 1.0, -1 / 3, 1 / 3, 0.0, 2 / 3],
    [0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8, 0.9],
    [1.0, 1.0, 1.0],
])
def test_exact_matches_brute_force(d):
    res = paired_permutation_test(d)
    assert res.method == "exact"
    assert res.n_permutations == 2 ** len(d)
    assert res.p_value == pytest.approx(brute_force_p(d), abs=1e-12)
    assert res.mean_difference == pytest.approx(np.mean(d))


def test_all_positive_three_tasks_has_known_p():
    # only all-plus and all-minus reach |sum| = 3: p = 2 / 8
    assert paired_permutation_test([1.0, 1.0, 1.0]).p_value == pytest.approx(0.25)


@pytest.mark.parametrize("seed,n", [(1, 8), (2, 12), (3, 14)])
def test_exact_matches_scipy_exact_paired_test(seed, n):
    t, c = paired_rates(seed, n)
    ours = paired_permutation_test_between(t, c)
    # n_resamples >= 2**n makes scipy enumerate every within-pair swap exactly
    ref = scipy_paired_p(t, c, n_resamples=2 ** n)
    assert ours.method == "exact"
    assert ours.p_value == pytest.approx(ref, abs=1e-9)


@pytest.mark.parametrize("seed", [4, 5])
def test_monte_carlo_matches_scipy(seed):
    t, c = paired_rates(seed, 40)
    ours = paired_permutation_test_between(t, c, seed=seed)
    ref = scipy_paired_p(t, c, n_resamples=10_000, seed=seed + 50)
    assert ours.method == "monte_carlo"
    assert ours.n_permutations == 10_000
    assert ours.seed == seed
    # two independent 10,000-draw estimates: Monte Carlo error well under 0.02 here
    assert ours.p_value == pytest.approx(ref, abs=0.02)


def test_monte_carlo_approaches_exact_when_forced():
    d = np.random.default_rng(6).normal(0.1, 0.4, size=14)
    exact = paired_permutation_test(d)
    mc = paired_permutation_test(d, exact_max_n=0, n_permutations=100_000, seed=1)
    assert exact.method == "exact" and mc.method == "monte_carlo"
    assert mc.p_value == pytest.approx(exact.p_value, abs=0.01)


def test_monte_carlo_formula_counts_the_observed_arrangement():
    # strong effect: no random flip reaches the observed sum, so p = 1 / (B + 1)
    d = np.full(60, 1.0)
    res = paired_permutation_test(d, n_permutations=999, seed=3)
    assert res.p_value == pytest.approx(1 / 1000)


def test_exact_threshold_is_configurable():
    d = [0.2] * 10
    assert paired_permutation_test(d, exact_max_n=10).method == "exact"
    assert paired_permutation_test(d, exact_max_n=9).method == "monte_carlo"
    with pytest.raises(ValueError, match="exact_max_n"):
        paired_permutation_test(d, exact_max_n=31)


def test_zero_differences_count_in_n_but_not_in_the_statistic():
    with_zeros = paired_permutation_test([0.5, 0.0, 0.5, 0.0])
    assert with_zeros.n_tasks == 4
    assert with_zeros.p_value == pytest.approx(brute_force_p([0.5, 0.0, 0.5, 0.0]))
    assert with_zeros.p_value == pytest.approx(0.5)


@pytest.mark.parametrize("n", [5, 40])
def test_all_zero_differences_give_p_one(n):
    assert paired_permutation_test([0.0] * n).p_value == 1.0


def test_no_differences_give_none():
    assert paired_permutation_test([]) is None
    assert paired_permutation_test([None, None]) is None
    assert paired_permutation_test_between([None, 1.0], [0.0, None]) is None


def test_same_seed_same_p():
    d = np.random.default_rng(8).normal(0.05, 0.3, size=50)
    assert paired_permutation_test(d, seed=4).p_value == paired_permutation_test(d, seed=4).p_value


def test_p_is_symmetric_in_direction():
    d = np.array([0.3, -0.1, 0.6, 0.2, 0.0, 0.4])
    assert paired_permutation_test(d).p_value == pytest.approx(paired_permutation_test(-d).p_value)
