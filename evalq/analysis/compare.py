"""Paired comparisons of two conditions on the same tasks, with Holm over the primary family.

In commit-comparison mode (three runs per side) only the bootstrap CI is computed: no test is
run, so there is no p-value to over-read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from evalq import stats
from evalq.stats.bootstrap import DEFAULT_RESAMPLES
from evalq.analysis.condition_metrics import METRICS, MISSING_REASON, task_values
from evalq.analysis.runs import Run


@dataclass(frozen=True)
class Pair:
    """One comparison to make: baseline vs candidate runs, and which metrics are primary."""

    baseline: str
    candidate: str
    baseline_runs: list[Run]
    candidate_runs: list[Run]
    primary: tuple[str, ...]
    hypotheses: tuple[dict, ...] = ()


def metric_delta(baseline: list[Run], candidate: list[Run], metric: str, k: int, *,
                 tests: bool, seed: int = 0,
                 n_resamples: int = DEFAULT_RESAMPLES) -> dict[str, Any]:
    """{delta, ci_low, ci_high, p_value, n_tasks, per_task, reason}: delta = candidate - baseline."""
    base = task_values(baseline, "tpr" if metric == "success_rate" else metric, k)
    cand = task_values(candidate, "tpr" if metric == "success_rate" else metric, k)
    result = stats.compare_paired(cand, base, significance_test=tests, n_resamples=n_resamples,
                                  seed=seed)
    if result is None:
        reason = MISSING_REASON.get(metric, f"no task has a {metric} value in both conditions")
        return {"delta": None, "ci_low": None, "ci_high": None, "p_value": None,
                "p_holm": None, "n_tasks": 0, "per_task": {}, "unpaired": sorted(set(base) | set(cand)),
                "reason": reason}
    return {"delta": result.mean_difference, "ci_low": result.ci.low, "ci_high": result.ci.high,
            "p_value": None if result.test is None else result.test.p_value,
            "p_holm": None,
            "test_method": None if result.test is None else result.test.method,
            "n_tasks": result.n_tasks,
            "per_task": {str(t): float(d) for t, d in zip(result.pairs.task_ids,
                                                          result.pairs.differences)},
            "unpaired": [str(t) for t in result.pairs.unpaired], "reason": None}


#: success_rate is pooled over runs, so its paired version is the per-task rate (= TPR).
COMPARED = tuple(m for m in METRICS if m != "success_rate")


def compare_pairs(pairs: list[Pair], k: int, *, tests: bool, seed: int = 0,
                  n_resamples: int = DEFAULT_RESAMPLES) -> list[dict[str, Any]]:
    """Every metric for every pair; Holm-adjusted p-values over the primary (pair, metric) family."""
    out: list[dict[str, Any]] = []
    family: list[tuple[int, str]] = []
    for i, pair in enumerate(pairs):
        metrics = {m: metric_delta(pair.baseline_runs, pair.candidate_runs, m, k, tests=tests,
                                   seed=seed, n_resamples=n_resamples) for m in COMPARED}
        for m in COMPARED:
            metrics[m]["primary"] = m in pair.primary
            metrics[m]["k"] = k
            if m in pair.primary:
                family.append((i, m))
        out.append({"baseline": pair.baseline, "candidate": pair.candidate,
                    "hypotheses": list(pair.hypotheses), "metrics": metrics})
    if tests:
        p_values: list[Optional[float]] = [out[i]["metrics"][m]["p_value"] for i, m in family]
        for (i, m), adjusted in zip(family, stats.holm_adjust(p_values)):
            out[i]["metrics"][m]["p_holm"] = adjusted
    return out
