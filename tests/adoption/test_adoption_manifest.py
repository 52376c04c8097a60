"""Adoption-baseline task manifests: the protocol's JSON under a study file's [adoption]
table validates, runs end to end on the embedded default, and its evidence record reaches
the lock, report.json, report.md and the export; every rule violation is one line."""

from __future__ import annotations

import copy
import json
import shutil

import pytest

from adoption_study import PACKAGE, TASK_MANIFEST, TASKS, adoption_study, toml_prompt
from conftest import run_cli


def _one_line(proc, *fragments):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_validate_names_the_tasks_and_the_package(tmp_path):
    study = adoption_study(tmp_path / "s")
    proc = run_cli(["study", "validate", str(study)])
    assert proc.returncode == 0, proc.stderr
    assert "4 fixtures × 2 conditions × 1 repetitions = 8 trials" in proc.stdout
    assert ("4 tasks: directed-integration 1, free-selection 2, upgrade 1; regression 3, "
            "unseen 1; 1 unsuitable; package 'praxo-core'") in proc.stdout


def test_the_json_alone_is_checked_for_structure_and_refused_for_a_run(tmp_path):
    study = adoption_study(tmp_path / "s")
    task_manifest = study.parent / "manifest.json"
    proc = run_cli(["study", "validate", str(task_manifest)])
    assert proc.returncode == 0, proc.stderr
    assert "valid task manifest (structure): 4 tasks" in proc.stdout
    assert "[adoption] task_manifest" in proc.stdout
    home = tmp_path / "home"
    _one_line(run_cli(["run", str(task_manifest)], {"EVALQ_HOME": str(home)}),
              "manifest.json", "names no package, fixtures or conditions", "[adoption]")
    assert not home.exists(), "nothing written"


def _set(path: str, value):
    """A change of the task manifest at a dotted path with [i] indexes (None deletes)."""
    def change(data):
        keys = path.replace("[", ".").replace("]", "").split(".")
        target = data
        for key in keys[:-1]:
            target = target[int(key)] if key.isdigit() else target[key]
        last = int(keys[-1]) if keys[-1].isdigit() else keys[-1]
        if value is None:
            del target[last]
        else:
            target[last] = value
        return data
    return change


TASK_MANIFEST_VIOLATIONS = [
    (_set("schemaVersion", 2), "schemaVersion", "unknown schemaVersion 2"),
    (_set("schemaVersion", None), "schemaVersion", "missing"),
    (_set("tool.version", None), "tool.version", "missing"),
    (_set("model", "gpt"), "model", "must be an object"),
    (_set("environment.permissions.search", "yes"), "environment.permissions.search",
     "true or false"),
    (_set("budgets.maxSteps", 0), "budgets.maxSteps", "positive whole number"),
    (_set("budgets.timeoutSeconds", None), "budgets.timeoutSeconds", "positive number"),
    (_set("tasks", []), "tasks", "non-empty list"),
    (_set("tasks[1].kind", "held-out"), "tasks[1].kind", "unknown kind 'held-out'"),
    (_set("tasks[0].track", "discovery"), "tasks[0].track", "unknown track 'discovery'"),
    (_set("tasks[0].suitable", "yes"), "tasks[0].suitable", "true or false"),
    (_set("tasks[2].prompt", ""), "tasks[2].prompt", "non-empty string"),
    (_set("tasks[2].packageVersion", None), "tasks[2].packageVersion", "missing"),
    (_set("tasks[2].acceptance", []), "tasks[2].acceptance", "non-empty list"),
    (_set("tasks[3].baselineVersion", None), "tasks[3].baselineVersion",
     "needs baselineVersion and targetVersion"),
    (_set("tasks[3].targetVersion", None), "tasks[3].targetVersion",
     "needs baselineVersion and targetVersion"),
    (_set("tasks[1].id", "free-embed-001"), "tasks[1].id", "used twice"),
]


@pytest.mark.parametrize("change, field, message", TASK_MANIFEST_VIOLATIONS,
                         ids=[f for _, f, _ in TASK_MANIFEST_VIOLATIONS])
def test_a_structural_violation_is_one_line(tmp_path, change, field, message):
    """Refused by validate and by run, the JSON path named, nothing written."""
    study = adoption_study(tmp_path / "s", change(copy.deepcopy(TASK_MANIFEST)))
    for args in (["study", "validate", str(study.parent / "manifest.json")],
                 ["run", str(study)]):
        _one_line(run_cli(args, {"EVALQ_HOME": str(tmp_path / "home")}),
                  "manifest.json", f"field '{field}'", message, "(fix: ")
    assert not (tmp_path / "home").exists() and not (study.parent / "study.lock.json").exists()


