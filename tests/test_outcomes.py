"""Outcome classification and grading through the real bubblewrap sandbox."""

from __future__ import annotations

import pytest

from evalq.fixtures.fixture import load_fixture
from evalq.graders.grade import classify, grade_workspace, prepare_reference
from evalq.graders.test_reports import parse_junit, parse_tap
from evalq.graders.sandbox.base import ExecResult
from evalq.models import Criterion, Outcome
from conftest import copy_fixture


def result(**kw) -> ExecResult:
    base = dict(exit_code=0, stdout="", stderr="", duration_seconds=0.1)
    base.update(kw)
    return ExecResult(**base)


PASS = [Criterion(index=0, name="a", passed=True)]
FAIL = [Criterion(index=0, name="a", passed=True), Criterion(index=1, name="b", passed=False)]


@pytest.mark.parametrize("exec_kw, criteria, problem, expected", [
    ({}, PASS, None, Outcome.correct),
    ({"exit_code": 1}, FAIL, None, Outcome.incorrect),
    ({"exit_code": 2}, [], None, Outcome.incorrect),            # build/collection failed
    ({"exit_code": 2}, None, None, Outcome.incorrect),
    ({"exit_code": 1}, PASS, None, Outcome.incorrect),          # exit code disagrees
    ({}, [], None, Outcome.grading_failure),                    # passes nothing
    ({}, None, None, Outcome.grading_failure),                  # no report at all
    ({"timed_out": True, "limit_hit": "time", "exit_code": -9}, None, None,
     Outcome.grading_failure),
    ({"limit_hit": "memory", "exit_code": -9}, PASS, None, Outcome.grading_failure),
    ({"limit_hit": "pids", "exit_code": 1}, FAIL, None, Outcome.grading_failure),
    ({"limit_hit": "output", "exit_code": -9}, PASS, None, Outcome.grading_failure),
    ({"exit_code": -11, "signal": 11}, PASS, None, Outcome.grading_failure),
    ({}, PASS, "JUnit report unreadable", Outcome.grading_failure),
])
def test_classification(exec_kw, criteria, problem, expected):
    outcome, reason = classify(result(**exec_kw), criteria, problem)
    assert outcome == expected
    assert (reason is None) == (expected == Outcome.correct)


def test_junit_criteria_carry_evidence(tmp_path):
    xml = tmp_path / "junit.xml"
    xml.write_text('<testsuites><testsuite><testcase classname="t" name="ok"/>'
                   '<testcase classname="t" name="bad"><failure message="assert 1 == 2">'
                   'trace</failure></testcase><testcase name="s"><skipped message="why"/>'
                   '</testcase></testsuite></testsuites>')
    criteria = parse_junit(xml)
    assert [(c.name, c.passed) for c in criteria] == [("t::ok", True), ("t::bad", False),
                                                       ("s", None)]
    assert "assert 1 == 2" in criteria[1].evidence
    assert parse_junit(tmp_path / "missing.xml") is None


def test_tap_reads_top_level_points_only():
    text = ("TAP version 13\n# Subtest: x\n    ok 1 - inner\nok 1 - outer one\n"
            "not ok 2 - outer two\n  ---\n  error: 'boom'\n  ...\nok 3 - later # SKIP no\n1..3\n")
    criteria = parse_tap(text)
    assert [(c.name, c.passed) for c in criteria] == [("outer one", True), ("outer two", False),
                                                       ("later", None)]
    assert "boom" in criteria[1].evidence


@pytest.mark.parametrize("name", ["py-slugify-bugfix", "py-inventory-feature"])
def test_references_grade_as_expected_in_bwrap(tmp_path, name):
    fixture = load_fixture(copy_fixture(name, tmp_path / "fx"))
    verdicts = {}
    for solution in (None, "correct", "incorrect"):
        workspace = prepare_reference(fixture, solution, tmp_path / f"ws-{solution}")
        graded = grade_workspace(fixture, workspace, sandbox="bwrap")
        verdicts[solution] = graded.outcome
        assert graded.sandbox == "bwrap"
        assert graded.criteria, "criteria come from the JUnit report"
    assert verdicts == {None: Outcome.incorrect, "correct": Outcome.correct,
                        "incorrect": Outcome.incorrect}


def test_hanging_solution_is_a_grading_failure_not_incorrect(tmp_path):
    fixture = load_fixture(copy_fixture("py-slugify-bugfix", tmp_path / "fx"))
    workspace = prepare_reference(fixture, "correct", tmp_path / "ws")
    (workspace / "textutil" / "slug.py").write_text(
        "def slugify(title):\n    while True:\n        pass\n")
    fast = fixture.spec.model_copy(update={"grade": fixture.spec.grade.model_copy(
        update={"timeout_seconds": 3})})
    quick = type(fixture)(path=fixture.path, spec=fast)
    graded = grade_workspace(quick, workspace, sandbox="bwrap")
    assert graded.outcome == Outcome.grading_failure
    assert "time limit" in graded.reason
    assert graded.duration_seconds < 3 + 5


def test_hidden_tests_replace_agent_edits_to_them(tmp_path):
    fixture = load_fixture(copy_fixture("py-slugify-bugfix", tmp_path / "fx"))
    workspace = prepare_reference(fixture, None, tmp_path / "ws")
    hidden = workspace / "hidden_tests"
    hidden.mkdir()
    (hidden / "test_slug_hidden.py").write_text("def test_nothing():\n    assert True\n")
    graded = grade_workspace(fixture, workspace, sandbox="bwrap")
    assert graded.outcome == Outcome.incorrect


def test_grading_environment_has_no_credential(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALQ_TEST_SECRET", "sk-planted-credential-123")
    fixture = load_fixture(copy_fixture("py-slugify-bugfix", tmp_path / "fx"))
    workspace = prepare_reference(fixture, "correct", tmp_path / "ws")
    init = workspace / "textutil" / "__init__.py"
    init.write_text(init.read_text() + "\nimport os\n"
                    "assert 'EVALQ_TEST_SECRET' not in os.environ, 'leaked'\n"
                    "assert not any('sk-planted' in v for v in os.environ.values())\n")
    graded = grade_workspace(fixture, workspace, sandbox="bwrap")
    assert graded.outcome == Outcome.correct, graded.output_tail
