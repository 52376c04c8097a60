"""A study's plan from a pilot: which comparison, the power grid, the recommended design, its forecast.

Everything is returned as plain data (the `evalq plan --json` shape); the text view and the
study lock's planning section are both made from it.

Multiplicity: the confirmatory analysis applies Holm over the study's m primary hypotheses, so
each planned metric is tested at alpha / m, the level Holm demands of the smallest p-value. A
p-value below alpha / m is rejected by Holm whatever the other hypotheses' p-values are, so
each planned power is a lower bound on that hypothesis' power under Holm (the step-down levels
alpha / (m - 1) ... alpha only help once another hypothesis is rejected, which a plan cannot
count on).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from evalq.errors import UserError
from evalq.stats import power_warning
from evalq.planning.choose import Floors, recommend
from evalq.planning.estimate import pair_estimates
from evalq.planning.forecast import forecast, run_distributions
from evalq.planning.pilot import Pilot
from evalq.planning.simulate import (DEFAULT_PERMUTATIONS, DEFAULT_RESAMPLES, DEFAULT_SIMULATIONS, PLANNABLE,
                                     field_rates, pilot_sampler, power_grid, rfr_unavailable)

SCHEMA = "evalq.study.order/1"
DEFAULT_TASKS = (10, 20, 30, 50, 75, 100, 150, 200)
DEFAULT_REPETITIONS = (1, 2, 3, 5)
SUPPORTED_METRICS = PLANNABLE
TEST_NAME = "two-sided paired sign-flip permutation test on per-task differences"
EFFECT_SCALE = "probability"


@dataclass(frozen=True)
class PlanTarget:
    """What the user asked for: detect ``effect`` with probability ``power`` at level ``alpha``."""

    effect: float = 0.10
    alpha: float = 0.05
    power: float = 0.80

    def check(self) -> None:
        for name, value, low, high, fix in (
                ("--effect", self.effect, 0.0, 1.0, "give a TPR difference such as 0.10"),
                ("--alpha", self.alpha, 0.0, 1.0, "use a level such as 0.05"),
                ("--power", self.power, 0.0, 1.0, "use a target such as 0.8")):
            if not low < value < high and not (name == "--effect" and value == 1.0):
                raise UserError(f"{name} {value} is out of range ({low}, {high})", field=name, fix=fix)


@dataclass(frozen=True)
class StudyShape:
    """The planned study's size: tasks (fixtures), conditions, repetitions, and its comparisons."""

    study_id: str
    tasks: int
    conditions: int
    repetitions: int
    metric: str
    hypotheses: tuple[tuple[str, str], ...]
    metrics: tuple[str, ...] = ("tpr",)  # every primary metric, in the manifest's order
    family_size: int = 1  # primary hypotheses Holm corrects over

    @classmethod
    def of(cls, study: Any) -> "StudyShape":
        manifest = study.manifest
        primary = [h for h in manifest.hypotheses if h.primary]
        metrics = [h.metric for h in primary] if primary else list(manifest.primary_metrics or ["tpr"])
        return cls(study_id=study.id, tasks=len(study.fixtures), conditions=len(manifest.conditions),
                   repetitions=manifest.repetitions, metric=metrics[0],
                   hypotheses=tuple((h.baseline, h.candidate) for h in primary),
                   metrics=tuple(dict.fromkeys(metrics)), family_size=max(1, len(metrics)))

    def trials(self, tasks: int, repetitions: int) -> int:
        return tasks * repetitions * self.conditions


def choose_pair(shape: StudyShape, pilot: Pilot, baseline: Optional[str],
                candidate: Optional[str]) -> tuple[str, str, str]:
    """(baseline, candidate, why): options, else the study's hypothesis, else the pilot's, else its conditions."""
    known = pilot.conditions
    if not known:
        raise UserError(f"pilot '{pilot.study_id}' has no trials", field="--pilot",
                        fix="run the pilot first, or import its results")
    if baseline or candidate:
        pair = (baseline or candidate, candidate or baseline)
        for flag, name in zip(("--baseline", "--candidate"), pair):
            if name not in known:
                raise UserError(f"'{name}' is not a condition of pilot '{pilot.study_id}'",
                                field=flag, fix=f"use one of {', '.join(known)}")
        return pair[0], pair[1], "given on the command line"
    for source, pairs in (("the study's primary hypothesis", shape.hypotheses),
                          ("the pilot's primary hypothesis", pilot.hypotheses)):
        for base, cand in pairs:
            if base in known and cand in known:
                return base, cand, source
    if len(known) >= 2:
        return known[0], known[1], "the pilot's first two conditions"
    return known[0], known[0], ("the pilot has one condition: it is the baseline, and the "
                                "candidate is the baseline plus the effect")


