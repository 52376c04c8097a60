"""Paired comparison glue: alignment by task id, and the same numbers as the underlying functions."""

import numpy as np
import pytest

from evalq.stats import (
    bootstrap_ci,
    compare_paired,
    paired_differences,
    paired_permutation_test,
    task_pass_rate,
    task_rates,
)


def test_differences_align_on_task_ids_not_order():
    treatment = {"b": 1.0, "a": 0.5, "c": None, "d": 0.25}
    control = {"a": 0.0, "b": 0.5, "c": 1.0, "e": 0.0}
    pairs = paired_differences(treatment, control)
    assert pairs.task_ids == ["a", "b"]
    np.testing.assert_allclose(pairs.differences, [0.5, 0.5])
    assert pairs.unpaired == ["c", "d", "e"]


def test_compare_matches_components():
    rng = np.random.default_rng(5)
    wf = {f"t{i:02d}": list(rng.random(3) < 0.7) for i in range(20)}
    sp = {f"t{i:02d}": list(rng.random(3) < 0.5) for i in range(20)}
    t_rates, c_rates = task_rates(wf), task_rates(sp)
    result = compare_paired(t_rates, c_rates, seed=3)
    diffs = np.array([t_rates[k] - c_rates[k] for k in sorted(t_rates)])
    assert result.n_tasks == 20
    # mean of per-task differences equals the difference of the two TPRs (same tasks, equal weights)
    assert result.mean_difference == pytest.approx(task_pass_rate(wf) - task_pass_rate(sp))
    assert tuple(result.ci) == tuple(bootstrap_ci(diffs, seed=3))
    assert result.test.p_value == pytest.approx(paired_permutation_test(diffs, seed=3).p_value)
    assert result.test.method == "monte_carlo"
    d = result.as_dict()
    assert d["ci"]["method"] == "percentile" and d["ci"]["seed"] == 3
    assert set(d["differences"]) == set(t_rates)


def test_no_significance_test_when_asked():
    result = compare_paired({"a": 1.0, "b": 0.0}, {"a": 0.0, "b": 0.0}, significance_test=False)
    assert result.test is None
    assert result.ci is not None
    assert result.as_dict()["test"] is None


def test_no_common_task_gives_none():
    assert compare_paired({"a": 1.0}, {"b": 1.0}) is None
    assert compare_paired({}, {}) is None
