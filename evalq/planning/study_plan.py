"""A study's plan from a pilot: which comparison, the power grid, the smallest adequate design, its forecast.

Everything is returned as plain data (the `evalq plan --json` shape); the text view and the
study lock's planning section are both made from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from evalq.errors import UserError
from evalq.stats import power_warning
from evalq.planning.estimate import pair_estimates
from evalq.planning.forecast import forecast, run_distributions
from evalq.planning.pilot import Pilot
from evalq.planning.simulate import (DEFAULT_PERMUTATIONS, DEFAULT_RESAMPLES, DEFAULT_SIMULATIONS, pilot_sampler,
                       power_grid, smallest_design)

SCHEMA = "evalq.study.order/1"
DEFAULT_TASKS = (10, 20, 30, 50, 75, 100, 150, 200)
DEFAULT_REPETITIONS = (1, 2, 3, 5)
SUPPORTED_METRICS = ("tpr",)
TEST_NAME = "two-sided paired sign-flip permutation test on per-task differences"


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

    @classmethod
    def of(cls, study: Any) -> "StudyShape":
        manifest = study.manifest
        primary = [h for h in manifest.hypotheses if h.primary]
        metric = primary[0].metric if primary else (manifest.primary_metrics or ["tpr"])[0]
        return cls(study_id=study.id, tasks=len(study.fixtures), conditions=len(manifest.conditions),
                   repetitions=manifest.repetitions, metric=metric,
                   hypotheses=tuple((h.baseline, h.candidate) for h in primary))

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
    return known[0], known[0], ("the pilot has one condition: both arms are resampled from it, "
                                "so the candidate is assumed to vary like the baseline")


def _assumptions(pair_source: str, target: PlanTarget, k_pilot: Optional[float]) -> list[str]:
    return [
        "the pilot's tasks are a random sample of the tasks the study will use (tasks are "
        "resampled with replacement)",
        "a task's runs are exchangeable: k runs are drawn with replacement from the pilot's "
        f"runs of that task and condition (pilot: {k_pilot if k_pilot is not None else '?'} "
        "valid runs per task on average); the pilot's observed per-task rates stand for the "
        "true ones, so its own run noise counts as task-to-task spread (cautious)",
        f"the effect is a shift of {target.effect:+.3f} in every task's pass-rate difference "
        "(candidate - baseline) around the pilot's own mean difference",
        f"comparison: {pair_source}",
        "grading and infrastructure failures are dropped, as in the report; they cost money "
        "and time in the forecast",
    ]


MIN_PILOT_TASKS = 5


def pilot_cautions(pilot: Pilot, sampler: Any, estimates: Any, effect: float) -> list[str]:
    """Reasons the simulated power may be optimistic: a tiny pilot, or one without any spread."""
    out = []
    if len(sampler.tasks) < MIN_PILOT_TASKS:
        out.append(f"the pilot has only {len(sampler.tasks)} usable tasks (fewer than "
                   f"{MIN_PILOT_TASKS}); the task-to-task spread is poorly known")
    spread = estimates.difference_variance
    rates = [*sampler.baseline_rates, *sampler.candidate_rates]
    if (spread is not None and spread == 0.0) or all(r in (0.0, 1.0) for r in rates):
        out.append("every pilot task passed always or never in each condition: the pilot "
                   "shows no run-to-run variation, so power is likely overstated")
    headroom = 1.0 - float(sampler.baseline_rates.mean())
    if effect > headroom:
        out.append(f"the effect {effect:+.3f} is more than the baseline's headroom "
                   f"({headroom:.3f} below a TPR of 1); the shift model cannot hold")
    dropped = sum(1 for r in pilot.runs if r.passed is None)
    if dropped:
        out.append(f"{dropped} pilot trials have no valid outcome and are left out")
    return out


def make_plan(study: Any, pilot: Pilot, target: PlanTarget = PlanTarget(), *,
              workers: Optional[int] = None, task_counts: Optional[Sequence[int]] = None,
              repetitions: Optional[Sequence[int]] = None,
              simulations: int = DEFAULT_SIMULATIONS, permutations: int = DEFAULT_PERMUTATIONS,
              resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
              baseline: Optional[str] = None, candidate: Optional[str] = None,
              on_design=None) -> dict[str, Any]:
    """The whole plan as plain data; ``study`` is a loaded manifest (evalq.study.manifest.Study).

    ``on_design(done, total)`` hears of each simulated design (the CLI's progress bar)."""
    target.check()
    shape = StudyShape.of(study)
    if shape.metric not in SUPPORTED_METRICS:
        raise UserError(f"planning supports the primary metric {', '.join(SUPPORTED_METRICS)}, "
                        f"not '{shape.metric}'", file=study.path, field="primary_metrics",
                        fix="plan on tpr (the per-task pass rate)")
    base, cand, source = choose_pair(shape, pilot, baseline, candidate)
    sampler = pilot_sampler(pilot, base, cand)
    estimates = pair_estimates(pilot, base, cand)
    tasks = sorted(set(task_counts or DEFAULT_TASKS) | {shape.tasks})
    reps = sorted(set(repetitions or DEFAULT_REPETITIONS) | {shape.repetitions})
    settings = dict(effect=target.effect, alpha=target.alpha, simulations=simulations,
                    permutations=permutations, resamples=resamples, seed=seed)
    grid = power_grid(sampler, tasks, reps, on_design=on_design, **settings)
    current = next(r for r in grid if (r.tasks, r.repetitions) == (shape.tasks, shape.repetitions))
    chosen = smallest_design(grid, target.power)
    dists = run_distributions(pilot)
    shown = chosen or current

    def row(result) -> dict[str, Any]:
        return dict(result.as_dict(), trials=shape.trials(result.tasks, result.repetitions),
                    meets_target=result.power >= target.power)

    cautions = pilot_cautions(pilot, sampler, estimates, target.effect)
    warn, reasons = power_warning(shown.tasks, shown.repetitions, {shape.metric: shown.ci_half_width})
    return {
        "schema": SCHEMA,
        "study": {"id": shape.study_id, "tasks": shape.tasks, "conditions": shape.conditions,
                  "repetitions": shape.repetitions,
                  "trials": shape.trials(shape.tasks, shape.repetitions)},
        "pilot": pilot.describe(),
        "comparison": {"baseline": base, "candidate": cand, "source": source,
                       "metric": shape.metric, "pilot_tasks_used": len(sampler.tasks)},
        "target": {"effect": target.effect, "alpha": target.alpha, "power": target.power,
                   "test": TEST_NAME, "ci": "95% percentile bootstrap over tasks"},
        "estimates": estimates.as_dict(),
        "simulation": {"simulations": simulations, "permutations": permutations,
                       "bootstrap_resamples": resamples, "seed": seed,
                       "method": "resample pilot tasks, then runs within task and condition; "
                                 "shift the per-task difference by the effect"},
        "grid": [row(r) for r in grid],
        "current_design": row(current),
        "chosen_design": row(chosen) if chosen else None,
        "chosen_reason": (None if chosen else
                          f"no design in the grid reaches power {target.power}; widen it with "
                          "--tasks/--repetitions or plan for a larger effect"),
        "power_warning": {"design": "chosen" if chosen else "current", "warn": warn,
                          "reasons": reasons},
        "run_distributions": dists.as_dict(),
        "forecast": dict(forecast(dists, shape.trials(shown.tasks, shown.repetitions), workers),
                         design="chosen" if chosen else "current"),
        "assumptions": _assumptions(source, target, estimates.baseline.runs_per_task),
        "pilot_cautions": cautions,
    }
