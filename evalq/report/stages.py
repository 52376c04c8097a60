"""The report's `stages` block: each run linked to its baseline run, and retention.

Retention is observed on the tasks whose baseline run was correct: the integration worked
before the change; does the stage's run still pass the hidden checks after it (and after the
agent's work, in an agent stage)? Per task (one baseline run) the share of its valid runs
that pass, averaged over tasks, with the percentile bootstrap CI over tasks used everywhere
else. Runs without a valid outcome (pending, grading or infrastructure failure) are counted
apart as unavailable, never as lost. Tasks from baseline runs that were not correct are no
retention observation; how many of their runs pass now is reported beside it. Figures are per
track of the baseline task, per stage condition and per baseline condition: never pooled
across tracks.
"""

from __future__ import annotations

from typing import Any, Optional

from evalq.analysis.tracks import UNTRACKED
from evalq.report.attempts import VALID
from evalq.criteria.rates import rate

DEFINITION = ("retention: of the tasks whose baseline run was correct, the share of the "
              "stage's valid runs (correct, incorrect, timed_out) that still pass the hidden "
              "checks after the declared change; the mean over tasks of each task's share, "
              "with a 95% percentile bootstrap CI over tasks. Runs without a valid outcome "
              "are unavailable, not lost. Per track of the baseline task, stage condition and "
              "baseline condition; never pooled across tracks.")


def _passes(outcome: Optional[str]) -> Optional[bool]:
    return None if outcome not in VALID else outcome == "correct"


def stage_links(stage: dict, runs) -> list[dict[str, Any]]:
    """One row per stage run: its trial, its baseline run and what each came to."""
    links = []
    for run in runs:
        base = (stage.get("runs") or {}).get(run.task)
        if base is None:
            continue
        links.append({
            "trial_id": run.view.trial_id, "task": run.task, "condition": run.condition,
            "baseline_trial": base["baseline_trial"],
            "baseline_attempt": base["baseline_attempt"],
            "baseline_condition": base["baseline_condition"],
            "baseline_outcome": base["baseline_outcome"],
            "baseline_track": base["baseline_track"] or UNTRACKED,
            "workspace_digest": base["workspace_digest"],
            "outcome": run.view.outcome, "passes": _passes(run.view.outcome),
            "retention_observation": base["baseline_outcome"] == "correct"})
    return links


def _group(links: list[dict], seed: int, n_resamples: int) -> dict[str, Any]:
    """Retention of one (track, condition, baseline condition): a named criterion's rate
    (criteria.rates) over the runs whose baseline was correct, in retention's words."""
    observed = [l for l in links if l["retention_observation"]]
    by_task: dict[str, list[Optional[bool]]] = {}
    for link in observed:
        by_task.setdefault(link["task"], []).append(link["passes"])
    figures = rate(by_task, seed=seed, n_resamples=n_resamples)
    runs = figures["runs"]
    others = [l for l in links if not l["retention_observation"]]
    return {
        "estimate": figures["estimate"], "ci_low": figures["ci_low"],
        "ci_high": figures["ci_high"], "n_tasks": figures["n_tasks"],
        "runs": {"retained": runs["passed"], "lost": runs["failed"],
                 "unavailable": runs["unresolved"]},
        "reason": None if figures["estimate"] is not None else (
            "no task's baseline run was correct" if not observed
            else "no stage run has a valid outcome yet"),
        "from_failing_baselines": {
            "tasks": len({l["task"] for l in others}),
            "runs_passing": sum(1 for l in others if l["passes"] is True),
            "runs_valid": sum(1 for l in others if l["passes"] is not None)}}


def stages_block(study, runs, n_resamples: int) -> Optional[dict[str, Any]]:
    """None for a study that is no stage."""
    stage = (study.lock or {}).get("stage")
    if not stage:
        return None
    seed = int(study.manifest.get("seed") or 0)
    links = stage_links(stage, runs)
    retention: dict[str, list[dict[str, Any]]] = {}
    keys = sorted({(l["baseline_track"], l["condition"], l["baseline_condition"])
                   for l in links})
    for track, condition, base_condition in keys:
        mine = [l for l in links if (l["baseline_track"], l["condition"],
                                     l["baseline_condition"]) == (track, condition, base_condition)]
        retention.setdefault(track, []).append(
            dict(condition=condition, baseline_condition=base_condition,
                 **_group(mine, seed, n_resamples)))
    return {"baseline_study": stage["baseline_study"], "baseline_lock": stage["baseline_lock"],
            "take": stage["take"], "agent": stage["agent"], "change": stage["change"],
            "baseline_version": stage["baseline_version"],
            "target_version": stage["target_version"],
            "definition": DEFINITION, "retention": retention, "links": links}
