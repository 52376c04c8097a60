"""power_warning thresholds, each on its boundary."""

import pytest

from evalq.stats import bootstrap_ci, ci_half_width, power_warning


def test_adequate_study_does_not_warn():
    assert power_warning(30, 3, {"TPR": 0.15, "RP@k": 0.10, "RFR": 0.05}) == (False, [])


@pytest.mark.parametrize("n_tasks,warn", [(29, True), (30, False), (0, True)])
def test_task_threshold(n_tasks, warn):
    flagged, reasons = power_warning(n_tasks, 5, [0.05])
    assert flagged is warn
    assert any("tasks" in r for r in reasons) is warn


@pytest.mark.parametrize("runs,warn", [(2, True), (3, False), ([5, 5, 2, 5], True), ([3, 4], False), ([], True)])
def test_runs_per_cell_threshold(runs, warn):
    flagged, reasons = power_warning(40, runs, [0.05])
    assert flagged is warn
    assert bool(reasons) is warn


@pytest.mark.parametrize("hw,warn", [(0.150001, True), (0.15, False), (0.3, True)])
def test_half_width_threshold(hw, warn):
    flagged, reasons = power_warning(40, 3, {"TPR": 0.05, "RFR": hw})
    assert flagged is warn
    assert any("RFR" in r for r in reasons) is warn


def test_none_half_width_is_noted_not_flagged():
    flagged, reasons = power_warning(40, 3, {"TPR": None, "RP@k": 0.1})
    assert flagged is False
    assert len(reasons) == 1 and reasons[0].startswith("note:") and "TPR" in reasons[0]


def test_every_reason_is_listed():
    flagged, reasons = power_warning(10, 2, [0.2, None])
    assert flagged is True
    assert len(reasons) == 4


def test_half_width_helpers_agree():
    assert ci_half_width(0.2, 0.5) == pytest.approx(0.15)
    assert ci_half_width(None, 0.5) is None
    ci = bootstrap_ci([0.0, 1.0] * 5, n_resamples=2000)
    assert ci.half_width == pytest.approx(ci_half_width(ci.low, ci.high))
    # ten tasks of 0/1: the CI is wide, and the warning says so
    assert power_warning(10, 3, [ci.half_width])[0] is True
    assert ci.half_width > 0.15
