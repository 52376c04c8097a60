"""A study's stage: its tasks are a recorded baseline study's final workspaces.

Each baseline run taken (`take`: its correct runs, or all with a valid outcome; optionally
only some conditions) becomes one task: the baseline task with that run's stored workspace as
its starting state (fixtures/derived.py). The lock records, per task, the baseline trial and
attempt, the workspace's artifact and tree digest, and the baseline's lock digest, the
versions and the change script's digest, so a result is pinned to exactly what it started
from. Nothing of the baseline workspace runs here: the change runs in the agent sandbox.

The baseline is read from the results database and artifact store of these settings; the
derived fixtures are written to a temporary folder of this process (a dry run writes nothing
under EVALQ_HOME), and travel to workers through the store like any fixture.
"""

from __future__ import annotations

import atexit
import hashlib
import shutil
import tempfile
from pathlib import Path

from evalq.digest import tree_digest
from evalq.errors import AgentDataError, EvalqError, UserError
from evalq.fixtures.archive import unpack_workspace
from evalq.fixtures.derived import build_derived_fixture, derived_id
from evalq.fixtures.fixture import Fixture, load_fixture
from evalq.models import StudyManifest
from evalq.report.attempts import VALID
from evalq.urls import masked

#: what `take` selects
TAKE = {"correct": "the baseline runs whose counted outcome is correct",
        "all": "every baseline run with a valid counted outcome (correct, incorrect, timed_out)"}


def _refuse(path: Path, field: str, message: str, fix: str) -> UserError:
    return UserError(message, file=path, field=f"stage.{field}", fix=fix)


def _baseline_sources(path: Path, stage):
    """(engine, store, settings) holding the baseline; a refusal when there is no database."""
    from sqlalchemy import inspect
    from sqlalchemy.exc import InterfaceError, OperationalError

    from evalq.artifacts import open_store
    from evalq.config import load_settings
    from evalq.results.store import get_engine, init_db

    settings = load_settings()
    url = settings.database_url
    fix = ("run the baseline study first, with the same EVALQ_HOME or EVALQ_DATABASE_URL")
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).is_file():
        raise _refuse(path, "baseline", f"the baseline study '{stage.baseline}' cannot be "
                      f"read: no results database at {masked(url)}", fix)
    try:  # never created by reading: a stage only reads its baseline
        with get_engine(url).connect() as conn:
            ready = inspect(conn).has_table("studies")
    except (OperationalError, InterfaceError) as exc:
        raise _refuse(path, "baseline", f"the results database {masked(url)} cannot be "
                      f"opened: {str(exc.orig).strip()[:200]}", fix) from None
    if not ready:
        raise _refuse(path, "baseline", f"the results database {masked(url)} holds no evalq "
                      "tables", fix)
    return init_db(url), open_store(settings.artifacts_url), settings


def _baseline_study(engine, path: Path, stage):
    from sqlmodel import Session, select

    from evalq.results.store import StudyRow

    with Session(engine) as session:
        row = session.get(StudyRow, stage.baseline)
        known = [] if row is not None else list(session.exec(select(StudyRow.id)).all())
    if row is None:
        raise _refuse(path, "baseline", f"no study '{stage.baseline}' in the results database",
                      f"name a study that ran ({', '.join(sorted(known)[:10]) or 'none yet'})")
    if row.lock_digest != stage.baseline_lock:
        raise _refuse(path, "baseline_lock", f"the baseline study '{stage.baseline}' ran with "
                      f"lock {row.lock_digest}, not {stage.baseline_lock}",
                      "copy lock_digest from the baseline's study.lock.json (a baseline "
                      "re-frozen with other inputs is another baseline)")
    return row


def _taken(engine, row, path: Path, stage) -> list:
    """The baseline trial views the stage takes, in planned order; refuses what it cannot."""
    from evalq.analysis.runs import condition_names, study_runs

    names = condition_names(row)
    for i, name in enumerate(stage.conditions or []):
        if name not in names:
            raise _refuse(path, f"conditions.{i}", f"'{name}' is not a condition of the "
                          f"baseline study '{row.id}'", f"use one of {', '.join(names)}")
    wanted = set(stage.conditions or names)
    _, runs = study_runs(engine, row.id)
    views = [r.view for r in runs if r.condition in wanted]
    open_views = [v for v in views if v.outcome is None or
                  (stage.take == "all" and v.outcome not in VALID)]
    if open_views:
        v = open_views[0]
        raise _refuse(path, "take", f"baseline run {v.trial_id} has no valid counted outcome "
                      f"({v.outcome or 'not finished'}); {len(open_views)} such run(s)",
                      "finish the baseline (`evalq run --resume`, `evalq resubmit`), or take "
                      "= \"correct\", or name only finished conditions")
    chosen = [v for v in views if v.outcome == "correct" or
              (stage.take == "all" and v.outcome in VALID)]
    if not chosen:
        raise _refuse(path, "take", f"no baseline run of '{row.id}' is taken ({TAKE[stage.take]})",
                      "take = \"all\", or name conditions that have such runs")
    return chosen


