"""Resubmit, regrade and cancel: each a database change first, then messages (DESIGN).

Every attempt stays a row: resubmission adds attempt n+1 beside the failed one, so the report
can show first-attempt and eventual figures. Regrading re-sends stored artifacts to
the grading queue without running the agent again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlmodel import Session, select

from evalq.artifacts import open_store
from evalq.config import Settings
from evalq.errors import UserError
from evalq.fixtures.cache import cached_fixture
from evalq.models import StudyManifest
from evalq.results.store import (AttemptRow, TrialRow, create_attempts, latest_attempts, read_study,
                     set_cancelled)
from evalq.queue.launch import publish_run_messages
from evalq.study.budgets import effective_limits, time_limits_for
from evalq.ops.recovery import send_grading

RESUBMITTABLE = ("infrastructure_failure", "grading_failure", "timed_out")
REGRADABLE = ("grading_failure", "correct", "incorrect")


@dataclass
class ActionSummary:
    study: str
    selected: int
    sent: int
    note: str = ""


def _time_limits(settings: Settings, manifest: StudyManifest, trial: TrialRow
                 ) -> tuple[float, float]:
    """Soft/hard Celery limits from the fixture's and study's budgets (as `evalq run` sets).

    The fixture comes from the artifact store: the manifest's folder may not be on this machine.
    """
    fixture = cached_fixture(open_store(settings.artifacts_url),
                             settings.home / "cache" / "fixtures", trial.fixture_ref,
                             trial.fixture_digest)
    return time_limits_for(effective_limits(fixture.spec.limits, manifest).wall_seconds)


def resubmit(app, engine, settings: Settings, study_id: str, outcome: str) -> ActionSummary:
    """New attempts for trials whose latest attempt ended with `outcome`, and their messages."""
    if outcome not in RESUBMITTABLE:
        raise UserError(f"cannot resubmit outcome '{outcome}'", field="--outcome",
                        fix=f"use one of {', '.join(RESUBMITTABLE)}")
    study = read_study(engine, study_id)
    if study.cancelled:
        raise UserError(f"study '{study_id}' is cancelled", field="STUDY",
                        fix="resume it first with `evalq run <manifest> --resume`")
    manifest = StudyManifest.model_validate(study.manifest)
    trials, latest = latest_attempts(engine, study_id)
    chosen = [(trials[r.trial_id], r.attempt + 1) for r in latest.values()
              if r.outcome == outcome and r.trial_id in trials]
    chosen.sort(key=lambda item: item[0].order_index)
    create_attempts(engine, [t.id for t, _ in chosen], {t.id: a for t, a in chosen}, study_id)
    by_fixture = {t.fixture_id: t for t, _ in chosen}
    publish_run_messages(app, chosen, lambda fid: _time_limits(settings, manifest, by_fixture[fid]),
                         manifest.max_attempts, settings.visibility_seconds)
    return ActionSummary(study_id, len(chosen), len(chosen))


def regrade(app, engine, study_id: str, outcome: str = "grading_failure") -> ActionSummary:
    """Re-send the stored final workspaces of attempts that ended with `outcome` to grading."""
    if outcome not in REGRADABLE:
        raise UserError(f"cannot regrade outcome '{outcome}' (no graded workspace)",
                        field="--outcome", fix=f"use one of {', '.join(REGRADABLE)}")
    read_study(engine, study_id)
    trials, _ = latest_attempts(engine, study_id)
    with Session(engine) as session:
        rows = session.exec(select(AttemptRow).where(AttemptRow.study_id == study_id,
                                                     AttemptRow.outcome == outcome)).all()
    usable = [(trials[r.trial_id], r) for r in rows
              if r.trial_id in trials and r.artifacts and r.artifacts.get("workspace")]
    send_grading(app, usable, regrade=True)
    skipped = len(rows) - len(usable)
    note = f"{skipped} without a stored workspace skipped" if skipped else ""
    return ActionSummary(study_id, len(rows), len(usable), note)


def cancel(engine, study_id: str) -> ActionSummary:
    """Flag the study: queued attempts become 'cancelled' (their messages find nothing to claim),
    running agents stop at their next poll; finished attempts are kept as they are."""
    read_study(engine, study_id)
    queued = set_cancelled(engine, study_id)
    with Session(engine) as session:
        running = len(session.exec(select(AttemptRow.id).where(
            AttemptRow.study_id == study_id, AttemptRow.state == "running",
            AttemptRow.outcome.is_(None))).all())
    return ActionSummary(study_id, queued + running, 0,
                         f"{queued} queued attempt(s) revoked, {running} running told to stop "
                         f"(at {time.strftime('%H:%M:%S')})")