def _prompt(index: int, prompt: str):
    """The task's prompt changed in the JSON and in its fixture alike (then re-frozen)."""
    def change(folder):
        data = json.loads((folder / "manifest.json").read_text())
        data["tasks"][index]["prompt"] = prompt
        (folder / "manifest.json").write_text(json.dumps(data))
        task_id, base, _ = TASKS[index]
        fixture = folder / "fixtures" / task_id
        from evalq.fixtures.fixture import freeze_fixture
        toml = fixture / "fixture.toml"
        old = toml_prompt(TASKS[index][2]["prompt"])
        assert old in toml.read_text()
        toml.write_text(toml.read_text().replace(old, toml_prompt(prompt)))
        freeze_fixture(fixture)
    return change


def _edit(name: str, old: str, new: str, refreeze: str | None = None):
    def change(folder):
        path = folder / name
        text = path.read_text()
        assert old in text, (old, text)
        path.write_text(text.replace(old, new, 1))
        if refreeze:
            from evalq.fixtures.fixture import freeze_fixture
            freeze_fixture(folder / "fixtures" / refreeze)
    return change


def _drop_task(index: int):
    def change(folder):
        data = json.loads((folder / "manifest.json").read_text())
        del data["tasks"][index]
        (folder / "manifest.json").write_text(json.dumps(data))
    return change


STUDY_VIOLATIONS = [
    (_prompt(0, "Fix the slugs with PRAXO core, the governed kernel."), "manifest.json",
     "tasks[0].prompt", "a free-selection prompt must not name 'praxo-core'"),
    (_prompt(2, "Add Inventory.remove with an approval step."), "manifest.json",
     "tasks[2].prompt", "a directed-integration prompt must name 'praxo-core'"),
    (_edit("manifest.json", "Upgrade the governed inventory", "Upgrade the inventory"),
     "manifest.json", "tasks[3].prompt", "differs from the prompt of fixture"),
    (_edit("manifest.json", '"excludes the package"', '"excluded"'), "manifest.json",
     "tasks[1].acceptance[0]", "'excluded' names no criterion"),
    (lambda folder: shutil.rmtree(folder / "fixtures" / "upgrade-python-001"),
     "manifest.json", "tasks[3].id", "no fixture of the study has id 'upgrade-python-001'"),
    (_drop_task(3), "study.toml", "fixtures", "fixture 'upgrade-python-001' is no task"),
    (_edit("study.toml", 'package = "praxo-core"\n', ""), "study.toml", "adoption.package",
     "add this field"),
    (_edit("study.toml", 'task_manifest = "manifest.json"', 'task_manifest = "gone.json"'),
     "gone.json", None, "file not found"),
    (_edit("study.toml", "[adoption]", "[budgets]\nwall_seconds = 60\n\n[adoption]"),
     "study.toml", "budgets.wall_seconds", "differs from the task manifest's "
     "budgets.timeoutSeconds"),
    (_edit("study.toml", 'agent = "scripted"', 'agent = "scripted"\nmodel = "other-model"'),
     "study.toml", "conditions.0.model", "differs from the task manifest's model.name"),
    (_edit("fixtures/direct-embed-001/fixture.toml", 'kind = "feature"',
           'kind = "feature"\ntrack = "upgrade"\nbaseline_version = "1"\n'
           'target_version = "2"', refreeze="direct-embed-001"),
     "direct-embed-001/fixture.toml", "track", "contradicts the task manifest's tasks[2]"),
    (_edit("fixtures/free-embed-001/fixture.toml", "wall_seconds = 600", "wall_seconds = 60",
           refreeze="free-embed-001"), "free-embed-001/fixture.toml", "limits.wall_seconds",
     "tighter than the task manifest's budgets.timeoutSeconds"),
]


@pytest.mark.parametrize("change, file, field, message", STUDY_VIOLATIONS,
                         ids=[f"{f}:{m[:30]}" for _, f, _, m in STUDY_VIOLATIONS])
def test_a_rule_violation_is_one_line(tmp_path, change, file, field, message):
    study = adoption_study(tmp_path / "s")
    change(study.parent)
    for args in (["study", "validate", str(study)], ["run", str(study)]):
        proc = run_cli(args, {"EVALQ_HOME": str(tmp_path / "home")})
        _one_line(proc, file, message, "(fix: ", *([f"field '{field}'"] if field else []))
    assert not (tmp_path / "home").exists() and not (study.parent / "study.lock.json").exists()


