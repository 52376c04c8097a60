"""The report as plain data (the JSON report's shape); every format renders this one result.

Schema 2 adds to the outcome counts: metrics with bootstrap CIs per condition, paired
comparisons with pinned-input compatibility, reliability, power warning, cost, tokens,
per-track grouping and a task x condition grid. Missing numbers are null with a reason.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Optional

from evalq.analysis.agent_errors import count_runs, last_line
from evalq.analysis.pinning import pinning_block, pinning_reasons
from evalq.analysis.usage import FROM_WIRE, usage_source
from evalq.ops.failures import FAILURES
from evalq.report.integrity import integrity_block
from evalq.report.overview import overview_block
from evalq.report.preregistration import claim_reasons, plan_record
from evalq import __version__
from evalq.gcpause import cyclic_gc_paused
from evalq.analysis.compare import Pair, compare_pairs
from evalq.analysis.cost_summary import condition_cost, condition_tokens
from evalq.analysis.skill_activation import activation_block, condition_activation, skill_revision
from evalq.analysis.condition_metrics import METRIC_OUTCOMES, condition_metrics, pass_k_tables, task_values
from evalq.analysis.sealing import sealing
from evalq.analysis.pinned import INTERVENTION, incompatible_fields, pinned_inputs
from evalq.analysis.rater_reliability import coverage_reason, reliability as reliability_block
from evalq.analysis.environment_split import environment_split, split_reasons
from evalq.analysis.runs import IMPORTED, IMPORTED_SOURCES, Run, condition_names, shared_groupings, study_runs
from evalq.results.store import first_started_at
from evalq.planning.wall_check import wall_time_check
from evalq.models import OUTCOMES
from evalq.ops.environments import study_environment_flag
from evalq.stats import ci_half_width, power_warning
from evalq.stats.bootstrap import BOOTSTRAP_METHOD, DEFAULT_RESAMPLES, shared_resamples
from evalq.analysis.evidence import evidence_block
from evalq.analysis.tracks import UNTRACKED, group_by_track, split_results, task_labels
from evalq.criteria.rates import criteria_block, stored_results
from evalq.report.session_checks import session_block, stored_sessions
from evalq.report.attempts import VALID, TrialView
from evalq.report.stages import stages_block

SCHEMA_VERSION = "2.4"  # 2.1: power_plan, model_pinning, usage_source and agent_* in runs;
# 2.2: agent_errors, overview and wall_time; exit_code, model_calls, agent_error and
# stderr_last_line in runs; 2.3: criteria, rater_coverage, environment_split and
# skill_activation per case (skill_commit, miss_runs, false_positive_runs); 2.4: evidence
# (a task manifest's evidence record), each track's by_split, session_first_check (first
# visible check vs eventual result, repair cost) and stages (run-to-baseline links and
# retention per track and condition)
COMMIT_COMPARISON = "commit-comparison"


def _outcome_counts(outcomes) -> dict[str, int]:
    counts = Counter(o for o in outcomes if o is not None)
    return {name: counts.get(name, 0) for name in OUTCOMES}


def _rate(counts: dict[str, int]) -> float | None:
    valid = sum(counts[o] for o in VALID)
    return counts["correct"] / valid if valid else None


def condition_summary(views: list[TrialView]) -> dict[str, Any]:
    eventual = _outcome_counts(v.outcome for v in views)
    first = _outcome_counts(v.first.outcome if v.first else None for v in views)
    finished = sum(1 for v in views if v.outcome is not None)
    return {
        "outcomes": eventual,
        "success_rate": _rate(eventual),
        "first_attempt": {"outcomes": first, "success_rate": _rate(first)},
        "trials": {"planned": len(views), "finished": finished, "pending": len(views) - finished},
        "attempts": sum(len(v.attempts) for v in views),
    }


def _k(study) -> int:
    return int(study.manifest.get("repetitions") or 1)


def _pairs(study, runs: list[Run], names: list[str],
           by_condition: Optional[dict[str, list[Run]]] = None) -> list[Pair]:
    """Hypotheses define the comparisons; without any, the first condition is the baseline.
    `by_condition`'s lists are used as they are: the metrics already made for those very
    lists are reused (shared_groupings keys them by identity)."""
    def of(name: str) -> list[Run]:
        if by_condition is not None and name in by_condition:
            return by_condition[name]
        return [r for r in runs if r.condition == name]

    primary_default = tuple(study.manifest.get("primary_metrics") or ("tpr",))
    wanted: dict[tuple[str, str], dict] = {}
    for hyp in study.manifest.get("hypotheses") or []:
        entry = wanted.setdefault((hyp["baseline"], hyp["candidate"]),
                                  {"primary": [], "hypotheses": []})
        entry["hypotheses"].append(hyp)
        if hyp.get("primary", True):
            entry["primary"].append(hyp["metric"])
    if not wanted:
        for other in names[1:]:
            wanted[(names[0], other)] = {"primary": list(primary_default), "hypotheses": []}
    return [Pair(baseline=b, candidate=c,
                 baseline_runs=of(b), candidate_runs=of(c),
                 primary=tuple(e["primary"]), hypotheses=tuple(e["hypotheses"]))
            for (b, c), e in wanted.items()]


def _within_ignore(study, baseline: str, candidate: str) -> tuple[str, ...]:
    """What two conditions of one study may differ in: commit, settings, an explicit model;
    in commit-comparison mode with agent sources, the agent source alone."""
    conds = {c["name"]: c for c in study.manifest.get("conditions", [])}
    if study.mode == COMMIT_COMPARISON and (study.lock or {}).get("agent_sources"):
        return INTERVENTION
    ignore = INTERVENTION + ("settings_digest",)
    a, b = conds.get(baseline, {}), conds.get(candidate, {})
    if a.get("model") and b.get("model") and a["model"] != b["model"]:
        ignore += ("model_id",)
    return ignore


def _group_report(study, runs: list[Run], names: list[str], *, tests: bool, seed: int,
                  n_resamples: int) -> dict[str, Any]:
    k = _k(study)
    conditions = {}
    by_condition = {name: [r for r in runs if r.condition == name] for name in names}
    pass_k = pass_k_tables(by_condition, k, seed=seed, n_resamples=n_resamples)
    for name, mine in by_condition.items():
        conditions[name] = {
            "outcomes": _outcome_counts(r.outcome for r in mine),
            "metrics": condition_metrics(mine, k, seed=seed, n_resamples=n_resamples),
            "pass_k": pass_k[name],
        }
    pairs = _pairs(study, runs, names, by_condition)
    comparisons = compare_pairs(pairs, k, tests=tests, seed=seed, n_resamples=n_resamples)
    for pair, comp in zip(pairs, comparisons):
        base = pinned_inputs(study, comp["baseline"], pair.baseline_runs)
        cand = pinned_inputs(study, comp["candidate"], pair.candidate_runs)
        fields = incompatible_fields(base, cand, _within_ignore(study, comp["baseline"],
                                                                comp["candidate"]))
        comp.update(compatible=not fields, incompatible_fields=fields,
                    pinned={"baseline": base, "candidate": cand})
    return {"conditions": conditions, "comparisons": comparisons}


def _power(runs: list[Run], names: list[str], groups: dict[str, dict]) -> tuple[bool, list[str]]:
    tasks_per_condition = []
    cells = []
    for name in names:
        mine = [r for r in runs if r.condition == name]
        valid: Counter = Counter()
        for r in mine:
            valid[r.task] += r.passed is not None
        tasks_per_condition.append(sum(1 for n in valid.values() if n))
        cells += list(valid.values())
    widths: dict[str, float | None] = {}
    for track, group in groups.items():
        prefix = "" if len(groups) == 1 else f"{track}: "
        for comp in group["comparisons"]:
            for metric, values in comp["metrics"].items():
                if values["primary"]:
                    widths[f"{prefix}{metric} {comp['candidate']} - {comp['baseline']}"] = \
                        ci_half_width(values["ci_low"], values["ci_high"])
                    for side in (comp["baseline"], comp["candidate"]):
                        m = group["conditions"][side]["metrics"][metric]
                        widths[f"{prefix}{metric} {side}"] = ci_half_width(m["ci_low"],
                                                                            m["ci_high"])
    return power_warning(min(tasks_per_condition, default=0), cells, widths)


def _task_grid(runs: list[Run], names: list[str], labels: dict, k: int) -> dict[str, Any]:
    grid: dict[str, Any] = {}
    by_condition: dict[str, list[Run]] = {}
    for run in runs:  # per-task values are per task: one pass a condition gives every cell
        by_condition.setdefault(run.condition, []).append(run)
    values = {name: task_values(by_condition.get(name, []), "tpr", k) for name in names}
    for task in sorted({r.task for r in runs}):
        label = labels.get(task, {})
        rates = {name: values[name].get(task) for name in names}
        grid[task] = {"track": label.get("track", UNTRACKED), "split": label.get("split"),
                      "suitable": label.get("suitable", True), "pass_rate": rates}
    return grid


def _primary_outcomes(study, comparisons) -> tuple[str, ...]:
    metrics = set(study.manifest.get("primary_metrics") or ())
    for comp in comparisons:
        metrics |= {m for m, v in comp["metrics"].items() if v["primary"]}
    out: list[str] = []
    for metric in sorted(metrics):
        for outcome in METRIC_OUTCOMES.get(metric, ()):
            if outcome not in out:
                out.append(outcome)
    return tuple(out)


#: what the model gateway metered per run (evalq/workers/wire.py), shown beside the agent's
WIRE_COLUMNS = ("wire_requests", "wire_input_tokens", "wire_output_tokens",
                "wire_cache_read_tokens", "wire_cache_write_tokens", "wire_cost_usd",
                "accounting_disagrees")


AGENT_COLUMNS = tuple("agent_" + name for name in FROM_WIRE)


def _counted_reason(view) -> Optional[str]:
    """Why the counted attempt ended as it did (the latest one while none is counted)."""
    attempt = view.counted or (view.attempts[-1] if view.attempts else None)
    return getattr(attempt, "reason", None) if attempt is not None else None


def _trial_row(run: Run, labels: dict,
               agent_error_kind: Optional[str] = None) -> dict[str, Any]:
    v, counted = run.view, run.view.counted
    m = run.counted_metrics  # read only: no copy (100k rows); the usage that counts
    get = m.get  # looked up once: two dozen keys a row, 100,000 rows
    first = v.first
    label = labels.get(run.task, {})
    grade = (counted.grade or {}) if counted is not None else None
    return {"trial_id": v.trial_id, "fixture": v.fixture_id, "condition": v.condition,
            "repetition": v.repetition, "order": v.order_index, "outcome": v.outcome,
            "first_outcome": first.outcome if first else None,
            "reason": _counted_reason(v),
            "attempts": len(v.attempts), "passed": run.passed,
            "track": label.get("track", UNTRACKED),
            "split": label.get("split"),
            "input_tokens": get("input_tokens"), "output_tokens": get("output_tokens"),
            "cache_read_tokens": get("cache_read_tokens"),
            "cache_write_tokens": get("cache_write_tokens"),
            # per request: what the provider reported, and evalq's estimate, never mixed
            "reported_prompt_tokens_per_request": get("request_prompt_tokens"),
            "estimated_context_tokens_per_request": get("estimated_context_tokens"),
            "tool_calls": get("tool_calls"), "tool_failures": get("tool_failures"),
            "stop_reason": get("stop_reason"),
            # did the agent itself break: its exit status (negative: killed by that signal),
            # its model calls, the kind of agent error and then its stderr's last line
            "exit_code": get("exit_code"), "model_calls": get("model_calls"),
            "agent_error": agent_error_kind,
            "stderr_last_line": last_line(get("stderr_tail")) if agent_error_kind else None,
            "cost_usd": get("cost_usd"), "cost_source": get("cost_source"),
            "usage_source": usage_source(m),
            "accounting_complete": None if counted is None else None not in (
                get("input_tokens"), get("output_tokens"), get("cost_usd")),
            "duration_seconds": get("duration_seconds"),
            "verdict": grade.get("verdict") if grade is not None else None,
            "tampered": grade.get("tampered") if grade is not None else None,
            # the model gateway's count of the same traffic, and the counts that differ
            **dict(zip(WIRE_COLUMNS, map(get, WIRE_COLUMNS))),
            # where the gateway's counts are the counted ones: what the agent said it used
            **dict(zip(AGENT_COLUMNS, map(get, AGENT_COLUMNS)))}


def _agent_errors(runs: list[Run], names: list[str]
                  ) -> tuple[dict[str, Any], list[str], dict[str, str]]:
    """Per condition: its finished runs, how many were agent errors, by kind; the warnings
    for conditions that mostly measured a broken agent (they make claims exploratory); and
    each agent-error run's kind by trial."""
    counts, kinds = count_runs(runs, names)
    warnings = [w for w in (c.warning() for c in counts.values()) if w]
    return {name: c.as_dict() for name, c in counts.items()}, warnings, kinds


