"""`evalq fixtures check` on the shipped suite, and every refusal it must make."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from conftest import FIXTURES, copy_fixture, pad_with_files, run_cli
from evalq.cli.fixtures_cmd import fixtures
from evalq.fixtures.fixture import MAX_CHARACTERS, freeze_fixture
from evalq.graders.sandbox.bwrap import BwrapSandbox
from evalq.fixtures.suite import LOCK_NAME, find_fixtures, read_lock

ok, why = BwrapSandbox.available()
pytestmark = pytest.mark.skipif(not ok, reason=why)

VERDICTS = {"initial": "incorrect", "correct": "correct", "incorrect": "incorrect"}


def check(*args: str):
    """Run `evalq fixtures check ... --json`; returns (exit code, rows, output)."""
    result = CliRunner().invoke(fixtures, ["check", *args, "--json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    rows = json.loads(result.stdout) if result.stdout.strip().startswith("[") else None
    return result.exit_code, rows, result.output


@pytest.fixture(scope="module")
def shipped_rows():
    """The self-check of the shipped suite through the real `evalq` entry point."""
    proc = run_cli(["fixtures", "check", str(FIXTURES), "--json"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def test_shipped_suite_passes_its_self_check(shipped_rows):
    lock = read_lock(FIXTURES)
    on_disk = {p.name for p in find_fixtures(FIXTURES)}
    assert {row["fixture"] for row in shipped_rows} == set(lock["fixtures"]) == on_disk
    for row in shipped_rows:
        assert row["ok"] is True, row
        assert row["failures"] == []
        assert {k: row[k] for k in VERDICTS} == VERDICTS, row
        assert row["digest"] == lock["fixtures"][row["fixture"]]["digest"]


def test_shipped_suite_covers_the_required_kinds_and_toolchains(shipped_rows):
    assert len(shipped_rows) >= 6
    kinds = {row["kind"] for row in shipped_rows}
    assert {"bugfix", "feature", "refactor", "multi-file"} <= kinds
    toolchains = {row["toolchain"] for row in shipped_rows}
    assert {"python", "node", "make"} <= toolchains


def test_table_lists_every_fixture_with_three_verdicts():
    result = CliRunner().invoke(fixtures, ["check", str(FIXTURES / "py-slugify-bugfix"),
                                           str(FIXTURES / "c-vsort-bugfix")])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()  # progress goes to stderr: one line per tenth here
    assert "2/2 fixtures checked finished" in result.stderr and "ok 2" in result.stderr
    assert lines[0].split() == ["fixture", "kind", "toolchain", "initial", "correct",
                                "incorrect", "ok"]
    # rows keep the order of the arguments
    assert lines[1].split() == ["py-slugify-bugfix", "bugfix", "python", "incorrect",
                                "correct", "incorrect", "ok"]
    assert lines[2].split() == ["c-vsort-bugfix", "bugfix", "make", "incorrect", "correct",
                                "incorrect", "ok"]


# ------------------------------------------------------------------ refusals
def assert_refused(path, expected: str):
    code, rows, output = check(str(path))
    assert code == 1, output
    (row,) = rows
    assert row["ok"] is False
    assert len(row["failures"]) == 1, row["failures"]
    reason = row["failures"][0]
    assert expected in reason, reason
    assert "\n" not in reason
    # the table form prints the same single line
    table = CliRunner().invoke(fixtures, ["check", str(path)])
    assert table.exit_code == 1
    assert any(expected in line for line in table.output.splitlines())
    return row


def test_one_changed_byte_is_refused(tmp_path):
    fixture = copy_fixture("py-slugify-bugfix", tmp_path)
    target = fixture / "workspace" / "textutil" / "slug.py"
    data = bytearray(target.read_bytes())
    data[10] ^= 0x01
    target.write_bytes(bytes(data))
    row = assert_refused(fixture, "no longer match the recorded digest")
    assert row["refused"] is True and row["initial"] is None


def test_sixty_five_files_are_refused(tmp_path):
    fixture = copy_fixture("py-inventory-feature", tmp_path)
    pad_with_files(fixture, 65)
    assert_refused(fixture, "fixture has 65 files, over the limit of 64")


def test_content_over_the_character_limit_is_refused(tmp_path):
    fixture = copy_fixture("c-pathnorm-feature", tmp_path)
    (fixture / "workspace" / "big.txt").write_text("a" * MAX_CHARACTERS)
    assert_refused(fixture, f"over the limit of {MAX_CHARACTERS}")


@pytest.mark.parametrize("solution", ["correct", "incorrect"])
def test_missing_reference_solution_is_refused(tmp_path, solution):
    fixture = copy_fixture("node-csv-quotes-bugfix", tmp_path)
    shutil.rmtree(fixture / "solutions" / solution)
    assert_refused(fixture, f"missing or empty 'solutions/{solution}/'")


def test_incorrect_reference_that_passes_is_refused(tmp_path):
    fixture = copy_fixture("py-notes-tags", tmp_path)
    incorrect = fixture / "solutions" / "incorrect"
    shutil.rmtree(incorrect)
    shutil.copytree(fixture / "solutions" / "correct", incorrect)
    freeze_fixture(fixture)  # a deliberate, frozen change: only the self-check can catch it
    row = assert_refused(fixture, "incorrect reference passes the hidden tests")
    assert row["correct"] == "correct" and row["incorrect"] == "correct"


def test_correct_reference_that_fails_is_reported(tmp_path):
    fixture = copy_fixture("c-vsort-bugfix", tmp_path)
    correct = fixture / "solutions" / "correct"
    shutil.rmtree(correct)
    shutil.copytree(fixture / "solutions" / "incorrect", correct)
    freeze_fixture(fixture)
    row = assert_refused(fixture, "correct reference graded incorrect")
    assert "test_compare[1.2-1.2.0-0]" in row["failures"][0]


def test_solved_initial_workspace_is_reported(tmp_path):
    fixture = copy_fixture("py-slugify-bugfix", tmp_path)
    shutil.copy(fixture / "solutions" / "correct" / "textutil" / "slug.py",
                fixture / "workspace" / "textutil" / "slug.py")
    freeze_fixture(fixture)
    assert_refused(fixture, "untouched workspace passes the hidden tests")


def test_one_bad_fixture_fails_the_run_but_others_are_checked(tmp_path):
    good = copy_fixture("py-slugify-bugfix", tmp_path)
    bad = copy_fixture("py-inventory-feature", tmp_path)
    (bad / "hidden" / "hidden_tests" / "test_inventory_hidden.py").write_text("x = 1\n")
    code, rows, _ = check(str(tmp_path))
    assert code == 1
    by_id = {row["fixture"]: row for row in rows}
    assert by_id[good.name]["ok"] is True
    assert by_id[bad.name]["ok"] is False and by_id[bad.name]["refused"] is True


def test_fixture_that_no_longer_matches_its_suite_lock_is_refused(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    fixture = copy_fixture("py-slugify-bugfix", suite)
    copy_fixture("py-inventory-feature", suite)
    assert CliRunner().invoke(fixtures, ["freeze", str(suite)]).exit_code == 0
    # a deliberate change frozen into the fixture but not into the suite lock
    (fixture / "workspace" / "README.md").write_text("# textutil\n")
    freeze_fixture(fixture)
    code, rows, _ = check(str(suite))
    assert code == 1
    row = next(r for r in rows if r["fixture"] == "py-slugify-bugfix")
    assert row["refused"] is True
    assert "fixture 'py-slugify-bugfix' does not match the suite lock" in row["failures"][0]
    assert "evalq fixtures freeze" in row["failures"][0]


def test_missing_fixture_of_a_locked_suite_is_reported(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    copy_fixture("py-slugify-bugfix", suite)
    gone = copy_fixture("py-inventory-feature", suite)
    assert CliRunner().invoke(fixtures, ["freeze", str(suite)]).exit_code == 0
    shutil.rmtree(gone)
    code, rows, _ = check(str(suite))
    assert code == 1
    row = next(r for r in rows if r["fixture"] == "py-inventory-feature")
    assert "in the suite lock but its directory py-inventory-feature is missing" in \
        row["failures"][0]


def test_check_of_a_path_without_fixtures_is_one_line(tmp_path):
    result = CliRunner().invoke(fixtures, ["check", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "no fixtures here" in result.output


def test_lock_file_is_shipped_with_the_suite():
    lock = json.loads((FIXTURES / LOCK_NAME).read_text())
    assert lock["suite_id"] == "evalq-core"
    assert isinstance(lock["suite_version"], int)
    assert set(lock) == {"suite_id", "suite_version", "fixtures", "suite_digest", "notes"}
    # the notes come in version order, the last for the current version: it says why
    noted = [n["suite_version"] for n in lock["notes"]]
    assert noted == sorted(noted) and noted[-1] == lock["suite_version"], lock["notes"]
