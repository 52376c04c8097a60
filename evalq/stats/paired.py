"""Paired comparison of two conditions on the same tasks: per-task differences, bootstrap CI, permutation p."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from evalq.stats.bootstrap import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, DEFAULT_SEED, BootstrapCI, bootstrap_ci
from evalq.stats.permutation import DEFAULT_EXACT_MAX_N, DEFAULT_PERMUTATIONS, PermutationTest, paired_permutation_test

K = TypeVar("K")


@dataclass(frozen=True)
class PairedDifferences(Generic[K]):
    """Differences treatment - control for tasks with a value in both; the rest listed as unpaired."""

    task_ids: list[K]
    differences: np.ndarray
    unpaired: list[K]


@dataclass(frozen=True)
class PairedComparison(Generic[K]):
    """Mean per-task difference with its bootstrap CI and, unless switched off, a permutation p-value."""

    n_tasks: int
    mean_difference: float
    ci: BootstrapCI
    test: PermutationTest | None  # None when no significance test was asked for
    pairs: PairedDifferences[K]

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for JSON reports (task ids as strings)."""
        return {
            "n_tasks": self.n_tasks,
            "mean_difference": self.mean_difference,
            "ci": self.ci.as_dict(),
            "test": None if self.test is None else self.test.as_dict(),
            "differences": {str(t): float(d) for t, d in zip(self.pairs.task_ids, self.pairs.differences)},
            "unpaired": [str(t) for t in self.pairs.unpaired],
        }


def paired_differences(treatment: Mapping[K, float | None], control: Mapping[K, float | None]) -> PairedDifferences[K]:
    """Per-task treatment - control over tasks valued in both, in sorted task order so seeded results repeat."""
    keys = list(dict.fromkeys([*treatment, *control]))
    both = [t for t in keys if treatment.get(t) is not None and control.get(t) is not None]
    both.sort(key=str)
    paired = set(both)
    unpaired = sorted((t for t in keys if t not in paired), key=str)
    diffs = np.asarray([float(treatment[t]) - float(control[t]) for t in both], dtype=float)  # type: ignore[arg-type]
    if not np.all(np.isfinite(diffs)):
        raise ValueError("per-task values contain nan or inf; pass None for a missing task value instead")
    return PairedDifferences(task_ids=both, differences=diffs, unpaired=unpaired)


def compare_paired(treatment: Mapping[K, float | None], control: Mapping[K, float | None], *,
                   significance_test: bool = True,
                   n_resamples: int = DEFAULT_RESAMPLES,
                   confidence: float = DEFAULT_CONFIDENCE,
                   exact_max_n: int = DEFAULT_EXACT_MAX_N,
                   n_permutations: int = DEFAULT_PERMUTATIONS,
                   seed: int | None = DEFAULT_SEED) -> PairedComparison[K] | None:
    """Paired comparison of per-task values; ``None`` when no task has both values.

    Set ``significance_test=False`` for modes that show uncertainty but make no
    significance claim (the three-run commit comparison).
    """
    pairs = paired_differences(treatment, control)
    if pairs.differences.size == 0:
        return None
    ci = bootstrap_ci(pairs.differences, n_resamples=n_resamples, confidence=confidence, seed=seed)
    assert ci is not None
    test = None
    if significance_test:
        test = paired_permutation_test(pairs.differences, exact_max_n=exact_max_n,
                                       n_permutations=n_permutations, seed=ci.seed)
    return PairedComparison(n_tasks=int(pairs.differences.size), mean_difference=float(pairs.differences.mean()),
                            ci=ci, test=test, pairs=pairs)
