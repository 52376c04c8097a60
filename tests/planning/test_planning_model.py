"""The planning model against independent computations: noise shrinkage, the bounded effect, Holm's level.

Closed forms: a one-way random-effects ANOVA for the task variance component, and a normal
approximation of the paired sign-flip test on per-task differences with known true rates.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from evalq.planning import pilot_from_rows, pilot_sampler, shrink_rates, simulate_design
from evalq.stats import holm_reject


def studentized_power(mean: float, sigma: float, n: int, alpha: float) -> float:
    """Normal approximation of the two-sided sign-flip test: |sum d| against z * sqrt(sum d^2)."""
    z = norm.ppf(1 - alpha / 2)
    spread = math.sqrt(n) * sigma
    edge = z * math.sqrt(n * (sigma ** 2 + mean ** 2))
    return float(norm.cdf((n * mean - edge) / spread) + norm.cdf((-n * mean - edge) / spread))


def within_mc(got: float, expected: float, sims: int, slack: float = 0.015) -> bool:
    return abs(got - expected) <= 3 * math.sqrt(max(expected * (1 - expected), 1e-4) / sims) + slack


def pilot_rows(passes: list[int], k: int, condition: str = "base", regression_free=None):
    """Task t passes its first passes[t] of k runs; regression_free(t, rep) gives RFR if set."""
    return [{"task": f"t{t:03d}", "condition": condition, "passed": rep < n, "repetition": rep,
             "regression_free": None if regression_free is None else regression_free(t, rep)}
            for t, n in enumerate(passes) for rep in range(k)]


def anova_task_component(outcomes: np.ndarray) -> float:
    """Between-task variance component of a balanced tasks × k table of 0/1 outcomes, from the
    one-way random-effects ANOVA sums of squares: (MSB - MSW) / k, floored at 0."""
    tasks, k = outcomes.shape
    grand = outcomes.mean()
    msb = k * ((outcomes.mean(axis=1) - grand) ** 2).sum() / (tasks - 1)
    msw = ((outcomes - outcomes.mean(axis=1, keepdims=True)) ** 2).sum() / (tasks * (k - 1))
    return max(0.0, (msb - msw) / k)


def test_shrinkage_equals_the_anova_variance_component():
    rng = np.random.default_rng(11)
    outcomes = (rng.random((50, 4)) < rng.beta(2, 3, size=(50, 1))).astype(float)
    rates, how = shrink_rates(outcomes.mean(axis=1), np.full(50, 4))
    assert how.true_variance == pytest.approx(anova_task_component(outcomes))
    assert how.observed_variance == pytest.approx(np.var(outcomes.mean(axis=1), ddof=1))
    # the shrunk rates keep the mean and the order, stay in [0, 1], and resample with the
    # estimated true spread
    assert rates.mean() == pytest.approx(outcomes.mean())
    assert np.all((rates >= 0) & (rates <= 1))
    assert np.all(np.diff(rates[np.argsort(outcomes.mean(axis=1), kind="stable")]) >= -1e-12)
    assert np.var(rates) == pytest.approx(how.true_variance)


def test_a_pilot_without_task_spread_shrinks_to_its_mean():
    # every task's true rate is 0.5: observed rates differ only by run noise
    rng = np.random.default_rng(12)
    outcomes = (rng.random((200, 3)) < 0.5).astype(float)
    rates, how = shrink_rates(outcomes.mean(axis=1), np.full(200, 3))
    assert how.true_variance == pytest.approx(anova_task_component(outcomes))
    assert np.var(rates) <= 0.01 < np.var(outcomes.mean(axis=1))


def test_shrinkage_recovers_a_known_task_spread():
    # true rates Beta(2, 2): variance 1/20; 4 runs add p(1-p)/4 of noise on average (0.05)
    rng = np.random.default_rng(13)
    true = rng.beta(2, 2, size=800)
    outcomes = (rng.random((800, 4)) < true[:, None]).astype(float)
    observed = outcomes.mean(axis=1)
    rates, how = shrink_rates(observed, np.full(800, 4))
    noise = float(np.mean(true * (1 - true) / 4))
    assert how.noise_variance == pytest.approx(noise, abs=0.005)
    assert how.true_variance == pytest.approx(np.var(true), abs=0.01)
    assert np.var(observed) > np.var(true) + 0.5 * noise  # what the old plan took as the spread


def test_one_run_per_task_cannot_be_shrunk_and_says_so():
    rates, how = shrink_rates(np.array([0.0, 1.0, 1.0, 0.0]), np.ones(4))
    assert list(rates) == [0.0, 1.0, 1.0, 0.0] and how.factor == 1.0
    assert how.noise_variance is None and how.true_variance is None
    assert "one valid run" in how.note


def test_the_candidate_probability_is_bounded_at_one():
    # baseline 0.95 everywhere (19 of 20 runs): the effect +0.10 can only add 0.05
    sampler = pilot_sampler(pilot_from_rows("p", pilot_rows([19] * 30, 20)), "base",
                            ("tpr", "rp_at_k"))
    assert np.allclose(sampler.baseline_rates, 0.95)
    draws = sampler(np.random.default_rng(0), 4000, 30, 3, 0.10)
    tpr = draws["tpr"]
    assert tpr.min() >= -1.0 and tpr.max() <= 1.0
    # closed form: E[d] = min(p + e, 1) - p = 0.05, sd of the 120,000 draws' mean is tiny
    assert tpr.mean() == pytest.approx(0.05, abs=0.003)
    # RP@3: E = q^3 - p^3 with q = 1
    assert draws["rp_at_k"].mean() == pytest.approx(1 - 0.95 ** 3, abs=0.004)


def spread_pilot():
    """60 tasks passing 0..4 of 4 baseline runs in a fixed pattern: interior rates with spread."""
    return pilot_from_rows("p", pilot_rows([t % 5 for t in range(60)], 4))


def moments(p: np.ndarray, q: np.ndarray, k: int, metric: str) -> tuple[float, float]:
    """Mean and sd of one task's difference, tasks drawn uniformly, each arm k Bernoulli runs."""
    if metric == "rp_at_k":
        a, b = q ** k, p ** k  # chance all k runs pass; the arms are independent given the task
        mean = float(np.mean(a - b))
        second = float(np.mean(a + b - 2 * a * b))
        return mean, math.sqrt(second - mean ** 2)
    mean = float(np.mean(q - p))
    return mean, math.sqrt(float(np.var(q - p)) + float(np.mean(p * (1 - p) + q * (1 - q))) / k)


