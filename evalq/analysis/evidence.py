"""The adoption-baseline evidence record of a study run from a task manifest: per trial its
date and id, the tool and model versions, the task and its prompt, track, kind and condition,
the package with its published version and registry, OS, toolchain, permissions, budget and
time limit, and the limitations; the session's first visible check, its eventual result and
the repair cost as the attempt stored them; and for a run of a stage (a study whose tasks are
a baseline study's final workspaces) the baseline run it started from and the retention
observation (whether it still passes after the change).

Everything comes from what was frozen (the lock's `adoption` section) and what the database
recorded; a value neither holds is None ("unavailable"), never filled in.
"""

from __future__ import annotations

from typing import Any, Optional

from sqlalchemy import func, select

from evalq.graders.first_check import NO_CHECK_DECLARED
from evalq.report.fmt import utc_iso
from evalq.results.store import AttemptRow


def adoption_record(study) -> Optional[dict[str, Any]]:
    """The lock's record of the task manifest, or None for a study run without one."""
    return (study.lock or {}).get("adoption")


def trial_dates(engine, study_id: str) -> dict[str, Optional[str]]:
    """When each trial's first attempt started, as UTC ISO 8601 (absent: never started)."""
    with engine.connect() as conn:
        rows = conn.execute(select(AttemptRow.trial_id, func.min(AttemptRow.started_at))
                            .where(AttemptRow.study_id == study_id)
                            .group_by(AttemptRow.trial_id)).all()
    return {trial: utc_iso(started) for trial, started in rows}


#: why a run of a study that is no stage has no retention observation
NOT_A_STAGE = "not a stage run"


def session_fields(attempt) -> dict[str, Any]:
    """The counted attempt's first visible check, eventual result and repair cost, as stored;
    null where it has none, with the stored reason (or why there is no attempt)."""
    if attempt is None:
        return {"first_check_result": None, "first_check_reason": "no finished attempt",
                "eventual_result": None, "repair_cost": None,
                "repair_cost_reason": "no finished attempt"}
    checks = attempt.session_checks if isinstance(attempt.session_checks, dict) else None
    cost = (checks or {}).get("repair_cost")
    cost = cost if isinstance(cost, dict) else None
    reason = None
    if cost is None:
        reason = attempt.first_check_reason or (NO_CHECK_DECLARED
                                                if checks is None else
                                                "the agent never ran the visible check")
    return {"first_check_result": attempt.first_check_result,
            "first_check_reason": attempt.first_check_reason,
            "eventual_result": attempt.eventual_result,
            "repair_cost": cost, "repair_cost_reason": reason}


def stage_fields(record: dict[str, Any], stage: Optional[dict[str, Any]]) -> dict[str, Any]:
    """A stage run's baseline run and retention observation (`stage`: see evidence_row):
    `retained` is true or false only where the baseline run was correct and the stage run
    has a valid outcome; otherwise null with the reason."""
    if stage is None:
        return {"baseline_study": None, "baseline_trial_id": None, "baseline_task_id": None,
                "baseline_condition": None, "baseline_skill": None, "baseline_outcome": None,
                "baseline_date": None, "retained": None, "retention_reason": NOT_A_STAGE}
    link = stage["link"]
    reason = None
    if not link["retention_observation"]:
        reason = (f"the baseline run was {link['baseline_outcome']}, not correct: no "
                  "retention observation")
    elif link["passes"] is None:
        reason = f"no valid outcome ({link['outcome'] or 'not finished'})"
    skill = ((record.get("conditions") or {}).get(link["baseline_condition"]) or {})
    return {"baseline_study": stage["baseline_study"],
            "baseline_trial_id": link["baseline_trial"],
            "baseline_task_id": stage["baseline_task"],
            "baseline_condition": link["baseline_condition"],
            "baseline_skill": skill.get("skill"), "baseline_outcome": link["baseline_outcome"],
            "baseline_date": stage["baseline_date"],
            "retained": link["passes"] if reason is None else None,
            "retention_reason": reason}


def evidence_row(record: dict[str, Any], run, date: Optional[str],
                 stage: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """One trial's evidence record, flat (an export row). For a run of a stage, `record` is
    its baseline study's and `stage` holds the run's `link` (report/stages.py), its
    `baseline_task`, `baseline_study` and `baseline_date`, the stage's `prompt` (None when no
    agent ran) and its `baseline_version` and `target_version`: the task's fields are the
    baseline task's, its track `upgrade`."""
    task = (record.get("tasks") or {}).get(stage["baseline_task"] if stage else run.task) or {}
    condition = (record.get("conditions") or {}).get(run.condition) or {}
    tool, model = record.get("tool") or {}, record.get("model") or {}
    package, env = record.get("package") or {}, record.get("environment") or {}
    budgets = record.get("budgets") or {}
    first = run.view.first
    return {
        "date": date, "trial_id": run.view.trial_id,
        "tool": tool.get("name"), "tool_version": tool.get("version"),
        "model": model.get("name"), "model_version": model.get("version"),
        "task_id": run.task, "prompt": stage["prompt"] if stage else task.get("prompt"),
        "track": "upgrade" if stage else task.get("track"),
        "kind": task.get("kind"), "suitable": task.get("suitable"),
        "condition": run.condition, "skill": condition.get("skill"),
        "package": package.get("name"), "published_version": task.get("package_version"),
        "registry": package.get("registry"),
        "baseline_version": (stage or task).get("baseline_version"),
        "target_version": (stage or task).get("target_version"),
        "os": env.get("os"), "toolchain": env.get("toolchain"),
        "permissions": env.get("permissions"),
        "max_steps": budgets.get("max_steps"), "timeout_seconds": budgets.get("timeout_seconds"),
        "limitations": record.get("limitations"),
        "acceptance": task.get("acceptance"),
        "outcome": run.outcome, "first_outcome": first.outcome if first else None,
        "task_manifest_digest": (record.get("task_manifest") or {}).get("digest"),
        **session_fields(run.view.counted),
        **stage_fields(record, stage),
    }


def evidence_block(engine, study, runs) -> Optional[dict[str, Any]]:
    """The report's `evidence`: the frozen record once, and each trial's date and id beside
    its task, condition and outcome; None for a study run without a task manifest."""
    record = adoption_record(study)
    if record is None:
        return None
    dates = trial_dates(engine, study.id)
    trials = [{"trial_id": r.view.trial_id, "date": dates.get(r.view.trial_id),
               "task_id": r.task, "condition": r.condition, "outcome": r.outcome}
              for r in runs]
    return dict(record, trials=trials)