def _left_out(runs: list[Run]) -> list[str]:
    """Runs left out of the rates make the claims exploratory, however few: an agent that can
    make its own losing runs fail (a workspace that breaks the grader, say) would otherwise
    raise its rate by taking them out of the denominator."""
    failed = sum(1 for r in runs if r.outcome in FAILURES)
    if not failed:
        return []
    return [f"{failed} of {len(runs)} runs ended in an evalq failure (infrastructure or "
            "grading) and are left out of every rate; resubmit them (`evalq resubmit`)"]


def _claims(mode: str, tests: bool, warn: bool, low_rel, comparisons,
            sealed: dict[str, Any], plan: dict[str, Any], left_out: list[str]) -> dict[str, Any]:
    reasons = []
    if sealed["sealed"] is False:
        reasons.append("agents ran unsealed (agent sandbox `none`): they could reach the host")
    reasons += claim_reasons(plan) + left_out
    if warn:
        reasons.append("power_warning is set")
    if low_rel:
        reasons.append("inter-rater reliability is low (kappa < 0.6 on a primary outcome)")
    if any(not c["compatible"] for c in comparisons):
        reasons.append("a compared pair differs in pinned inputs")
    if mode == "workflow-lift":
        reasons.append("workflow-lift mode: the difference is the whole workflow packet, "
                       "not the workflow document alone")
    # without tests the claims are descriptive (intervals only) while nothing weakens them;
    # what weakens a confirmatory claim weakens a descriptive one as much
    status = "exploratory" if reasons else ("descriptive" if not tests else "confirmatory")
    if not tests:
        reasons.append("commit-comparison mode reports uncertainty (CIs) only")
    return {"status": status, "reasons": reasons}


