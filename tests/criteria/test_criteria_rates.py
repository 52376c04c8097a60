"""A criterion's rate and CI over many tasks, against a computation written differently, and
review criteria read from ratings as a real adjudicated import stores them."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from evalq.criteria.rates import rate
from evalq.criteria.review import adjudicated, resolved


def _loop_bootstrap(per_task: list[float], seed: int, n_resamples: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    means = []
    for _ in range(n_resamples):
        picks = rng.integers(0, len(per_task), size=len(per_task))
        total = 0.0
        for i in picks:
            total += per_task[i]
        means.append(total / len(per_task))
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


@pytest.mark.parametrize("seed", [0, 5, 17])
def test_rate_is_the_task_weighted_share_with_a_bootstrap_over_tasks(seed):
    rnd = random.Random(seed)
    by_task = {f"t{i:02d}": [rnd.choice([True, False, False, None])
                             for _ in range(rnd.randint(1, 5))] for i in range(23)}
    got = rate(by_task, seed=seed, n_resamples=2000)
    per_task = []
    for task in sorted(by_task):
        judged = [v for v in by_task[task] if v is not None]
        if judged:
            per_task.append(judged.count(True) / len(judged))
    assert got["n_tasks"] == len(per_task)
    assert got["estimate"] == pytest.approx(sum(per_task) / len(per_task))
    low, high = _loop_bootstrap(per_task, seed, 2000)
    assert (got["ci_low"], got["ci_high"]) == pytest.approx((low, high))
    flat = [v for vs in by_task.values() for v in vs]
    assert got["runs"] == {"passed": flat.count(True), "failed": flat.count(False),
                           "unresolved": flat.count(None)}


def test_unresolved_results_are_unavailable_never_zero():
    got = rate({"a": [None, None], "b": [None]}, seed=0, n_resamples=100)
    assert got["estimate"] is None and got["ci_low"] is None and got["ci_high"] is None
    assert got["runs"]["unresolved"] == 3 and "unresolved" in got["reason"]
    assert rate({}, seed=0, n_resamples=100)["reason"] == \
        "no run of this condition has the criterion"


def test_review_scores_are_adjudicated_and_disagreement_is_unresolved():
    ratings = [{"rater_id": "r1", "human_accepted": True},
               {"rater_id": "r2", "human_accepted": False}]
    assert adjudicated({"ratings": ratings}, "human_accepted")[0] is None
    assert "disagree" in adjudicated({"ratings": ratings}, "human_accepted")[1]
    final = {"ratings": ratings, "adjudications": [{"human_accepted": False,
                                                   "adjudicator_id": "r3"}]}
    score, evidence, shown = adjudicated(final, "human_accepted")
    assert score is False and "adjudicated false" in evidence and "r1=true" in evidence
    assert [r["rater_id"] for r in shown] == ["r1", "r2"]
    agree = {"ratings": [dict(r, human_accepted=True) for r in ratings]}
    assert adjudicated(agree, "human_accepted")[0] is True
    assert adjudicated({}, "human_accepted") == (None, "not rated yet", [])
    stored = [{"name": "accepted", "kind": "review", "required": False,
               "field": "human_accepted", "passed": None, "evidence": "not rated yet"},
              {"name": "checks", "kind": "hidden", "required": True, "passed": True,
               "evidence": "1 of 1 check(s) passed"}]
    out = resolved(stored, final)
    assert out[0]["passed"] is False and out[1] == stored[1]


def test_review_criteria_read_a_real_adjudicated_import(tmp_path):
    """Ratings and adjudications as `evalq import` stores them in each attempt's grade: the
    score per run and rater field is the adjudicated row's value wherever raters scored it."""
    import sys
    from pathlib import Path

    from sqlmodel import Session, select

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))
    from adjudicated_gen import FIELDS, generate
    from evalq.analysis.adjudicated_import import import_results
    from evalq.results.store import AttemptRow, TrialRow, init_db

    paths = generate(tmp_path / "data", tasks=10, k=3)  # runs past 50: unrated
    url = f"sqlite:///{tmp_path / 'r.db'}"
    import_results(url, paths["results"], "s3", raters_path=paths["raters"],
                   adjudications_path=paths["adjudications"])
    rows = {(r["task_id"], r["condition"], r["run_id"]): r for r in
            map(json.loads, paths["results"].read_text().splitlines())}
    with Session(init_db(url)) as session:
        trials = {t.id: t for t in session.exec(select(TrialRow))}
        attempts = list(session.exec(select(AttemptRow)))
    checked = {True: 0, False: 0, None: 0}
    for attempt in attempts:
        trial = trials[attempt.trial_id]
        row = rows[(trial.fixture_id, trial.condition, trial.repetition)]
        for field in FIELDS:
            score, evidence, ratings = adjudicated(attempt.grade, field)
            rated = [r["value"] for r in ratings if r["value"] is not None]
            expected = row[field] if rated else None
            assert score is expected, (attempt.trial_id, field, evidence)
            checked[score] += 1
    assert all(checked.values()), checked  # true, false and unrated all occurred
