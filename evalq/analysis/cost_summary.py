"""Cost per successful task and token totals per condition.

Cost covers every finished attempt, resubmitted ones included. An attempt without a cost is
incomplete accounting: it is flagged, left out of the total, and makes the cost per success
unavailable. Tokens are summed only over runs that reported them, with the count of runs
that did not beside it.
"""

from __future__ import annotations

from typing import Any

from evalq import stats
from evalq.analysis.runs import Run

TOKEN_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def condition_cost(runs: list[Run]) -> dict[str, Any]:
    """{total, per_success, per_success_reason, incomplete_runs, complete_runs, attempts, ...}."""
    per_run = [(run, run.attempt_costs) for run in runs]  # each run's costs read once
    pairs = [pair for _, run_pairs in per_run for pair in run_pairs]
    costs = [c for c, _ in pairs]
    correct = [ok for _, ok in pairs]
    split = stats.split_cost_accounting(costs, correct)
    per = stats.cost_per_success(costs, correct)
    incomplete_trials = sorted({run.view.trial_id for run, run_pairs in per_run
                                for c, _ in run_pairs if c is None})
    return {"total": split.total_cost, "per_success": per.value,
            "per_success_reason": per.reason, "incomplete_runs": split.n_incomplete,
            "complete_runs": split.n_complete, "attempts": len(pairs),
            "correct_runs": sum(correct), "incomplete_trials": incomplete_trials,
            "total_covers": "attempts with complete cost accounting only"}


def condition_tokens(runs: list[Run]) -> dict[str, Any]:
    """Per token field: total over the counted attempts that reported it, and how many did not."""
    out: dict[str, Any] = {}
    finished = [run.counted_metrics for run in runs if run.view.counted is not None]
    for name in TOKEN_FIELDS:
        values = [m.get(name) for m in finished]
        known = [v for v in values if v is not None]
        out[name] = {"total": sum(known) if known else None, "runs_reported": len(known),
                     "runs_missing": len(values) - len(known)}
    return out