def compute_report(engine, study_id: str, *, n_resamples: int = DEFAULT_RESAMPLES) -> dict[str, Any]:
    with cyclic_gc_paused():
        study, runs = study_runs(engine, study_id, report_only=True)
        first_run_at = first_started_at(engine, study_id)
        # each condition's runs grouped by task, and each set of resample indices drawn, once
        with shared_groupings(), shared_resamples():
            report = _report(study, runs, n_resamples, first_run_at)
            report["criteria"] = _named_criteria(engine, study, runs, n_resamples)
            report["session_first_check"] = _session_first_check(engine, study, runs,
                                                                 n_resamples)
            report["stages"] = stages_block(study, runs, n_resamples)  # None: no stage
        report["overview"] = overview_block(engine, study, runs)
        report["evidence"] = evidence_block(engine, study, runs)  # None without a task manifest
        report["wall_time"] = wall_time_check(engine, study_id, study.lock)  # forecast vs actual
        return report


def _named_criteria(engine, study, runs: list[Run], n_resamples: int) -> dict[str, Any]:
    """Per track, each named criterion's rate per condition ({} when no fixture names any)."""
    stored = stored_results(engine, study.id)
    if not stored:
        return {}
    return criteria_block(runs, stored, task_labels(study), condition_names(study),
                          seed=int(study.manifest.get("seed") or 0), n_resamples=n_resamples)


