"""Study manifests: loading, validation beyond types, and freezing into a lock (SPEC S1, S2)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from evalq import __version__
from evalq.digest import data_digest
from evalq.errors import UserError
from evalq.fixtures.fixture import MANIFEST as FIXTURE_MANIFEST, Fixture, load_fixture
from evalq.models import StudyManifest
from evalq.fileio import load_document, validation_error
from evalq.fileio import write_json_atomic

LOCK_SUFFIX = ".lock.json"


@dataclass(frozen=True)
class Study:
    path: Path
    manifest: StudyManifest
    fixtures: tuple[Fixture, ...]
    skills: dict = field(default_factory=dict)  # condition name -> skill directory

    @property
    def id(self) -> str:
        return self.manifest.id

    @property
    def lock_path(self) -> Path:
        return lock_path_for(self.path)

    def fixture(self, fixture_id: str) -> Fixture:
        for fixture in self.fixtures:
            if fixture.id == fixture_id:
                return fixture
        raise KeyError(fixture_id)


def lock_path_for(manifest_path: Path) -> Path:
    return manifest_path.with_name(manifest_path.stem + LOCK_SUFFIX)


def _fixture_dirs(entry: str, base: Path, manifest_path: Path, index: int) -> list[Path]:
    path = (base / entry).resolve()
    if (path / FIXTURE_MANIFEST).is_file():
        return [path]
    if path.is_dir():
        found = sorted(p.parent for p in path.glob(f"*/{FIXTURE_MANIFEST}"))
        if found:
            return found
    raise UserError(f"'{entry}' is neither a fixture nor a folder of fixtures",
                    file=manifest_path, field=f"fixtures.{index}",
                    fix="give a path, relative to the manifest, to a folder with fixture.toml")


def _check_references(manifest: StudyManifest, path: Path) -> None:
    names = [c.name for c in manifest.conditions]
    for i, name in enumerate(names):
        if names.index(name) != i:
            raise UserError(f"condition name '{name}' is used twice", file=path,
                            field=f"conditions.{i}.name", fix="give every condition its own name")
    for i, hyp in enumerate(manifest.hypotheses):
        for side in ("baseline", "candidate"):
            if getattr(hyp, side) not in names:
                raise UserError(f"'{getattr(hyp, side)}' is not a condition of this study",
                                file=path, field=f"hypotheses.{i}.{side}",
                                fix=f"use one of {', '.join(names)}")
    from evalq.workers.agents import validate_condition

    for i, condition in enumerate(manifest.conditions):
        problem = validate_condition(condition)
        if problem:
            field, message, fix = problem
            raise UserError(message, file=path, field=f"conditions.{i}.{field}", fix=fix)


def load_study(path: str | Path, verify_fixtures: bool = True) -> Study:
    """Parse and validate a manifest and every fixture it names; one-line errors for people."""
    path = Path(path).resolve()
    data = load_document(path)
    try:
        manifest = StudyManifest.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, path) from None
    _check_references(manifest, path)
    fixtures: list[Fixture] = []
    seen: dict[str, Path] = {}
    for index, entry in enumerate(manifest.fixtures):
        for folder in _fixture_dirs(entry, path.parent, path, index):
            fixture = load_fixture(folder, verify=verify_fixtures)
            if fixture.id in seen:
                raise UserError(f"fixture id '{fixture.id}' appears twice ({seen[fixture.id]})",
                                file=path, field=f"fixtures.{index}",
                                fix="list each fixture once")
            seen[fixture.id] = folder
            fixtures.append(fixture)
    from evalq.skills import resolve_skill
    from evalq.tracks import check_tracks

    check_tracks(manifest, fixtures, path)
    skills = {c.name: resolve_skill(c.skill, path, i)
              for i, c in enumerate(manifest.conditions) if c.skill}
    return Study(path=path, manifest=manifest, fixtures=tuple(fixtures), skills=skills)


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
        from evalq.skills import skill_digests

        body["skills"] = skill_digests(study.skills)
    lock = dict(body, lock_digest=data_digest(body), evalq_version=__version__)
    return lock


def freeze(study: Study, force: bool = False) -> dict:
    """Write the lock next to the manifest. A lock that disagrees is only replaced with force.

    A forced re-freeze keeps the old lock's planning section (it lies outside lock_digest): the
    usual path is plan, adopt the chosen design in the manifest, re-freeze, and the
    pre-registration record must survive that step.
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
    write_json_atomic(target, lock, sort_keys=True)
    return lock


def _read_lock(target: Path) -> dict:
    try:
        return json.loads(target.read_text())
    except json.JSONDecodeError:
        raise UserError("lock file is not valid JSON", file=target,
                        fix="restore it from version control or re-freeze with --force") from None


def verify_lock(study: Study) -> dict | None:
    """The lock if the study matches it; None when unfrozen; refuses a changed frozen input."""
    target = study.lock_path
    if not target.exists():
        return None
    existing = _read_lock(target)
    current = build_lock(study)
    if existing.get("lock_digest") == current["lock_digest"]:
        return existing
    changed = [key for key in ("manifest_digest", "seed", "repetitions", "skills")
               if existing.get(key) != current.get(key)]
    old_fx, new_fx = existing.get("fixtures", {}), current["fixtures"]
    changed += [f"fixtures.{k}" for k in sorted(set(old_fx) | set(new_fx))
                if old_fx.get(k, {}).get("digest") != new_fx.get(k, {}).get("digest")]
    raise UserError(f"frozen inputs changed since the study was frozen: {', '.join(changed)}",
                    file=target, fix="restore them, or freeze a new study with a new id")
