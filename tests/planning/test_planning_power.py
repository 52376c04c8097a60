"""Simulated power and CI width against closed forms and against evalq.stats' own permutation test."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from evalq.planning import pilot_from_rows, pilot_sampler, simulate_design
from evalq.planning.simulate import sign_flip_pvalues
from evalq.stats import paired_permutation_test


def closed_form_power(effect: float, sigma: float, n: int, alpha: float) -> float:
    """Two-sided z-test power for paired differences with known standard deviation sigma."""
    z = norm.ppf(1 - alpha / 2)
    shift = effect * math.sqrt(n) / sigma
    return float(norm.cdf(shift - z) + norm.cdf(-shift - z))


def gaussian(sigma: float):
    """A draw of normal per-task differences shifted by the effect (the planner's draw interface)."""
    return lambda rng, sims, tasks, reps, effect: {"tpr": rng.normal(effect, sigma, size=(sims, tasks))}


def studentized_power(mean: float, sigma: float, n: int, alpha: float) -> float:
    """Normal approximation of the sign-flip test, which compares |sum d| with z * sqrt(sum d^2).

    Under the alternative sum d ~ N(n mean, n sigma^2) and sum d^2 ~ n (sigma^2 + mean^2).
    """
    z = norm.ppf(1 - alpha / 2)
    spread = math.sqrt(n) * sigma
    edge = z * math.sqrt(n * (sigma ** 2 + mean ** 2))
    return float(norm.cdf((n * mean - edge) / spread) + norm.cdf((-n * mean - edge) / spread))


def tolerance(power: float, sims: int) -> float:
    # 3 Monte Carlo standard errors, plus 0.015 for the sign-flip test studentizing by
    # sqrt(sum d^2) where the closed form knows sigma (a 2% shift of z at effect/sigma = 0.2).
    return 3 * math.sqrt(power * (1 - power) / sims) + 0.015


def test_gaussian_differences_match_the_closed_form():
    sims = 2000
    expected = closed_form_power(0.10, 0.5, 200, 0.05)
    assert 0.75 < expected < 0.85
    got = simulate_design(gaussian(0.5), 200, 1, effect=0.10, alpha=0.05, simulations=sims,
                          resamples=200, seed=1)
    assert abs(got.power - expected) <= tolerance(expected, sims), (got.power, expected)


def paired_moments(p: np.ndarray, q: np.ndarray, k: int) -> tuple[float, float]:
    """Mean and standard deviation of one task's TPR difference when tasks are drawn uniformly
    from true rates p (baseline) and q (candidate) and each arm runs k Bernoulli trials."""
    mean = float(np.mean(q - p))
    variance = float(np.var(q - p)) + float(np.mean(p * (1 - p) + q * (1 - q))) / k
    return mean, math.sqrt(variance)


def test_pilot_resampling_matches_the_closed_form():
    # 40 pilot tasks passing 1, 2 or 3 of 4 baseline runs: interior rates, so the normal
    # approximation holds. The closed form takes the sampler's true rates and the model
    # q = min(p + effect, 1); the simulation must agree within Monte Carlo error.
    rows = [{"task": f"t{t}", "condition": "base", "passed": rep < 1 + t % 3, "repetition": rep}
            for t in range(40) for rep in range(4)]
    sampler = pilot_sampler(pilot_from_rows("p", rows), "base")
    p = sampler.baseline_rates
    k, n, sims, effect = 3, 100, 2000, 0.12
    mean, sigma = paired_moments(p, np.minimum(p + effect, 1.0), k)
    expected = studentized_power(mean, sigma, n, 0.05)
    assert 0.6 < expected < 0.95
    got = simulate_design(sampler, n, k, effect=effect, alpha=0.05, simulations=sims,
                          resamples=200, seed=2)
    assert abs(got.power - expected) <= 3 * math.sqrt(expected * (1 - expected) / sims) + 0.01, \
        (got.power, expected)


def test_size_under_the_null_is_alpha():
    sims = 3000
    got = simulate_design(gaussian(0.4), 40, 1, effect=0.0, alpha=0.05, simulations=sims,
                          resamples=200, seed=3)
    assert abs(got.power - 0.05) <= 3 * math.sqrt(0.05 * 0.95 / sims) + 0.005, got.power


def test_constant_differences_give_the_exact_sign_flip_answer():
    # Baseline never passes; the candidate passes always (effect 1). Every difference is 1, so
    # the exact p-value is 2 / 2**n: above 0.05 for n = 5, below for n = 6.
    rows = [{"task": f"t{t}", "condition": "base", "passed": False} for t in range(8)]
    sampler = pilot_sampler(pilot_from_rows("p", rows), "base")
    five = simulate_design(sampler, 5, 2, effect=1.0, alpha=0.05, simulations=200, resamples=100)
    six = simulate_design(sampler, 6, 2, effect=1.0, alpha=0.05, simulations=200, resamples=100)
    assert five.power == 0.0
    assert six.power == 1.0
    assert six.ci_half_width == pytest.approx(0.0, abs=1e-12)


def test_sign_flip_pvalues_equal_the_reports_exact_test():
    rng = np.random.default_rng(5)
    d = np.round(rng.normal(0.1, 0.4, size=(20, 10)), 3)
    ours = sign_flip_pvalues(d, 1000, np.random.default_rng(0))
    theirs = [paired_permutation_test(row, exact_max_n=16).p_value for row in d]
    assert np.allclose(ours, theirs)


def test_sign_flip_pvalues_agree_with_the_reports_monte_carlo_test():
    rng = np.random.default_rng(6)
    d = rng.normal(0.05, 0.3, size=(10, 40))
    ours = sign_flip_pvalues(d, 5000, np.random.default_rng(0))
    theirs = np.array([paired_permutation_test(row, n_permutations=5000, seed=1).p_value
                       for row in d])
    # two independent Monte Carlo estimates of the same p: 4 standard errors apart at most
    assert np.all(np.abs(ours - theirs) <= 4 * np.sqrt(2 * theirs * (1 - theirs) / 5000) + 1e-3)


def test_expected_ci_half_width_matches_the_normal_value():
    sigma, n = 0.5, 100
    got = simulate_design(gaussian(sigma), n, 1, effect=0.0, alpha=0.05, simulations=400,
                          resamples=1000, seed=4)
    expected = norm.ppf(0.975) * sigma / math.sqrt(n)
    assert got.ci_half_width == pytest.approx(expected, rel=0.04)


def test_the_same_seed_repeats_and_another_differs():
    draw = gaussian(0.5)
    a = simulate_design(draw, 30, 2, effect=0.1, alpha=0.05, simulations=300, resamples=100, seed=9)
    b = simulate_design(draw, 30, 2, effect=0.1, alpha=0.05, simulations=300, resamples=100, seed=9)
    c = simulate_design(draw, 30, 2, effect=0.1, alpha=0.05, simulations=300, resamples=100, seed=10)
    assert a == b
    assert (a.power, a.ci_half_width) != (c.power, c.ci_half_width)
