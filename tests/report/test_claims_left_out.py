"""Runs that ended in an evalq failure are left out of the rates, so they cost the claims their
confirmatory status: an agent able to fail its own losing runs must not raise its rate so."""

from __future__ import annotations

from evalq.report.compute import compute_report
from report_native_rows import make_study


def _reasons(report):
    return [r for r in report["claims"]["reasons"] if "evalq failure" in r]


def test_a_failed_run_is_named_in_the_claims_and_left_out_of_the_rate(tmp_path):
    def outcome(task, cond, rep):  # the candidate "fails" exactly the runs it would lose
        if cond == "cand" and task == "t1":
            return "grading_failure" if rep == 1 else "infrastructure_failure"
        return "correct" if cond == "cand" or rep == 1 else "incorrect"

    engine = make_study(f"sqlite:///{tmp_path / 'r.db'}", "left-out", outcome=outcome)
    report = compute_report(engine, "left-out", n_resamples=200)
    assert _reasons(report) == ["3 of 18 runs ended in an evalq failure (infrastructure or "
                                "grading) and are left out of every rate; resubmit them "
                                "(`evalq resubmit`)"]
    assert report["claims"]["status"] == "exploratory"
    # the rate it bought: 6 correct of 6 valid runs, where 9 were run
    assert report["conditions"]["cand"]["metrics"]["success_rate"]["estimate"] == 1.0


def test_no_failure_no_such_reason(tmp_path):
    engine = make_study(f"sqlite:///{tmp_path / 'r.db'}", "complete")
    assert _reasons(compute_report(engine, "complete", n_resamples=200)) == []