def _session_first_check(engine, study, runs: list[Run], n_resamples: int) -> dict[str, Any]:
    """Per track and condition: the first visible check's success rate and the eventual one,
    apart, with the repair cost ({} when no fixture declares a visible check)."""
    stored = stored_sessions(engine, study.id)
    if not stored:
        return {}
    return session_block(runs, stored, task_labels(study), condition_names(study),
                         seed=int(study.manifest.get("seed") or 0), n_resamples=n_resamples)


def _conditions_block(study, runs: list[Run], names: list[str], groups: dict,
                      k: int, labels: dict) -> dict[str, Any]:
    """Per condition: outcomes, metrics with CIs and pass@k (pooled only when there is one
    track: results are never aggregated across tracks), tokens and skill activation."""
    pooled = next(iter(groups.values())) if len(groups) == 1 else None
    any_group = next(iter(groups.values()), None)
    conditions = {}
    for name in names:
        mine = [r for r in runs if r.condition == name]
        summary = condition_summary([r.view for r in mine])
        if pooled is not None:
            summary["metrics"] = pooled["conditions"][name]["metrics"]
            summary["pass_k"] = pooled["conditions"][name]["pass_k"]
        else:
            summary["metrics"] = {m: {"estimate": None, "ci_low": None, "ci_high": None,
                                      "n_tasks": 0, "k": k,
                                      "reason": "reported per track; results are never "
                                                "aggregated across tracks"}
                                  for m in any_group["conditions"][name]["metrics"]}
            summary["pass_k"] = []  # per track only, like every metric
        cond_def = next((c for c in study.manifest.get("conditions", [])
                         if c.get("name") == name), {})
        summary["tokens"] = condition_tokens(mine)
        summary["skill_activation"] = condition_activation(
            mine, cond_def.get("skill"), skill_revision(study, name), labels)
        conditions[name] = summary
    return conditions