def test_an_unsuitable_task_needs_criteria_for_its_exclusion(tmp_path):
    study = adoption_study(tmp_path / "s")
    fixture = study.parent / "fixtures" / "free-workflow-001"
    toml = fixture / "fixture.toml"
    toml.write_text(toml.read_text().split("\n[[criteria]]")[0] + "\n")
    from evalq.fixtures.fixture import freeze_fixture
    freeze_fixture(fixture)
    _one_line(run_cli(["study", "validate", str(study)]), "free-workflow-001/fixture.toml",
              "field 'criteria'", "unsuitable", "what a correct exclusion is")


def test_every_violation_gets_its_own_line(tmp_path):
    data = copy.deepcopy(TASK_MANIFEST)
    data["tasks"][0]["kind"] = "seen"
    data["tasks"][3].pop("targetVersion")
    data["budgets"]["maxSteps"] = -1
    study = adoption_study(tmp_path / "s", data)
    proc = run_cli(["study", "validate", str(study)])
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert [line.split("field ")[1].split(":")[0] for line in lines] == [
        "'budgets.maxSteps'", "'tasks[0].kind'", "'tasks[3].targetVersion'"], lines


EVIDENCE = {"tool": "evalq-scripted", "tool_version": "1.18.18", "model": "scripted-model",
            "model_version": "2026-11-01", "package": PACKAGE, "registry": "PyPI",
            "os": "linux", "toolchain": "python3.11",
            "permissions": {"search": True, "execute": False}, "max_steps": 20,
            "timeout_seconds": 120, "limitations": ["one tool, model and platform"]}


def _export_evidence(home, study: str, out) -> list[dict]:
    """`evalq export STUDY --format evidence`'s rows."""
    proc = run_cli(["export", study, "--format", "evidence", "--out", str(out)],
                   {"EVALQ_HOME": str(home)})
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_runs_end_to_end_with_the_evidence_record(tmp_path):
    study = adoption_study(tmp_path / "s")
    home = tmp_path / "home"
    proc = run_cli(["run", str(study)], {"EVALQ_HOME": str(home)}, timeout=600)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    tasks = {task_id: entry for task_id, _, entry in TASKS}

    lock = json.loads((study.parent / "study.lock.json").read_text())
    record = lock["adoption"]
    assert record["tool"] == {"name": "evalq-scripted", "version": "1.18.18"}
    assert record["model"] == {"name": "scripted-model", "version": "2026-11-01"}
    assert record["package"] == {"name": PACKAGE, "registry": "PyPI"}
    assert record["environment"]["permissions"] == {"search": True, "execute": False}
    assert record["budgets"] == {"max_steps": 20, "timeout_seconds": 120}
    assert record["conditions"] == {"no-skill": {"skill": "none"},
                                    "skill": {"skill": "installed"}}
    for task_id, entry in tasks.items():
        assert record["tasks"][task_id]["prompt"] == entry["prompt"]
        assert record["tasks"][task_id]["kind"] == entry["kind"]
    assert record["tasks"]["upgrade-python-001"]["baseline_version"] == "0.2.4"
    assert lock["task_labels"]["free-workflow-001"]["split"] == "held-out"

    report_path = home / "reports" / "adoption" / "report.json"
    report = json.loads(report_path.read_text())
    assert report["schema_version"] == "2.4"
    # tracks never pooled, and within a track regression and unseen tasks apart
    assert set(report["tracks"]) == {"free-selection", "directed-integration", "upgrade"}
    free = report["tracks"]["free-selection"]
    assert free["unsuitable_tasks"] == ["free-workflow-001"]
    assert free["correct_exclusions"] == {"no-skill": 0, "skill": 1}
    assert free["by_split"]["held-out"]["skill"] == {"tasks": 1, "runs": 1, "correct": 1,
                                                     "success_rate": 1.0}
    assert free["by_split"]["regression"]["no-skill"]["success_rate"] == 0.0
    evidence = report["evidence"]
    assert {k: v for k, v in evidence.items() if k not in ("trials", "task_manifest")} == \
        {k: v for k, v in record.items() if k != "task_manifest"}
    assert evidence["task_manifest"]["digest"] == record["task_manifest"]["digest"]
    assert len(evidence["trials"]) == 8
    assert all(t["date"] and t["date"].endswith("Z") for t in evidence["trials"])
    markdown = (report_path.parent / "report.md").read_text()
    assert "## Evidence record" in markdown and "| package | praxo-core, registry PyPI |" in markdown
    assert "| free-selection | held-out | skill | 1 | 1 | 1 | 100.0% |" in markdown

    rows = _export_evidence(home, "adoption", tmp_path / "evidence.jsonl")
    assert len(rows) == 8
    dates = {t["trial_id"]: t["date"] for t in evidence["trials"]}
    for row in rows:
        entry = tasks[row["task_id"]]
        assert {k: row[k] for k in EVIDENCE} == EVIDENCE
        assert row["prompt"] == entry["prompt"] and row["track"] == entry["track"]
        assert row["kind"] == entry["kind"] and row["published_version"] == "0.3.2"
        assert row["skill"] == ("installed" if row["condition"] == "skill" else "none")
        assert row["date"] == dates[row["trial_id"]]
        assert row["outcome"] == ("correct" if row["condition"] == "skill" else "incorrect")
        upgrade = row["task_id"] == "upgrade-python-001"
        assert row["target_version"] == ("0.3.2" if upgrade else None)


