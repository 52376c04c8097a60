"""`evalq fixtures new` templates and `evalq grade FIXTURE WORKSPACE`."""

from __future__ import annotations

import json
import tomllib

import pytest
from click.testing import CliRunner

from conftest import FIXTURES, run_cli
from evalq.cli.fixtures_cmd import fixtures, grade
from evalq.fixtures.fixture import load_fixture
from evalq.graders.grade import prepare_reference
from evalq.graders.sandbox.bwrap import BwrapSandbox

ok, why = BwrapSandbox.available()
needs_bwrap = pytest.mark.skipif(not ok, reason=why)


@needs_bwrap
def test_new_fixtures_of_every_toolchain_freeze_and_pass_the_self_check(tmp_path):
    runner = CliRunner()
    for toolchain in ("python", "node", "make"):
        result = runner.invoke(fixtures, ["new", f"demo-{toolchain}", "--dir", str(tmp_path),
                                          "--toolchain", toolchain])
        assert result.exit_code == 0, result.output
        fixture = load_fixture(tmp_path / f"demo-{toolchain}")  # frozen: digest verified
        spec = tomllib.loads((fixture.path / "fixture.toml").read_text())
        assert spec["toolchain"] == toolchain and spec["prompt"].strip()
        for part in ("workspace", "hidden", "solutions/correct", "solutions/incorrect"):
            assert any((fixture.path / part).rglob("*")), part
    result = runner.invoke(fixtures, ["check", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert sorted(r["toolchain"] for r in rows) == ["make", "node", "python"]
    for row in rows:
        assert (row["initial"], row["correct"], row["incorrect"]) == \
            ("incorrect", "correct", "incorrect"), row


def test_new_refuses_bad_names_and_existing_directories(tmp_path):
    runner = CliRunner()
    bad = runner.invoke(fixtures, ["new", "Bad Name", "--dir", str(tmp_path)])
    assert bad.exit_code == 2 and "not a valid fixture id" in bad.output
    assert bad.output.count("\n") == 1
    assert runner.invoke(fixtures, ["new", "twice", "--dir", str(tmp_path)]).exit_code == 0
    again = runner.invoke(fixtures, ["new", "twice", "--dir", str(tmp_path)])
    assert again.exit_code == 2 and "already exists" in again.output


@needs_bwrap
def test_grade_correct_reference_prints_every_check(tmp_path):
    fixture = load_fixture(FIXTURES / "py-slugify-bugfix")
    workspace = prepare_reference(fixture, "correct", tmp_path / "ws")
    result = CliRunner().invoke(grade, [str(fixture.path), str(workspace)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("py-slugify-bugfix: correct")
    assert "  pass  hidden_tests.test_slug_hidden::test_strips_leading_and_trailing_separators" \
        in result.output


@needs_bwrap
def test_grade_incorrect_reference_json_names_the_failed_check(tmp_path):
    fixture = load_fixture(FIXTURES / "node-csv-quotes-bugfix")
    workspace = prepare_reference(fixture, "incorrect", tmp_path / "ws")
    result = CliRunner().invoke(grade, [str(fixture.path), str(workspace), "--json"])
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert data["fixture"] == "node-csv-quotes-bugfix" and data["outcome"] == "incorrect"
    assert data["digest"] == fixture.digest
    failed = {c["name"]: c["evidence"] for c in data["criteria"] if c["passed"] is False}
    name = "hidden_tests.test_csv_hidden::test_empty_quoted_field"
    assert name in failed  # judged from Python: the parser ran in a Node subject
    assert """assert [['a', '"', 'b'], ['"']] == [['a', '', 'b'], ['']]""" in failed[name]
    assert any(c["passed"] for c in data["criteria"])


@needs_bwrap
def test_grade_through_the_evalq_command_by_suite_id(tmp_path):
    fixture = load_fixture(FIXTURES / "c-pathnorm-feature")
    workspace = prepare_reference(fixture, "incorrect", tmp_path / "ws")
    proc = run_cli(["grade", "c-pathnorm-feature", str(workspace)], cwd=FIXTURES.parent)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.startswith("c-pathnorm-feature: incorrect")
    assert "  FAIL  hidden_tests.test_pathutil_hidden::test_normalize[../a-../a]" in proc.stdout


def test_grade_unknown_fixture_is_one_line(tmp_path):
    result = CliRunner().invoke(grade, [str(tmp_path / "nope" / "x"), str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.startswith("evalq: error: ") and result.output.count("\n") == 1
