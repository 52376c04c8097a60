"""pass@k and pass^k for every k at once, and their shared-resample intervals, against a
brute-force computation written differently: math.comb per task per k in a loop, and a
plain-loop percentile bootstrap over the same generator's draws."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest

from evalq.analysis.condition_metrics import pass_k_tables
from evalq.analysis.runs import Run
from evalq.stats.bootstrap import bootstrap_ci_matrix
from evalq.stats.pass_k import pass_k_arrays


def _comb_estimates(n: int, c: int, k: int) -> tuple[float, float] | None:
    if k > n:
        return None
    return 1.0 - math.comb(n - c, k) / math.comb(n, k), math.comb(c, k) / math.comb(n, k)


def test_every_k_of_every_task_equals_math_comb_exactly():
    rng = random.Random(5)
    n = [rng.randint(0, 60) for _ in range(400)] + [0, 1, 1, 60, 60]
    c = [rng.randint(0, m) for m in n[:400]] + [0, 0, 1, 0, 60]
    at, hat = pass_k_arrays(n, c, 64)
    assert at.shape == hat.shape == (405, 64)
    for t, (tn, tc) in enumerate(zip(n, c)):
        for k in range(1, 65):
            expected = _comb_estimates(tn, tc, k)
            if expected is None:
                assert math.isnan(at[t, k - 1]) and math.isnan(hat[t, k - 1])
            else:
                assert (at[t, k - 1], hat[t, k - 1]) == expected  # the same float, bit for bit


def test_large_run_counts_are_exact_ratios():
    at, hat = pass_k_arrays([200, 1000], [50, 999], 300)
    for k in (1, 10, 150, 200):
        assert at[0, k - 1] == 1.0 - float(Fraction(math.comb(150, k), math.comb(200, k)))
        assert hat[0, k - 1] == float(Fraction(math.comb(50, k), math.comb(200, k)))
    assert at[1, 299] == 1.0 and at[1, 0] == hat[1, 0] == 0.999
    assert hat[1, 299] == float(Fraction(math.comb(999, 300), math.comb(1000, 300)))
    assert math.isnan(at[0, 200]) and np.isfinite(at[1]).sum() == 300


@pytest.mark.parametrize("n, c, k", [([3], [4], 2), ([2, 3], [1], 2), ([3], [1], 0),
                                     ([3], [-1], 2), ([3], [1], True)])
def test_bad_counts_are_refused(n, c, k):
    with pytest.raises(ValueError):
        pass_k_arrays(n, c, k)


def _quantile(sorted_values: list[float], q: float) -> float:
    """numpy's default (linear) quantile, by hand."""
    h = (len(sorted_values) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (h - lo) * (sorted_values[hi] - sorted_values[lo])


def _loop_bootstrap(values: list[float], resamples: int, seed: int) -> tuple[float, float]:
    """Percentile interval of the mean, one resample at a time, over the draws
    np.random.default_rng(seed) makes as one (resamples x tasks) matrix."""
    n = len(values)
    draws = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    means = sorted(sum(values[i] for i in row) / n for row in draws.tolist())
    return _quantile(means, 0.025), _quantile(means, 0.975)


def test_matrix_intervals_equal_a_plain_loop_bootstrap_per_column():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 4, size=(23, 5)) / 3
    x[[2, 7], 3] = np.nan  # a column on fewer tasks draws over its own tasks
    x[:, 4] = np.nan  # a column with no value at all
    cis = bootstrap_ci_matrix(x, n_resamples=400, seed=8)
    assert cis[4] is None
    for j in range(4):
        column = [float(v) for v in x[:, j] if not np.isnan(v)]
        low, high = _loop_bootstrap(column, 400, 8)
        assert (cis[j].low, cis[j].high) == pytest.approx((low, high), abs=1e-12)
        assert cis[j].estimate == pytest.approx(sum(column) / len(column), abs=1e-15)
        assert cis[j].n_tasks == len(column)


def test_matrix_refuses_infinity():
    with pytest.raises(ValueError, match="inf"):
        bootstrap_ci_matrix(np.array([[1.0], [np.inf]]))


