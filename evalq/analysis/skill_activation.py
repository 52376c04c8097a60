"""Skill activation per case and condition, reported per model: misses, false positives, latency.

Activation is read from each run's trace (`skill_loaded`: true, false, or None when the trace
cannot tell). A case declares whether the skill should activate on it (`skill_expected`):
in a condition that has the skill, a run of an activation case that did not load it is a
miss, and a run of an unrelated case that loaded it is a false positive. In a condition
without the skill nothing should load, so any load is a false positive there. A case that
declares nothing has neither (None, with the reason): evalq does not guess the intent.
Results are grouped by model and never pooled across models, since models need different
amounts of guidance.
"""

from __future__ import annotations

from statistics import median
from typing import Any, Optional

from evalq.analysis.runs import Run
from evalq.results.store import StudyRow

UNDECLARED = "the case declares no skill_expected"
UNKNOWN = "no run's trace says whether the skill loaded"


def skill_revision(study: StudyRow, condition: str) -> Optional[str]:
    """The skill's own revision: the git commit it was imported with, else the digest of the
    frozen skill folder; None for a condition without a skill."""
    entry = ((study.lock or {}).get("skills") or {}).get(condition) or {}
    return entry.get("commit") or entry.get("digest")


def latency(values: list[Optional[float]]) -> dict[str, Any]:
    """Elapsed seconds of the runs that report it; the rest are counted, never taken as 0."""
    known = sorted(float(v) for v in values if v is not None)
    return {"runs": len(known), "unreported": len(values) - len(known),
            "median": median(known) if known else None, "min": known[0] if known else None,
            "max": known[-1] if known else None,
            "mean": sum(known) / len(known) if known else None}


def case_cell(runs: list[Run], has_skill: bool, expected: Optional[bool]) -> dict[str, Any]:
    """One case under one condition: loads, misses, false positives, latency."""
    finished = [r for r in runs if r.view.counted is not None]
    values = [r.counted_metrics.get("skill_loaded") for r in finished]
    loaded = sum(v is True for v in values)
    not_loaded = sum(v is False for v in values)
    known = loaded + not_loaded
    should = expected if has_skill else False  # without the skill, nothing should load
    misses = false_positives = None
    reason = None
    if should is None:
        reason = UNDECLARED
    elif not known:
        reason = UNKNOWN
    elif should:
        misses = not_loaded
    else:
        false_positives = loaded
    return {"runs": len(finished), "loaded": loaded, "not_loaded": not_loaded,
            "unknown": len(values) - known, "expected": should, "misses": misses,
            "false_positives": false_positives, "reason": reason,
            "latency_seconds": latency([r.counted_metrics.get("duration_seconds")
                                        for r in finished])}


def _total(cells: list[dict[str, Any]], key: str) -> Optional[int]:
    values = [c[key] for c in cells if c[key] is not None]
    return sum(values) if values else None


def runs_by_case(runs: list[Run]) -> dict[str, list[Run]]:
    """The runs of each case, in one pass (a scan of every run per case took minutes at
    20,000 cases: bench/ report)."""
    by_case: dict[str, list[Run]] = {}
    for r in runs:
        by_case.setdefault(r.task, []).append(r)
    return by_case


def condition_activation(runs: list[Run], skill: Optional[str], revision: Optional[str],
                         labels: dict[str, dict]) -> dict[str, Any]:
    """A condition's loads over all its cases and its misses and false positives summed over
    the cases that decide them (None when none does)."""
    by_case = runs_by_case(runs)
    cells = [case_cell(by_case[case], bool(skill), labels.get(case, {}).get("skill_expected"))
             for case in sorted(by_case)]
    return {"skill": skill, "skill_commit": revision,
            "loaded": sum(c["loaded"] for c in cells),
            "not_loaded": sum(c["not_loaded"] for c in cells),
            "unknown": sum(c["unknown"] for c in cells),
            "misses": _total(cells, "misses"),
            "miss_runs": sum(c["loaded"] + c["not_loaded"] for c in cells
                             if c["misses"] is not None),
            "false_positives": _total(cells, "false_positives"),
            "false_positive_runs": sum(c["loaded"] + c["not_loaded"] for c in cells
                                       if c["false_positives"] is not None)}


def condition_model(study: StudyRow, condition: dict[str, Any]) -> str:
    model = condition.get("model") or (study.manifest.get("environment") or {}).get("model_id")
    return str(model) if model else "unnamed model"


def activation_block(study: StudyRow, runs: list[Run], labels: dict[str, dict]
                     ) -> Optional[dict[str, Any]]:
    """{model: {conditions: {name: totals}, cases: {case: {expected, conditions: {name: cell}}}}}
    for a study where some condition has a skill or some case declares skill_expected; None
    otherwise (nothing to report)."""
    conditions = study.manifest.get("conditions") or []
    declared = any(v.get("skill_expected") is not None for v in labels.values())
    if not declared and not any(c.get("skill") for c in conditions):
        return None
    models: dict[str, Any] = {}
    for cond in conditions:
        name = cond.get("name")
        mine = [r for r in runs if r.condition == name]
        skill = cond.get("skill")
        block = models.setdefault(condition_model(study, cond), {"conditions": {}, "cases": {}})
        block["conditions"][name] = condition_activation(mine, skill,
                                                         skill_revision(study, name), labels)
        for case, case_runs in sorted(runs_by_case(mine).items()):
            expected = labels.get(case, {}).get("skill_expected")
            entry = block["cases"].setdefault(case, {"skill_expected": expected,
                                                     "conditions": {}})
            entry["conditions"][name] = case_cell(case_runs, bool(skill), expected)
    return {"models": models,
            "rule": "miss: an activation case ran with the skill and did not load it; false "
                    "positive: a case that should not activate it loaded a skill (any load in "
                    "a condition without the skill); per model, never pooled across models"}
