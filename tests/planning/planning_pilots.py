"""Helpers for the planning tests: pilots written into a real results database with evalq.results.store."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from conftest import PY_FIXTURES

from evalq.results.store import StudyRow, TrialRow, init_db, record_attempt, save_study

H1_TPR = [("H1", "tpr")]


def manifest(folder: Path, fixtures_dir: Path, study_id: str, repetitions: int,
             hypotheses: list[tuple[str, str]] = H1_TPR) -> Path:
    """A two-fixture study of conditions good/bad with primary hypotheses (id, metric), bad → good."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{study_id}.toml"
    listed = ", ".join(f'"{(fixtures_dir / n).as_posix()}"' for n in PY_FIXTURES)
    declared = "".join(f'''
[[hypotheses]]
id = "{hid}"
metric = "{metric}"
baseline = "bad"
candidate = "good"
''' for hid, metric in hypotheses)
    path.write_text(f'''
id = "{study_id}"
fixtures = [{listed}]
repetitions = {repetitions}
seed = 3

[budgets]
wall_seconds = 120

[[conditions]]
name = "good"
agent = "scripted"
settings = {{ action = "solution", solution = "correct", usage = {{ input_tokens = 10, output_tokens = 5, cost_usd = 0.05 }} }}

[[conditions]]
name = "bad"
agent = "scripted"
settings = {{ action = "solution", solution = "incorrect", usage = {{ input_tokens = 10, output_tokens = 5, cost_usd = 0.02 }} }}
''' + declared)
    return path


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
