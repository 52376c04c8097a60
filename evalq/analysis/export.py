"""Per-trial exports: skill-activation trial rows, adjudicated results.jsonl rows, and the
adoption-baseline evidence record of a study run from a task manifest (or of a stage of one).

Unknown values are null, never 0 or a guess; a stored count or cost that is no number (a NaN,
a negative count, from a row written before evalq checked them) is unknown too, so every row
is strict JSON. A run whose fixture names criteria exports one entry per criterion (index,
name, kind, required, passed, evidence). An imported results study exports its rows as
they were imported; a native study's rater fields are null (no rater scored them) and its
hidden_validation_passed is the grader's verdict.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional

from evalq.errors import UserError
from evalq.criteria.review import resolved
from evalq.report.json_text import finite
from evalq.results.store import StudyRow
from evalq.workers.agents.numbers import cost_or_reason, count
from evalq.analysis.rater_pool import executors_of
from evalq.analysis.runs import RATER_FIELDS, Run
from evalq.analysis.skill_activation import skill_revision
from evalq.analysis.evidence import adoption_record, evidence_row, trial_dates


def _condition(study: StudyRow, name: str) -> dict[str, Any]:
    return next((c for c in study.manifest.get("conditions", []) if c.get("name") == name), {})


def _amount(value: Any) -> Any:
    """A duration or cost kept only when finite and non-negative."""
    return cost_or_reason(value)[0]


def activation_row(study: StudyRow, run: Run, labels: Optional[dict] = None) -> dict[str, Any]:
    """The skill-activation per-trial row, plus the case's declared activation and evalq's
    outcome, attempt count and cost. `skill_commit` is the skill's own revision."""
    cond = _condition(study, run.condition)
    env = study.manifest.get("environment") or {}
    counted = run.view.counted
    m = run.counted_metrics
    return {
        "case_id": run.task, "condition": run.condition,
        "skill_commit": skill_revision(study, run.condition),
        "model": cond.get("model") or env.get("model_id"),
        "runtime": env.get("harness_version") or env.get("tool_version"),
        "trial": run.repetition, "skill_loaded": m.get("skill_loaded"),
        "criteria": _criteria(counted),
        "elapsed_seconds": _amount(m.get("duration_seconds")),
        "input_tokens": count(m.get("input_tokens")),
        "output_tokens": count(m.get("output_tokens")),
        "artifacts": (counted.artifacts or None) if counted else None,
        "skill_expected": ((labels or {}).get(run.task) or {}).get("skill_expected"),
        "study_id": study.id, "trial_id": run.view.trial_id, "outcome": run.outcome,
        "first_outcome": run.view.first.outcome if run.view.first else None,
        "attempts": len(run.view.attempts), "cost_usd": _amount(m.get("cost_usd")),
    }


def _criteria(counted) -> list[dict[str, Any]]:
    """The run's named criteria (evalq/criteria/) as the row's criteria, review scores
    adjudicated; without named criteria, each hidden check's verdict."""
    if counted is None:
        return []
    named = resolved(getattr(counted, "criterion_results", None), counted.grade)
    if named is None:
        return [dict(c, index=i) for i, c in enumerate(counted.criteria or [])]
    return [{"index": i, "name": r.get("name"), "kind": r.get("kind"),
             "required": r.get("required"), "passed": r.get("passed"),
             "evidence": r.get("evidence") or ""} for i, r in enumerate(named)]


def adjudicated_row(study: StudyRow, run: Run) -> dict[str, Any]:
    """The adjudicated result row for one run."""
    counted = run.view.counted
    if run.imported and counted is not None:
        return finite(dict((counted.grade or {}).get("row") or {}))  # NaN it held: null
    cond = _condition(study, run.condition)
    env = dict(study.manifest.get("environment") or {})
    env["repo_sha"] = cond.get("commit")
    env["time_budget_seconds"] = (study.manifest.get("budgets") or {}).get("wall_seconds")
    m = run.counted_metrics
    row: dict[str, Any] = {"task_id": run.task, "condition": run.condition,
                           "run_id": run.repetition, "run_order": run.order, "env": env,
                           "artifact_path": ((counted.artifacts or {}).get("diff")
                                             if counted else None),
                           "blinded_artifact_path": None}
    row.update({f: None for f in RATER_FIELDS})
    row["passed"] = run.passed
    row.update(public_validation_passed=None, hidden_validation_passed=run.passed,
               cycle_time_seconds=_amount(m.get("duration_seconds")), adjudicated=False,
               rater_ids=[], notes=(None if run.passed is not None else
                                    f"no valid outcome: {run.outcome or 'pending'}"))
    row["executor_ids"] = executors_of(study, run)  # who may not rate it
    return row


def _stage_parts(engine, study: StudyRow, runs: list[Run]) -> tuple[Optional[dict], dict]:
    """For a stage: (its baseline study's evidence record, each run's stage part for
    evidence_row); (None, {}) for a study that is no stage or whose baseline has no record."""
    from evalq.report.stages import stage_links
    from evalq.results.store import read_study

    stage = (study.lock or {}).get("stage")
    if not stage:
        return None, {}
    try:
        baseline = read_study(engine, stage["baseline_study"])
    except UserError:
        return None, {}
    record = adoption_record(baseline)
    if record is None:
        return None, {}
    dates = trial_dates(engine, baseline.id)
    prompt = (study.manifest.get("stage") or {}).get("prompt")
    parts = {}
    for link in stage_links(stage, runs):
        task = stage["runs"][link["task"]]
        parts[link["trial_id"]] = {
            "link": link, "baseline_task": task["baseline_fixture"],
            "baseline_study": baseline.id, "baseline_date": dates.get(link["baseline_trial"]),
            "prompt": None if not stage.get("agent") else prompt or record.get(
                "tasks", {}).get(task["baseline_fixture"], {}).get("prompt"),
            "baseline_version": stage.get("baseline_version"),
            "target_version": stage.get("target_version")}
    return record, parts


def evidence_rows(engine, study: StudyRow, runs: list[Run]) -> Iterator[dict[str, Any]]:
    """One evidence record per trial (analysis/evidence.py); only a study run from a task
    manifest has one, since everything else it holds is what that manifest pinned, or a stage
    of such a study (its rows carry the baseline's record, each with its baseline run)."""
    record, stages = adoption_record(study), {}
    if record is None:
        record, stages = _stage_parts(engine, study, runs)
    if record is None:
        raise UserError(f"study '{study.id}' was not run from an adoption task manifest, nor "
                        "is it a stage of one, so it has no evidence record", field="--format",
                        fix="use --format jsonl or results, or run the study from a study file "
                            "with an [adoption] table")
    dates = trial_dates(engine, study.id)
    return (evidence_row(record, run, dates.get(run.view.trial_id),
                         stages.get(run.view.trial_id)) for run in runs)
