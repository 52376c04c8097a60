"""Per-condition outcome metrics, reduced per task first so every task weighs the same.

Input shape for one condition: ``{task_id: [run, run, ...]}`` where a run is
``True``/``1`` (passed), ``False``/``0`` (failed) or ``None`` (no valid outcome, e.g.
a grading or infrastructure failure). ``None`` runs are dropped, never counted as 0;
a metric that has nothing to compute on returns ``None``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from math import comb
from typing import TypeVar

K = TypeVar("K")
Run = bool | int | None


_BOOL_OR_NONE = frozenset({bool, type(None)})


def valid_runs(runs: Iterable[Run]) -> list[bool]:
    """Drop ``None`` runs and check the rest are booleans (or 0/1), so a typo cannot pass as data."""
    if isinstance(runs, (list, tuple)) and _BOOL_OR_NONE.issuperset(map(type, runs)):
        # the usual input, checked at C speed: a report makes tens of thousands of these calls
        return [run for run in runs if run is not None]
    out: list[bool] = []
    for run in runs:
        if run is None:
            continue
        if isinstance(run, float) or run not in (0, 1):
            raise ValueError(f"run value {run!r} is not a boolean; use True/False (or 1/0), "
                             "or None for a run without a valid outcome")
        out.append(bool(run))
    return out


def mean_of_defined(values: Iterable[float | None]) -> float | None:
    """Mean of the non-``None`` values; ``None`` when there are none (never 0 or nan)."""
    defined = [float(v) for v in values if v is not None]
    if not defined:
        return None
    return sum(defined) / len(defined)


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k={k!r} must be a positive integer (the number of runs per task)")


# -- per-task values: the unit that bootstraps and paired tests resample --------------


def task_rates(runs_by_task: Mapping[K, Sequence[Run]]) -> dict[K, float | None]:
    """Per-task share of passing runs among valid runs; ``None`` for a task with no valid run."""
    rates: dict[K, float | None] = {}
    for task, runs in runs_by_task.items():
        ok = valid_runs(runs)
        rates[task] = sum(ok) / len(ok) if ok else None
    return rates


def task_all_passed(runs_by_task: Mapping[K, Sequence[Run]], k: int) -> dict[K, float | None]:
    """Per-task 1.0 if all k runs passed, else 0.0; ``None`` unless the task has exactly k valid runs.

    A task with fewer (or more) than k valid runs cannot say whether "every pre-registered
    run passed", so it is excluded rather than guessed.
    """
    _check_k(k)
    out: dict[K, float | None] = {}
    for task, runs in runs_by_task.items():
        ok = valid_runs(runs)
        out[task] = (1.0 if all(ok) else 0.0) if len(ok) == k else None
    return out


#: a report's pass@k tables ask for every k of every task, and tasks share a few (n, c):
#: cached by exact argument types, so True is never taken for 1 (bench/ report)
_estimates = lru_cache(maxsize=1 << 16, typed=True)


@_estimates
def pass_at_k_estimate(n: int, c: int, k: int) -> float | None:
    """Unbiased pass@k for one task with n runs, c correct: 1 - C(n-c, k) / C(n, k); ``None`` if k > n."""
    _check_k(k)
    if not 0 <= c <= n:
        raise ValueError(f"correct count c={c} must lie between 0 and n={n}")
    if k > n:
        return None
    return 1.0 - comb(n - c, k) / comb(n, k)


@_estimates
def pass_hat_k_estimate(n: int, c: int, k: int) -> float | None:
    """Unbiased pass^k for one task (all of k runs pass): C(c, k) / C(n, k); ``None`` if k > n."""
    _check_k(k)
    if not 0 <= c <= n:
        raise ValueError(f"correct count c={c} must lie between 0 and n={n}")
    if k > n:
        return None
    return comb(c, k) / comb(n, k)


def task_pass_at_k(runs_by_task: Mapping[K, Sequence[Run]], k: int) -> dict[K, float | None]:
    """Per-task unbiased pass@k over the task's valid runs; ``None`` where fewer than k valid runs."""
    out: dict[K, float | None] = {}
    for task, runs in runs_by_task.items():
        ok = valid_runs(runs)
        out[task] = pass_at_k_estimate(len(ok), sum(ok), k)
    return out


def task_pass_hat_k(runs_by_task: Mapping[K, Sequence[Run]], k: int) -> dict[K, float | None]:
    """Per-task unbiased pass^k over the task's valid runs; ``None`` where fewer than k valid runs."""
    out: dict[K, float | None] = {}
    for task, runs in runs_by_task.items():
        ok = valid_runs(runs)
        out[task] = pass_hat_k_estimate(len(ok), sum(ok), k)
    return out


# -- condition-level estimates ----------------------------------------------------------


def success_rate(runs_by_task: Mapping[K, Sequence[Run]]) -> float | None:
    """Runs pooled across tasks: correct runs / valid runs; ``None`` when no run is valid."""
    ok = [r for runs in runs_by_task.values() for r in valid_runs(runs)]
    return sum(ok) / len(ok) if ok else None


def task_weighted_rate(runs_by_task: Mapping[K, Sequence[Run]]) -> float | None:
    """Mean over tasks of each task's rate of ``True`` runs (None runs and empty tasks dropped).

    The generic task-weighted mean used for TPR, RFR, CPR and NRR: callers pass one
    boolean per run (e.g. "regression-free" for RFR) and every task weighs the same.
    """
    return mean_of_defined(task_rates(runs_by_task).values())


def task_pass_rate(runs_by_task: Mapping[K, Sequence[Run]]) -> float | None:
    """TPR: mean over tasks of the per-task pass rate, the primary quality endpoint."""
    return task_weighted_rate(runs_by_task)


def reliable_pass_at_k(runs_by_task: Mapping[K, Sequence[Run]], k: int) -> float | None:
    """RP@k: share of tasks whose k runs all passed; tasks without exactly k valid runs are excluded."""
    return mean_of_defined(task_all_passed(runs_by_task, k).values())


def pass_at_k(runs_by_task: Mapping[K, Sequence[Run]], k: int) -> float | None:
    """pass@k: mean over tasks of the unbiased per-task estimate; tasks with fewer than k valid runs excluded."""
    return mean_of_defined(task_pass_at_k(runs_by_task, k).values())


def pass_hat_k(runs_by_task: Mapping[K, Sequence[Run]], k: int) -> float | None:
    """pass^k: mean over tasks of the unbiased chance that k runs all pass; short tasks excluded."""
    return mean_of_defined(task_pass_hat_k(runs_by_task, k).values())
