"""Comparing two studies (for example one commit each): pinned inputs first, then paired metrics.

An incompatible pair is refused with the differing fields named: it is not a comparison.
"""

from __future__ import annotations

from typing import Any

from evalq.errors import UserError
from evalq.analysis.agent_errors import AgentErrorCount, count_runs
from evalq.stats.bootstrap import DEFAULT_RESAMPLES
from evalq.analysis.compare import Pair, compare_pairs
from evalq.analysis.condition_metrics import condition_metrics
from evalq.analysis.pinned import describe, incompatible_fields, pinned_inputs, settings_of
from evalq.analysis.settings_diff import describe_differences, differing_settings
from evalq.analysis.runs import condition_names, study_runs

COMMIT_COMPARISON = "commit-comparison"


def side(engine, argument: str):
    """'STUDY' (a one-condition study) or 'STUDY:CONDITION' -> (study, condition, runs)."""
    study_id, _, condition = argument.partition(":")
    study, runs = study_runs(engine, study_id)
    names = condition_names(study)
    if not condition:
        if len(names) != 1:
            raise UserError(f"study '{study_id}' has conditions {', '.join(names)}",
                            field=argument, fix=f"name one: {study_id}:{names[0]}")
        condition = names[0]
    if condition not in names:
        raise UserError(f"study '{study_id}' has no condition '{condition}'", field=argument,
                        fix=f"use one of {', '.join(names)}")
    return study, condition, [r for r in runs if r.condition == condition]


def compare_studies(engine, baseline: str, candidate: str, *,
                    n_resamples: int = DEFAULT_RESAMPLES) -> dict[str, Any]:
    b_study, b_cond, b_runs = side(engine, baseline)
    c_study, c_cond, c_runs = side(engine, candidate)
    b_pin = pinned_inputs(b_study, b_cond, b_runs)
    c_pin = pinned_inputs(c_study, c_cond, c_runs)
    fields = incompatible_fields(b_pin, c_pin)
    if fields:
        parts = []
        for f in fields:
            part = f"{f}: {describe(b_pin.get(f))} vs {describe(c_pin.get(f))}"
            if f == "settings_digest":
                rows = differing_settings(settings_of(b_study, b_cond, b_runs),
                                          settings_of(c_study, c_cond, c_runs))
                part += f" (differing settings: {describe_differences(rows) or 'unavailable'})"
            parts.append(part)
        detail = "; ".join(parts)
        fix = "re-run both sides with the same pinned inputs"
        if "settings_digest" in fields:  # often two versions of an agent told apart by argv
            fix += ("; to compare two versions of an agent's code, give each condition a "
                    "`source` (a folder or a commit) and the same settings, with {agent_dir} "
                    "in argv")
        raise UserError(f"not a comparison: pinned inputs differ ({detail})", field=fields[0],
                        fix=fix)
    k = min(int(b_study.manifest.get("repetitions") or 1),
            int(c_study.manifest.get("repetitions") or 1))
    tests = COMMIT_COMPARISON not in (b_study.mode, c_study.mode)
    seed = int(b_study.manifest.get("seed") or 0)
    primary = tuple(b_study.manifest.get("primary_metrics") or ("tpr",))
    pair = Pair(baseline=baseline, candidate=candidate, baseline_runs=b_runs,
                candidate_runs=c_runs, primary=primary)
    comp = compare_pairs([pair], k, tests=tests, seed=seed, n_resamples=n_resamples)[0]
    comp.update(compatible=True, incompatible_fields=[],
                pinned={"baseline": b_pin, "candidate": c_pin})
    errors = {label: _agent_errors(label, runs)
              for label, runs in ((baseline, b_runs), (candidate, c_runs))}
    return {"baseline": baseline, "candidate": candidate, "k": k, "tests": tests,
            "agent_errors": {label: count.as_dict() for label, count in errors.items()},
            "warnings": [w for w in (count.warning() for count in errors.values()) if w],
            "conditions": {baseline: condition_metrics(b_runs, k, seed=seed,
                                                       n_resamples=n_resamples),
                           candidate: condition_metrics(c_runs, k, seed=seed,
                                                        n_resamples=n_resamples)},
            "comparison": comp}


def _agent_errors(label: str, runs) -> AgentErrorCount:
    """One side's agent errors, named by its side (STUDY:CONDITION)."""
    counts, _ = count_runs(runs)  # a side is one condition
    count = next(iter(counts.values()), None) or AgentErrorCount(label)
    count.condition = label
    return count
