"""Percentile bootstrap checked against scipy.stats.bootstrap and exact enumeration of all resamples."""

import itertools
import time
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats as sps

from evalq.stats import BOOTSTRAP_METHOD, bootstrap_ci, bootstrap_distribution, paired_bootstrap_ci


def rates(seed, n_tasks, k=3, p=0.6):
    rng = np.random.default_rng(seed)
    return rng.binomial(k, p, size=n_tasks) / k


def exact_bootstrap_quantile(values, q):
    """Inverse CDF at q of the exact bootstrap distribution of the mean (all n**n resamples)."""
    n = len(values)
    exact = [Fraction(v).limit_denominator(1000) for v in values]  # 1/3 as a true third
    dist = Counter(sum(exact[i] for i in idx) / n for idx in itertools.product(range(n), repeat=n))
    total = n ** n
    cum = 0
    for value in sorted(dist):
        cum += dist[value]
        if Fraction(cum, total) >= q:
            return float(value), dist, total
    raise AssertionError("unreachable")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_agrees_with_scipy_percentile_bootstrap(seed):
    x = rates(seed, 40)
    ours = bootstrap_ci(x, n_resamples=20_000, seed=seed)
    ref = sps.bootstrap((x,), np.mean, n_resamples=20_000, confidence_level=0.95,
                        method="percentile", rng=np.random.default_rng(seed + 100))
    assert ours.low == pytest.approx(ref.confidence_interval.low, abs=0.01)
    assert ours.high == pytest.approx(ref.confidence_interval.high, abs=0.01)
    assert ours.low < x.mean() < ours.high


def test_agrees_with_scipy_for_median_statistic():
    x = np.random.default_rng(7).normal(0.2, 0.3, size=60)
    ours = bootstrap_ci(x, statistic=np.median, n_resamples=20_000, seed=7)
    ref = sps.bootstrap((x,), np.median, n_resamples=20_000, method="percentile",
                        rng=np.random.default_rng(8))
    assert ours.low == pytest.approx(ref.confidence_interval.low, abs=0.02)
    assert ours.high == pytest.approx(ref.confidence_interval.high, abs=0.02)
    assert ours.estimate == pytest.approx(np.median(x))


@pytest.mark.parametrize("confidence", [0.95, 0.8])
def test_three_tasks_all_27_resamples(confidence):
    values = [0.0, 1 / 3, 1.0]
    alpha = Fraction(1 - Fraction(str(confidence)), 2)
    lo_exact, dist, total = exact_bootstrap_quantile(values, alpha)
    hi_exact, _, _ = exact_bootstrap_quantile(values, 1 - alpha)
    assert total == 27
    sample = bootstrap_distribution(values, n_resamples=200_000, seed=11)
    # every simulated mean is one of the exact support points, with the exact frequency
    support = {float(v): Fraction(c, total) for v, c in dist.items()}
    for v, p in support.items():
        share = np.mean(np.isclose(sample, v))
        assert share == pytest.approx(float(p), abs=0.005)
    if confidence == 0.8:  # 10% and 90% fall inside the distribution, not on its extremes
        assert min(values) < lo_exact < hi_exact < max(values)
    low, high = bootstrap_ci(values, n_resamples=200_000, confidence=confidence, seed=11)
    assert low == pytest.approx(lo_exact, abs=1e-12)
    assert high == pytest.approx(hi_exact, abs=1e-12)


def test_five_tasks_exact_percentiles_away_from_the_edges():
    values = [0.0, 0.5, 1.0, 0.25, 2.0]
    q_lo, q_hi = Fraction(1, 40), Fraction(39, 40)
    lo_exact, dist, total = exact_bootstrap_quantile(values, q_lo)
    hi_exact, _, _ = exact_bootstrap_quantile(values, q_hi)
    # the 2.5% and 97.5% points are not near a jump of the exact CDF, so simulation must land on them
    cdf, cum = [], 0
    for v in sorted(dist):
        cum += dist[v]
        cdf.append(Fraction(cum, total))
    assert min(abs(float(c - q)) for c in cdf for q in (q_lo, q_hi)) > 0.002
    low, high = bootstrap_ci(values, n_resamples=400_000, seed=5)
    assert low == pytest.approx(lo_exact, abs=1e-12)
    assert high == pytest.approx(hi_exact, abs=1e-12)


def test_records_method_seed_and_settings():
    ci = bootstrap_ci([0.0, 1.0, 0.5, 1.0], seed=42, n_resamples=500, confidence=0.9)
    assert (ci.method, ci.seed, ci.n_resamples, ci.confidence, ci.n_tasks) == (BOOTSTRAP_METHOD, 42, 500, 0.9, 4)
    assert ci.method == "percentile"
    assert ci.as_dict()["seed"] == 42
    assert ci.half_width == pytest.approx((ci.high - ci.low) / 2)
    low, high = ci
    assert (low, high) == (ci.low, ci.high)


def test_same_seed_same_interval_other_seed_differs():
    x = rates(3, 50)  # four classes of values: intervals of two seeds may well coincide
    assert tuple(bootstrap_ci(x, seed=9)) == tuple(bootstrap_ci(x, seed=9))
    assert np.array_equal(bootstrap_distribution(x, seed=9), bootstrap_distribution(x, seed=9))
    assert not np.array_equal(bootstrap_distribution(x, seed=9),
                              bootstrap_distribution(x, seed=10))


