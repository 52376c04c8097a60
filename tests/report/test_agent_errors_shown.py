"""A broken agent is shown as one: its runs are counted as agent errors per condition in the
report, the status and the run rows, with their exit status, model calls and stderr, and a
condition made mostly of them costs the claims their confirmatory status. Counted by hand here,
on SQLite and PostgreSQL (the status counts in SQL)."""

from __future__ import annotations

import json

import pytest

from evalq.analysis.agent_errors import (BEFORE_ANY_MODEL_CALL, ERROR_EXIT, KILLED,
                                         NO_MODEL_CALL, agent_error, count_by_condition,
                                         describe_exit, last_line)
from evalq.ops.status import AgentErrorsEvery, render, study_status, with_agent_errors
from evalq.report.compute import compute_report
from evalq.report.html import render_html
from evalq.report.markdown import render_markdown
from evalq.report.transcripts import render_transcript, run_summary
from evalq.results.store import get_engine
from report_native_rows import make_study

EVIL = '<script>alert(1)</script> | # heading\x1b[31m'
TAIL = f"Traceback (most recent call last):\n  File \"fixer.py\"\nFileNotFoundError: {EVIL}"
WARNING = f"condition cand: 9/9 runs {BEFORE_ANY_MODEL_CALL}"


def _metrics(task, cond, rep):
    if cond == "cand":
        return {"exit_code": 2, "model_calls": 0, "stderr_tail": TAIL, "stop_reason": "exit 2"}
    if task == "t1" and rep == 1:  # one base run killed by a signal it did not get from evalq
        return {"exit_code": -9, "model_calls": 4, "stderr_tail": None}
    return {"exit_code": 0, "model_calls": 3, "stderr_tail": "warning: slow"}


def _outcome(task, cond, rep):
    return "incorrect" if cond == "cand" or (task, rep) == ("t1", 1) else "correct"


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'r.db'}"
    else:
        yield request.getfixturevalue("postgres_url")
    get_engine.cache_clear()


def test_the_classification():
    assert agent_error({"exit_code": 2, "model_calls": 0}, "incorrect") == BEFORE_ANY_MODEL_CALL
    assert agent_error({"exit_code": 1, "model_calls": 5}, "incorrect") == ERROR_EXIT
    assert agent_error({"exit_code": 1, "model_calls": None}, "incorrect") == ERROR_EXIT
    assert agent_error({"exit_code": -11, "model_calls": 2}, "incorrect") == KILLED
    assert agent_error({"exit_code": 0, "model_calls": 0}, "incorrect") == NO_MODEL_CALL
    assert agent_error({"exit_code": 0, "model_calls": None}, "incorrect") is None
    # evalq's own stop at the wall time is `timed_out`, not a crash; evalq failures are evalq's
    assert agent_error({"exit_code": -9, "model_calls": 0}, "timed_out") is None
    assert agent_error({"exit_code": 2, "model_calls": 0}, "infrastructure_failure") is None
    assert agent_error({}, "incorrect") is None
    assert describe_exit(2) == "exit 2" and describe_exit(None) == "unavailable"
    assert describe_exit(-9) == "killed by signal 9 (SIGKILL)"
    assert last_line("a\nb\n\n  \n") == "b" and last_line(None) is None
    counts = count_by_condition([
        {"condition": "a", "outcome": "incorrect", "metrics": {"exit_code": 1}, "n": 3},
        {"condition": "a", "outcome": "correct", "metrics": {"exit_code": 0}, "n": 2},
        {"condition": "a", "outcome": "grading_failure", "metrics": {"exit_code": 1}}],
        ["b", "a"])
    assert list(counts) == ["b", "a"] and counts["b"].runs == 0 and counts["b"].warning() is None
    assert (counts["a"].runs, counts["a"].errors) == (5, 3)
    assert counts["a"].warning() == f"condition a: 3/5 runs {ERROR_EXIT}"


