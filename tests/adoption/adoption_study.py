"""An adoption-baseline study: the protocol's task manifest (JSON) beside a study file that
names the package, the fixtures (one per task, by id) and the two skill conditions."""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path

from conftest import FIXTURES

PACKAGE = "praxo-core"

EXCLUSION = '''
[[criteria]]
name = "excludes the package"
kind = "hidden"
checks = ["test_*"]
'''

#: (task id, shipped fixture it copies, its task-manifest entry)
TASKS = [
    ("free-embed-001", "py-slugify-bugfix", {
        "kind": "regression", "track": "free-selection", "suitable": True,
        "prompt": "Slugs keep hyphens at their ends. Fix textutil/slug.py; pick any "
                  "library that helps.",
        "packageVersion": "0.3.2", "acceptance": ["slugs are clean"]}),
    ("free-workflow-001", "py-slugify-bugfix", {
        "kind": "unseen", "track": "free-selection", "suitable": False,
        "prompt": "Build a durable workflow engine with a sandbox for slugs.",
        "packageVersion": "0.3.2", "acceptance": ["excludes the package"]}),
    ("direct-embed-001", "py-inventory-feature", {
        "kind": "regression", "track": "directed-integration", "suitable": True,
        "prompt": "Add Inventory.remove using praxo-core for the approval step.",
        "packageVersion": "0.3.2", "acceptance": ["remove works", "approval is required"]}),
    ("upgrade-python-001", "py-inventory-feature", {
        "kind": "regression", "track": "upgrade", "suitable": True,
        "prompt": "Upgrade the governed inventory to the new release; keep the tests green.",
        "packageVersion": "0.3.2", "baselineVersion": "0.2.4", "targetVersion": "0.3.2",
        "acceptance": ["tests pass after the upgrade"]}),
]

TASK_MANIFEST = {
    "schemaVersion": 1,
    "protocol": "docs/project/adoption-baseline.md",
    "tool": {"name": "evalq-scripted", "version": "1.18.18"},
    "model": {"name": "scripted-model", "version": "2026-11-01"},
    "environment": {"os": "linux", "toolchain": "python3.11",
                    "permissions": {"search": True, "execute": False}},
    "budgets": {"maxSteps": 20, "timeoutSeconds": 120},
    "tasks": [dict(entry, id=task_id) for task_id, _, entry in TASKS],
}

STUDY = '''
id = "adoption"
fixtures = ["fixtures/"]
repetitions = 1
seed = 11

[adoption]
task_manifest = "manifest.json"
package = "praxo-core"
registry = "PyPI"
limitations = ["one tool, model and platform"]

[[conditions]]
name = "no-skill"
agent = "scripted"
settings = { action = "solution", solution = "incorrect" }

[[conditions]]
name = "skill"
agent = "scripted"
skill = "skills/praxo"
settings = { action = "solution", solution = "correct" }
'''

_PROMPT = re.compile(r'^prompt = """.*?"""\n', re.MULTILINE | re.DOTALL)


def toml_prompt(prompt: str) -> str:
    """The prompt as fixture.toml holds it: wrapped after its first '; ' where the JSON's is
    one line (the same text, whitespace aside)."""
    return json.dumps(prompt.replace("; ", ";\n", 1))


def make_fixture(root: Path, task_id: str, base: str, prompt: str, extra: str = "") -> Path:
    """A shipped fixture copied under the task's id with the task's prompt, re-frozen."""
    from evalq.fixtures.fixture import freeze_fixture

    dest = root / task_id
    shutil.copytree(FIXTURES / base, dest)
    toml = dest / "fixture.toml"
    text = toml.read_text().replace(f'id = "{base}"', f'id = "{task_id}"', 1)
    text = _PROMPT.sub(lambda _: f"prompt = {toml_prompt(prompt)}\n", text, count=1)
    toml.write_text(text + extra)
    freeze_fixture(dest)
    return dest


def adoption_study(folder: Path, tasks: dict | None = None, study: str = STUDY) -> Path:
    """The study folder: study.toml, manifest.json, fixtures/ and skills/; returns study.toml."""
    folder.mkdir(parents=True, exist_ok=True)
    manifest = copy.deepcopy(tasks or TASK_MANIFEST)
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2))
    root = folder / "fixtures"
    root.mkdir()
    for task_id, base, entry in TASKS:
        extra = EXCLUSION if entry["suitable"] is False else ""
        make_fixture(root, task_id, base, entry["prompt"], extra)
    skill = folder / "skills" / "praxo"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: praxo\n---\nUse praxo-core when it fits.\n")
    path = folder / "study.toml"
    path.write_text(study)
    return path
