"""The session's first attempt and its eventual result, per track and condition, never merged.

A run's first attempt is the hidden tests' verdict on its workspace at the agent's first run of
the fixture's visible check (`first_check_result`); its eventual result is the verdict on the
final workspace (`eventual_result`). Each rate is computed like the task pass rate: the share
of correct runs per task, the mean over tasks, the percentile bootstrap CI over tasks. A run
counts for the first-check rate when its first check was graded correct or incorrect; a run
that never ran the check is null (counted apart as `never_checked`, never as a failure), as is
one whose first check the grader could not judge. Both come from the attempt the queue counts
(its first valid attempt), so the two notions never mix. Tracks are never pooled.
"""

from __future__ import annotations

import json
import statistics
from typing import Any, Iterable, Mapping, Optional

from sqlalchemy import Text, cast, select

from evalq.analysis.tracks import UNTRACKED
from evalq.criteria.rates import rate
from evalq.report.attempts import VALID
from evalq.results.store import AttemptRow

#: repair-cost figures summarised per condition (each from session_checks.repair_cost)
COST_FIGURES = ("repair_check_runs", "commands_after_first_check", "elapsed_seconds",
                "input_tokens_after_first_check", "output_tokens_after_first_check",
                "human_interventions")


def stored_sessions(engine, study_id: str) -> dict[tuple[str, int], dict[str, Any]]:
    """{(trial id, attempt): first_check_result, first_check_reason, eventual_result,
    session_checks} of a study's attempts whose fixture declares a visible check."""
    c = AttemptRow.__table__.c
    statement = select(c.trial_id, c.attempt, c.first_check_result, c.first_check_reason,
                       c.eventual_result, cast(c.session_checks, Text)).where(
        c.study_id == study_id, c.session_checks.isnot(None))
    with engine.connect() as conn:
        rows = conn.execute(statement).all()
    out = {}
    for trial_id, attempt, first, reason, eventual, text in rows:
        checks = json.loads(text) if text else None
        out[(trial_id, attempt)] = {"first_check_result": first, "first_check_reason": reason,
                                    "eventual_result": eventual,
                                    "session_checks": checks if isinstance(checks, dict)
                                    else None}
    return out


def session_block(runs: Iterable, stored: Mapping[tuple[str, int], dict[str, Any]],
                  labels: Mapping[str, dict], names: list[str], *, seed: int,
                  n_resamples: int) -> dict[str, Any]:
    """{track: {condition: {first_check, eventual, never_checked, repaired, ...}}}; {} when
    no fixture of the study declares a visible check."""
    cells: dict[str, dict[str, list[tuple[str, dict[str, Any]]]]] = {}
    runs = list(runs)
    # the tasks that declare a visible check: some attempt of theirs kept a record of it
    checked = {r.task for r in runs for a in r.view.attempts
               if (r.view.trial_id, a.attempt) in stored}
    for run in runs:
        counted = run.view.counted
        if run.outcome not in VALID or counted is None or run.task not in checked:
            continue
        session = stored.get((run.view.trial_id, counted.attempt))
        if session is None:  # it ended before the record was made: its result counts still
            session = {"first_check_result": None, "first_check_reason": None,
                       "eventual_result": run.outcome, "session_checks": None}
        track = labels.get(run.task, {}).get("track") or UNTRACKED
        cells.setdefault(track, {}).setdefault(run.condition, []).append((run.task, session))
    return {track: {name: _condition(cells[track].get(name, []), seed, n_resamples)
                    for name in names} for track in sorted(cells)}


def _condition(runs: list[tuple[str, dict[str, Any]]], seed: int,
               n_resamples: int) -> dict[str, Any]:
    first: dict[str, list[Optional[bool]]] = {}
    eventual: dict[str, list[Optional[bool]]] = {}
    for task, s in runs:
        first.setdefault(task, []).append(
            {"correct": True, "incorrect": False}.get(s["first_check_result"]))
        eventual.setdefault(task, []).append(
            None if s["eventual_result"] is None else s["eventual_result"] == "correct")
    never = sum(1 for _, s in runs if isinstance(s["session_checks"], dict)
                and s["session_checks"].get("first_check_at") is None)
    first_rate = rate(first, seed=seed, n_resamples=n_resamples)
    if first_rate["estimate"] is None:
        first_rate["reason"] = ("no run of this condition" if not runs else
                                "no run's first visible check was graded (never run, or "
                                "no verdict)")
    eventual_rate = rate(eventual, seed=seed, n_resamples=n_resamples)
    if eventual_rate["estimate"] is None:
        eventual_rate["reason"] = "no run of this condition"
    pairs = [(s["first_check_result"], s["eventual_result"]) for _, s in runs]
    return {"runs": len(runs), "first_check": first_rate, "eventual": eventual_rate,
            "never_checked": never,
            "first_check_ungraded": sum(1 for _, s in runs if s["first_check_result"] not in
                                        ("correct", "incorrect")) - never,
            "repaired": sum(1 for f, e in pairs if f == "incorrect" and e == "correct"),
            "lost_after_first_check": sum(1 for f, e in pairs if f == "correct"
                                          and e in ("incorrect", "timed_out")),
            "repair_cost": _costs([(s["session_checks"] or {}).get("repair_cost")
                                   for _, s in runs])}


def _costs(costs: list[Optional[dict[str, Any]]]) -> dict[str, Any]:
    """Each figure's median, mean, min and max over the runs that ran the check and report
    it; how many runs lack it (null, never 0)."""
    known = [c for c in costs if isinstance(c, dict)]
    out: dict[str, Any] = {"runs_with_first_check": len(known)}
    for figure in COST_FIGURES:
        values = [c.get(figure) for c in known]
        numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        entry: dict[str, Any] = {"n": len(numbers), "unavailable": len(values) - len(numbers)}
        if numbers:
            entry.update(median=statistics.median(numbers), mean=statistics.fmean(numbers),
                         min=min(numbers), max=max(numbers))
        else:
            reasons = sorted({str((c.get("unavailable") or {}).get(figure)) for c in known
                              if (c.get("unavailable") or {}).get(figure)})
            entry.update(median=None, mean=None, min=None, max=None,
                         reason="; ".join(reasons) or ("no run ran the visible check"
                                                       if not known else "not reported"))
        out[figure] = entry
    return out
