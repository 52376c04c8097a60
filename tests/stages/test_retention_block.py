"""The retention figures on hand-made runs: what counts as retained, lost and unavailable,
and that tracks are never pooled (checked against counts made here)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from evalq.analysis.runs import _run_of
from evalq.report.attempts import TrialView
from evalq.report.stages import stages_block
from evalq.results.store import AttemptRow
from evalq.stats.bootstrap import bootstrap_ci


def _run(task: str, condition: str, rep: int, outcome: str | None):
    attempts = [AttemptRow(trial_id=f"s/{task}/{condition}/r{rep}", study_id="s", attempt=1,
                           outcome=outcome)]
    return _run_of(TrialView(trial_id=f"s/{task}/{condition}/r{rep}", fixture_id=task,
                             condition=condition, repetition=rep, order_index=0,
                             attempts=attempts))


def _entry(trial: str, outcome: str, track: str | None):
    return {"baseline_trial": trial, "baseline_attempt": 1, "baseline_condition":
            trial.split("/")[2], "baseline_outcome": outcome, "baseline_track": track,
            "workspace_digest": "sha256:" + "1" * 64}


def test_retention_counts_and_never_pools_tracks():
    runs_of_stage = {
        "a.skill.r1": _entry("b/a/skill/r1", "correct", "directed-integration"),
        "b.skill.r1": _entry("b/b/skill/r1", "correct", "directed-integration"),
        "c.skill.r1": _entry("b/c/skill/r1", "correct", "free-selection"),
        "d.skill.r1": _entry("b/d/skill/r1", "incorrect", "free-selection"),
        "e.none.r1": _entry("b/e/none/r1", "correct", None),
    }
    stage = {"baseline_study": "b", "baseline_lock": "sha256:" + "0" * 64, "take": "all",
             "agent": True, "change": None, "baseline_version": "1", "target_version": "2",
             "runs": runs_of_stage}
    runs = [_run("a.skill.r1", "fixer", 1, "correct"), _run("a.skill.r1", "fixer", 2,
                                                             "incorrect"),
            _run("b.skill.r1", "fixer", 1, "timed_out"),
            _run("b.skill.r1", "fixer", 2, "grading_failure"),
            _run("c.skill.r1", "fixer", 1, None), _run("c.skill.r1", "fixer", 2, None),
            _run("d.skill.r1", "fixer", 1, "correct"), _run("d.skill.r1", "fixer", 2,
                                                             "incorrect"),
            _run("e.none.r1", "fixer", 1, "correct")]
    study = SimpleNamespace(lock={"stage": stage}, manifest={"seed": 5})
    block = stages_block(study, runs, n_resamples=2000)
    assert sorted(block["retention"]) == ["directed-integration", "free-selection",
                                          "untracked"]
    (directed,) = block["retention"]["directed-integration"]
    # task a: 1 of 2 valid runs pass; task b: 0 of 1 (the grading failure is unavailable)
    assert directed["estimate"] == pytest.approx((0.5 + 0.0) / 2)
    ci = bootstrap_ci([0.5, 0.0], n_resamples=2000, seed=5)
    assert (directed["ci_low"], directed["ci_high"]) == (ci.low, ci.high)
    assert directed["runs"] == {"retained": 1, "lost": 2, "unavailable": 1}
    (free,) = block["retention"]["free-selection"]
    # task c never finished: no estimate, not zero; task d's baseline failed: counted apart
    assert free["estimate"] is None and free["reason"] == "no stage run has a valid outcome yet"
    assert free["runs"] == {"retained": 0, "lost": 0, "unavailable": 2}
    assert free["from_failing_baselines"] == {"tasks": 1, "runs_passing": 1, "runs_valid": 2}
    (untracked,) = block["retention"]["untracked"]
    assert untracked["estimate"] == 1.0 and untracked["baseline_condition"] == "none"
    links = {l["trial_id"]: l for l in block["links"]}
    assert links["s/b.skill.r1/fixer/r2"]["passes"] is None
    assert links["s/d.skill.r1/fixer/r1"]["retention_observation"] is False
    assert links["s/a.skill.r1/fixer/r1"]["baseline_trial"] == "b/a/skill/r1"


def test_no_stage_no_block():
    assert stages_block(SimpleNamespace(lock={}, manifest={}), [], n_resamples=100) is None
