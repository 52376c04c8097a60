"""The no-op study every throughput run uses, and the figures read back from its attempt rows.

Shared by the Redis-path runs (bench.overhead), the one-at-a-time runs (bench.critical_path)
and the embedded default's run (bench.embedded_run), so all three measure the same thing.
"""

from __future__ import annotations

import time
from pathlib import Path

from evalq.config import Settings

from .services import ROOT, wait_for

FIXTURE = ROOT / "bench" / "fixture" / "bench-noop"
IMAGE = "evalq-grader-python:local"


def settings_for(workdir: Path, broker: str, database: str, sandbox: str) -> Settings:
    return Settings(home=workdir / "home", database_url=database, broker_url=broker,
                    artifacts_url=str(workdir / "artifacts"), sandbox=sandbox,
                    max_trial_seconds=600.0, lease_seconds=60.0)


def write_study(folder: Path, study_id: str, trials: int) -> Path:
    """Two no-op conditions × trials/2 repetitions of the bench fixture."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.toml"
    path.write_text(f'''id = "{study_id}"
fixtures = ["{FIXTURE.as_posix()}"]
repetitions = {max(1, trials // 2)}
seed = 1

[budgets]
wall_seconds = 60

[[conditions]]
name = "noop-a"
agent = "scripted"
settings = {{ action = "noop" }}

[[conditions]]
name = "noop-b"
agent = "scripted"
settings = {{ action = "noop" }}
''')
    return path


def finished_count(engine, study_id: str) -> int:
    from sqlalchemy import func
    from sqlmodel import Session, select

    from evalq.results.store import AttemptRow

    with Session(engine) as session:
        return session.exec(select(func.count()).select_from(AttemptRow).where(
            AttemptRow.study_id == study_id, AttemptRow.outcome.is_not(None))).one()


def wait_finished(engine, study_id: str, count: int, timeout: float) -> None:
    wait_for(lambda: finished_count(engine, study_id) >= count, timeout,
             f"{count} trials of {study_id}", poll=0.05)


def mean(values) -> float | None:
    """Mean of the known values; None (unavailable, never 0) when none is known."""
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def stage_means(rows) -> dict:
    """Per-stage mean seconds from the attempt rows' own timestamps."""
    return {
        "agent_stage_seconds": mean(r.agent_finished_at - r.started_at for r in rows
                                    if r.agent_finished_at and r.started_at),
        "grader_run_seconds": mean((r.grade or {}).get("duration_seconds") for r in rows),
        "grading_stage_seconds": mean(r.graded_at - (r.grade or {}).get("started_at", r.graded_at)
                                      for r in rows if r.graded_at),
        "record_latency_seconds": mean(r.finished_at - r.graded_at for r in rows
                                       if r.graded_at and r.finished_at),
    }


def pipelined_figures(engine, study_id: str, started: float) -> dict:
    """Wall time from the first send to the last result, per trial, with outcomes and stages."""
    from evalq.results.store import attempts_of

    rows = attempts_of(engine, study_id)
    wall = max(r.finished_at for r in rows) - started
    outcomes: dict[str, int] = {}
    for row in rows:
        outcomes[row.outcome] = outcomes.get(row.outcome, 0) + 1
    return {"study": study_id, "trials": len(rows), "wall_seconds": wall,
            "per_trial": wall / len(rows), "trials_per_second": len(rows) / wall,
            "outcomes": outcomes, **stage_means(rows)}


def now() -> float:
    """Wall clock, as the attempt rows record it (time.time, not monotonic)."""
    return time.time()
