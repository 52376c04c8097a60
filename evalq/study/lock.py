"""Freezing a study into its lock: every digest a result depends on, and the check
that refuses a run whose frozen inputs changed."""

from __future__ import annotations

from pathlib import Path

from evalq import __version__
from evalq.digest import data_digest
from evalq.errors import UserError
from evalq.fileio import read_json_object, write_json_atomic
from evalq.study.adoption import lock_section, task_labels
from evalq.study.agent_source import checkout_states, lock_entries, refuse_dirty
from evalq.study.manifest import Study
from evalq.study.skills import skill_digests


def build_lock(study: Study) -> dict:
    """Everything a result depends on, by digest; lock_digest is the study's identity."""
    body = {
        "study_id": study.id,
        "manifest_digest": data_digest(study.manifest.model_dump(mode="json")),
        "fixtures": {f.id: {"digest": f.digest, "workspace_digest": f.spec.workspace_digest}
                     for f in study.fixtures},
        "suite_digest": data_digest(sorted(f.digest for f in study.fixtures)),
        "seed": study.manifest.seed,
        "repetitions": study.manifest.repetitions,
    }
    if study.skills:
        body["skills"] = skill_digests(study.skills)
    if study.sources:  # digest and resolved commit id of each condition's agent source
        body["agent_sources"] = lock_entries(study.sources)
    if study.adoption is not None:  # the task manifest's digest, pins and tasks; its labels
        body["adoption"] = lock_section(study.adoption, study.manifest)
        body["task_labels"] = task_labels(study.adoption, study.fixtures)
    if study.stage is not None:  # the baseline study and each task's baseline run, by digest
        body["stage"] = study.stage
    lock = dict(body, lock_digest=data_digest(body), evalq_version=__version__)
    if study.stage is not None:  # the report's tracks, without deriving the tasks again
        from evalq.analysis.tracks import labels_from_fixtures

        lock["task_labels"] = labels_from_fixtures(study.fixtures)
    return lock


def freeze(study: Study, force: bool = False, allow_dirty: bool = False) -> dict:
    """Write the lock next to the manifest. A lock that disagrees is only replaced with force.

    A forced re-freeze keeps the old lock's planning section (it lies outside lock_digest): the
    usual path is plan, adopt the chosen design in the manifest, re-freeze, and the
    pre-registration record must survive that step.

    An agent source with uncommitted changes is refused unless `allow_dirty`; the lock
    records each source's checkout state and the flag, outside lock_digest (the digests pin
    the code itself).
    """
    lock = build_lock(study)
    target = study.lock_path
    try:
        existing = _read_lock(target) if target.exists() else None
    except UserError:
        if not force:
            raise
        existing = None  # a corrupt lock is what --force is for
    if existing is not None and not force:
        if existing.get("lock_digest") != lock["lock_digest"]:
            raise UserError("the study is already frozen with different inputs", file=target,
                            fix="give the changed study a new id, or pass --force to re-freeze "
                                "(earlier results then become exploratory)")
        return existing
    if existing and "planning" in existing:
        lock["planning"] = existing["planning"]
    if study.sources:
        states = checkout_states(study.sources)
        if not allow_dirty:
            refuse_dirty(study.sources, states)
        lock["agent_source_states"] = states
        if allow_dirty:
            lock["allow_dirty"] = True
    write_json_atomic(target, lock, sort_keys=True)
    return lock


def _read_lock(target: Path) -> dict:
    return read_json_object(target, "the study lock",
                            "restore it from version control or re-freeze with --force")


def verify_lock(study: Study) -> dict | None:
    """The lock if the study matches it; None when unfrozen; refuses a changed frozen input."""
    target = study.lock_path
    if not target.exists():
        return None
    existing = _read_lock(target)
    current = build_lock(study)
    if existing.get("lock_digest") == current["lock_digest"]:
        return existing
    changed = [key for key in ("manifest_digest", "seed", "repetitions", "skills", "stage")
               if existing.get(key) != current.get(key)]
    changed += _changed_adoption(existing.get("adoption") or {}, current.get("adoption") or {})
    old_fx, new_fx = existing.get("fixtures", {}), current["fixtures"]
    changed += [f"fixtures.{k}" for k in sorted(set(old_fx) | set(new_fx))
                if old_fx.get(k, {}).get("digest") != new_fx.get(k, {}).get("digest")]
    changed += _changed_sources(existing.get("agent_sources") or {},
                                current.get("agent_sources") or {})
    raise UserError(f"frozen inputs changed since the study was frozen: {', '.join(changed)}",
                    file=target, fix="restore them, or freeze a new study with a new id")


def _changed_adoption(old: dict, new: dict) -> list[str]:
    """`adoption.<part>` for each part of the task manifest's record that differs."""
    return [f"adoption.{key}" for key in sorted(set(old) | set(new))
            if old.get(key) != new.get(key)]


def _changed_sources(old: dict, new: dict) -> list[str]:
    """`agent_sources.<condition>`, with the commit a name moved between, for those that differ."""
    changed = []
    for name in sorted(set(old) | set(new)):
        before, now = old.get(name) or {}, new.get(name) or {}
        if before == now:
            continue
        if before.get("commit") and now.get("commit") and before["commit"] != now["commit"]:
            changed.append(f"agent_sources.{name} ('{now.get('name')}' is now commit "
                           f"{now['commit'][:12]}, frozen as {before['commit'][:12]})")
        else:
            changed.append(f"agent_sources.{name}")
    return changed
