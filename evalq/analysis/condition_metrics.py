"""Per-condition metrics reduced per task first, each with a 95% bootstrap CI over tasks.

A metric whose inputs are missing is ``None`` with a reason, never 0: RFR, CPR and NRR need
rater scores (regression, rework_required, validation_passed) that native runs do not have.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from evalq import stats
from evalq.models import COMPARABLE_METRICS
from evalq.stats.bootstrap import (DEFAULT_RESAMPLES, bootstrap_ci_matrix, class_count_chunks,
                                   resample_chunks, uses_class_counts)
from evalq.stats.pass_k import pass_k_arrays
from evalq.analysis.runs import PASSED, Run, by_task

METRICS = ("success_rate", *COMPARABLE_METRICS)
LABELS = {"success_rate": "success rate", "tpr": "TPR", "rp_at_k": "RP@k",
          "pass_at_k": "pass@k", "pass_hat_k": "pass^k", "rfr": "RFR", "cpr": "CPR",
          "nrr": "NRR"}


def label(metric: str, k: int | None) -> str:
    """'pass@3' rather than 'pass@k' where k is known, so no row leaves k implicit."""
    text = LABELS[metric]
    if k is None or not text.endswith(("@k", "^k")):
        return text
    return text[:-1] + str(k)


#: Rater outcomes each metric reads, for reliability flags on primary outcomes.
METRIC_OUTCOMES = {"success_rate": ("passed",), "tpr": ("passed",), "rp_at_k": ("passed",),
                   "pass_at_k": ("passed",), "pass_hat_k": ("passed",),
                   "rfr": ("regression",), "cpr": ("passed", "validation_passed", "regression",
                                                   "rework_required"),
                   "nrr": ("rework_required",)}


def _rfr(run: Run) -> Optional[bool]:
    """No human-scored regression and, where present, the locked hidden checks passing."""
    regression = run.scores.get("regression")
    if regression is None:
        return None
    hidden = run.scores.get("hidden_validation_passed")
    return (not regression) and (hidden is not False)


def _cpr(run: Run) -> Optional[bool]:
    s = run.scores
    needed = (s.get("passed"), s.get("validation_passed"), s.get("regression"),
              s.get("rework_required"))
    if any(v is None for v in needed):
        return None
    return bool(s["passed"] and s["validation_passed"] and not s["regression"]
                and not s["rework_required"])


def _nrr(run: Run) -> Optional[bool]:
    rework = run.scores.get("rework_required")
    return None if rework is None else not rework


RUN_VALUE: dict[str, Callable[[Run], Optional[bool]]] = {
    "rfr": _rfr, "cpr": _cpr, "nrr": _nrr,
}
MISSING_REASON = {
    "rfr": "no rater score 'regression'; import rater-scored results",
    "cpr": "no rater scores for passed, validation_passed, regression, rework_required",
    "nrr": "no rater score 'rework_required'; import rater-scored results",
}


def task_values(runs: list[Run], metric: str, k: int) -> dict[str, Optional[float]]:
    """One value per task (the resampling unit); None where the task has no usable run."""
    passed = by_task(runs, PASSED)
    if metric in ("tpr", "success_rate"):
        return stats.task_rates(passed)
    if metric == "rp_at_k":
        return stats.task_all_passed(passed, k)
    if metric == "pass_at_k":
        return stats.task_pass_at_k(passed, k)
    if metric == "pass_hat_k":
        return stats.task_pass_hat_k(passed, k)
    if metric in RUN_VALUE:
        return stats.task_rates(by_task(runs, RUN_VALUE[metric]))
    raise KeyError(metric)


def pooled_ratio_ci(correct: np.ndarray, valid: np.ndarray, *, n_resamples: int,
                    seed: int, confidence: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap over tasks of sum(correct)/sum(valid), for the pooled success rate.
    Tasks with equal (correct, valid) are one class where that is the cheaper draw
    (bootstrap.uses_class_counts): each resample's sums are its class counts times theirs."""
    n = correct.size
    pairs, sizes = np.unique(np.stack([correct, valid], axis=1), axis=0, return_counts=True)
    if uses_class_counts(pairs.shape[0], n):
        sums = [counts @ pairs for counts in class_count_chunks(seed, sizes, n_resamples)]
        num, den = np.concatenate(sums)[:, 0], np.concatenate(sums)[:, 1]
    else:
        chunks = list(resample_chunks(seed, n, n_resamples))  # the same draws as one matrix
        num = np.concatenate([correct[idx].sum(axis=1) for idx in chunks])
        den = np.concatenate([valid[idx].sum(axis=1) for idx in chunks])
    ratios = num[den > 0] / den[den > 0]
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(ratios, [alpha, 1.0 - alpha])
    return float(low), float(high)