def test_pass_k_tables_equal_math_comb_and_a_loop_bootstrap_for_every_k():
    """The report's tables, every k and condition, against per-task math.comb in a loop and
    the plain-loop bootstrap over each (k, condition)'s defined tasks."""
    rng = random.Random(9)
    by_condition = {}
    for cond, tasks in (("a", range(14)), ("b", range(2, 16))):  # partly different tasks
        by_condition[cond] = [
            Run(view=None, task=f"t{t:02d}", condition=cond, repetition=rep, order=rep,
                outcome=None, scores={},
                passed=None if rng.random() < 0.1 else rng.random() < 0.2 + t / 20)
            for t in tasks for rep in range(1, 7 - t % 4)]  # tasks with 3 to 6 runs
    k_max, resamples, seed = 6, 300, 4
    tables = pass_k_tables(by_condition, k_max, seed=seed, n_resamples=resamples)
    checked = 0
    for cond, runs in by_condition.items():
        counts: dict[str, list[int]] = {}
        for run in runs:
            entry = counts.setdefault(run.task, [0, 0])
            if run.passed is not None:
                entry[0] += 1
                entry[1] += run.passed
        assert [row["k"] for row in tables[cond]] == list(range(1, k_max + 1))
        for row in tables[cond]:
            k = row["k"]
            estimates = [_comb_estimates(n, c, k) for _, (n, c) in sorted(counts.items())]
            for e, metric in enumerate(("pass_at_k", "pass_hat_k")):
                values = [pair[e] for pair in estimates if pair is not None]
                got = row[metric]
                if not values:
                    assert got["estimate"] is None and got["n_tasks"] == 0
                    assert got["reason"] == f"no task has {k} valid runs"
                    continue
                low, high = _loop_bootstrap(values, resamples, seed)
                assert got["n_tasks"] == len(values) and got["k"] == k
                assert got["estimate"] == pytest.approx(sum(values) / len(values), abs=1e-12)
                assert (got["ci_low"], got["ci_high"]) == pytest.approx((low, high), abs=1e-12)
                checked += 1
    assert checked >= 16


def _loop_class_bootstrap(rows: list[tuple[float, ...]], resamples: int, seed: int
                          ) -> list[tuple[float, float]]:
    """Per column, the percentile interval of the mean where each resample is drawn as the
    count of each class of equal rows (Multinomial(n, class sizes / n)), in plain loops."""
    n = len(rows)
    classes = sorted(set(rows))
    sizes = [rows.count(c) for c in classes]
    counts = np.random.default_rng(seed).multinomial(n, np.asarray(sizes) / n, size=resamples)
    out = []
    for j in range(len(rows[0])):
        means = sorted(sum(int(m) * c[j] for m, c in zip(row, classes)) / n
                       for row in counts.tolist())
        out.append((_quantile(means, 0.025), _quantile(means, 0.975)))
    return out


def test_many_tasks_in_few_classes_equal_a_plain_loop_over_class_counts():
    rng = np.random.default_rng(6)
    x = rng.integers(0, 4, size=(600, 3)) / 3  # 64 classes of rows over 600 tasks
    x[:, 2] = x[:, 0] ** 2
    cis = bootstrap_ci_matrix(x, n_resamples=500, seed=2)
    expected = _loop_class_bootstrap([tuple(map(float, r)) for r in x], 500, 2)
    for ci, (low, high) in zip(cis, expected):
        assert (ci.low, ci.high) == pytest.approx((low, high), abs=1e-12)


def test_pass_k_tables_over_many_tasks_equal_math_comb_and_a_class_count_loop():
    """20,000-task studies at k = 3 fall in few classes: the tables then draw class counts,
    shared by every column defined on the same tasks (both conditions, every k)."""
    rng = random.Random(4)
    by_condition = {cond: [Run(view=None, task=f"t{t:03d}", condition=cond, repetition=rep,
                               order=rep, outcome=None, scores={},
                               passed=rng.random() < (0.4 if cond == "a" else 0.6))
                           for t in range(300) for rep in range(1, 4)]
                    for cond in ("a", "b")}
    tables = pass_k_tables(by_condition, 3, seed=5, n_resamples=400)
    rows = []
    for t in range(300):
        row = []
        for cond in ("a", "b"):
            c = sum(r.passed for r in by_condition[cond] if r.task == f"t{t:03d}")
            row += [_comb_estimates(3, c, k)[0] for k in (1, 2, 3)]
            row += [_comb_estimates(3, c, k)[1] for k in (1, 2, 3)]
        rows.append(tuple(row))
    expected = _loop_class_bootstrap(rows, 400, 5)
    for c_index, cond in enumerate(("a", "b")):
        for k in (1, 2, 3):
            for e, metric in enumerate(("pass_at_k", "pass_hat_k")):
                got = tables[cond][k - 1][metric]
                low, high = expected[6 * c_index + 3 * e + k - 1]
                assert (got["ci_low"], got["ci_high"]) == pytest.approx((low, high), abs=1e-12)
                column = [r[6 * c_index + 3 * e + k - 1] for r in rows]
                assert got["estimate"] == pytest.approx(sum(column) / 300, abs=1e-12)