def test_missing_registry_and_limitations_stay_unavailable(tmp_path):
    from adoption_study import STUDY
    study = adoption_study(tmp_path / "s", study=STUDY.replace('registry = "PyPI"\n', "")
                           .replace('limitations = ["one tool, model and platform"]\n', ""))
    proc = run_cli(["study", "freeze", str(study)])
    assert proc.returncode == 0, proc.stderr
    record = json.loads((study.parent / "study.lock.json").read_text())["adoption"]
    assert record["package"] == {"name": PACKAGE, "registry": None}
    assert record["limitations"] is None


def test_a_changed_task_manifest_is_refused_after_freezing(tmp_path):
    study = adoption_study(tmp_path / "s")
    assert run_cli(["study", "freeze", str(study)]).returncode == 0
    path = study.parent / "manifest.json"
    path.write_text(path.read_text().replace('"0.3.2"', '"0.3.3"'))
    _one_line(run_cli(["run", str(study)], {"EVALQ_HOME": str(tmp_path / "home")}),
              "study.lock.json", "frozen inputs changed", "adoption.tasks")
    assert not (tmp_path / "home" / "evalq.db").exists(), "nothing half-written"


def _stored_study(home, adoption=None):
    """A study written straight to the database (tests/report's mixed study: retried,
    pending and never-sent trials), with `adoption` as its lock's evidence record."""
    import sys
    from pathlib import Path

    from sqlmodel import Session

    sys.path.insert(0, str(Path(__file__).parents[1] / "report"))
    from test_report_fast_path import mixed_study
    from evalq.results.store import StudyRow, get_engine

    home.mkdir()
    url = f"sqlite:///{home / 'evalq.db'}"
    mixed_study(url, "stored")
    if adoption is not None:
        with Session(get_engine(url)) as session:
            row = session.get(StudyRow, "stored")
            row.lock = dict(row.lock, adoption=adoption)
            session.add(row)
            session.commit()


def test_export_evidence_of_a_study_without_a_task_manifest_is_refused(tmp_path):
    home = tmp_path / "home"
    _stored_study(home)
    out = tmp_path / "e.jsonl"
    _one_line(run_cli(["export", "stored", "--format", "evidence", "--out", str(out)],
                      {"EVALQ_HOME": str(home)}),
              "field '--format'", "no evidence record", "--format jsonl")
    assert not out.exists()


def test_what_nothing_recorded_is_null_never_filled_in(tmp_path):
    """A trial never started has no date; a record missing parts gives null fields."""
    home = tmp_path / "home"
    _stored_study(home, adoption={"tool": {"name": "t", "version": None},
                                  "tasks": {"task-00": {"prompt": "p", "kind": "unseen"}}})
    rows = _export_evidence(home, "stored", tmp_path / "e.jsonl")
    assert len(rows) == 144
    never_started = [r for r in rows if r["outcome"] is None and r["first_outcome"] is None]
    assert any(r["date"] is None for r in never_started)
    assert all(r["date"] is not None for r in rows if r["first_outcome"] is not None)
    task = next(r for r in rows if r["task_id"] == "task-00")
    assert (task["tool"], task["prompt"], task["kind"]) == ("t", "p", "unseen")
    for key in ("tool_version", "model", "registry", "os", "permissions", "max_steps",
                "timeout_seconds", "limitations", "published_version", "skill"):
        assert task[key] is None, key
    other = next(r for r in rows if r["task_id"] == "task-01")
    assert other["prompt"] is None and other["kind"] is None
