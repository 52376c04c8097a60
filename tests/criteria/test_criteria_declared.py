"""Criteria in fixture.toml: validated with one clear line, frozen in the fixture's digest;
trace rules checked over trajectories as the adapters write them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from conftest import FIXTURES, run_cli  # noqa: E402
from criteria_study import CRITERIA, criteria_fixture  # noqa: E402
from evalq.criteria.evaluate import derived_outcome, run_results  # noqa: E402
from evalq.criteria.spec import CriterionSpec, TraceRule  # noqa: E402
from evalq.criteria.trace import EVENT_TEXT_LIMIT, check, events  # noqa: E402
from evalq.errors import UserError  # noqa: E402
from evalq.fixtures.fixture import load_fixture  # noqa: E402
from evalq.workers.agents.trajectory import Step, build  # noqa: E402


def test_shipped_fixtures_keep_their_digests():
    for manifest in FIXTURES.glob("*/fixture.toml"):
        fixture = load_fixture(manifest.parent)  # verify=True: digest recomputed and compared
        assert fixture.spec.criteria is None


def test_criteria_are_in_the_digest(tmp_path):
    path = criteria_fixture(tmp_path, "slug-x", "directed-integration", "textutil")
    fixture = load_fixture(path)
    assert [c.name for c in fixture.spec.criteria][:2] == ["basic slugs", "no hyphen at the ends"]
    manifest = path / "fixture.toml"
    manifest.write_text(manifest.read_text().replace('tool = "edit"', 'tool = "write"'))
    with pytest.raises(UserError, match="no longer match the recorded digest"):
        load_fixture(path)


@pytest.mark.parametrize("criterion, words", [
    ('name = "a"\nkind = "review"\nfield = "human_accepted"', "set required = false"),
    ('name = "a"\nkind = "hidden"', "needs checks"),
    ('name = "a"\nkind = "trace"\nrule = { event = "message", tool = "bash" }',
     "tool and succeeded apply to event"),
    ('name = "a"\nkind = "trace"\nrule = { tool = "bash" }', "give event ="),
    ('name = "a"\nkind = "trace"\nrule = { event = "tool_call", code = "x" }', "code"),
    ('name = "a"\nkind = "hidden"\nchecks = ["x"]\n\n[[criteria]]\nname = "a"\nkind = "hidden"\n'
     'checks = ["y"]', "used twice"),
])
def test_bad_criteria_are_one_line_naming_file_and_field(tmp_path, criterion, words):
    dest = tmp_path / "fx"
    import shutil

    shutil.copytree(FIXTURES / "py-slugify-bugfix", dest)
    manifest = dest / "fixture.toml"
    manifest.write_text(manifest.read_text() + "\n[[criteria]]\n" + criterion + "\n")
    proc = run_cli(["fixtures", "freeze", str(dest)])
    assert proc.returncode != 0
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "fixture.toml" in lines[0] and "criteria" in lines[0], lines
    assert words in lines[0], lines[0]


def _trajectory(*steps: Step) -> dict:
    return build("scripted", None, None, [Step("user", message="Fix slugify."), *steps],
                 usage_scope="turn")


def _agent(call: str, args: dict, error: bool = False, message: str = "") -> Step:
    step = Step("agent", message=message)
    step.call("c-" + call + str(len(args)), call, args)
    step.result("c-" + call + str(len(args)), "out", error)
    return step


def test_rules_count_matching_events():
    trajectory = _trajectory(_agent("Bash", {"command": "pip install slugkit==2.0"}),
                             _agent("bash", {"command": "python3 -m pytest -q"}, error=True),
                             _agent("Read", {"path": "/p/skills/slug/SKILL.md"}),
                             Step("agent", message="Done. I excluded PRAXO: not a slug library."))
    found = events(trajectory)
    rule = lambda **kw: TraceRule(**kw)  # noqa: E731
    assert check(rule(event="tool_call", tool="bash", contains=["SLUGKIT"]), found)[0] is True
    assert check(rule(event="tool_call", tool="bash", contains=["pytest"], succeeded=True),
                 found)[0] is False
    assert check(rule(event="tool_call", tool="b*", min_count=2), found)[0] is True
    assert check(rule(event="tool_call", tool="b*", max_count=1), found)[0] is False
    assert check(rule(event="tool_call", contains=["rm -rf"], max_count=0), found)[0] is True
    assert check(rule(event="final_message", contains=["excluded"], excludes=["installed"]),
                 found)[0] is True
    assert check(rule(event="message", contains=["excluded"]), found)[2] == [5]
    both = rule(all=[{"event": "tool_call", "contains": ["skill.md"]},
                     {"any": [{"event": "tool_call", "tool": "skill"},
                              {"event": "final_message", "contains": ["done"]}]}])
    passed, evidence, steps = check(both, found)
    assert passed is True and steps == [4, 5] and evidence.startswith("all of (")
    assert check(rule(event="message"), None) == (None, "no trajectory was recorded for this run",
                                                   [])
    assert events({"steps": "not a list"}) is None and events([1, 2]) is None


def test_a_huge_agent_text_is_read_bounded():
    text = "a" * (EVENT_TEXT_LIMIT * 4) + "needle"
    found = events(_trajectory(Step("agent", message=text)))
    assert all(len(e.text) <= EVENT_TEXT_LIMIT for e in found)
    assert check(TraceRule(event="message", contains=["needle"]), found)[0] is False


def test_outcome_derivation_keeps_what_the_checks_cannot_decide():
    specs = [CriterionSpec(name="core", kind="hidden", checks=["test_core*"]),
             CriterionSpec(name="extra", kind="hidden", checks=["test_extra*"], required=False),
             CriterionSpec(name="trace", kind="trace", required=True,
                           rule=TraceRule(event="tool_call", tool="edit"))]
    checks = [{"name": "h::test_core_a", "passed": True},
              {"name": "h::test_extra_b", "passed": False}]
    edited = json.dumps(_trajectory(_agent("edit", {"f": 1}))).encode()
    results = run_results(specs, checks, edited)
    assert [r["passed"] for r in results] == [True, False, True]
    assert derived_outcome("incorrect", "1 failed", results, checks, False)[0] == "correct"
    assert derived_outcome("incorrect", "1 failed", results, checks, True) == (
        "incorrect", "1 failed"), "a tampered run stays incorrect"
    for kept in ("timed_out", "grading_failure", "infrastructure_failure"):
        assert derived_outcome(kept, "why", results, checks, False) == (kept, "why")
    assert derived_outcome("incorrect", "build failed", results, [], False) == (
        "incorrect", "build failed")
    no_trace = run_results(specs, checks, None)
    outcome, reason = derived_outcome("incorrect", "x", no_trace, checks, False)
    assert outcome == "grading_failure" and "trace (no trajectory" in reason
    skipped = run_results(specs, [{"name": "h::test_core_a", "passed": None}], edited)
    assert skipped[0]["passed"] is None and "skipped" in skipped[0]["evidence"]


def test_the_criteria_study_text_declares_every_kind():
    assert all(f'kind = "{k}"' in CRITERIA for k in ("hidden", "trace", "review"))


def test_fixtures_check_refuses_a_group_that_names_no_check(tmp_path):
    good = criteria_fixture(tmp_path / "ok", "slug-ok", "directed-integration", "textutil")
    proc = run_cli(["fixtures", "check", str(good), "--sandbox", "bwrap"], timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    typo = criteria_fixture(tmp_path / "typo", "slug-typo", "directed-integration", "textutil")
    manifest = typo / "fixture.toml"
    manifest.write_text(manifest.read_text().replace('"test_strips_*"', '"test_strip_ends*"')
                        .replace('"test_no_hyphen_at_either_end*"', '"test_no_hyphens*"'))
    run_cli(["fixtures", "freeze", str(typo)])
    proc = run_cli(["fixtures", "check", str(typo), "--sandbox", "bwrap"], timeout=300)
    assert proc.returncode != 0
    assert "criterion 'no hyphen at the ends' names no hidden check" in proc.stdout + proc.stderr


def test_a_grading_failure_leaves_hidden_criteria_unresolved():
    from evalq.criteria.evaluate import graded

    specs = [CriterionSpec(name="core", kind="hidden", checks=["*"]),
             CriterionSpec(name="trace", kind="trace", required=False,
                           rule=TraceRule(event="tool_call", tool="edit"))]
    edited = json.dumps(_trajectory(_agent("edit", {"f": 1}))).encode()
    outcome, reason, results = graded(specs, "grading_failure", "grader exceeded its time limit",
                                      [], None, edited)
    assert (outcome, reason) == ("grading_failure", "grader exceeded its time limit")
    assert results[0]["passed"] is None and "no verdict" in results[0]["evidence"]
    assert results[1]["passed"] is True
    outcome, _, results = graded(specs, "incorrect", "test run exited 2 without a test report",
                                 [], None, edited)
    assert outcome == "incorrect" and results[0]["passed"] is False
    assert graded(None, "correct", None, [], None, None) == ("correct", None, None)


def test_a_trajectory_with_endless_calls_is_read_up_to_the_event_limit():
    from evalq.criteria.trace import EVENT_LIMIT

    step = Step("agent", message="many calls")
    for i in range(EVENT_LIMIT + 500):
        step.call(f"c{i}", "bash", {"i": i})
    found = events(_trajectory(step, Step("agent", message="final words")))
    assert len(found) == EVENT_LIMIT + 1 and found[-1].kind == "final_message"
    assert found[-1].text == "final words"
    assert check(TraceRule(event="tool_call", tool="bash", min_count=EVENT_LIMIT), found)[0] \
        is False


def test_exported_criteria_import_back_with_only_the_required_deciding(tmp_path):
    from evalq.analysis.trial_import import _outcome, check_row

    row = {"case_id": "slug", "condition": "bad", "skill_commit": None, "model": "m",
           "runtime": None, "trial": 1, "skill_loaded": None, "elapsed_seconds": 1.5,
           "input_tokens": None, "output_tokens": None, "artifacts": None,
           "criteria": [{"index": 0, "name": "basic slugs", "kind": "hidden", "required": True,
                         "passed": True, "evidence": "7 of 7 check(s) passed"},
                        {"index": 1, "name": "no hyphen at the ends", "kind": "hidden",
                         "required": False, "passed": False, "evidence": "3 of 4 failed"},
                        {"index": 2, "name": "reviewers accept it", "kind": "review",
                         "required": False, "passed": None, "evidence": "not rated yet"}]}
    checked = check_row(row, tmp_path / "trials.jsonl", 1)
    assert [c["name"] for c in checked["criteria"]][:2] == ["basic slugs",
                                                           "no hyphen at the ends"]
    assert _outcome(checked["criteria"])[0] == "correct"
    row["criteria"][0]["passed"] = False
    assert _outcome(check_row(row, tmp_path / "t.jsonl", 1)["criteria"])[0] == "incorrect"
    for c in row["criteria"]:  # rows without `required` (other tools'): every one decides
        c.pop("required")
    row["criteria"][0]["passed"] = True
    assert _outcome(check_row(row, tmp_path / "t.jsonl", 1)["criteria"])[0] == "incorrect"
