"""Power and precision of a design by simulation: draw true task rates, runs, test, as the report would.

A simulated study of n tasks × k runs draws n pilot tasks with replacement. Each drawn task
brings its assumed true baseline pass probability p (the pilot's observed rate shrunk for run
noise, evalq.planning.shrink); the candidate's is p + effect bounded to [0, 1] (the effect is
on the probability scale, the same on every task). Each condition's k runs are
Binomial(k, probability). Every planned primary metric is computed per task (TPR: pass share;
RP@k: all k passed; RFR: regression-free share) and analysed like a real study: the two-sided
paired sign-flip test (exact when 2**n is small, else seeded random flips) at the planned level
and the percentile bootstrap CI of the mean difference.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

import numpy as np

from evalq.errors import UserError
from evalq.planning.pilot import Pilot
from evalq.planning.shrink import Shrinkage, shrink_rates

EXACT_MAX_TASKS = 12  # 4,096 sign vectors: enumerate all of them, like the report's exact test
DEFAULT_SIMULATIONS = 1000
DEFAULT_PERMUTATIONS = 500
DEFAULT_RESAMPLES = 250
CI_SIMULATIONS = 500  # the mean half-width settles long before the power estimate does
_CHUNK = 256

#: the run field each plannable metric is computed from
METRIC_FIELD = {"tpr": "passed", "rp_at_k": "passed", "rfr": "regression_free"}
PLANNABLE = tuple(METRIC_FIELD)

# draw(rng, simulations, tasks, repetitions, effect) -> {metric: (simulations, tasks) differences}
Draw = Callable[[np.random.Generator, int, int, int, float], Mapping[str, np.ndarray]]


def task_differences(metric: str, base: np.ndarray, cand: np.ndarray, repetitions: int) -> np.ndarray:
    """Per-task candidate - baseline of one metric from each arm's pass counts out of k runs."""
    if metric == "rp_at_k":
        return (cand == repetitions).astype(float) - (base == repetitions).astype(float)
    return (cand - base) / repetitions


@dataclass(frozen=True)
class PilotSampler:
    """Assumed true baseline rates per pilot task for each run field, and the metrics to plan."""

    tasks: tuple[str, ...]
    rates: dict[str, np.ndarray]  # run field -> true baseline rate of each task
    metrics: tuple[str, ...]
    shrinkage: dict[str, Shrinkage] = field(default_factory=dict)

    @property
    def baseline_rates(self) -> np.ndarray:
        return self.rates["passed"]

    def __call__(self, rng: np.random.Generator, simulations: int, tasks: int,
                 repetitions: int, effect: float) -> dict[str, np.ndarray]:
        idx = rng.integers(0, len(self.tasks), size=(simulations, tasks))
        counts = {}
        for name in dict.fromkeys(METRIC_FIELD[m] for m in self.metrics):
            p = self.rates[name][idx]
            counts[name] = (rng.binomial(repetitions, p),
                            rng.binomial(repetitions, np.clip(p + effect, 0.0, 1.0)))
        return {m: task_differences(m, *counts[METRIC_FIELD[m]], repetitions) for m in self.metrics}


def field_rates(pilot: Pilot, condition: str, name: str) -> dict[str, tuple[float, int]]:
    """{task: (rate, valid runs)} of one run field in one condition, tasks without a value left out."""
    out = {}
    for task, values in pilot.values(condition, name).items():
        known = [bool(v) for v in values if v is not None]
        if known:
            out[task] = (sum(known) / len(known), len(known))
    return out


def rfr_unavailable(pilot: Pilot, baseline: str, tasks: Iterable[str]) -> Optional[str]:
    """Why RFR cannot be planned from this pilot, or None when every used task has it."""
    tasks = list(tasks)
    known = field_rates(pilot, baseline, "regression_free")
    have = sum(1 for t in tasks if t in known)
    if have == len(tasks):
        return None
    if not have:
        return (f"the pilot has no rater score 'regression' for '{baseline}' "
                "(import rater-scored results)")
    return f"RFR is known for only {have} of the {len(tasks)} pilot tasks of '{baseline}'"


def pilot_sampler(pilot: Pilot, baseline: str, metrics: Iterable[str] = ("tpr",)) -> PilotSampler:
    """Tasks with at least one valid baseline run, their shrunk rates; refuses a pilot with none.

    A metric whose field some task lacks (RFR without rater scores) is left out of ``metrics``;
    rfr_unavailable says why.
    """
    passed = field_rates(pilot, baseline, "passed")
    tasks = tuple(sorted(passed))
    if not tasks:
        raise UserError(f"pilot '{pilot.study_id}' has no task with a valid run of '{baseline}'",
                        field="--pilot",
                        fix="use a finished pilot with correct/incorrect outcomes in the baseline")
    wanted = [m for m in dict.fromkeys(metrics) if m in METRIC_FIELD]
    if "rfr" in wanted and rfr_unavailable(pilot, baseline, tasks):
        wanted.remove("rfr")
    rates, how = {}, {}
    for name in dict.fromkeys(["passed", *(METRIC_FIELD[m] for m in wanted)]):
        values = field_rates(pilot, baseline, name)
        observed = np.asarray([values[t][0] for t in tasks])
        runs = np.asarray([values[t][1] for t in tasks])
        rates[name], how[name] = shrink_rates(observed, runs)
    return PilotSampler(tasks=tasks, rates=rates, metrics=tuple(wanted), shrinkage=how)