def _assumptions(pair_source: str, target: PlanTarget, k_pilot: Optional[float], alpha_each: float,
                 family: int) -> list[str]:
    return [
        "the pilot's tasks are a random sample of the tasks the study will use (tasks are "
        "resampled with replacement)",
        "each task has a true baseline pass probability: the pilot's observed rate "
        f"(pilot: {k_pilot if k_pilot is not None else '?'} valid runs per task on average) "
        "pulled toward the pilot mean so that the spread of true rates is the observed spread "
        "minus the pilot's binomial run noise (method of moments, floored at 0); the study's k "
        "runs per task and condition are then Binomial(k, probability), so run noise counts once",
        f"the effect is on the probability scale: each task's candidate pass probability is its "
        f"baseline's {target.effect:+.3f}, bounded to [0, 1], the same shift on every task; the "
        "pilot's own candidate rates are reported but not simulated",
        f"each planned primary metric is tested at alpha / m = {alpha_each:.4g} (m = {family} "
        "primary hypotheses, Holm-Bonferroni): below that level Holm rejects whatever the other "
        "p-values, so each power is a lower bound on its power under Holm",
        "RP@k and RFR follow from the same task probabilities (RP@k: all k runs pass; RFR: the "
        "pilot's regression-free rates shifted by the same effect); RP@k's effect depends on k, "
        "so its power need not rise with k",
        f"comparison: {pair_source}",
        "grading and infrastructure failures are dropped, as in the report; they cost money "
        "and time in the forecast",
    ]


MIN_PILOT_TASKS = 5


def pilot_cautions(pilot: Pilot, sampler: Any, base: str, cand: str, effect: float,
                   floors: Floors) -> list[str]:
    """Reasons the plan may mislead: a tiny pilot, no spread, a capped effect, lowered floors."""
    out = []
    if len(sampler.tasks) < MIN_PILOT_TASKS:
        out.append(f"the pilot has only {len(sampler.tasks)} usable tasks (fewer than "
                   f"{MIN_PILOT_TASKS}); the task-to-task spread is poorly known")
    observed = [r for c in dict.fromkeys((base, cand))
                for r, _ in field_rates(pilot, c, "passed").values()]
    if all(r in (0.0, 1.0) for r in observed):
        out.append("every pilot task passed always or never in each condition: the pilot "
                   "shows no run-to-run variation, so power is likely overstated")
    p = sampler.baseline_rates
    capped = int(np.count_nonzero(p + effect > 1.0))
    if capped:
        out.append(f"{capped} of {len(p)} pilot tasks have an assumed baseline rate above "
                   f"{1 - effect:.3f}: their candidate rate is capped at 1, so the mean effect "
                   f"simulated is {float(np.mean(np.clip(p + effect, 0, 1) - p)):+.3f}, not "
                   f"{effect:+.3f}")
    out.extend(f"{name}: {how.note}" for name, how in sampler.shrinkage.items() if how.note)
    if floors.lowered:
        out.append(f"the floors are lowered to {floors.min_tasks} tasks and k = "
                   f"{floors.min_repetitions}, below the protocol's 30 and 3")
    dropped = sum(1 for r in pilot.runs if r.passed is None)
    if dropped:
        out.append(f"{dropped} pilot trials have no valid outcome and are left out")
    return out


