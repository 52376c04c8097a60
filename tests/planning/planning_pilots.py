"""Helpers for the planning tests: pilots written into a real results database with evalq.results.store."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from evalq.results.store import StudyRow, TrialRow, init_db, record_attempt, save_study


def insert_pilot(db_path: Path, study_id: str, runs: list[dict[str, Any]],
                 hypotheses: Optional[list[dict]] = None):
    """Insert a finished study; each run: task, condition, attempts=[{outcome, cost, start, end}]."""
    engine = init_db(f"sqlite:///{db_path}")
    conditions = list(dict.fromkeys(r["condition"] for r in runs))
    manifest = {"id": study_id, "conditions": [{"name": c} for c in conditions],
                "hypotheses": hypotheses or []}
    study = StudyRow(id=study_id, manifest=manifest, lock={"lock_digest": f"sha256:{study_id}"},
                     lock_digest=f"sha256:{study_id}")
    trials = [TrialRow(id=f"{study_id}-{i}", study_id=study_id, fixture_id=r["task"],
                       fixture_digest="sha256:x", fixture_ref="ref", condition=r["condition"],
                       repetition=r.get("repetition", 1), block=0, order_index=i)
              for i, r in enumerate(runs)]
    save_study(engine, study, trials)
    for i, run in enumerate(runs):
        for number, attempt in enumerate(run["attempts"], start=1):
            metrics = {"cost_usd": attempt.get("cost"), "duration_seconds": attempt.get("duration")}
            record_attempt(engine, {"trial_id": f"{study_id}-{i}", "attempt": number,
                                    "study_id": study_id, "outcome": attempt["outcome"],
                                    "started_at": attempt.get("start"),
                                    "agent_finished_at": attempt.get("end"),
                                    "finished_at": attempt.get("end"), "metrics": metrics})
    return engine