@pytest.mark.parametrize("metric, n, k, effect", [("tpr", 80, 3, 0.12), ("rp_at_k", 100, 2, 0.15)])
def test_power_matches_the_closed_form_at_holms_level(metric, n, k, effect):
    sampler = pilot_sampler(spread_pilot(), "base", (metric,))
    p = sampler.baseline_rates
    mean, sigma = moments(p, np.clip(p + effect, 0, 1), k, metric)
    sims, alpha = 2000, 0.05 / 3
    expected = studentized_power(mean, sigma, n, alpha)
    assert 0.4 < expected < 0.95, expected
    got = simulate_design(sampler, n, k, effect=effect, alpha=alpha, simulations=sims,
                          permutations=1000, resamples=100, seed=7)
    assert within_mc(got.metrics[metric].power, expected, sims), (got.metrics[metric], expected)
    # the unadjusted level would promise visibly more
    assert studentized_power(mean, sigma, n, 0.05) > expected + 0.08


def test_size_under_no_effect_is_the_planned_level():
    sampler = pilot_sampler(spread_pilot(), "base", ("tpr",))
    sims = 3000
    got = simulate_design(sampler, 60, 3, effect=0.0, alpha=0.05, simulations=sims,
                          permutations=1000, resamples=50, seed=8)
    assert abs(got.power - 0.05) <= 3 * math.sqrt(0.05 * 0.95 / sims) + 0.005, got.power