def planned_metrics(shape: StudyShape, pilot: Pilot, base: str,
                    tasks: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """(metrics simulated, {metric: why not} for the rest); refuses a study with none plannable."""
    skipped = {m: "planning cannot model this metric (it plans tpr, rp_at_k and rfr)"
               for m in shape.metrics if m not in PLANNABLE}
    if "rfr" in shape.metrics:
        why = rfr_unavailable(pilot, base, tasks)
        if why:
            skipped["rfr"] = why
    planned = [m for m in shape.metrics if m not in skipped]
    if not planned:
        raise UserError(f"none of the study's primary metrics ({', '.join(shape.metrics)}) can be "
                        f"planned from pilot '{pilot.study_id}'", field="--pilot",
                        fix="use a rater-scored pilot for rfr, or plan on tpr or rp_at_k")
    return planned, skipped


def _design_row(result: Any, shape: StudyShape, target: PlanTarget, floors: Floors, dists: Any,
                workers: Optional[int]) -> dict[str, Any]:
    trials = shape.trials(result.tasks, result.repetitions)
    fc = forecast(dists, trials, workers)
    return dict(result.as_dict(), trials=trials,
                meets_target=all(m.power >= target.power for m in result.metrics.values()),
                weakest_power=result.weakest_power,
                within_floors=floors.admits(result.tasks, result.repetitions),
                forecast_cost_usd=fc["cost_usd"]["expected_total"],
                forecast_wall_seconds=fc["wall_seconds"]["at_median"])


def make_plan(study: Any, pilot: Pilot, target: PlanTarget = PlanTarget(), *,
              workers: Optional[int] = None, task_counts: Optional[Sequence[int]] = None,
              repetitions: Optional[Sequence[int]] = None,
              simulations: int = DEFAULT_SIMULATIONS, permutations: int = DEFAULT_PERMUTATIONS,
              resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
              baseline: Optional[str] = None, candidate: Optional[str] = None,
              floors: Floors = Floors(), on_design=None) -> dict[str, Any]:
    """The whole plan as plain data; ``study`` is a loaded manifest (evalq.study.manifest.Study).

    ``on_design(done, total)`` hears of each simulated design (the CLI's progress bar)."""
    target.check()
    floors.check()
    shape = StudyShape.of(study)
    if not any(m in PLANNABLE for m in shape.metrics):
        raise UserError(f"planning supports the primary metrics {', '.join(PLANNABLE)}, "
                        f"not {', '.join(shape.metrics)}", file=study.path, field="primary_metrics",
                        fix="plan on tpr (the per-task pass rate), rp_at_k or rfr")
    base, cand, source = choose_pair(shape, pilot, baseline, candidate)
    tasks_used = pilot_sampler(pilot, base, ()).tasks
    metrics, skipped = planned_metrics(shape, pilot, base, tasks_used)
    sampler = pilot_sampler(pilot, base, metrics)
    estimates = pair_estimates(pilot, base, cand)
    alpha_each = target.alpha / shape.family_size
    tasks = sorted(set(task_counts or DEFAULT_TASKS) | {shape.tasks, floors.min_tasks})
    reps = sorted(set(repetitions or DEFAULT_REPETITIONS) | {shape.repetitions, floors.min_repetitions})
    settings = dict(effect=target.effect, alpha=alpha_each, simulations=simulations,
                    permutations=permutations, resamples=resamples, seed=seed)
    grid = power_grid(sampler, tasks, reps, on_design=on_design, **settings)
    dists = run_distributions(pilot)
    rows = [_design_row(r, shape, target, floors, dists, workers) for r in grid]
    current = next(r for r in rows if (r["tasks"], r["repetitions"]) == (shape.tasks, shape.repetitions))
    chosen, why_none, ranking = recommend(rows, floors, target.power, dists.cost_usd.partial)
    shown = chosen or current
    half_widths = {m: v["ci_half_width"] for m, v in shown["metrics"].items()}
    warn, reasons = power_warning(shown["tasks"], shown["repetitions"], half_widths)
    p = sampler.baseline_rates
    return {
        "schema": SCHEMA,
        "study": {"id": shape.study_id, "tasks": shape.tasks, "conditions": shape.conditions,
                  "repetitions": shape.repetitions,
                  "trials": shape.trials(shape.tasks, shape.repetitions)},
        "pilot": pilot.describe(),
        "comparison": {"baseline": base, "candidate": cand, "source": source,
                       "metric": metrics[0], "pilot_tasks_used": len(sampler.tasks)},
        "target": {"effect": target.effect, "alpha": target.alpha, "power": target.power,
                   "test": TEST_NAME, "ci": "95% percentile bootstrap over tasks",
                   "effect_scale": EFFECT_SCALE,
                   "mean_effect_simulated": float(np.mean(np.clip(p + target.effect, 0, 1) - p)),
                   "family_size": shape.family_size, "alpha_per_hypothesis": alpha_each,
                   "multiplicity": "Holm-Bonferroni over the primary hypotheses; each planned at "
                                   "alpha / m, the level Holm demands of the smallest p-value",
                   "metrics": metrics, "metrics_not_planned": skipped},
        "floors": floors.as_dict(),
        "estimates": dict(estimates.as_dict(),
                          shrinkage={name: how.as_dict() for name, how in sampler.shrinkage.items()}),
        "simulation": {"simulations": simulations, "permutations": permutations,
                       "bootstrap_resamples": resamples, "seed": seed,
                       "method": "resample pilot tasks with their noise-shrunk baseline rates; "
                                 "candidate rate = baseline + effect bounded to [0, 1]; k "
                                 "binomial runs per task and condition; test each planned "
                                 "metric at alpha / m"},
        "grid": rows,
        "current_design": current,
        "chosen_design": chosen,
        "chosen_reason": why_none,
        "ranking": ranking,
        "power_warning": {"design": "chosen" if chosen else "current", "warn": warn,
                          "reasons": reasons},
        "run_distributions": dists.as_dict(),
        "forecast": dict(forecast(dists, shown["trials"], workers),
                         design="chosen" if chosen else "current"),
        "assumptions": _assumptions(source, target, estimates.baseline.runs_per_task, alpha_each,
                                    shape.family_size),
        "pilot_cautions": pilot_cautions(pilot, sampler, base, cand, target.effect, floors),
    }