def _tracks_block(runs: list[Run], names: list[str], tracks: dict, labels: dict,
                  groups: dict) -> dict[str, Any]:
    """Per adoption track: its tasks, splits, unsuitable tasks (a correct exclusion is a
    success, S3) and its own per-condition results."""
    block = {}
    for track, tasks in tracks.items():
        split = Counter(labels.get(t, {}).get("split") or "unlabelled" for t in tasks)
        unsuitable = [t for t in tasks if labels.get(t, {}).get("suitable") is False]
        block[track] = {
            "tasks": tasks, "splits": dict(split), "unsuitable_tasks": unsuitable,
            # regression and held-out (unseen) tasks apart, never pooled in one figure
            "by_split": split_results(runs, tasks, names, labels),
            "correct_exclusions": {n: sum(1 for r in runs if r.condition == n
                                          and r.task in unsuitable and r.outcome == "correct")
                                   for n in names},
            "conditions": groups[track]["conditions"]}
    return block


def _inference(tests: bool, n_resamples: int, seed: int) -> dict[str, Any]:
    """How the intervals and tests were computed, as the report states it."""
    return {"tests": tests, "bootstrap": {"method": BOOTSTRAP_METHOD,
                                          "n_resamples": n_resamples,
                                          "confidence": 0.95, "seed": seed, "unit": "task"},
            "permutation": ({"alternative": "two-sided", "n_permutations": 10000,
                             "exact_when_tasks_at_most": 16,
                             "multiplicity": "holm over the primary family"}
                            if tests else None),
            "note": ("commit-comparison mode: uncertainty only (95% CIs); "
                     "no hypothesis tests are run" if not tests else None)}


