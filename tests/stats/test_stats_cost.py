"""Cost per successful task: unavailable (never 0) without a correct run or with incomplete accounting."""

import pytest

from evalq.stats import cost_per_success, split_cost_accounting


def test_total_cost_of_all_attempts_over_correct_runs():
    costs = [0.5, 1.25, 0.25, 2.0]
    correct = [True, False, None, True]  # None: e.g. an infrastructure failure, still paid for
    value, reason = cost_per_success(costs, correct)
    assert reason is None
    assert value == pytest.approx(4.0 / 2)


def test_no_correct_run_is_unavailable():
    value, reason = cost_per_success([1.0, 2.0], [False, None])
    assert value is None
    assert "no correct run" in reason


def test_incomplete_accounting_is_unavailable():
    value, reason = cost_per_success([1.0, None, 2.0], [True, True, False])
    assert value is None
    assert "1 of 3" in reason


def test_both_problems_are_reported():
    value, reason = cost_per_success([None], [False])
    assert value is None
    assert "incomplete" in reason and "no correct run" in reason


def test_no_attempts():
    assert cost_per_success([], []) == (None, "no attempts")


def test_zero_cost_is_a_real_value_not_missing():
    assert cost_per_success([0.0, 0.0], [True, False]).value == 0.0


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_bad_costs_are_refused(bad):
    with pytest.raises(ValueError, match="cost of run #1"):
        cost_per_success([1.0, bad], [True, True])


def test_length_mismatch_is_refused():
    with pytest.raises(ValueError, match="length"):
        cost_per_success([1.0], [True, False])


def test_split_keeps_complete_runs_only():
    costs = [0.5, None, 1.5, None, 2.0]
    correct = [True, True, False, False, True]
    acc = split_cost_accounting(costs, correct)
    assert acc.total_cost == pytest.approx(4.0)
    assert (acc.n_complete, acc.n_incomplete) == (3, 2)
    assert acc.incomplete == [1, 3]
    assert acc.n_correct == 2
    # over complete runs the cost per success is well defined
    sub = [i for i in range(5) if i not in acc.incomplete]
    assert cost_per_success([costs[i] for i in sub], [correct[i] for i in sub]).value == pytest.approx(2.0)


def test_split_without_complete_runs_has_no_total():
    acc = split_cost_accounting([None, None])
    assert acc.total_cost is None
    assert acc.n_correct is None
    assert (acc.n_complete, acc.n_incomplete) == (0, 2)
