"""The adoption-baseline evidence record of a study run from a task manifest: per trial its
date and id, the tool and model versions, the task and its prompt, track, kind and condition,
the package with its published version and registry, OS, toolchain, permissions, budget and
time limit, and the limitations.

Everything comes from what was frozen (the lock's `adoption` section) and what the database
recorded; a value neither holds is None ("unavailable"), never filled in.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Optional

from sqlalchemy import func, select

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
    return {trial: _iso(started) for trial, started in rows}


def _iso(stamp: Optional[float]) -> Optional[str]:
    if stamp is None:
        return None
    return datetime.fromtimestamp(stamp, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def evidence_row(record: dict[str, Any], run, date: Optional[str]) -> dict[str, Any]:
    """One trial's evidence record, flat (an export row)."""
    task = (record.get("tasks") or {}).get(run.task) or {}
    condition = (record.get("conditions") or {}).get(run.condition) or {}
    tool, model = record.get("tool") or {}, record.get("model") or {}
    package, env = record.get("package") or {}, record.get("environment") or {}
    budgets = record.get("budgets") or {}
    first = run.view.first
    return {
        "date": date, "trial_id": run.view.trial_id,
        "tool": tool.get("name"), "tool_version": tool.get("version"),
        "model": model.get("name"), "model_version": model.get("version"),
        "task_id": run.task, "prompt": task.get("prompt"),
        "track": task.get("track"), "kind": task.get("kind"), "suitable": task.get("suitable"),
        "condition": run.condition, "skill": condition.get("skill"),
        "package": package.get("name"), "published_version": task.get("package_version"),
        "registry": package.get("registry"),
        "baseline_version": task.get("baseline_version"),
        "target_version": task.get("target_version"),
        "os": env.get("os"), "toolchain": env.get("toolchain"),
        "permissions": env.get("permissions"),
        "max_steps": budgets.get("max_steps"), "timeout_seconds": budgets.get("timeout_seconds"),
        "limitations": record.get("limitations"),
        "acceptance": task.get("acceptance"),
        "outcome": run.outcome, "first_outcome": first.outcome if first else None,
        "task_manifest_digest": (record.get("task_manifest") or {}).get("digest"),
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
