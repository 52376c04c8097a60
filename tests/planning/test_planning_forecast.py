"""The forecast against hand computations on small pilots stored in a real results database."""

from __future__ import annotations

import pytest

from evalq.planning import forecast, forecast_lines, load_pilot, run_distributions
from evalq.planning.estimate import pair_estimates

from planning_pilots import insert_pilot


def four_runs(costs, durations=(10.0, 20.0, 30.0, 40.0)):
    """Two tasks × two conditions, one run each, with the given per-run cost and duration."""
    cells = [("a", "base", "incorrect"), ("a", "cand", "correct"),
             ("b", "base", "correct"), ("b", "cand", "correct")]
    return [{"task": t, "condition": c,
             "attempts": [{"outcome": o, "cost": cost, "start": 1000.0, "end": 1000.0 + dur}]}
            for (t, c, o), cost, dur in zip(cells, costs, durations)]


def test_forecast_equals_a_hand_computation(tmp_path):
    engine = insert_pilot(tmp_path / "db.sqlite", "pilot", four_runs([0.40, 0.10, 0.30, 0.20]))
    fc = forecast(run_distributions(load_pilot(engine, "pilot")), trials=10, workers=3)
    # costs sorted 0.1 0.2 0.3 0.4: median 0.25; 90th percentile (linear) at position 2.7
    # -> 0.3 + 0.7 * 0.1 = 0.37; mean 0.25. One attempt per trial, so 10 runs.
    assert fc["runs"] == 10
    cost = fc["cost_usd"]
    assert cost["available"] and cost["reason"] is None and cost["partial"] is False
    assert cost["coverage"]["share"] == 1.0
    assert cost["per_run"] == pytest.approx({"median": 0.25, "p90": 0.37, "mean": 0.25})
    assert cost["total_at_median"] == pytest.approx(2.5)
    assert cost["total_at_p90"] == pytest.approx(3.7)
    assert cost["expected_total"] == pytest.approx(2.5)
    # durations 10 20 30 40: median 25, p90 37; 10 runs on 3 workers go in 4 waves
    wall = fc["wall_seconds"]
    assert wall["waves"] == 4
    assert wall["at_median"] == pytest.approx(100.0)
    assert wall["at_p90"] == pytest.approx(148.0)


def test_retries_are_runs_that_cost_money(tmp_path):
    runs = four_runs([0.1, 0.1, 0.1, 0.1])
    runs[0]["attempts"].insert(0, {"outcome": "infrastructure_failure", "cost": 0.5,
                                   "start": 1000.0, "end": 1002.0})
    engine = insert_pilot(tmp_path / "db.sqlite", "pilot", runs)
    pilot = load_pilot(engine, "pilot")
    fc = forecast(run_distributions(pilot), trials=8, workers=5)
    # 5 attempts over 4 trials: 1.25 per trial, so 8 trials are 10 runs; mean cost 0.9 / 5 = 0.18
    assert fc["attempts_per_trial"] == pytest.approx(1.25)
    assert fc["runs"] == pytest.approx(10.0)
    assert fc["cost_usd"]["expected_total"] == pytest.approx(1.8)
    assert fc["wall_seconds"]["waves"] == 2
    # the retried trial counts its valid outcome, as the report does
    passed = {(r.task, r.condition): r.passed for r in pilot.runs}
    assert passed[("a", "base")] is False


def test_missing_cost_is_unavailable_with_the_reason(tmp_path):
    engine = insert_pilot(tmp_path / "db.sqlite", "pilot", four_runs([None] * 4))
    fc = forecast(run_distributions(load_pilot(engine, "pilot")), trials=10, workers=3)
    cost = fc["cost_usd"]
    assert cost["available"] is False
    assert "none of the pilot's 4 attempts reports a cost" in cost["reason"]
    for key in ("total_at_median", "total_at_p90", "expected_total"):
        assert cost[key] is None
    assert cost["per_run"] == {"median": None, "p90": None, "mean": None}
    text = "\n".join(forecast_lines(fc))
    assert "cost: unavailable: none of the pilot's 4 attempts reports a cost" in text
    assert "$0.00" not in text
    assert fc["wall_seconds"]["available"]  # durations are still known


def test_partial_cost_is_partial_not_available(tmp_path):
    engine = insert_pilot(tmp_path / "db.sqlite", "pilot", four_runs([0.2, None, 0.4, None]))
    fc = forecast(run_distributions(load_pilot(engine, "pilot")), trials=2, workers=None)
    cost = fc["cost_usd"]
    # mean of the two known costs, 0.3, times 2 runs: an extrapolation, so marked partial
    assert cost["expected_total"] == pytest.approx(0.6)
    assert cost["available"] is False and cost["partial"] is True
    assert cost["coverage"] == {"attempts_with_value": 2, "attempts": 4, "share": 0.5}
    assert "partial: 2 of 4 pilot attempts report a cost (50%)" in cost["note"]
    text = "\n".join(forecast_lines(fc))
    assert "cost (partial): $0.60 at the pilot's median run" in text
    assert fc["wall_seconds"]["available"] is False
    assert "--workers" in fc["wall_seconds"]["reason"]
    assert fc["wall_seconds"]["at_median"] is None


def test_estimates_from_a_stored_pilot(tmp_path):
    runs = []
    rates = {"t1": (0, 1), "t2": (1, 2), "t3": (2, 2), "t4": (0, 0)}  # passes of 2 runs: base, cand
    for task, (base, cand) in rates.items():
        for condition, passes in (("base", base), ("cand", cand)):
            for rep in range(2):
                runs.append({"task": task, "condition": condition, "repetition": rep,
                             "attempts": [{"outcome": "correct" if rep < passes else "incorrect"}]})
    engine = insert_pilot(tmp_path / "db.sqlite", "pilot", runs)
    est = pair_estimates(load_pilot(engine, "pilot"), "base", "cand")
    base, cand = [0.0, 0.5, 1.0, 0.0], [0.5, 1.0, 1.0, 0.0]
    diffs = [c - b for b, c in zip(base, cand)]
    import numpy as np

    assert est.baseline.tpr == pytest.approx(0.375)
    assert est.candidate.tpr == pytest.approx(0.625)
    assert est.mean_difference == pytest.approx(0.25)
    assert est.difference_variance == pytest.approx(np.var(diffs, ddof=1))
    assert est.correlation == pytest.approx(np.corrcoef(base, cand)[0, 1])
    # within-task variance: tasks with a 1/2 split have run variance 0.5 (ddof 1), others 0
    assert est.baseline.within_task_variance == pytest.approx(0.5 / 4)
