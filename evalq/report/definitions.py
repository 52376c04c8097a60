"""One line per metric the report shows, and which of them are the same number at the study's
design: a reviewer should not read pass@1 and TPR as two findings."""

from __future__ import annotations

from typing import Any, Optional

DEFINITIONS = (
    ("success rate", "correct runs / valid runs (correct, incorrect, timed_out), pooled over "
                     "tasks"),
    ("TPR", "task pass rate: each task's share of passing valid runs, averaged over tasks "
            "(every task weighs the same)"),
    ("RP@k", "reliable pass: the share of tasks whose k valid runs all passed (a task without "
             "exactly k valid runs is left out)"),
    ("pass@k", "the chance that at least one of k runs drawn from a task's runs passes "
               "(unbiased estimator), averaged over tasks"),
    ("pass^k", "the chance that all k runs drawn from a task's runs pass (unbiased "
               "estimator), averaged over tasks"),
    ("RFR", "regression-free rate: runs a rater scored free of regressions (and whose hidden "
            "checks, where recorded, passed)"),
    ("CPR", "clean pass rate: runs that passed, passed validation, caused no regression and "
            "needed no rework (rater scores)"),
    ("NRR", "no-rework rate: runs a rater scored as needing no rework"),
)


def coinciding(k: Optional[int], max_attempts: Optional[int],
               rater_scored: bool) -> list[str]:
    """Sentences naming the metrics that are one number at this design."""
    out = ["pass@1 and pass^1 equal TPR (the k = 1 rows of the pass@k table)"]
    if k == 1:
        out.append("with one repetition, TPR, RP@1, pass@1 and pass^1 are the same number")
    elif k:
        out.append(f"with {k} repetitions, pass^{k} equals RP@{k} (both are 1 for a task only "
                   f"when all its {k} runs pass) and pass@{k} is the share of tasks with at "
                   "least one passing run")
    out.append("success rate equals TPR when every task has the same number of valid runs")
    if max_attempts == 1:
        out.append("max_attempts = 1: no run is retried, so first-attempt figures equal the "
                   "counted ones (unless a run was resubmitted by hand)")
    if not rater_scored:
        out.append("RFR, CPR and NRR need rater scores, which this study has none of: they "
                   "read unavailable")
    return out


def definition_lines(report: dict[str, Any]) -> list[str]:
    design = (report.get("overview") or {}).get("design") or {}
    k = design.get("repetitions") or report["study"].get("repetitions")
    rated = bool(report.get("reliability"))
    lines = ["## Metric definitions", ""]
    lines += [f"- {name}: {text}" for name, text in DEFINITIONS]
    lines += ["", "At this design:", ""]
    lines += [f"- {sentence}" for sentence in coinciding(k, design.get("max_attempts"), rated)]
    return lines + [""]
