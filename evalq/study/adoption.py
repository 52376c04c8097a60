"""A study that runs an adoption-baseline task manifest: the `[adoption]` table of a study file.

The protocol's JSON pre-registers the tasks and the pins (tool, model, environment, budgets);
the study file adds what the JSON does not say: the package under study (the prompt rules
test its name), its registry, the limitations to record, the fixtures holding each task's
hidden checks (a fixture per task, by id), and the conditions. The JSON stays as
pre-registered: evalq reads it, never writes it, and freezes its digest in the lock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from pydantic import Field, ValidationError

from evalq.digest import data_digest
from evalq.errors import UserError, UserErrors
from evalq.models import Strict, StudyManifest
from evalq.study.task_manifest import SPLIT_OF_KIND, TaskManifest, load_task_manifest

TABLE = "adoption"


class AdoptionTable(Strict):
    """The `[adoption]` table of a study file."""

    task_manifest: str = Field(min_length=1)  # the protocol's JSON, relative to the study file
    package: str = Field(min_length=1)        # the package under study, as prompts would name it
    registry: Optional[str] = Field(None, min_length=1)   # where it is published (PyPI, npm...)
    limitations: Optional[list[str]] = None   # recorded with the evidence as written


@dataclass(frozen=True)
class Adoption:
    table: AdoptionTable
    tasks: TaskManifest


#: (study section, key) each pin of the task manifest fills, and where the JSON holds it
PINS = ((("budgets", "wall_seconds"), ("budgets", "timeoutSeconds")),
        (("budgets", "max_steps"), ("budgets", "maxSteps")),
        (("environment", "tool"), ("tool", "name")),
        (("environment", "tool_version"), ("tool", "version")),
        (("environment", "model_id"), ("model", "name")),
        (("environment", "model_version"), ("model", "version")),
        (("environment", "os"), ("environment", "os")),
        (("environment", "toolchain"), ("environment", "toolchain")),
        (("environment", "permissions"), ("environment", "permissions")))


def split_adoption(data: dict, path: Path) -> tuple[dict, Optional[Adoption]]:
    """The study document without its `[adoption]` table, its budgets and pinned environment
    taken from the task manifest; (data, None) for a study without one."""
    if TABLE not in data:
        return data, None
    data = dict(data)
    raw = data.pop(TABLE)
    if not isinstance(raw, dict):
        raise UserError("must be a table", file=path, field=TABLE,
                        fix='write [adoption] with task_manifest = "manifest.json" and '
                            'package = "<name>"')
    try:
        table = AdoptionTable.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in (TABLE, *err.get("loc", ())))
        fix = {"missing": "add this field",
               "extra_forbidden": "remove this field or check its spelling"}.get(
            err.get("type", ""), "see README: Adoption baseline manifests")
        raise UserError(err.get("msg", "invalid value"), file=path, field=loc, fix=fix) from None
    tasks = load_task_manifest(path.parent / table.task_manifest)
    return _pinned(data, tasks, path), Adoption(table=table, tasks=tasks)


def _pinned(data: dict, tasks: TaskManifest, path: Path) -> dict:
    """Budgets and environment as the task manifest pins them; a study value that says
    otherwise is refused (the pre-registered pins are the ones that hold)."""
    if any(not isinstance(data.get(name) or {}, dict) for name in ("budgets", "environment")):
        return data  # not a table: the study's own validation names it
    sections = {name: dict(data.get(name) or {}) for name in ("budgets", "environment")}
    errors = []
    for (section, key), (json_section, json_key) in PINS:
        wanted = tasks.data[json_section][json_key]
        given = sections[section].get(key)
        if given is not None and given != wanted:
            errors.append(UserError(
                f"{given!r} differs from the task manifest's {json_section}.{json_key} "
                f"({wanted!r})", file=path, field=f"{section}.{key}",
                fix="remove it: the task manifest pins it"))
        sections[section][key] = wanted
    if errors:
        raise UserErrors(errors)
    return dict(data, **sections)


def _normal(text: str) -> str:
    """Lower case, with runs of separators as one hyphen: `PRAXO core` names `praxo-core`."""
    return re.sub(r"[\s._-]+", "-", text.lower())


def names_package(prompt: str, package: str) -> bool:
    return _normal(package).strip("-") in _normal(prompt)


def check_adoption(adoption: Adoption, manifest: StudyManifest, fixtures, path: Path) -> None:
    """Every rule between the task manifest, the study and its fixtures, all violations at
    once: a task per fixture, the prompt rules of each track, the prompt the agent gets,
    labels a fixture contradicts, limits tighter than the pinned budget, criteria for the
    acceptance checks and for a correct exclusion, one model across conditions."""
    tm, package = adoption.tasks, adoption.table.package
    errors: list[UserError] = []

    def bad(file, field: str, message: str, fix: str) -> None:
        errors.append(UserError(message, file=file, field=field, fix=fix))

    by_id = {f.id: f for f in fixtures}
    task_ids = {t["id"] for t in tm.tasks}
    for fixture in fixtures:
        if fixture.id not in task_ids:
            bad(path, "fixtures", f"fixture '{fixture.id}' is no task of the task manifest",
                f"add a task with id '{fixture.id}' to {tm.path.name}, or take the fixture "
                "out of fixtures")
    for i, task in enumerate(tm.tasks):
        where = f"tasks[{i}]"
        named = names_package(task["prompt"], package)
        if task["track"] == "free-selection" and named:
            bad(tm.path, f"{where}.prompt", f"a free-selection prompt must not name "
                f"'{package}'", "describe the need without the package name")
        if task["track"] == "directed-integration" and not named:
            bad(tm.path, f"{where}.prompt", f"a directed-integration prompt must name "
                f"'{package}'", "name the package the task requires")
        fixture = by_id.get(task["id"])
        if fixture is None:
            bad(tm.path, f"{where}.id", f"no fixture of the study has id '{task['id']}'",
                f"add the task's fixture (fixture.toml id = \"{task['id']}\") to fixtures "
                f"in {path.name}")
            continue
        _check_fixture(bad, tm, where, task, fixture, package)
    for i, condition in enumerate(manifest.conditions):
        pinned = tm.data["model"]["name"]
        if condition.model is not None and condition.model != pinned:
            bad(path, f"conditions.{i}.model", f"'{condition.model}' differs from the task "
                f"manifest's model.name ('{pinned}')",
                "compare conditions on the pinned model only: use it, or leave model unset")
    if errors:
        raise UserErrors(errors)


def _check_fixture(bad, tm: TaskManifest, where: str, task: dict, fixture, package: str) -> None:
    spec, toml = fixture.spec, fixture.path / "fixture.toml"
    if spec.prompt.split() != task["prompt"].split():  # line wrapping aside
        bad(tm.path, f"{where}.prompt", f"differs from the prompt of fixture '{fixture.id}' "
            f"({toml}), which is what the agent gets",
            "make them the same text (the fixture's prompt is frozen in its digest)")
    contradicted = [("track", spec.track, task["track"]),
                    ("package", spec.package, package),
                    ("suitable", False if spec.suitable is False else None, task["suitable"])]
    if task["track"] == "upgrade":
        contradicted += [("baseline_version", spec.baseline_version, task["baselineVersion"]),
                         ("target_version", spec.target_version, task["targetVersion"])]
    for key, declared, wanted in contradicted:
        if declared is not None and declared != wanted:
            bad(toml, key, f"{declared!r} contradicts the task manifest's {where} ({wanted!r})",
                f"set {key} to {wanted!r} or remove it (the task manifest's labels are reported)")
    budgets = tm.data["budgets"]
    for key, pinned, json_key in (("wall_seconds", budgets["timeoutSeconds"], "timeoutSeconds"),
                                  ("max_steps", budgets["maxSteps"], "maxSteps")):
        own = getattr(spec.limits, key)
        if own is not None and own < pinned:
            bad(toml, f"limits.{key}", f"{own} is tighter than the task manifest's "
                f"budgets.{json_key} ({pinned}), so the pinned budget would not hold",
                f"set limits.{key} to at least {pinned}")
    names = [c.name for c in spec.criteria or []]
    if names:
        for j, check in enumerate(task["acceptance"]):
            if check not in names:
                bad(tm.path, f"{where}.acceptance[{j}]", f"'{check}' names no criterion of "
                    f"fixture '{fixture.id}'", f"use one of: {', '.join(names)}")
    elif task["suitable"] is False:
        bad(toml, "criteria", f"task '{task['id']}' is unsuitable, and its fixture does not "
            "say what a correct exclusion is", "add [[criteria]] that a correct exclusion "
            "meets, named as the task's acceptance checks (README: Named criteria)")


def lock_section(adoption: Adoption, manifest: StudyManifest) -> dict[str, Any]:
    """What the evidence record needs from the pre-registration, frozen with the study."""
    tm, table = adoption.tasks, adoption.table
    data = tm.data
    return {
        "task_manifest": {"path": table.task_manifest, "digest": data_digest(data),
                          "schema_version": data["schemaVersion"],
                          "protocol": data["protocol"]},
        "package": {"name": table.package, "registry": table.registry},
        "tool": {"name": data["tool"]["name"], "version": data["tool"]["version"]},
        "model": {"name": data["model"]["name"], "version": data["model"]["version"]},
        "environment": {"os": data["environment"]["os"],
                        "toolchain": data["environment"]["toolchain"],
                        "permissions": dict(data["environment"]["permissions"])},
        "budgets": {"max_steps": data["budgets"]["maxSteps"],
                    "timeout_seconds": data["budgets"]["timeoutSeconds"]},
        "limitations": table.limitations,
        "conditions": {c.name: {"skill": "installed" if c.skill else "none"}
                       for c in manifest.conditions},
        "tasks": {t["id"]: {"prompt": t["prompt"], "track": t["track"], "kind": t["kind"],
                            "suitable": t["suitable"], "package_version": t["packageVersion"],
                            "baseline_version": t.get("baselineVersion"),
                            "target_version": t.get("targetVersion"),
                            "acceptance": list(t["acceptance"])}
                  for t in tm.tasks},
    }


def task_labels(adoption: Adoption, fixtures) -> dict[str, dict]:
    """The report's labels as the task manifest gives them (analysis/tracks.py reads these
    from the lock before any fixture's own)."""
    activation = {f.id: f.spec.skill_expected for f in fixtures}
    return {t["id"]: {"track": t["track"], "split": SPLIT_OF_KIND[t["kind"]], "kind": t["kind"],
                      "suitable": t["suitable"], "skill_expected": activation.get(t["id"])}
            for t in adoption.tasks.tasks}
