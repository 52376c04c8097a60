"""Power and precision of a design by simulation: resample the pilot's tasks and runs, shift, test.

A simulated study of n tasks × k runs draws n pilot tasks with replacement, and for each
drawn task and condition k of that task's pilot runs with replacement (for pass/fail runs
this is Binomial(k, pilot pass rate) / k). The per-task difference candidate - baseline is
centred on the pilot's mean difference and shifted by the effect to detect (a location-shift
assumption). Each simulated study is analysed like a real one: the two-sided paired
sign-flip test (exact when 2**n is small, else seeded random flips) and the percentile
bootstrap CI of the mean difference.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any, Optional

import numpy as np

from evalq.errors import UserError
from evalq.planning.pilot import Pilot

EXACT_MAX_TASKS = 12  # 4,096 sign vectors: enumerate all of them, like the report's exact test
DEFAULT_SIMULATIONS = 1000
DEFAULT_PERMUTATIONS = 500
DEFAULT_RESAMPLES = 250
CI_SIMULATIONS = 500  # the mean half-width settles long before the power estimate does
_CHUNK = 256

# draw(rng, simulations, tasks, repetitions) -> (simulations, tasks) per-task differences, mean 0
Draw = Callable[[np.random.Generator, int, int, int], np.ndarray]


@dataclass(frozen=True)
class PilotSampler:
    """Per-task pass rates of the two arms (the same arm twice for a one-condition pilot)."""

    tasks: tuple[str, ...]
    baseline_rates: np.ndarray
    candidate_rates: np.ndarray

    @property
    def mean_difference(self) -> float:
        return float(np.mean(self.candidate_rates - self.baseline_rates))

    def __call__(self, rng: np.random.Generator, simulations: int, tasks: int,
                 repetitions: int) -> np.ndarray:
        idx = rng.integers(0, len(self.tasks), size=(simulations, tasks))
        base = rng.binomial(repetitions, self.baseline_rates[idx]) / repetitions
        cand = rng.binomial(repetitions, self.candidate_rates[idx]) / repetitions
        return cand - base - self.mean_difference


def pilot_sampler(pilot: Pilot, baseline: str, candidate: str) -> PilotSampler:
    """Tasks with at least one valid run in both arms; refuses a pilot with none."""
    from evalq.stats import task_rates

    base = task_rates(pilot.outcomes(baseline))
    cand = task_rates(pilot.outcomes(candidate))
    tasks = tuple(sorted(t for t in base if base[t] is not None and cand.get(t) is not None))
    if not tasks:
        raise UserError(f"pilot '{pilot.study_id}' has no task with a valid run in both "
                        f"'{baseline}' and '{candidate}'", field="--pilot",
                        fix="use a finished pilot with correct/incorrect outcomes in both conditions")
    return PilotSampler(tasks=tasks,
                        baseline_rates=np.asarray([base[t] for t in tasks], dtype=float),
                        candidate_rates=np.asarray([cand[t] for t in tasks], dtype=float))


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
class DesignResult:
    """One design's simulated power (with its Monte Carlo standard error) and expected CI half-width."""

    tasks: int
    repetitions: int
    power: float
    power_se: float
    ci_half_width: float
    simulations: int
    seed: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def simulate_design(draw: Draw, tasks: int, repetitions: int, *, effect: float, alpha: float,
                    simulations: int = DEFAULT_SIMULATIONS,
                    permutations: int = DEFAULT_PERMUTATIONS,
                    resamples: int = DEFAULT_RESAMPLES, confidence: float = 0.95,
                    seed: int = 0) -> DesignResult:
    """Simulate one design; the seed is mixed with (tasks, repetitions) so each cell repeats on its own."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, tasks, repetitions]))
    diffs = draw(rng, simulations, tasks, repetitions) + effect
    p = sign_flip_pvalues(diffs, permutations, rng)
    power = float(np.mean(p <= alpha))
    widths = bootstrap_half_widths(diffs[:CI_SIMULATIONS], resamples, confidence, rng)
    return DesignResult(tasks=tasks, repetitions=repetitions, power=power,
                        power_se=float(np.sqrt(power * (1 - power) / simulations)),
                        ci_half_width=float(np.mean(widths)), simulations=simulations, seed=seed)


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


def smallest_design(results: Iterable[DesignResult], target_power: float) -> Optional[DesignResult]:
    """The design meeting the power target with the fewest runs (tasks × repetitions); more tasks wins a tie."""
    meeting = [r for r in results if r.power >= target_power]
    if not meeting:
        return None
    return min(meeting, key=lambda r: (r.tasks * r.repetitions, -r.tasks))
