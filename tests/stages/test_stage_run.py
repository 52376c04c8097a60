"""Stages on the embedded default: a baseline study, then studies that start from its final
workspaces, apply a change in the agent sandbox, and report retention linked run to run."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from conftest import PY_FIXTURES, copy_fixture, run_cli, write_study  # noqa: E402
from stage_support import (CHANGE, lock_digest, report_of, run_study,  # noqa: E402
                           write_stage)
from evalq.artifacts import ArtifactStore  # noqa: E402
from evalq.digest import tree_digest  # noqa: E402
from evalq.fixtures.archive import unpack_workspace  # noqa: E402
from evalq.stats.bootstrap import bootstrap_ci  # noqa: E402

#: a baseline agent that leaves links out of its workspace and a hook for the change to run,
#: which writes to a host path (it must not reach it) and to the workspace (it may), and more
#: files than an authored fixture may hold (a stored workspace has the archive's limits)
HOSTILE = '''
[[conditions]]
name = "hostile"
agent = "command"
settings = {{ argv = ["sh", "-c", "ln -s /etc/passwd leak; ln -s / escape; printf 'echo pwned > {marker}; touch hook-ran-inside' > bump-hook.sh; mkdir many; for i in $(seq 100); do echo $i > many/f$i; done"] }}
'''


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    """The recorded baseline: good, bad and hostile runs of two Python tasks, one each."""
    root = tmp_path_factory.mktemp("baseline")
    fixtures = root / "fixtures"
    fixtures.mkdir()
    for name in PY_FIXTURES:
        copy_fixture(name, fixtures)
    marker = root / "escaped-from-change"
    study = write_study(root / "s1", fixtures, study_id="base", repetitions=1,
                        extra_conditions=HOSTILE.format(marker=marker))
    home = root / "home"
    proc = run_study(study, home)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return {"root": root, "study": study, "home": home, "lock": lock_digest(study),
            "marker": marker}


def _db(home: Path):
    return sqlite3.connect(home / "evalq.db")


def _baseline_copy(baseline, tmp_path: Path):
    """(home, open database) of a copy of the baseline's home a test may damage."""
    import shutil

    home = tmp_path / "home"
    shutil.copytree(baseline["home"] / "artifacts", home / "artifacts")
    db = _db(home)
    with sqlite3.connect(baseline["home"] / "evalq.db") as source:
        source.backup(db)  # a consistent copy, whatever the WAL holds
    return home, db


def _baseline_outcomes(home: Path) -> dict[str, str]:
    rows = _db(home).execute("select trial_id, outcome from attempts where study_id = 'base'")
    return dict(rows.fetchall())