def _signs(tasks: int, permutations: int, rng: np.random.Generator) -> tuple[np.ndarray, bool]:
    if tasks <= EXACT_MAX_TASKS:
        codes = np.arange(1 << tasks, dtype=np.int64)
        return 1.0 - 2.0 * ((codes[:, None] >> np.arange(tasks)) & 1), True
    return 1.0 - 2.0 * rng.integers(0, 2, size=(permutations, tasks)), False


def sign_flip_pvalues(differences: np.ndarray, permutations: int,
                      rng: np.random.Generator) -> np.ndarray:
    """Two-sided paired sign-flip p-value of each row (one simulated study per row)."""
    sims, tasks = differences.shape
    signs, exact = _signs(tasks, permutations, rng)
    out = np.empty(sims)
    for start in range(0, sims, _CHUNK):
        d = differences[start:start + _CHUNK]
        observed = np.abs(d.sum(axis=1))
        tolerance = 1e-9 * np.maximum(1.0, np.abs(d).sum(axis=1))
        hits = np.count_nonzero(np.abs(d @ signs.T) >= (observed - tolerance)[:, None], axis=1)
        out[start:start + _CHUNK] = hits / signs.shape[0] if exact else (hits + 1) / (permutations + 1)
    return out


def bootstrap_half_widths(differences: np.ndarray, resamples: int, confidence: float,
                          rng: np.random.Generator) -> np.ndarray:
    """Half-width of each row's percentile bootstrap CI of the mean (resampling tasks)."""
    sims, tasks = differences.shape
    weights = rng.multinomial(tasks, np.full(tasks, 1.0 / tasks), size=resamples) / tasks
    tail = (1.0 - confidence) / 2.0
    out = np.empty(sims)
    for start in range(0, sims, _CHUNK):
        means = differences[start:start + _CHUNK] @ weights.T
        low, high = np.quantile(means, [tail, 1.0 - tail], axis=1)
        out[start:start + _CHUNK] = (high - low) / 2.0
    return out


@dataclass(frozen=True)
class MetricPower:
    """One metric's simulated power (with its Monte Carlo standard error) and expected CI half-width."""

    power: float
    power_se: float
    ci_half_width: float


@dataclass(frozen=True)
class DesignResult:
    """One design's results per planned metric; power/power_se/ci_half_width are the first metric's."""

    tasks: int
    repetitions: int
    power: float
    power_se: float
    ci_half_width: float
    simulations: int
    seed: int
    metrics: dict[str, MetricPower] = field(default_factory=dict)

    @property
    def weakest_power(self) -> float:
        return min((m.power for m in self.metrics.values()), default=self.power)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def simulate_design(draw: Draw, tasks: int, repetitions: int, *, effect: float, alpha: float,
                    simulations: int = DEFAULT_SIMULATIONS,
                    permutations: int = DEFAULT_PERMUTATIONS,
                    resamples: int = DEFAULT_RESAMPLES, confidence: float = 0.95,
                    seed: int = 0) -> DesignResult:
    """Simulate one design; the seed is mixed with (tasks, repetitions) so each cell repeats on its own.

    ``alpha`` is the level each metric is tested at (already adjusted for multiplicity)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, tasks, repetitions]))
    per_metric = {}
    for metric, diffs in draw(rng, simulations, tasks, repetitions, effect).items():
        p = sign_flip_pvalues(diffs, permutations, rng)
        power = float(np.mean(p <= alpha))
        widths = bootstrap_half_widths(diffs[:CI_SIMULATIONS], resamples, confidence, rng)
        per_metric[metric] = MetricPower(power=power,
                                         power_se=float(np.sqrt(power * (1 - power) / simulations)),
                                         ci_half_width=float(np.mean(widths)))
    first = next(iter(per_metric.values()))
    return DesignResult(tasks=tasks, repetitions=repetitions, power=first.power,
                        power_se=first.power_se, ci_half_width=first.ci_half_width,
                        simulations=simulations, seed=seed, metrics=per_metric)


def power_grid(draw: Draw, task_counts: Iterable[int], repetitions: Iterable[int], *,
               on_design: Optional[Callable[[int, int], None]] = None, **kwargs: Any,
               ) -> list[DesignResult]:
    """simulate_design over every (tasks, repetitions) pair, fewest tasks first;
    `on_design(done, total)` is told after each (a progress bar)."""
    pairs = [(n, k) for n in sorted(set(task_counts)) for k in sorted(set(repetitions))]
    results = []
    for n, k in pairs:
        results.append(simulate_design(draw, n, k, **kwargs))
        if on_design is not None:
            on_design(len(results), len(pairs))
    return results
