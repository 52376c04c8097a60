"""The report's session block as a unit: rates per track and condition against a computation of
their own, nulls apart, and runs of a checked task that kept no record still counted.

Runs are plain records with the fields the block reads (a test double for the report's Run
rows, whose loading from a study is covered end to end in test_first_check_study.py).
"""

from __future__ import annotations

from types import SimpleNamespace

from evalq.report.session_checks import session_block


def run(task: str, condition: str, rep: int, outcome: str):
    trial = f"s/{task}/{condition}/r{rep}"
    attempt = SimpleNamespace(attempt=1, outcome=outcome)
    view = SimpleNamespace(trial_id=trial, counted=attempt, attempts=[attempt])
    return SimpleNamespace(task=task, condition=condition, outcome=outcome, view=view)


def session(first, eventual, checked=True, cost=None):
    checks = {"first_check_at": 1.0 if checked else None, "repair_cost": cost}
    return {"first_check_result": first, "first_check_reason": None,
            "eventual_result": eventual, "session_checks": checks}


def test_rates_are_means_over_tasks_with_nulls_apart():
    plan = {  # (task, condition, rep): (first, outcome, ran the check)
        ("a", "x", 1): ("incorrect", "correct", True), ("a", "x", 2): ("correct", "correct", True),
        ("a", "x", 3): (None, "correct", False),
        ("b", "x", 1): ("incorrect", "incorrect", True), ("b", "x", 2): ("incorrect", "correct",
                                                                         True),
        ("c", "x", 1): (None, "timed_out", False),
        ("a", "y", 1): ("correct", "correct", True),
    }
    runs, stored = [], {}
    for (task, cond, rep), (first, outcome, ran) in plan.items():
        r = run(task, cond, rep, outcome)
        runs.append(r)
        cost = {"repair_check_runs": rep, "elapsed_seconds": 2.0 * rep,
                "commands_after_first_check": None,
                "unavailable": {"commands_after_first_check": "no tool calls"}} if ran else None
        stored[(r.view.trial_id, 1)] = session(first, outcome, ran, cost)
    # a run of a checked task that kept no record (its worker refused its output): counted
    lost = run("b", "x", 3, "incorrect")
    runs.append(lost)
    labels = {"a": {"track": "t1"}, "b": {"track": "t1"}, "c": {"track": "t2"}}
    block = session_block(runs, stored, labels, ["x", "y"], seed=1, n_resamples=2000)

    x = block["t1"]["x"]
    # first check, per task: a 1/2 (the null apart), b 0/2; mean over tasks 0.25
    assert x["first_check"]["estimate"] == (1 / 2 + 0 / 2) / 2
    assert x["first_check"]["runs"] == {"passed": 1, "failed": 3, "unresolved": 2}
    # eventual, per task: a 3/3, b 1/3; mean 2/3
    assert abs(x["eventual"]["estimate"] - (1 + 1 / 3) / 2) < 1e-12
    assert x["eventual"]["ci_low"] <= x["eventual"]["estimate"] <= x["eventual"]["ci_high"]
    assert (x["runs"], x["never_checked"], x["first_check_ungraded"]) == (6, 1, 1)
    assert (x["repaired"], x["lost_after_first_check"]) == (2, 0)
    cost = x["repair_cost"]
    assert cost["runs_with_first_check"] == 4
    assert cost["repair_check_runs"]["median"] == 1.5 and cost["repair_check_runs"]["n"] == 4
    assert cost["commands_after_first_check"]["median"] is None
    assert cost["commands_after_first_check"]["reason"] == "no tool calls"
    assert cost["human_interventions"]["unavailable"] == 4
    # the other track is never pooled in; a condition with no run there says so
    t2 = block["t2"]
    assert t2["x"]["first_check"]["estimate"] is None and t2["x"]["eventual"]["estimate"] == 0.0
    assert t2["y"]["runs"] == 0 and t2["y"]["eventual"]["reason"] == "no run of this condition"
    assert block["t1"]["y"]["first_check"]["estimate"] == 1.0


def test_no_visible_check_anywhere_gives_an_empty_block():
    assert session_block([run("a", "x", 1, "correct")], {}, {}, ["x"], seed=1,
                         n_resamples=100) == {}