def test_no_agent_retention_stage(baseline, tmp_path):
    home = baseline["home"]
    stage = write_stage(tmp_path / "keep", study_id="keep", baseline="base",
                        baseline_lock=baseline["lock"], body='take = "all"\nagent = false\n')
    proc = run_study(stage, home)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    report = report_of(proc)
    block = report["stages"]
    lock = json.loads((stage.parent / "study.lock.json").read_text())
    pinned = lock["stage"]

    # pinned: the baseline's lock, the versions, the change script, each workspace's digest
    assert pinned["baseline_lock"] == baseline["lock"] == block["baseline_lock"]
    assert (pinned["baseline_version"], pinned["target_version"]) == ("0.2.4", "0.3.2")
    assert pinned["change"]["digest"] == "sha256:" + hashlib.sha256(CHANGE.encode()).hexdigest()
    store = ArtifactStore(home / "artifacts")
    base_rows = {t: json.loads(a) for t, a in _db(home).execute(
        "select trial_id, artifacts from attempts where study_id = 'base'")}
    assert len(pinned["runs"]) == 6 == len(base_rows)  # take = all: every valid baseline run
    for task, entry in pinned["runs"].items():
        unpacked = tmp_path / "check" / task
        unpack_workspace(store.get(base_rows[entry["baseline_trial"]]["workspace"]), unpacked)
        assert entry["workspace_digest"] == tree_digest(unpacked)
        assert entry["workspace_digest"] == lock["fixtures"][task]["workspace_digest"]
        assert entry["workspace_artifact"] == base_rows[entry["baseline_trial"]]["workspace"]

    # links: every stage run names the baseline run its task came from
    links = {l["trial_id"]: l for l in block["links"]}
    assert len(links) == 6
    outcomes = _baseline_outcomes(home)
    for trial_id, link in links.items():
        fixture, condition, rep = link["task"].rsplit(".", 2)
        assert link["baseline_trial"] == f"base/{fixture}/{condition}/{rep}"
        assert link["baseline_outcome"] == outcomes[link["baseline_trial"]]
        assert trial_id == f"keep/{link['task']}/no-agent/r1"

    # retention against a computation from the database alone
    stage_outcomes = dict(_db(home).execute(
        "select trial_id, outcome from attempts where study_id = 'keep'").fetchall())
    groups: dict[str, dict[str, list[float]]] = {}
    for trial_id, outcome in stage_outcomes.items():
        fixture, condition, _ = trial_id.split("/")[1].rsplit(".", 2)
        base_outcome = outcomes[f"base/{fixture}/{condition}/r1"]
        if base_outcome == "correct" and outcome in ("correct", "incorrect", "timed_out"):
            groups.setdefault(condition, {})[fixture] = [float(outcome == "correct")]
    rows = {r["baseline_condition"]: r for r in block["retention"]["untracked"]}
    assert set(rows) == {"good", "bad", "hostile"} and list(block["retention"]) == ["untracked"]
    good = groups["good"]
    values = [sum(v) / len(v) for _, v in sorted(good.items())]
    ci = bootstrap_ci(values, seed=11)
    assert rows["good"]["estimate"] == pytest.approx(sum(values) / len(values)) == 0.5
    assert (rows["good"]["ci_low"], rows["good"]["ci_high"]) == (ci.low, ci.high)
    assert rows["good"]["runs"] == {"retained": 1, "lost": 1, "unavailable": 0}
    for failing in ("bad", "hostile"):  # no baseline run was correct: no retention observed
        assert rows[failing]["estimate"] is None and rows[failing]["reason"]
        assert rows[failing]["from_failing_baselines"]["tasks"] == 2
    md = (home / "reports" / "keep" / "report.md").read_text()
    assert "## Stages: upgrade and retention" in md and "base/py-slugify-bugfix/good/r1" in md
    html = (home / "reports" / "keep" / "report.html").read_text()
    assert "Stages: upgrade and retention" in html
    # a stage of a study run without a task manifest has no evidence record either
    out = tmp_path / "evidence.jsonl"
    refused = run_cli(["export", "keep", "--format", "evidence", "--out", str(out)],
                      {"EVALQ_HOME": str(home)})
    assert refused.returncode == 2 and "nor is it a stage of one" in refused.stderr
    assert not out.exists()

    # the hostile baseline: its links never travelled; its hook ran inside the sandbox only
    assert not baseline["marker"].exists(), "the change ran a workspace hook on the host"
    for trial_id, link in links.items():
        if link["baseline_condition"] != "hostile":
            continue
        refs = json.loads(_db(home).execute("select artifacts from attempts where trial_id = ?",
                                            (trial_id,)).fetchone()[0])
        final = tmp_path / "final" / link["task"]
        unpack_workspace(store.get(refs["workspace"]), final)
        assert (final / "hook-ran-inside").is_file(), "the hook ran in the sandbox's workspace"
        assert not (final / "leak").exists() and not (final / "escape").exists()
        assert not any(p.is_symlink() for p in final.rglob("*"))
        assert (final / "requirements.txt").read_text() == "praxo-core==0.3.2\n"
        assert len(list((final / "many").iterdir())) == 100
        change = json.loads(store.get(refs["change"]))
        assert change["exit_code"] == 0 and change["sandbox"] == "bwrap"


def test_agent_stage_repairs_after_the_change(baseline, tmp_path):
    home = baseline["home"]
    stage = write_stage(tmp_path / "fix", study_id="fix", baseline="base",
                        baseline_lock=baseline["lock"],
                        body='take = "correct"\nconditions = ["good"]\n'
                             'prompt = "praxo-core was bumped to 0.3.2: make the tests pass"\n',
                        extra='[[conditions]]\nname = "fixer"\nagent = "scripted"\n'
                              'settings = { action = "solution", solution = "correct" }\n')
    proc = run_study(stage, home)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    block = report_of(proc)["stages"]
    assert block["agent"] is True and block["take"] == "correct"
    assert sorted(l["baseline_trial"] for l in block["links"]) == [
        "base/py-inventory-feature/good/r1", "base/py-slugify-bugfix/good/r1"]
    (row,) = block["retention"]["untracked"]
    assert (row["condition"], row["baseline_condition"]) == ("fixer", "good")
    assert row["estimate"] == 1.0 and row["runs"] == {"retained": 2, "lost": 0,
                                                       "unavailable": 0}


def _refused(proc, stage: Path, home: Path, field: str) -> str:
    """One line naming the manifest and the field, a non-zero exit, and nothing written."""
    assert proc.returncode != 0, proc.stdout
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"evalq: {stage}: field '{field}'") or \
        f"{stage}: field '{field}'" in lines[0], lines[0]
    assert "fix:" in lines[0] and "Traceback" not in proc.stderr
    assert not (stage.parent / "study.lock.json").exists()
    assert not (home / "reports" / "s2").exists()
    ids = [r[0] for r in _db(home).execute("select id from studies")]
    assert "s2" not in ids
    return lines[0]


def _refused_run(baseline, folder: Path, home: Path, body: str, trial: str, words: str):
    """A stage over a damaged baseline is refused at `stage.take`, naming the run."""
    stage = write_stage(folder, study_id="s2", baseline="base",
                        baseline_lock=baseline["lock"], body=body)
    line = _refused(run_study(stage, home), stage, home, "stage.take")
    assert trial in line and words in line, line


