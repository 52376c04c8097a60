"""The recommended design: protocol floors, ranking by forecast cost then time then trials, Holm's family."""

from __future__ import annotations

import pytest

from evalq.errors import UserError
from evalq.planning import Floors, PlanTarget, make_plan, pilot_from_rows, recommend
from evalq.study.manifest import load_manifest

from planning_pilots import manifest


def row(n, k, power, cost=None, wall=None):
    return {"tasks": n, "repetitions": k, "trials": 2 * n * k, "meets_target": power >= 0.8,
            "forecast_cost_usd": cost, "forecast_wall_seconds": wall}


GRID = [row(325, 1, 0.85, cost=65.0, wall=100.0), row(20, 5, 0.9, cost=20.0, wall=50.0),
        row(40, 3, 0.82, cost=24.0, wall=30.0), row(60, 3, 0.95, cost=36.0, wall=40.0),
        row(30, 5, 0.9, cost=30.0, wall=30.0)]


def test_the_protocol_floors_exclude_one_repetition_and_few_tasks():
    chosen, why, basis = recommend(GRID, Floors(), 0.8)
    assert (chosen["tasks"], chosen["repetitions"]) == (40, 3)  # cheapest with >= 30 tasks, k >= 3
    assert why is None and basis == {"by": "expected cost", "note": None}


def test_lowered_floors_are_explicit():
    chosen, _, _ = recommend(GRID, Floors(min_tasks=10, min_repetitions=3), 0.8)
    assert (chosen["tasks"], chosen["repetitions"]) == (20, 5)
    chosen, _, _ = recommend(GRID, Floors(min_tasks=1, min_repetitions=1), 0.8)
    assert (chosen["tasks"], chosen["repetitions"]) == (20, 5)  # 325 × 1 meets the target too, at 3× the cost
    assert Floors(min_tasks=10).as_dict()["lowered"] is True
    assert Floors().as_dict()["lowered"] is False
    with pytest.raises(UserError, match="--min-repetitions"):
        Floors(min_repetitions=0).check()


def test_a_partial_cost_ranking_says_so():
    _, _, basis = recommend(GRID, Floors(), 0.8, partial_cost=True)
    assert basis["by"] == "expected cost" and "partial" in basis["note"]


def test_without_cost_the_ranking_falls_back_to_wall_time_then_trials():
    no_cost = [dict(r, forecast_cost_usd=None) for r in GRID]
    chosen, _, basis = recommend(no_cost, Floors(), 0.8)
    assert basis["by"] == "wall time" and "cost is unavailable" in basis["note"]
    # 40 × 3 and 30 × 5 both take 30 s: the tie goes to fewer trials (240 against 300)
    assert (chosen["tasks"], chosen["repetitions"]) == (40, 3)
    bare = [dict(r, forecast_cost_usd=None, forecast_wall_seconds=None) for r in GRID]
    chosen, _, basis = recommend(bare, Floors(), 0.8)
    assert basis["by"] == "trials" and "unavailable" in basis["note"]
    assert (chosen["tasks"], chosen["repetitions"]) == (40, 3)


def test_when_only_designs_below_the_floors_qualify_it_says_so():
    below = [row(20, 5, 0.9, cost=1.0), row(40, 3, 0.5, cost=2.0)]
    chosen, why, _ = recommend(below, Floors(), 0.8)
    assert chosen is None
    assert "below the floors" in why and "--min-tasks" in why and "20 tasks × 5" in why


def rows_for(tasks: int, k: int, rate_of):
    return [{"task": f"t{t}", "condition": c, "passed": rep < round(k * rate_of(t, c)),
             "repetition": rep, "cost_usd": 0.1, "duration_seconds": 60.0}
            for t in range(tasks) for c in ("bad", "good") for rep in range(k)]


def test_a_study_with_three_primary_hypotheses_plans_each_at_alpha_over_three(tmp_path,
                                                                               fixture_copies):
    path = manifest(tmp_path, fixture_copies, "main", 3,
                    hypotheses=[("H1", "tpr"), ("H2", "rp_at_k"), ("H3", "rfr")])
    pilot = pilot_from_rows("p", rows_for(30, 4, lambda t, c: (t % 5) / 4))
    plan = make_plan(load_manifest(path), pilot, PlanTarget(effect=0.2), workers=4,
                     task_counts=[30, 60], repetitions=[3], simulations=200, resamples=50)
    target = plan["target"]
    assert target["family_size"] == 3
    assert target["alpha_per_hypothesis"] == pytest.approx(0.05 / 3)
    assert target["metrics"] == ["tpr", "rp_at_k"]
    assert "regression" in target["metrics_not_planned"]["rfr"]  # the pilot has no rater scores
    assert target["effect_scale"] == "probability"
    for r in plan["grid"]:
        assert set(r["metrics"]) == {"tpr", "rp_at_k"}
        assert r["meets_target"] == (min(m["power"] for m in r["metrics"].values()) >= 0.8)
        assert r["power"] == r["metrics"]["tpr"]["power"]
        assert r["forecast_cost_usd"] == pytest.approx(r["trials"] * 0.1)
    assert any("alpha / m" in a for a in plan["assumptions"])


def test_the_plan_never_recommends_k_1_by_default_and_does_when_asked(tmp_path, fixture_copies):
    # a pilot where the baseline passes 1 of 4 runs and the candidate 3 of 4: a large effect,
    # so one repetition on few tasks would reach the target by trials alone
    path = manifest(tmp_path, fixture_copies, "main", 3)
    pilot = pilot_from_rows("p", rows_for(20, 4, lambda t, c: 0.75 if c == "good" else 0.25))
    settings = dict(task_counts=[25, 30, 100], repetitions=[1, 3], simulations=200, resamples=50)
    plan = make_plan(load_manifest(path), pilot, PlanTarget(effect=0.5), **settings)
    chosen = plan["chosen_design"]
    assert (chosen["tasks"], chosen["repetitions"]) == (30, 3)
    assert not any("fewer than" in r for r in plan["power_warning"]["reasons"])
    small = [r for r in plan["grid"] if (r["tasks"], r["repetitions"]) == (25, 1)][0]
    assert small["meets_target"] and not small["within_floors"]
    lowered = make_plan(load_manifest(path), pilot, PlanTarget(effect=0.5),
                        floors=Floors(min_tasks=10, min_repetitions=1), **settings)
    assert (lowered["chosen_design"]["tasks"], lowered["chosen_design"]["repetitions"]) == (25, 1)
    assert lowered["power_warning"]["warn"] is True
    assert any("floors are lowered" in c for c in lowered["pilot_cautions"])
