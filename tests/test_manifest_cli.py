"""Manifest validation, freezing and one-line errors from the CLI."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli, write_study


def _assert_one_line_error(proc, *fragments):
    assert proc.returncode == 2, proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_validate_accepts_a_good_manifest(tmp_path, fixture_copies):
    path = write_study(tmp_path / "s", fixture_copies)
    proc = run_cli(["study", "validate", str(path)])
    assert proc.returncode == 0, proc.stderr
    assert "2 fixtures × 2 conditions × 2 repetitions = 8 trials" in proc.stdout


@pytest.mark.parametrize("mutate, fragments", [
    (lambda t: t.replace('repetitions = 2', 'repetitions = "two"'),
     ["study.toml", "field 'repetitions'", "integer"]),
    (lambda t: t.replace('id = "t"', ''), ["study.toml", "field 'id'", "add this field"]),
    (lambda t: t.replace('seed = 7', 'seed = 7\ncolour = "red"'),
     ["field 'colour'", "remove this field"]),
    (lambda t: t.replace('agent = "scripted"', 'agent = "nonesuch"', 1),
     ["field 'conditions.0.agent'", "unknown agent 'nonesuch'", "evalq agents list"]),
    (lambda t: t.replace('solution = "incorrect"', 'solution = "maybe"'),
     ["field 'conditions.1.settings.solution'"]),
    (lambda t: t.replace('name = "bad"', 'name = "good"'),
     ["field 'conditions.1.name'", "used twice"]),
    (lambda t: t + "\n[[hypotheses]]\nid='H1'\nmetric='tpr'\nbaseline='good'\ncandidate='x'\n",
     ["field 'hypotheses.0.candidate'", "'x' is not a condition"]),
    (lambda t: t.replace("[budgets]", "[budgets"), ["study.toml", "cannot parse"]),
])
def test_malformed_manifest_gets_one_line(tmp_path, fixture_copies, mutate, fragments):
    path = write_study(tmp_path / "s", fixture_copies)
    path.write_text(mutate(path.read_text()))
    _assert_one_line_error(run_cli(["study", "validate", str(path)]), *fragments)


def test_missing_fixture_path_named(tmp_path, fixture_copies):
    path = write_study(tmp_path / "s", fixture_copies)
    path.write_text(path.read_text().replace("py-inventory-feature", "nowhere"))
    _assert_one_line_error(run_cli(["study", "validate", str(path)]),
                           "field 'fixtures.1'", "neither a fixture")


def test_malformed_fixture_gets_one_line(tmp_path, fixture_copies):
    path = write_study(tmp_path / "s", fixture_copies)
    manifest = fixture_copies / "py-slugify-bugfix" / "fixture.toml"
    manifest.write_text(manifest.read_text().replace('id = "py-slugify-bugfix"',
                                                     'id = "Not A Valid Id"', 1))
    proc = run_cli(["study", "validate", str(path)])
    _assert_one_line_error(proc, "fixture.toml", "field 'id'", "should match pattern")


def test_freeze_writes_lock_and_refuses_changed_inputs(tmp_path, fixture_copies):
    path = write_study(tmp_path / "s", fixture_copies)
    proc = run_cli(["study", "freeze", str(path)])
    assert proc.returncode == 0, proc.stderr
    lock = json.loads((tmp_path / "s" / "study.lock.json").read_text())
    assert set(lock["fixtures"]) == {"py-slugify-bugfix", "py-inventory-feature"}
    assert lock["manifest_digest"].startswith("sha256:")
    assert run_cli(["study", "freeze", str(path)]).returncode == 0  # same inputs: fine
    path.write_text(path.read_text().replace("seed = 7", "seed = 8"))
    _assert_one_line_error(run_cli(["study", "freeze", str(path)]), "already frozen",
                           "new id")
    _assert_one_line_error(run_cli(["run", str(path)], {"EVALQ_HOME": str(tmp_path / "h")}),
                           "frozen inputs changed", "manifest_digest", "seed")
    assert not (tmp_path / "h" / "evalq.db").exists(), "nothing half-written"