def test_refusals_name_the_file_and_field(baseline, tmp_path):
    home, lock = baseline["home"], baseline["lock"]
    cases = [
        (dict(baseline="no-such-study", baseline_lock=lock), "stage.baseline", "no study"),
        (dict(baseline="base", baseline_lock="sha256:" + "0" * 64), "stage.baseline_lock",
         lock),
        (dict(baseline="base", baseline_lock=lock, body='conditions = ["nobody"]\n'),
         "stage.conditions.0", "not a condition"),
        (dict(baseline="base", baseline_lock=lock, body='change = "missing.sh"\n',
              change=None), "stage.change", "no change script"),
    ]
    for i, (kwargs, field, words) in enumerate(cases):
        kwargs["body"] = kwargs.get("body", "") + "agent = false\n"
        stage = write_stage(tmp_path / f"case{i}", study_id="s2", **kwargs)
        line = _refused(run_study(stage, home), stage, home, field)
        assert words in line, line
    # the change never runs unsealed
    stage = write_stage(tmp_path / "unsealed", study_id="s2", baseline="base",
                        baseline_lock=lock, body="agent = false\n")
    proc = run_cli(["run", str(stage)], {"EVALQ_HOME": str(home),
                                          "EVALQ_AGENT_SANDBOX": "none"}, timeout=300)
    assert "the agent sandbox is `none`" in _refused(proc, stage, home, "stage.change")


def test_a_baseline_run_without_its_workspace_is_refused(baseline, tmp_path):
    """A copy of the baseline's home where one run's workspace is gone from the store and
    another's reference is gone from its attempt: each is refused by name."""
    home, db = _baseline_copy(baseline, tmp_path)
    trial = "base/py-slugify-bugfix/good/r1"
    refs = json.loads(db.execute("select artifacts from attempts where trial_id = ?",
                                 (trial,)).fetchone()[0])
    blob = ArtifactStore(home / "artifacts")._path(refs["workspace"])
    kept = blob.read_bytes()
    blob.unlink()
    _refused_run(baseline, tmp_path / "lost", home, "agent = false\n", trial, "cannot be read")
    blob.write_bytes(kept)
    other = "base/py-inventory-feature/good/r1"
    refs = json.loads(db.execute("select artifacts from attempts where trial_id = ?",
                                 (other,)).fetchone()[0])
    refs.pop("workspace")
    db.execute("update attempts set artifacts = ? where trial_id = ?", (json.dumps(refs), other))
    db.commit()
    _refused_run(baseline, tmp_path / "none", home, 'conditions = ["good"]\nagent = false\n',
                 other, "no stored final workspace")


def test_the_change_runs_in_the_docker_agent_sandbox_too(baseline, tmp_path):
    home = baseline["home"]
    stage = write_stage(tmp_path / "docker", study_id="keep-docker", baseline="base",
                        baseline_lock=baseline["lock"],
                        body='take = "all"\nconditions = ["hostile"]\nagent = false\n')
    proc = run_cli(["run", str(stage)], {"EVALQ_HOME": str(home),
                                          "EVALQ_AGENT_SANDBOX": "docker"}, timeout=600)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    store = ArtifactStore(home / "artifacts")
    rows = _db(home).execute("select trial_id, artifacts from attempts "
                             "where study_id = 'keep-docker'").fetchall()
    assert len(rows) == 2
    for trial_id, artifacts in rows:
        refs = json.loads(artifacts)
        change = json.loads(store.get(refs["change"]))
        assert change["sandbox"] == "docker" and change["exit_code"] == 0, change
        final = tmp_path / "final" / trial_id.replace("/", "_")
        unpack_workspace(store.get(refs["workspace"]), final)
        assert (final / "hook-ran-inside").is_file()
    assert not baseline["marker"].exists(), "the change ran a workspace hook on the host"


def test_a_baseline_run_without_a_valid_outcome_is_refused_when_all_are_taken(baseline,
                                                                              tmp_path):
    home, db = _baseline_copy(baseline, tmp_path)
    trial = "base/py-slugify-bugfix/bad/r1"
    db.execute("update attempts set outcome = 'infrastructure_failure' where trial_id = ?",
               (trial,))
    db.commit()
    _refused_run(baseline, tmp_path / "open", home,
                 'take = "all"\nconditions = ["bad"]\nagent = false\n', trial,
                 "no valid counted outcome")
    # taking the correct runs only leaves it out, and the stage is valid
    stage = write_stage(tmp_path / "correct", study_id="s2", baseline="base",
                        baseline_lock=baseline["lock"], body='agent = false\n')
    proc = run_cli(["study", "validate", str(stage)], {"EVALQ_HOME": str(home)})
    assert proc.returncode == 0 and "2 fixtures × 1 conditions" in proc.stdout, proc.stderr
