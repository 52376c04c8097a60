"""The adoption-baseline task manifest: the protocol's own pre-registered JSON, checked
structurally (its shape, the upgrade versions), every violation one line with its JSON path.

What needs more than the JSON (the package name the prompt rules test, the fixtures holding
the hidden checks, the conditions) is evalq's study file: study/adoption.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalq.errors import UserError, UserErrors
from evalq.fileio import load_document
from evalq.study.tracks import TRACKS

SCHEMA_VERSIONS = (1,)
KINDS = ("regression", "unseen")
#: how a task's kind reads as evalq's split (the report's vocabulary)
SPLIT_OF_KIND = {"regression": "regression", "unseen": "held-out"}


def is_task_manifest(data: dict) -> bool:
    """A protocol task manifest is known by its `schemaVersion`, or by `tasks` where an evalq
    study would have conditions (a manifest that lost its version is still judged as one)."""
    return "schemaVersion" in data or ("tasks" in data and "conditions" not in data)


@dataclass(frozen=True)
class TaskManifest:
    path: Path
    data: dict  # the JSON as written (its digest is frozen in the lock)

    @property
    def tasks(self) -> list[dict]:
        return self.data["tasks"]

    def task_index(self, task_id: str) -> int:
        return next(i for i, t in enumerate(self.tasks) if t["id"] == task_id)


def load_task_manifest(path: Path) -> TaskManifest:
    """The JSON at `path`, refused with one line per violation when its shape is wrong."""
    path = Path(path).resolve()
    if path.suffix.lower() != ".json":
        raise UserError("a task manifest is JSON", file=path,
                        fix="give the protocol's task manifest, a .json file")
    data = load_document(path)
    problems = check_task_manifest(data, path)
    if problems:
        raise UserErrors(problems)
    return TaskManifest(path=path, data=data)


class _Checker:
    """Collects every violation rather than stopping at the first, so one run lists them all."""

    def __init__(self, path: Path):
        self.path = path
        self.errors: list[UserError] = []

    def add(self, field: str, message: str, fix: str) -> None:
        self.errors.append(UserError(message, file=self.path, field=field, fix=fix))

    def text(self, obj: dict, key: str, where: str, example: str) -> None:
        value = obj.get(key)
        if not isinstance(value, str) or not value.strip():
            self.add(where, "missing" if value is None else "must be a non-empty string",
                     f'set "{key}": "{example}"')

    def obj(self, parent: dict, key: str, where: str, example: str) -> dict:
        value = parent.get(key)
        if not isinstance(value, dict):
            self.add(where, "missing" if value is None else "must be an object",
                     f'set "{key}": {example}')
            return {}
        return value


def _number(value: Any, integer: bool) -> bool:
    kinds = (int,) if integer else (int, float)
    return isinstance(value, kinds) and not isinstance(value, bool) and value > 0


def check_task_manifest(data: dict, path: Path) -> list[UserError]:
    """Every structural violation, one UserError each, fields named as JSON paths."""
    c = _Checker(path)
    version = data.get("schemaVersion")
    if isinstance(version, bool) or version not in SCHEMA_VERSIONS:
        c.add("schemaVersion", f"unknown schemaVersion {version!r}" if version is not None
              else "missing", "evalq reads schemaVersion 1; write the manifest in that "
              "version's shape")
        return c.errors  # another version's shape is unknown: nothing else can be judged
    c.text(data, "protocol", "protocol", "docs/project/adoption-baseline.md")
    for key in ("tool", "model"):
        part = c.obj(data, key, key, '{"name": "...", "version": "..."}')
        if part:
            c.text(part, "name", f"{key}.name", "...")
            c.text(part, "version", f"{key}.version", "...")
    env = c.obj(data, "environment", "environment",
                '{"os": "linux", "toolchain": "...", "permissions": {...}}')
    if env:
        c.text(env, "os", "environment.os", "linux")
        c.text(env, "toolchain", "environment.toolchain", "python3.12")
        perms = c.obj(env, "permissions", "environment.permissions",
                      '{"search": true, "execute": true}')
        for key in ("search", "execute") if perms else ():
            if not isinstance(perms.get(key), bool):
                c.add(f"environment.permissions.{key}", "must be true or false",
                      f'set "{key}": true or false')
    budgets = c.obj(data, "budgets", "budgets", '{"maxSteps": 20, "timeoutSeconds": 600}')
    if budgets:
        if not _number(budgets.get("maxSteps"), integer=True):
            c.add("budgets.maxSteps", "must be a positive whole number", 'set "maxSteps": 20')
        if not _number(budgets.get("timeoutSeconds"), integer=False):
            c.add("budgets.timeoutSeconds", "must be a positive number of seconds",
                  'set "timeoutSeconds": 600')
    tasks = data.get("tasks")
    if not isinstance(tasks, list) or not tasks:
        c.add("tasks", "must be a non-empty list of tasks", 'list the tasks under "tasks"')
        return c.errors
    seen: set[str] = set()
    for i, task in enumerate(tasks):
        _check_task(c, task, f"tasks[{i}]", seen)
    return c.errors


def _check_task(c: _Checker, task: Any, where: str, seen: set[str]) -> None:
    if not isinstance(task, dict):
        c.add(where, "must be an object", "write each task as {\"id\": ..., \"track\": ...}")
        return
    c.text(task, "id", f"{where}.id", "regression-001")
    if isinstance(task.get("id"), str):
        if task["id"] in seen:
            c.add(f"{where}.id", f"task id '{task['id']}' is used twice",
                  "give every task its own id")
        seen.add(task["id"])
    if task.get("kind") not in KINDS:
        c.add(f"{where}.kind", f"unknown kind {task.get('kind')!r}",
              f"use one of {', '.join(KINDS)}")
    if task.get("track") not in TRACKS:
        c.add(f"{where}.track", f"unknown track {task.get('track')!r}",
              f"use one of {', '.join(TRACKS)}")
    if not isinstance(task.get("suitable"), bool):
        c.add(f"{where}.suitable", "must be true or false",
              'set "suitable": true, or false where the package does not fit the task')
    c.text(task, "prompt", f"{where}.prompt", "the task as the agent reads it")
    c.text(task, "packageVersion", f"{where}.packageVersion", "2.6.0")
    acceptance = task.get("acceptance")
    if not isinstance(acceptance, list) or not acceptance or \
            not all(isinstance(a, str) and a.strip() for a in acceptance):
        c.add(f"{where}.acceptance", "must be a non-empty list of acceptance checks (text)",
              'set "acceptance": ["the loop runs", "approval is required"]')
    if task.get("track") == "upgrade":
        for key in ("baselineVersion", "targetVersion"):
            value = task.get(key)
            if not isinstance(value, str) or not value.strip():
                c.add(f"{where}.{key}", "an upgrade task needs baselineVersion and "
                      "targetVersion", f'set "{key}": "<version>"')