def _report(study, runs: list[Run], n_resamples: int,
            first_run_at: float | None = None) -> dict[str, Any]:
    views = [r.view for r in runs]
    names = condition_names(study)
    mode = study.mode
    tests = mode != COMMIT_COMPARISON
    seed = int(study.manifest.get("seed") or 0)
    labels = task_labels(study)
    k = _k(study)
    tracks = group_by_track((r.task for r in runs), labels)
    task_sets = {track: set(tasks) for track, tasks in tracks.items()}  # not one set per run
    groups = {track: _group_report(study, [r for r in runs if r.task in task_sets[track]], names,
                                   tests=tests, seed=seed, n_resamples=n_resamples)
              for track in tracks}
    conditions = _conditions_block(study, runs, names, groups, k, labels)
    comparisons = [dict(comp, track=track) for track, group in groups.items()
                   for comp in group["comparisons"]]
    track_block = _tracks_block(runs, names, tracks, labels, groups)
    reliability = reliability_block(runs, names, _primary_outcomes(study, comparisons))

    def part_comparisons(part: list[Run]) -> list[dict[str, Any]]:
        """One environment's comparisons, per track like the study's own."""
        return [dict(comp, track=track) for track in tracks
                for comp in _group_report(study, [r for r in part if r.task in task_sets[track]],
                                          names, tests=tests, seed=seed,
                                          n_resamples=n_resamples)["comparisons"]]

    split = environment_split(runs, part_comparisons)
    warn, warn_reasons = _power(runs, names, groups)
    sealed = sealing(study.lock, (a for r in runs for a in r.view.attempts))
    plan = plan_record(study.lock, first_run_at)
    pinning = pinning_block(study.manifest.get("conditions") or [], runs)
    agent_errors, agent_warnings, error_kinds = _agent_errors(runs, names)
    finished = sum(1 for v in views if v.outcome is not None)
    return {
        "schema_version": SCHEMA_VERSION,
        "evalq_version": __version__,
        "study": {"id": study.id, "mode": mode, "lock_digest": study.lock_digest,
                  "seed": study.manifest.get("seed"),
                  "repetitions": study.manifest.get("repetitions"),
                  "fixtures": sorted({v.fixture_id for v in views}),
                  "cancelled": study.cancelled,
                  "source": IMPORTED if (study.lock or {}).get("source") in IMPORTED_SOURCES
                  else "evalq",
                  "hypotheses": study.manifest.get("hypotheses") or [],
                  "primary_metrics": study.manifest.get("primary_metrics") or []},
        "trials": {"planned": len(views), "finished": finished, "pending": len(views) - finished},
        "counting": "first valid attempt (correct, incorrect or timed_out), else the latest "
                    "failure; first-attempt figures are reported beside it",
        "inference": _inference(tests, n_resamples, seed),
        "conditions": conditions,
        "comparisons": comparisons,
        "tracks": track_block,
        "task_grid": _task_grid(runs, names, labels, k),
        "reliability": reliability["outcomes"],
        "low_reliability": reliability["low_reliability"],
        "reliability_reasons": reliability["reasons"],
        "reliability_note": reliability["note"],
        # runs with fewer than two raters, where raters score the study (None: nobody does)
        "rater_coverage": reliability["coverage"],
        # each environment's part of a study whose environment changed (None: it did not)
        "environment_split": split,
        # per model: each case's loads, misses, false positives and latency per condition
        "skill_activation": activation_block(study, runs, labels),
        "power_warning": warn,
        "power_warning_reasons": warn_reasons,
        "worker_environments": study_environment_flag(
            a for r in runs for a in r.view.attempts),
        # runs where the agent itself broke (crashed, killed, no model call), per condition
        "agent_errors": agent_errors,
        "cost": {name: condition_cost([r for r in runs if r.condition == name])
                 for name in names},
        "agent_sandbox": sealed,
        "power_plan": plan,
        "model_pinning": pinning,
        "claims": _claims(mode, tests, warn, reliability["low_reliability"], comparisons, sealed,
                          plan, agent_warnings + _left_out(runs) + pinning_reasons(pinning)
                          + coverage_reason(reliability["coverage"]) + split_reasons(split)),
        "trial_rows": [_trial_row(r, labels, error_kinds.get(r.view.trial_id)) for r in runs],
        "grading_integrity": integrity_block(views),
    }