def test_seed_none_draws_and_records_a_seed():
    x = rates(4, 30)
    ci = bootstrap_ci(x, seed=None, n_resamples=2000)
    assert isinstance(ci.seed, int)
    assert tuple(bootstrap_ci(x, seed=ci.seed, n_resamples=2000)) == tuple(ci)


def test_chunking_does_not_change_the_result(monkeypatch):
    from evalq.stats import _arrays

    x = rates(5, 200)
    whole = bootstrap_distribution(x, n_resamples=3000, seed=1)
    monkeypatch.setattr(_arrays, "CHUNK_ELEMENTS", 200 * 7)  # 7 rows per chunk
    chunked = bootstrap_distribution(x, n_resamples=3000, seed=1)
    assert whole.shape == chunked.shape == (3000,)
    # same generator stream consumed in row order, so the draws are identical
    np.testing.assert_allclose(whole, chunked)


def test_none_values_dropped_and_empty_gives_none():
    assert bootstrap_ci([]) is None
    assert bootstrap_ci([None, None]) is None
    with_none = bootstrap_ci([1.0, None, 0.0, 0.5], seed=3)
    without = bootstrap_ci([1.0, 0.0, 0.5], seed=3)
    assert with_none.n_tasks == 3
    assert tuple(with_none) == tuple(without)


def test_nan_is_refused():
    with pytest.raises(ValueError, match="None for a missing"):
        bootstrap_ci([0.5, float("nan")])


@pytest.mark.parametrize("kwargs", [{"n_resamples": 0}, {"confidence": 1.0}, {"confidence": 0}])
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(ValueError):
        bootstrap_ci([0.1, 0.2], **kwargs)


def test_single_task_gives_a_point_interval():
    ci = bootstrap_ci([0.7])
    assert (ci.low, ci.high) == pytest.approx((0.7, 0.7))


def test_paired_is_bootstrap_of_differences():
    a = rates(21, 45)
    b = rates(22, 45, p=0.4)
    paired = paired_bootstrap_ci(a, b, seed=13)
    direct = bootstrap_ci(a - b, seed=13)
    assert tuple(paired) == tuple(direct)
    assert paired.estimate == pytest.approx(np.mean(a - b))
    ref = sps.bootstrap((a - b,), np.mean, n_resamples=10_000, method="percentile",
                        rng=np.random.default_rng(99))
    assert paired.low == pytest.approx(ref.confidence_interval.low, abs=0.015)
    assert paired.high == pytest.approx(ref.confidence_interval.high, abs=0.015)


def test_paired_drops_tasks_missing_either_side():
    ci = paired_bootstrap_ci([1.0, None, 0.5, 1.0], [0.0, 1.0, None, 0.5], seed=2)
    assert ci.n_tasks == 2
    assert ci.estimate == pytest.approx(0.75)
    with pytest.raises(ValueError, match="length"):
        paired_bootstrap_ci([1.0], [1.0, 0.0])
    assert paired_bootstrap_ci([None], [1.0]) is None


def test_ten_thousand_resamples_over_a_thousand_tasks_is_fast():
    x = rates(0, 1000)
    bootstrap_ci(x, n_resamples=100)  # warm-up
    start = time.perf_counter()
    ci = bootstrap_ci(x, n_resamples=10_000)
    elapsed = time.perf_counter() - start
    assert ci.n_tasks == 1000
    assert elapsed < 1.0, f"took {elapsed:.2f}s"


def test_bootstrap_ci_columns_equals_bootstrap_ci_per_column():
    from evalq.stats.bootstrap import bootstrap_ci_columns

    rng = np.random.default_rng(12)
    full = [list(rng.random(300)) for _ in range(4)]
    holes = [[None if i % 7 == 0 else v for i, v in enumerate(col)] for col in full[:2]]
    columns = full + holes + [[None] * 300]
    got = bootstrap_ci_columns(columns, n_resamples=5_000, seed=4)
    for column, ci in zip(columns, got):
        ref = bootstrap_ci(column, n_resamples=5_000, seed=4)
        if ref is None:
            assert ci is None
            continue
        assert (ci.low, ci.high, ci.estimate, ci.n_tasks) == pytest.approx(
            (ref.low, ref.high, ref.estimate, ref.n_tasks), abs=1e-12)


def test_bootstrap_ci_columns_on_tasks_that_all_agree_needs_no_draw():
    """A column group whose tasks all have one value (pass^k = 0 at a high k) is answered
    without drawing: what counting each task in each resample gives, and bootstrap_ci's
    interval, to rounding."""
    from evalq.stats.bootstrap import _mean_distributions, bootstrap_ci_columns, resample_chunks

    for value in (0.0, 1.0, 0.3, 1 / 3):
        x = np.full((999, 1), value)
        counted = np.concatenate([
            np.bincount((idx + 999 * np.arange(idx.shape[0])[:, None]).ravel(),
                        minlength=idx.size).reshape(idx.shape[0], 999) @ x / 999
            for idx in resample_chunks(9, 999, 2_000)])
        assert np.allclose(_mean_distributions(x, 2_000, 9), counted, rtol=0, atol=1e-12)
        columns = [[value] * 999, [None if i % 3 == 0 else value for i in range(999)]]
        for column, ci in zip(columns, bootstrap_ci_columns(columns, n_resamples=2_000, seed=9)):
            ref = bootstrap_ci(column, n_resamples=2_000, seed=9)
            assert (ci.low, ci.high, ci.estimate, ci.n_tasks) == pytest.approx(
                (ref.low, ref.high, ref.estimate, ref.n_tasks), abs=1e-12)
