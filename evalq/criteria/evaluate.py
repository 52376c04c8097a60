"""One run's result per named criterion, and the outcome its required criteria give.

A result is a plain dict (stored in the attempt's `criterion_results`):
`{name, kind, required, passed, evidence, checks?, steps?, ratings?}`, `passed` true, false or
null (unresolved, with the reason in `evidence`). The outcome stays one of the five: a verdict
the checks gave (correct or incorrect) is decided again by the required criteria alone, so a
failing check outside every required group no longer fails the run; every other outcome
(timed out, tampered, no verdict from the grader, evalq's failures) stands as it was.
"""

from __future__ import annotations

import fnmatch
import json
from typing import Any, Optional

from evalq.criteria.spec import CriterionSpec
from evalq.criteria.trace import check as check_trace, events

#: check names listed in one hidden criterion's evidence
EVIDENCE_CHECKS = 20
UNRATED = "not rated yet"


def hidden_result(spec: CriterionSpec, checks: list[dict], no_checks_why: Optional[str]
                  ) -> dict[str, Any]:
    """A group of hidden checks: false when one failed, true when one passed and none failed,
    null when none of its checks ran (skipped or absent). `no_checks_why`: the run was not
    graded or gave no checks (a timeout, a build that failed): the group is false."""
    result = _base(spec)
    if no_checks_why is not None:
        return dict(result, passed=False, evidence=no_checks_why, checks=[])
    mine = [c for c in checks if _in_group(spec.checks or [], str(c.get("name", "")))]
    failed = [c["name"] for c in mine if c.get("passed") is False]
    passed = [c["name"] for c in mine if c.get("passed") is True]
    names = [c["name"] for c in mine]
    if failed:
        verdict, why = False, f"{len(failed)} of {len(mine)} check(s) failed: " + ", ".join(
            failed[:EVIDENCE_CHECKS])
    elif passed:
        verdict, why = True, f"{len(passed)} of {len(mine)} check(s) passed"
    else:
        verdict = None
        why = ("no check of this group ran (patterns: " + ", ".join(spec.checks or []) + ")"
               if not mine else f"all {len(mine)} check(s) of this group were skipped")
    return dict(result, passed=verdict, evidence=why, checks=names[:EVIDENCE_CHECKS * 5])


def _in_group(patterns: list[str], name: str) -> bool:
    short = name.rsplit("::", 1)[-1]
    return any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(short, p) for p in patterns)


def trace_result(spec: CriterionSpec, transcript: Optional[bytes]) -> dict[str, Any]:
    trajectory = None
    if transcript is not None:
        try:
            trajectory = json.loads(transcript.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            trajectory = None
    assert spec.rule is not None
    passed, evidence, steps = check_trace(spec.rule, events(trajectory))
    if trajectory is None and transcript is not None:
        evidence = "the run's trajectory could not be read"
    return dict(_base(spec), passed=passed, evidence=evidence, steps=steps[:50])


def review_result(spec: CriterionSpec) -> dict[str, Any]:
    """Scored by raters after the run: null until then (the report reads the ratings)."""
    return dict(_base(spec), field=spec.field, passed=None, evidence=UNRATED)


def _base(spec: CriterionSpec) -> dict[str, Any]:
    return {"name": spec.name, "kind": spec.kind, "required": spec.required}


def run_results(criteria: list[CriterionSpec], checks: list[dict], transcript: Optional[bytes],
                no_checks_why: Optional[str] = None) -> list[dict[str, Any]]:
    """Every criterion's result for one run, in the fixture's order."""
    out = []
    for spec in criteria:
        if spec.kind == "hidden":
            out.append(hidden_result(spec, checks, no_checks_why))
        elif spec.kind == "trace":
            out.append(trace_result(spec, transcript))
        else:
            out.append(review_result(spec))
    return out


def derived_outcome(outcome: str, reason: Optional[str], results: list[dict[str, Any]],
                    checks: list[dict], tampered: Optional[bool]) -> tuple[str, Optional[str]]:
    """The outcome from the required criteria, where the checks gave the verdict."""
    if outcome not in ("correct", "incorrect") or tampered:
        return outcome, reason
    failed_checks = any(c.get("passed") is False for c in checks)
    if outcome == "incorrect" and not failed_checks:
        return outcome, reason  # the test run failed outside its checks (a build, an exit)
    required = [r for r in results if r["required"]]
    unmet = [r["name"] for r in required if r["passed"] is False]
    if unmet:
        return "incorrect", "required criteria not met: " + "; ".join(
            f"{r['name']} ({r['evidence']})" for r in required if r["passed"] is False)
    unresolved = [r for r in required if r["passed"] is None]
    if unresolved:
        return "grading_failure", "required criteria unresolved: " + "; ".join(
            f"{r['name']} ({r['evidence']})" for r in unresolved)
    if outcome == "incorrect":
        names = ", ".join(r["name"] for r in results if not r["required"]
                          and r["passed"] is False) or "checks outside every criterion"
        return "correct", f"every required criterion met; failed but not required: {names}"
    return "correct", reason


def graded(criteria: Optional[list[CriterionSpec]], outcome: str, reason: Optional[str],
           checks: list[dict], tampered: Optional[bool], transcript: Optional[bytes]
           ) -> tuple[str, Optional[str], Optional[list[dict[str, Any]]]]:
    """(outcome, reason, criterion results) of a graded run; a fixture without criteria keeps
    its outcome and stores no results (its one implicit criterion is the outcome itself)."""
    if not criteria:
        return outcome, reason, None
    why = None
    if not checks:
        why = f"no hidden check ran ({reason or outcome})"
    results = run_results(criteria, checks, transcript, why)
    if outcome in ("grading_failure", "infrastructure_failure"):  # evalq's, not the agent's
        results = [dict(r, passed=None, evidence=f"the grader gave no verdict ({reason})")
                   if r["kind"] == "hidden" else r for r in results]
    outcome, reason = derived_outcome(outcome, reason, results, checks, tampered)
    return outcome, reason, results


def ungraded(criteria: Optional[list[CriterionSpec]], transcript: Optional[bytes], why: str
             ) -> Optional[list[dict[str, Any]]]:
    """Results of a run that was not graded (it timed out; its workspace was refused): its
    hidden criteria false with the reason, its trace criteria read as for any run."""
    if not criteria:
        return None
    return run_results(criteria, [], transcript, f"not graded: {why}")


def reference_problems(criteria: Optional[list[CriterionSpec]], checks: list[dict]
                       ) -> list[str]:
    """What the correct reference's checks say is wrong with the hidden criteria: a group
    that names no check the hidden tests have (a typo would leave every run unresolved), or a
    group the correct solution does not pass."""
    problems = []
    for spec in criteria or []:
        if spec.kind != "hidden":
            continue
        result = hidden_result(spec, checks, None)
        if not result["checks"]:
            problems.append(f"criterion '{spec.name}' names no hidden check (patterns: "
                            + ", ".join(spec.checks or []) + ")")
        elif result["passed"] is not True:
            problems.append(f"correct reference does not meet criterion '{spec.name}': "
                            f"{result['evidence']}")
    return problems