def _workspace(store, view, path: Path) -> tuple[str, bytes]:
    """(artifact reference, archive bytes) of the counted attempt's final workspace."""
    attempt = view.counted
    ref = (attempt.artifacts or {}).get("workspace") if attempt is not None else None
    fix = ("take = \"correct\", or leave its condition out of stage.conditions; a workspace "
           "that was refused or lost cannot be a starting state")
    if not ref:
        raise _refuse(path, "take", f"baseline run {view.trial_id} (attempt "
                      f"{attempt.attempt if attempt else '?'}) has no stored final workspace",
                      fix)
    try:
        return ref, store.get(ref)
    except EvalqError as exc:
        raise _refuse(path, "take", f"baseline run {view.trial_id}: its final workspace "
                      f"{ref[:19]}… cannot be read: {exc}", fix) from None


def _base_fixture(store, trial, cache: dict, scratch: Path) -> Fixture:
    """The baseline's fixture as its runs had it: from the store, checked against its digest."""
    if trial.fixture_digest not in cache:
        folder = scratch / "baseline" / hashlib.sha256(trial.fixture_digest.encode()).hexdigest()
        unpack_workspace(store.get(trial.fixture_ref), folder)
        fixture = load_fixture(folder)
        if fixture.digest != trial.fixture_digest:
            raise UserError(f"baseline fixture {trial.fixture_id} in the store is not "
                            f"{trial.fixture_digest}", field="stage.baseline",
                            fix="the artifact store is damaged: restore it")
        cache[trial.fixture_digest] = fixture
    return cache[trial.fixture_digest]


def _scratch() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="evalq-stage-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


def _change(path: Path, stage) -> bytes | None:
    if stage.change is None:
        return None
    script = (path.parent / stage.change).resolve()
    if not script.is_file():
        raise _refuse(path, "change", f"no change script at {script}",
                      "give a path, relative to the manifest, to a shell script")
    return script.read_bytes()


def _refuse_unsealed(path: Path, stage, settings) -> None:
    """A change runs on agent-written files: only ever in a sealed sandbox."""
    if stage.change is not None and settings.agent_sandbox == "none":
        raise _refuse(path, "change", "the change script runs on the baseline's agent-written "
                      "workspace, and the agent sandbox is `none` (no sandbox)",
                      "set EVALQ_AGENT_SANDBOX=bwrap or docker")


def derive_stage(manifest: StudyManifest, path: Path) -> tuple[tuple[Fixture, ...], dict]:
    """The stage's tasks as fixtures, and the lock's `stage` section that links them."""
    stage = manifest.stage
    engine, store, settings = _baseline_sources(path, stage)
    _refuse_unsealed(path, stage, settings)
    row = _baseline_study(engine, path, stage)
    change = _change(path, stage)
    from evalq.results.store import records, TrialRow

    from evalq.analysis.recorded_labels import recorded_labels

    trials = {t.id: t for t in records(engine, TrialRow, row.id, [TrialRow.order_index])}
    labels = recorded_labels(row) or {}  # a task manifest's tracks, where fixtures name none
    scratch, bases = _scratch(), {}
    fixtures, runs, seen = [], {}, {}
    for view in _taken(engine, row, path, stage):
        trial = trials[view.trial_id]
        base = _base_fixture(store, trial, bases, scratch)
        ref, archive = _workspace(store, view, path)
        new_id = derived_id(base.id, view.condition, view.repetition)
        if new_id in seen:
            raise _refuse(path, "conditions", f"baseline runs {seen[new_id]} and "
                          f"{view.trial_id} would make the same task id '{new_id}'",
                          "take only one of the conditions whose names differ by case")
        seen[new_id] = view.trial_id
        updates = {"track": "upgrade", "baseline_version": stage.baseline_version,
                   "target_version": stage.target_version,
                   "package": stage.package or base.spec.package,
                   "title": f"{base.spec.title} (from {view.trial_id})"}
        if stage.prompt:
            updates["prompt"] = stage.prompt
        try:
            fixture = build_derived_fixture(
                base, archive, scratch / "tasks" / new_id, new_id=new_id, updates=updates,
                change=change, origin={"baseline_study": row.id, "baseline_lock": row.lock_digest,
                                       "baseline_trial": view.trial_id,
                                       "baseline_attempt": view.counted.attempt,
                                       "workspace_artifact": ref})
        except (AgentDataError, UserError) as exc:
            raise _refuse(path, "take", f"baseline run {view.trial_id} cannot start a task: "
                          f"{getattr(exc, 'message', str(exc))}",
                          "take = \"correct\", or leave its condition out") from None
        fixtures.append(fixture)
        runs[new_id] = {
            "baseline_trial": view.trial_id, "baseline_attempt": view.counted.attempt,
            "baseline_condition": view.condition, "baseline_fixture": base.id,
            "baseline_fixture_digest": base.digest, "baseline_outcome": view.outcome,
            "baseline_track": base.spec.track or labels.get(base.id, {}).get("track"),
            "workspace_artifact": ref,
            "workspace_digest": tree_digest(fixture.workspace_dir)}
    section = {"baseline_study": row.id, "baseline_lock": row.lock_digest,
               "take": stage.take, "conditions": stage.conditions,
               "baseline_version": stage.baseline_version,
               "target_version": stage.target_version, "agent": stage.agent,
               "change": None if change is None else
               {"path": stage.change, "digest": "sha256:" + hashlib.sha256(change).hexdigest()},
               "runs": runs}
    return tuple(fixtures), section
