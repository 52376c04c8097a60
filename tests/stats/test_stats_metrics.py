"""Per-task metrics checked against hand counts and brute-force enumeration of run subsets."""

from itertools import combinations

import pytest

from evalq.stats import (
    mean_of_defined,
    pass_at_k,
    pass_at_k_estimate,
    pass_hat_k,
    pass_hat_k_estimate,
    reliable_pass_at_k,
    success_rate,
    task_all_passed,
    task_pass_rate,
    task_rates,
    task_weighted_rate,
)

RUNS = {
    "a": [True, True, True],        # 3/3
    "b": [True, False, False],      # 1/3
    "c": [False, False, False],     # 0/3
    "d": [1, 1, 0, 1, 1, 1],        # 5/6 (more runs: weighs the same as the others in TPR)
}


def brute_pass_at_k(runs, k):
    """Share of all k-subsets of the runs that contain at least one pass (the estimator's definition)."""
    subsets = list(combinations(runs, k))
    return sum(any(s) for s in subsets) / len(subsets)


def brute_pass_hat_k(runs, k):
    """Share of all k-subsets of the runs in which every run passes."""
    subsets = list(combinations(runs, k))
    return sum(all(s) for s in subsets) / len(subsets)


def test_success_rate_pools_runs():
    assert success_rate(RUNS) == pytest.approx((3 + 1 + 0 + 5) / 15)


def test_tpr_weighs_each_task_equally():
    expected = (1 + 1 / 3 + 0 + 5 / 6) / 4
    assert task_pass_rate(RUNS) == pytest.approx(expected)
    assert task_pass_rate(RUNS) != pytest.approx(success_rate(RUNS))


def test_none_runs_are_dropped_not_counted_as_failures():
    runs = {"a": [True, None, True], "b": [None, None], "c": [False]}
    assert task_rates(runs) == {"a": 1.0, "b": None, "c": 0.0}
    assert task_weighted_rate(runs) == pytest.approx(0.5)
    assert success_rate(runs) == pytest.approx(2 / 3)


def test_nothing_to_compute_returns_none():
    assert success_rate({}) is None
    assert task_pass_rate({}) is None
    assert task_weighted_rate({"a": [None], "b": []}) is None
    assert success_rate({"a": [None, None]}) is None
    assert reliable_pass_at_k({"a": [True, True]}, 3) is None
    assert pass_at_k({"a": [True]}, 2) is None
    assert pass_hat_k({}, 1) is None
    assert mean_of_defined([None, None]) is None


def test_rp_at_k_requires_exactly_k_valid_runs():
    runs = {"a": [True, True, True], "b": [True, True, False], "c": [True, True],
            "d": [True, True, True, True], "e": [True, True, None, True]}
    assert task_all_passed(runs, 3) == {"a": 1.0, "b": 0.0, "c": None, "d": None, "e": 1.0}
    assert reliable_pass_at_k(runs, 3) == pytest.approx(2 / 3)


def test_rp_at_k_all_fail_is_not_reliable_success():
    assert reliable_pass_at_k({"a": [False] * 3, "b": [True] * 3}, 3) == pytest.approx(0.5)


@pytest.mark.parametrize("n", range(1, 8))
def test_pass_at_k_matches_subset_enumeration(n):
    for c in range(n + 1):
        runs = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            assert pass_at_k_estimate(n, c, k) == pytest.approx(brute_pass_at_k(runs, k), abs=1e-12)
            assert pass_hat_k_estimate(n, c, k) == pytest.approx(brute_pass_hat_k(runs, k), abs=1e-12)


def test_pass_at_k_and_pass_hat_k_average_over_tasks():
    expected_at_2 = sum(brute_pass_at_k([bool(r) for r in runs], 2) for runs in RUNS.values()) / 4
    expected_hat_2 = sum(brute_pass_hat_k([bool(r) for r in runs], 2) for runs in RUNS.values()) / 4
    assert pass_at_k(RUNS, 2) == pytest.approx(expected_at_2)
    assert pass_hat_k(RUNS, 2) == pytest.approx(expected_hat_2)
    # k = 1 both reduce to TPR
    assert pass_at_k(RUNS, 1) == pytest.approx(task_pass_rate(RUNS))
    assert pass_hat_k(RUNS, 1) == pytest.approx(task_pass_rate(RUNS))


def test_pass_at_k_excludes_tasks_with_fewer_than_k_runs():
    runs = {"long": [True, False, False, False], "short": [True, True]}
    assert pass_at_k(runs, 3) == pytest.approx(brute_pass_at_k([True, False, False, False], 3))
    assert pass_hat_k(runs, 3) == pytest.approx(0.0)


def test_pass_at_k_large_n_is_finite_and_exact():
    # Big binomials must not overflow: 1 - C(150, 10) / C(200, 10)
    value = pass_at_k_estimate(200, 50, 10)
    prod = 1.0
    for i in range(151, 201):
        prod *= 1.0 - 10 / i
    assert value == pytest.approx(1.0 - prod, rel=1e-12)


@pytest.mark.parametrize("bad", [2, -1, "yes", 0.5, 1.0])
def test_non_boolean_runs_are_refused(bad):
    with pytest.raises(ValueError, match="not a boolean"):
        task_pass_rate({"a": [True, bad]})


@pytest.mark.parametrize("k", [0, -2, True, 1.5])
def test_bad_k_is_refused(k):
    with pytest.raises(ValueError, match="k="):
        pass_at_k({"a": [True]}, k)
