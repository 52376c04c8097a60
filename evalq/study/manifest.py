"""Study manifests: loading and validation beyond types; the lock is in lock.py."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from pydantic import ValidationError

from evalq.errors import UserError
from evalq.fixtures.fixture import MANIFEST as FIXTURE_MANIFEST, Fixture, load_fixture
from evalq.models import StudyManifest
from evalq.study.adoption import Adoption, check_adoption, split_adoption
from evalq.study.agent_source import resolve_source
from evalq.study.budgets import check_priced_models
from evalq.study.paths import lock_path_for
from evalq.study.skills import resolve_skill
from evalq.study.task_manifest import is_task_manifest, load_task_manifest
from evalq.study.tracks import check_tracks
from evalq.workers.agents.registry import validate_condition
from evalq.fileio import load_document, validation_error



@dataclass(frozen=True)
class Study:
    path: Path
    manifest: StudyManifest
    fixtures: tuple[Fixture, ...]
    skills: dict = field(default_factory=dict)  # condition name -> skill directory
    sources: dict = field(default_factory=dict)  # condition name -> its agent source (SourceSpec)
    adoption: Optional[Adoption] = None  # the adoption-baseline task manifest it runs, if any
    stage: dict | None = None  # a stage's links to its baseline runs (the lock's `stage`)

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
    for i, condition in enumerate(manifest.conditions):
        problem = validate_condition(condition)
        if problem:
            field, message, fix = problem
            raise UserError(message, file=path, field=f"conditions.{i}.{field}", fix=fix)
        _check_source_fields(condition, i, path)
    if manifest.mode == "commit-comparison":
        _check_only_sources_differ(manifest, path)


#: what conditions of a commit-comparison study may differ in: the agent's source itself
INTERVENTION_FIELDS = {"name", "commit", "source"}


def _check_source_fields(condition, index: int, path: Path) -> None:
    """{agent_dir} needs a source; a source's commit is not also written as a free label."""
    if condition.source is not None and condition.commit is not None:
        raise UserError("a condition with a source takes its commit from the source",
                        file=path, field=f"conditions.{index}.commit",
                        fix="remove `commit` (the lock records the commit id the source "
                            "resolves to)")
    if condition.source is None and "{agent_dir}" in json.dumps(condition.settings):
        raise UserError("{agent_dir} names the condition's agent source, and it has none",
                        file=path, field=f"conditions.{index}.settings",
                        fix='add source = { path = "agents/" } or source = { repo = ".", '
                            'commit = "v2" } to the condition')


def _check_only_sources_differ(manifest: StudyManifest, path: Path) -> None:
    """A commit comparison compares the agent's code: with sources, nothing else may differ."""
    conditions = manifest.conditions
    if not any(c.source is not None for c in conditions):
        return  # commits named by label only (older studies): nothing to check against
    first = conditions[0]
    for i, other in enumerate(conditions):
        if other.source is None:
            raise UserError("in a commit comparison every condition names its agent source",
                            file=path, field=f"conditions.{i}.source",
                            fix='add source = { repo = ".", commit = "..." }')
        a = first.model_dump(mode="json", exclude=INTERVENTION_FIELDS)
        b = other.model_dump(mode="json", exclude=INTERVENTION_FIELDS)
        differing = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        if differing:
            raise UserError(f"in a commit comparison conditions differ only in their source; "
                            f"'{other.name}' also differs from '{first.name}' in "
                            f"{', '.join(differing)}", file=path,
                            field=f"conditions.{i}.{differing[0]}",
                            fix=f"give it the same {differing[0]}, or use mode = \"controlled\"")


def load_manifest(path: str | Path, verify_fixtures: bool = True) -> Study:
    """Parse and validate a manifest and every fixture it names; one-line errors for people."""
    path = Path(path).resolve()
    data = load_document(path)
    if is_task_manifest(data):
        load_task_manifest(path)  # its own violations first, one line each
        raise UserError("a task manifest alone names no package, fixtures or conditions",
                        file=path, fix=f'give evalq a study file with [adoption] task_manifest '
                        f'= "{path.name}" and package = "<name>", its fixtures and '
                        '[[conditions]] (README: Adoption baseline manifests)')
    data, adoption = split_adoption(data, path)
    try:
        manifest = StudyManifest.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, path) from None
    _check_references(manifest, path)
    fixtures: list[Fixture] = []
    seen: dict[str, Path] = {}
    stage = None
    if manifest.stage is not None:  # tasks from the baseline's runs (reads its database)
        from evalq.study.stage import derive_stage

        derived, stage = derive_stage(manifest, path)
        fixtures.extend(derived)
    for index, entry in enumerate(manifest.fixtures):
        for folder in _fixture_dirs(entry, path.parent, path, index):
            fixture = load_fixture(folder, verify=verify_fixtures)
            if fixture.id in seen:
                raise UserError(f"fixture id '{fixture.id}' appears twice ({seen[fixture.id]})",
                                file=path, field=f"fixtures.{index}",
                                fix="list each fixture once")
            seen[fixture.id] = folder
            fixtures.append(fixture)
    check_tracks(manifest, fixtures, path)
    if adoption is not None:
        check_adoption(adoption, manifest, fixtures, path)
    check_priced_models(manifest, fixtures, path)
    skills = {c.name: resolve_skill(c.skill, path, i)
              for i, c in enumerate(manifest.conditions) if c.skill}
    sources = {c.name: resolve_source(c.source, path, i, c.name)
               for i, c in enumerate(manifest.conditions) if c.source is not None}
    return Study(path=path, manifest=manifest, fixtures=tuple(fixtures), skills=skills,
                 sources=sources, adoption=adoption, stage=stage)