def test_report_and_status_show_the_broken_condition(db_url):
    engine = make_study(db_url, "broken", metrics=_metrics, outcome=_outcome)
    report = compute_report(engine, "broken", n_resamples=200)
    expected = {"base": {"runs": 9, "errors": 1, "by_kind": {KILLED: 1}},
                "cand": {"runs": 9, "errors": 9, "by_kind": {BEFORE_ANY_MODEL_CALL: 9}}}
    assert report["agent_errors"] == expected
    assert WARNING in report["claims"]["reasons"]
    assert report["claims"]["status"] == "exploratory"
    assert report["conditions"]["cand"]["outcomes"]["incorrect"] == 9  # the outcome stays
    rows = {r["trial_id"]: r for r in report["trial_rows"]}
    cand = rows["broken-t2-cand-1"]
    assert (cand["exit_code"], cand["model_calls"], cand["agent_error"], cand["stop_reason"]) \
        == (2, 0, BEFORE_ANY_MODEL_CALL, "exit 2")
    assert cand["stderr_last_line"] == f"FileNotFoundError: {EVIL}"
    fine = rows["broken-t2-base-1"]
    assert (fine["agent_error"], fine["stderr_last_line"], fine["exit_code"]) == (None, None, 0)
    assert json.loads(json.dumps(report))["agent_errors"] == expected

    md = render_markdown(report)
    section = md[md.index("## Agent errors"):]
    assert "| cand | 9 | 9 |" in section and "| base | 9 | 1 |" in section
    line = next(l for l in section.splitlines() if l.startswith("| broken-t2-cand-1 "))
    assert "exit 2" in line and "FileNotFoundError" in line
    assert "\x1b" not in md and "\\| # heading" in line  # one cell: its pipe escaped
    html = render_html(report)
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)" in html

    status = with_agent_errors(engine, study_status(engine, "broken"))
    assert status.agent_errors == expected
    assert status.agent_error_warnings == [WARNING]
    shown = [r["trial_id"] for r in status.agent_error_runs]
    assert shown[0] == "broken-t1-base-1" and len(shown) == 10  # planned order, bounded
    text = render(status)
    assert "agent errors   base 1/9" in text and "cand 9/9" in text
    assert f"warning: {WARNING}" in text
    assert "broken-t1-cand-1: incorrect, the agent exited with an error before any model " \
           "call; exit 2, model calls 0, stop reason exit 2; stderr: FileNotFoundError" in text
    assert "killed by signal 9 (SIGKILL)" in text and "\x1b" not in text
    assert "… 0 more" not in text and "… 0" not in text
    assert json.loads(json.dumps(status.as_dict()))["agent_errors"] == expected

    # a watch counts them again at most every `every` seconds, and once settled
    watch = AgentErrorsEvery(engine, every=3600)
    first, second = study_status(engine, "broken"), study_status(engine, "broken")
    first.planned = second.planned = first.planned + 1  # as if a trial were still running
    assert watch.add(first).agent_errors == expected
    assert watch.add(second).agent_errors is first.agent_errors  # not counted again
    settled = watch.add(study_status(engine, "broken"))
    assert settled.agent_errors == expected and settled.agent_errors is not first.agent_errors


def test_a_transcript_page_says_how_the_run_ended():
    class Attempt:
        outcome, reason = "incorrect", f"2 hidden checks failed {EVIL}"
        criteria = [{"index": 0, "name": f"test_slug {EVIL}", "passed": False,
                     "evidence": EVIL}, {"index": 1, "name": "ok", "passed": True}]
        metrics = {"exit_code": 2, "model_calls": 0, "stop_reason": "exit 2",
                   "stderr_tail": TAIL}

    page = render_transcript("t1", None, run_summary(Attempt, f"+++ b/x\n+{EVIL}".encode()))
    assert "<script>" not in page and page.count("&lt;script&gt;") >= 5
    for words in ("outcome: incorrect", "failed checks: 1<ul><li>test_slug", "exit status: exit 2",
                  "model calls: 0", "stop reason: exit 2",
                  "the agent exited with an error before any model call", "<h2>Diff</h2>",
                  "FileNotFoundError", "no transcript was recorded"):
        assert words in page, words
    Attempt.metrics = {}
    bare = render_transcript("t1", None, run_summary(Attempt, None))
    assert "exit status: unavailable" in bare and "model calls: unavailable" in bare
    assert "agent error" not in bare and "no diff" in bare


def test_the_run_summary_names_a_condition_of_agent_errors():
    """What `evalq run` prints last: the broken condition's errors beside its outcomes, and
    the warning that weakens the claims."""
    from evalq.ops.failures import run_summary

    report = {"study": {"id": "s"}, "claims": {"status": "exploratory", "reasons": []},
              "conditions": {"v1": {"outcomes": {"correct": 3}},
                             "v2": {"outcomes": {"incorrect": 3}}},
              "agent_errors": {"v1": {"runs": 3, "errors": 0, "by_kind": {}},
                               "v2": {"runs": 3, "errors": 3,
                                      "by_kind": {"exited with an error": 3}}}}
    lines = run_summary(report, [])
    assert lines[1] == "  v1: correct 3"
    assert lines[2] == "  v2: incorrect 3 (3 agent error(s): `evalq status s` lists them)"
    assert lines[3] == "warning: condition v2: 3/3 runs exited with an error; the claims are " \
                       "exploratory"
