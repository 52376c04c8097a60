"""The suite lock: freezing, loading, and refusing fixtures that drifted from it."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from conftest import FIXTURES, copy_fixture
from evalq.cli.fixtures_cmd import fixtures
from evalq.errors import UserError
from evalq.fixtures.fixture import freeze_fixture, load_fixture
from evalq.fixtures.suite import (LOCK_NAME, find_fixtures, freeze_suite, load_suite, read_lock,
                         suite_digest)


def make_suite(tmp_path, names=("py-slugify-bugfix", "node-csv-quotes-bugfix")):
    root = tmp_path / "suite"
    root.mkdir()
    for name in names:
        copy_fixture(name, root)
    freeze_suite(root, "test-suite")
    return root


def test_shipped_suite_loads_and_matches_every_fixture():
    suite = load_suite(FIXTURES)
    lock = json.loads((FIXTURES / LOCK_NAME).read_text())
    assert suite.suite_id == "evalq-core"
    assert suite.suite_version == lock["suite_version"]
    assert suite.suite_digest == lock["suite_digest"] == suite_digest("evalq-core",
                                                                      lock["fixtures"])
    assert [f.id for f in suite.fixtures] == sorted(lock["fixtures"])
    for fixture in suite.fixtures:
        assert fixture.digest == lock["fixtures"][fixture.id]["digest"]
        assert load_fixture(fixture.path).digest == fixture.digest


def test_shipped_fixtures_are_within_the_contract():
    for path in find_fixtures(FIXTURES):
        files = [p for p in path.rglob("*") if p.is_file()]
        assert len(files) <= 64
        assert sum(len(p.read_text(encoding="utf-8")) for p in files) <= 262_144
        assert not [p for p in files if "__pycache__" in p.parts or "build" in p.parts]


def test_freeze_is_stable_and_a_change_bumps_the_version(tmp_path):
    root = make_suite(tmp_path)
    first = read_lock(root)
    assert first["suite_id"] == "test-suite" and first["suite_version"] == 1
    assert freeze_suite(root) == first  # nothing changed: same lock, same version
    readme = root / "py-slugify-bugfix" / "workspace" / "README.md"
    readme.write_text(readme.read_text() + "\nMore words.\n")
    second = freeze_suite(root)
    assert second["suite_version"] == 2
    assert second["suite_digest"] != first["suite_digest"]
    assert second["fixtures"]["py-slugify-bugfix"]["digest"] != \
        first["fixtures"]["py-slugify-bugfix"]["digest"]
    assert load_suite(root).suite_version == 2


def test_a_new_version_keeps_the_note_saying_why(tmp_path):
    """A note is recorded for the version it came with, kept by later versions, and not
    added when nothing changed; it is no part of the suite digest."""
    root = make_suite(tmp_path)
    readme = root / "py-slugify-bugfix" / "workspace" / "README.md"
    readme.write_text(readme.read_text() + "\nMore words.\n")
    runner = CliRunner()
    done = runner.invoke(fixtures, ["freeze", str(root), "--note", "README reworded"])
    assert done.exit_code == 0, done.output
    second = read_lock(root)
    assert second["suite_version"] == 2
    assert second["notes"] == [{"suite_version": 2, "note": "README reworded"}]
    assert second["suite_digest"] == suite_digest("test-suite", second["fixtures"])
    assert freeze_suite(root, note="nothing changed") == second
    readme.write_text(readme.read_text() + "\nEven more.\n")
    third = freeze_suite(root, note="README longer")
    assert third["notes"] == [{"suite_version": 2, "note": "README reworded"},
                              {"suite_version": 3, "note": "README longer"}]
    assert load_suite(root).suite_version == 3


def test_malformed_notes_are_refused(tmp_path):
    root = make_suite(tmp_path)
    lock = read_lock(root)
    lock["notes"] = [{"suite_version": "2", "note": "x"}]
    (root / LOCK_NAME).write_text(json.dumps(lock))
    with pytest.raises(UserError, match="'notes' must be a list"):
        read_lock(root)


def test_changed_byte_is_refused_naming_the_fixture(tmp_path):
    root = make_suite(tmp_path)
    target = root / "node-csv-quotes-bugfix" / "workspace" / "lib" / "parse.js"
    target.write_bytes(target.read_bytes().replace(b"quoted", b"quotex", 1))
    with pytest.raises(UserError) as info:
        load_suite(root)
    line = info.value.one_line()
    assert "node-csv-quotes-bugfix" in line and "no longer match" in line
    assert "evalq fixtures freeze" in line and "\n" not in line


def test_refrozen_fixture_not_in_the_lock_is_refused(tmp_path):
    root = make_suite(tmp_path)
    fixture = root / "py-slugify-bugfix"
    (fixture / "workspace" / "README.md").write_text("# changed\n")
    freeze_fixture(fixture)  # the fixture is consistent again, the suite lock is not
    with pytest.raises(UserError) as info:
        load_suite(root)
    line = info.value.one_line()
    assert "fixture 'py-slugify-bugfix' does not match the suite lock" in line
    assert "evalq fixtures freeze" in line


def test_unlocked_and_missing_fixtures_are_refused(tmp_path):
    root = make_suite(tmp_path)
    copy_fixture("py-inventory-feature", root)
    with pytest.raises(UserError, match="py-inventory-feature is not in the suite lock"):
        load_suite(root)
    shutil.rmtree(root / "py-inventory-feature")
    shutil.rmtree(root / "py-slugify-bugfix")
    with pytest.raises(UserError, match="fixture 'py-slugify-bugfix' is missing"):
        load_suite(root)


def test_tampered_lock_is_refused(tmp_path):
    root = make_suite(tmp_path)
    lock = read_lock(root)
    lock["suite_digest"] = "sha256:" + "0" * 64
    (root / LOCK_NAME).write_text(json.dumps(lock))
    with pytest.raises(UserError, match="suite digest does not match"):
        load_suite(root)
    (root / LOCK_NAME).write_text("{not json")
    with pytest.raises(UserError, match="the suite lock is not valid JSON"):
        load_suite(root)
    (root / LOCK_NAME).unlink()
    with pytest.raises(UserError, match="no suite lock"):
        load_suite(root)


def test_find_fixtures_does_not_descend_into_a_fixture(tmp_path):
    root = make_suite(tmp_path)
    nested = root / "py-slugify-bugfix" / "workspace" / "vendor"
    nested.mkdir()
    (nested / "fixture.toml").write_text('id = "nested"\n')
    assert [p.name for p in find_fixtures(root)] == ["node-csv-quotes-bugfix",
                                                     "py-slugify-bugfix"]
    assert find_fixtures(root / "py-slugify-bugfix") == [(root / "py-slugify-bugfix").resolve()]


def test_duplicate_ids_are_refused(tmp_path):
    root = make_suite(tmp_path)
    shutil.copytree(root / "py-slugify-bugfix", root / "zz-copy")
    with pytest.raises(UserError, match="two fixtures have the id 'py-slugify-bugfix'"):
        freeze_suite(root)


def test_freeze_command_on_a_fixture_updates_the_lock_beside_it(tmp_path):
    root = make_suite(tmp_path)
    fixture = root / "py-slugify-bugfix"
    (fixture / "workspace" / "README.md").write_text("# changed\n")
    result = CliRunner().invoke(fixtures, ["freeze", str(fixture)])
    assert result.exit_code == 0, result.output
    assert "version 2" in result.output
    assert load_suite(root).suite_version == 2


def test_freeze_command_on_a_missing_path_is_one_line(tmp_path):
    result = CliRunner().invoke(fixtures, ["freeze", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert result.output.startswith("evalq: error: ") and result.output.count("\n") == 1


def test_freezing_one_fixture_leaves_the_others_alone(tmp_path):
    root = make_suite(tmp_path)
    drifted = root / "node-csv-quotes-bugfix" / "workspace" / "README.md"
    drifted.write_text("# drifted by accident\n")
    (root / "py-slugify-bugfix" / "workspace" / "README.md").write_text("# deliberate\n")
    result = CliRunner().invoke(fixtures, ["freeze", str(root / "py-slugify-bugfix")])
    assert result.exit_code == 0, result.output
    lock = read_lock(root)
    assert lock["fixtures"]["py-slugify-bugfix"]["digest"] == \
        load_fixture(root / "py-slugify-bugfix").digest
    with pytest.raises(UserError, match="no longer match the recorded digest"):
        load_suite(root)  # the accidental change is still caught


def test_new_fixture_in_a_suite_joins_the_lock_when_frozen(tmp_path):
    root = make_suite(tmp_path, names=("py-slugify-bugfix",))
    runner = CliRunner()
    assert runner.invoke(fixtures, ["new", "extra", "--dir", str(root)]).exit_code == 0
    with pytest.raises(UserError, match="extra is not in the suite lock"):
        load_suite(root)
    result = runner.invoke(fixtures, ["freeze", str(root / "extra")])
    assert result.exit_code == 0, result.output
    suite = load_suite(root)
    assert [f.id for f in suite.fixtures] == ["extra", "py-slugify-bugfix"]
    assert suite.suite_version == 2