def _success_rate(runs: list[Run], seed: int, n_resamples: int) -> dict[str, Any]:
    passed = by_task(runs, PASSED)
    estimate = stats.success_rate(passed)
    counts = [(sum(v for v in vals if v is not None), sum(v is not None for v in vals))
              for vals in passed.values()]
    counts = [c for c in counts if c[1] > 0]
    if estimate is None or not counts:
        return _missing("no run has a valid outcome (correct, incorrect or timed_out)")
    correct = np.asarray([c for c, _ in counts], dtype=float)
    valid = np.asarray([n for _, n in counts], dtype=float)
    low, high = pooled_ratio_ci(correct, valid, n_resamples=n_resamples, seed=seed)
    return {"estimate": estimate, "ci_low": low, "ci_high": high, "n_tasks": len(counts),
            "reason": None, "pooled": "correct runs / valid runs; CI resamples tasks"}


def _missing(reason: str, n_tasks: int = 0) -> dict[str, Any]:
    return {"estimate": None, "ci_low": None, "ci_high": None, "n_tasks": n_tasks,
            "reason": reason}


def metric_summary(runs: list[Run], metric: str, k: int, *, seed: int = 0,
                   n_resamples: int = DEFAULT_RESAMPLES) -> dict[str, Any]:
    """{estimate, ci_low, ci_high, n_tasks, k, reason}: estimate is the mean of per-task values."""
    if metric == "success_rate":
        out = _success_rate(runs, seed, n_resamples)
    else:
        values = task_values(runs, metric, k)
        ci = stats.bootstrap_ci(list(values.values()), n_resamples=n_resamples, seed=seed)
        if ci is None:
            reason = MISSING_REASON.get(metric) or (
                f"no task has {k} valid runs" if metric != "tpr"
                else "no run has a valid outcome (correct, incorrect or timed_out)")
            out = _missing(reason)
        else:
            out = {"estimate": ci.estimate, "ci_low": ci.low, "ci_high": ci.high,
                   "n_tasks": ci.n_tasks, "reason": None}
    out["k"] = k
    return out


def condition_metrics(runs: list[Run], k: int, *, seed: int = 0,
                      n_resamples: int = DEFAULT_RESAMPLES) -> dict[str, dict[str, Any]]:
    return {m: metric_summary(runs, m, k, seed=seed, n_resamples=n_resamples) for m in METRICS}


def _run_counts(runs: list[Run], tasks: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per task of `tasks`: valid runs n and correct runs c (0, 0 for a task it lacks)."""
    n, c = np.zeros(len(tasks), dtype=np.int64), np.zeros(len(tasks), dtype=np.int64)
    position = {task: i for i, task in enumerate(tasks)}
    for task, values in by_task(runs, PASSED).items():
        ok = stats.valid_runs(values)
        n[position[task]], c[position[task]] = len(ok), sum(ok)
    return n, c


def pass_k_tables(runs_by_condition: dict[str, list[Run]], n: int, *, seed: int = 0,
                  n_resamples: int = DEFAULT_RESAMPLES) -> dict[str, list[dict[str, Any]]]:
    """Per condition, pass@k and pass^k (unbiased estimators, per task then averaged) for every
    k = 1 … n, each row naming its k: at k = n alone pass@k is only "any run passed" and
    pass^k is RP@k.

    Each task's runs are counted once, every k's estimates come from those counts as one array
    (pass_k_arrays), and every interval shares the resamples of the tasks it is defined on
    (bootstrap_ci_matrix, across k and conditions): the same figures as metric_summary gives
    for one k at a time, for a fraction of the work.
    """
    names = list(runs_by_condition)
    tasks = sorted({task for runs in runs_by_condition.values() for task in by_task(runs, PASSED)})
    k_max = max(1, n)
    blocks = []
    for name in names:  # columns: per condition, pass@1 … pass@K then pass^1 … pass^K
        blocks.extend(pass_k_arrays(*_run_counts(runs_by_condition[name], tasks), k_max))
    cis = bootstrap_ci_matrix(np.concatenate(blocks, axis=1) if tasks
                              else np.empty((0, 2 * k_max * len(names))),
                              n_resamples=n_resamples, seed=seed)
    tables: dict[str, list[dict[str, Any]]] = {}
    for c_index, name in enumerate(names):
        tables[name] = []
        for k in range(1, k_max + 1):
            row: dict[str, Any] = {"k": k}
            for e, metric in enumerate(("pass_at_k", "pass_hat_k")):
                ci = cis[(2 * c_index + e) * k_max + k - 1]
                row[metric] = dict(_missing(f"no task has {k} valid runs") if ci is None else
                                   {"estimate": ci.estimate, "ci_low": ci.low,
                                    "ci_high": ci.high, "n_tasks": ci.n_tasks, "reason": None},
                                   k=k)
            tables[name].append(row)
    return tables
