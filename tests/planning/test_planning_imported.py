"""A rater-scored adjudicated pilot, imported into a real results database, lets the plan cover RFR."""

from __future__ import annotations

import importlib.util
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from evalq.analysis.adjudicated_import import import_results
from evalq.planning import load_pilot, pilot_sampler
from evalq.results.store import get_engine


def adjudicated_generator():
    """The report tests' deterministic adjudicated-results dataset generator (tests/report)."""
    path = Path(__file__).resolve().parents[1] / "report" / "adjudicated_gen.py"
    spec = importlib.util.spec_from_file_location("adjudicated_gen", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generate


def test_an_imported_pilot_plans_rfr_from_its_adjudicated_scores(tmp_path):
    paths = adjudicated_generator()(tmp_path / "data", tasks=12, k=3, seed=4)
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    import_results(url, paths["results"], "imp", raters_path=paths["raters"],
                   adjudications_path=paths["adjudications"])
    pilot = load_pilot(get_engine(url), "imp")

    # Independent: the rated study's RFR of a run straight from the results file's final scores.
    rows = [json.loads(line) for line in paths["results"].read_text().splitlines() if line]
    expected, passed = defaultdict(list), defaultdict(list)
    for row in rows:
        if row["condition"] == "single_prompt":
            expected[row["task_id"]].append(
                (not row["regression"]) and row.get("hidden_validation_passed") is not False)
            passed[row["task_id"]].append(row["passed"])
    sampler = pilot_sampler(pilot, "single_prompt", ("tpr", "rfr"))
    assert sampler.metrics == ("tpr", "rfr")
    assert list(sampler.tasks) == sorted(expected)
    observed = np.array([np.mean(expected[t]) for t in sampler.tasks])
    how = sampler.shrinkage["regression_free"]
    assert how.mean_rate == pytest.approx(observed.mean())
    assert how.observed_variance == pytest.approx(np.var(observed, ddof=1))
    assert sampler.rates["regression_free"].mean() == pytest.approx(observed.mean())
    pass_rates = np.array([np.mean(passed[t]) for t in sampler.tasks])
    assert sampler.shrinkage["passed"].observed_variance == pytest.approx(np.var(pass_rates, ddof=1))
