"""Per-criterion rates for the report: per track, per criterion, per condition, with CIs.

Each criterion's rate is computed like the task pass rate: the share of passing runs per task,
then the mean over tasks, with the percentile bootstrap over tasks. A run counts when its
outcome says something about the agent (correct, incorrect, timed out) and its result for the
criterion is true or false; unresolved results (null: not rated yet, no trajectory) are
counted apart, never as failures. Tracks are never pooled.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping, Optional

from sqlalchemy import Text, cast, select

from evalq.analysis.tracks import UNTRACKED
from evalq.criteria.review import resolved
from evalq.report.attempts import VALID
from evalq.results.store import AttemptRow
from evalq.stats.bootstrap import bootstrap_ci
from evalq.stats.metrics import mean_of_defined, task_rates


def stored_results(engine, study_id: str) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """{(trial id, attempt): criterion results} of a study's attempts that have any."""
    c = AttemptRow.__table__.c
    statement = select(c.trial_id, c.attempt, cast(c.criterion_results, Text)).where(
        c.study_id == study_id, c.criterion_results.isnot(None))
    with engine.connect() as conn:
        rows = conn.execute(statement).all()
    out = {}
    for trial_id, attempt, text in rows:
        value = json.loads(text) if text else None
        if isinstance(value, list):
            out[(trial_id, attempt)] = value
    return out


def run_results(run, stored: Mapping[tuple[str, int], list[dict[str, Any]]]
                ) -> Optional[list[dict[str, Any]]]:
    """The counted attempt's criterion results, review criteria resolved from its ratings."""
    counted = run.view.counted
    if counted is None:
        return None
    return resolved(stored.get((run.view.trial_id, counted.attempt)), counted.grade)


def criteria_block(runs: Iterable, stored: Mapping[tuple[str, int], list[dict[str, Any]]],
                   labels: Mapping[str, dict], names: list[str], *, seed: int,
                   n_resamples: int) -> dict[str, Any]:
    """{track: {criterion: {kind, required, conditions: {name: rate}}}}; {} when no run has
    named criteria."""
    cells: dict[str, dict[str, dict[str, Any]]] = {}
    for run in runs:
        if run.outcome not in VALID:
            continue
        results = run_results(run, stored)
        if not results:
            continue
        track = labels.get(run.task, {}).get("track") or UNTRACKED
        for result in results:
            entry = cells.setdefault(track, {}).setdefault(str(result.get("name")), {
                "kinds": set(), "required": set(), "values": {}})
            entry["kinds"].add(result.get("kind"))
            entry["required"].add(bool(result.get("required")))
            entry["values"].setdefault(run.condition, {}).setdefault(run.task, []).append(
                result.get("passed") if isinstance(result.get("passed"), bool) else None)
    block: dict[str, Any] = {}
    for track in sorted(cells):
        block[track] = {}
        for name in sorted(cells[track]):
            entry = cells[track][name]
            kinds = sorted(k for k in entry["kinds"] if k)
            block[track][name] = {
                "kind": kinds[0] if len(kinds) == 1 else kinds,
                "required": (entry["required"] == {True}) if len(entry["required"]) == 1
                else None,
                "conditions": {cond: rate(entry["values"].get(cond, {}), seed=seed,
                                          n_resamples=n_resamples) for cond in names}}
    return block


def rate(by_task: Mapping[str, list[Optional[bool]]], *, seed: int,
         n_resamples: int) -> dict[str, Any]:
    """One criterion's rate for one condition and track."""
    values = [v for runs in by_task.values() for v in runs]
    counts = {"passed": sum(v is True for v in values), "failed": sum(v is False for v in values),
              "unresolved": sum(v is None for v in values)}
    per_task = task_rates(dict(sorted(by_task.items())))
    estimate = mean_of_defined(per_task.values())
    ci = bootstrap_ci(list(per_task.values()), seed=seed, n_resamples=n_resamples) \
        if estimate is not None else None
    reason = None
    if estimate is None:
        reason = ("no run of this condition has the criterion" if not values else
                  "every result is unresolved (null)")
    return {"estimate": estimate, "ci_low": ci.low if ci else None,
            "ci_high": ci.high if ci else None,
            "n_tasks": sum(1 for r in per_task.values() if r is not None),
            "runs": counts, "reason": reason}