def test_power_is_monotone_in_tasks_and_repetitions():
    sampler = pilot_sampler(spread_pilot(), "base", ("tpr",))
    tasks, reps, sims = (7, 10, 20, 30, 50, 75), (1, 2, 3, 5), 800
    power = {(n, k): simulate_design(sampler, n, k, effect=0.15, alpha=0.05, simulations=sims,
                                     resamples=50, seed=3).power
             for n in tasks for k in reps}
    slack = 3 * math.sqrt(2 * 0.25 / sims)  # two independent estimates, at worst p = 0.5
    for k in reps:
        for small, large in zip(tasks, tasks[1:]):
            assert power[(large, k)] >= power[(small, k)] - slack, (k, small, large, power)
    for n in tasks:
        for small, large in zip(reps, reps[1:]):
            assert power[(n, large)] >= power[(n, small)] - slack, (n, small, large, power)
    # the old additive model's inversion (7 × 1 above 20 × 1) is gone, and by a margin
    assert power[(30, 1)] > power[(7, 1)] + slack and power[(20, 3)] > power[(7, 3)] + slack
    assert power[(75, 5)] > 0.9


def test_a_p_value_below_alpha_over_m_is_rejected_by_holm_whatever_the_others():
    rng = np.random.default_rng(4)
    for m in (2, 3, 5):
        for _ in range(200):
            others = list(rng.random(m - 1))
            p = float(rng.uniform(0, 0.05 / m))
            assert holm_reject([p, *others], 0.05)[0] is True
    # and alpha / m is the largest such level: just above it, other p-values can block it
    assert holm_reject([0.05 / 3 + 1e-6, 0.5, 0.9], 0.05)[0] is False


def test_rfr_is_planned_when_the_pilot_has_it():
    with_rfr = pilot_rows([t % 5 for t in range(40)], 4, regression_free=lambda t, r: r < 3)
    sampler = pilot_sampler(pilot_from_rows("p", with_rfr), "base", ("tpr", "rfr"))
    assert sampler.metrics == ("tpr", "rfr")
    assert np.allclose(sampler.rates["regression_free"], 0.75)  # no task spread: all at the mean
    draws = sampler(np.random.default_rng(1), 3000, 40, 3, 0.10)
    assert draws["rfr"].mean() == pytest.approx(0.10, abs=0.004)
    without = pilot_sampler(pilot_from_rows("p", pilot_rows([2] * 10, 4)), "base", ("tpr", "rfr"))
    assert without.metrics == ("tpr",)


def tasks_needed(p: np.ndarray, effect: float, k: int, alpha: float = 0.05, power: float = 0.8):
    """Closed-form paired z-test sample size for true baseline rates p under the bounded effect."""
    q = np.clip(p + effect, 0, 1)
    variance = float(np.var(q - p)) + float(np.mean(p * (1 - p) + q * (1 - q))) / k
    return (norm.ppf(1 - alpha / 2) + norm.ppf(power)) ** 2 * variance / float(np.mean(q - p)) ** 2


def test_tasks_needed_from_a_noisy_pilot_match_the_truth():
    # A pilot of 300 tasks × 3 runs drawn from true rates Beta(2, 2). Planned from the shrunk
    # rates, the tasks needed are within 10% of those the true rates need; read as true rates,
    # the old model's per-task differences (observed candidate - baseline, plus the effect)
    # needed about 60% more.
    rng = np.random.default_rng(21)
    true = rng.beta(2, 2, size=300)
    base = rng.binomial(3, true)
    cand = rng.binomial(3, true)
    rows = [{"task": f"t{t}", "condition": c, "passed": rep < n, "repetition": rep}
            for t in range(300) for c, counts in (("base", base), ("cand", cand))
            for n in (counts[t],) for rep in range(3)]
    sampler = pilot_sampler(pilot_from_rows("p", rows), "base")
    truth = tasks_needed(rng.beta(2, 2, size=400_000), 0.1, 3)
    assert tasks_needed(sampler.baseline_rates, 0.1, 3) == pytest.approx(truth, rel=0.10)
    b, c = base / 3, cand / 3
    old_variance = np.var(c - b) + np.mean(b * (1 - b) + c * (1 - c)) / 3
    old = (norm.ppf(0.975) + norm.ppf(0.8)) ** 2 * old_variance / 0.1 ** 2
    assert old > 1.4 * truth
