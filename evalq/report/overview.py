"""What a reviewer reads first: what each condition ran, the study's design, when it ran and
the digests it is pinned by; the report's `overview` block (the opening section is rendered
from it and from the rest of the report)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select

from evalq.analysis.pinned import agent_source_pin
from evalq.report.fmt import utc_iso
from evalq.results.store import AttemptRow


def timing(engine, study_id: str) -> dict[str, Any]:
    """When the study's first attempt started and its last one finished, and the wall time
    between them (None each when no attempt recorded it: an imported study, say)."""
    with engine.connect() as conn:
        first, last = conn.execute(
            select(func.min(AttemptRow.started_at), func.max(AttemptRow.finished_at))
            .where(AttemptRow.study_id == study_id)).one()
    wall = last - first if first is not None and last is not None and last >= first else None
    return {"first_started_at": utc_iso(first), "last_finished_at": utc_iso(last),
            "wall_seconds": wall,
            "reason": None if wall is not None else "no attempt recorded when it ran"}


def condition_descriptions(study) -> dict[str, dict[str, Any]]:
    """Per condition: its agent, model, skill, commit label and pinned agent source."""
    environment = study.manifest.get("environment") or {}
    out = {}
    for cond in study.manifest.get("conditions") or []:
        out[cond.get("name")] = {
            "agent": cond.get("agent"),
            "model": cond.get("model") or environment.get("model_id"),
            "skill": cond.get("skill"),
            "commit": cond.get("commit"),
            "source": agent_source_pin(study, cond.get("name")),
        }
    return out


def overview_block(engine, study, runs) -> dict[str, Any]:
    lock = study.lock or {}
    return {
        "conditions": condition_descriptions(study),
        "design": {"tasks": len({r.task for r in runs}),
                   "repetitions": study.manifest.get("repetitions"),
                   "conditions": len(study.manifest.get("conditions") or []),
                   "max_attempts": study.manifest.get("max_attempts")},
        "timing": timing(engine, study.id),
        "digests": {"manifest_digest": lock.get("manifest_digest"),
                    "lock_digest": study.lock_digest,
                    "suite_digest": lock.get("suite_digest")},
    }
