"""Statistics at the analysis plan's size: 10,000 bootstrap resamples and 10,000 sign-flip
permutations over 1,000 tasks, through evalq.stats (the functions the report uses), each beside
scipy.stats doing the same job (percentile bootstrap; paired permutation test, random and exact
at 16 tasks), which is why evalq keeps its own: same numbers (tests/stats), less time.
"""

from __future__ import annotations

import time

import numpy as np
from scipy import stats as sps

from evalq.stats import (compare_paired, paired_bootstrap_ci, paired_permutation_test,
                         paired_permutation_test_between)

from .figures import Figure, ratio


def run(tasks: int, resamples: int, log) -> tuple[list[Figure], dict]:
    rng = np.random.default_rng(11)
    control = rng.binomial(3, 0.55, size=tasks) / 3
    treatment = np.clip(control + rng.normal(0.03, 0.2, size=tasks), 0, 1)
    timings: dict[str, float] = {}

    def timed(name, fn):
        started = time.perf_counter()
        value = fn()
        timings[name] = time.perf_counter() - started
        return value

    ci = timed("bootstrap", lambda: paired_bootstrap_ci(treatment, control,
                                                        n_resamples=resamples, seed=5))
    test = timed("permutation", lambda: paired_permutation_test_between(
        treatment, control, n_permutations=resamples, seed=5))
    ids = [f"t{i}" for i in range(tasks)]
    both = timed("compare_paired", lambda: compare_paired(
        dict(zip(ids, treatment.tolist())), dict(zip(ids, control.tolist())),
        n_resamples=resamples, n_permutations=resamples, seed=5))
    diffs = treatment - control
    mean = lambda v, axis: np.mean(v, axis=axis)  # noqa: E731
    timed("scipy_bootstrap", lambda: sps.bootstrap(
        (diffs,), np.mean, n_resamples=resamples, method="percentile", vectorized=True,
        rng=np.random.default_rng(5)))
    timed("scipy_permutation", lambda: sps.permutation_test(
        (diffs,), mean, permutation_type="samples", n_resamples=resamples, vectorized=True,
        rng=np.random.default_rng(5)))
    small = diffs[:16]
    timed("exact16", lambda: paired_permutation_test(small))
    timed("scipy_exact16", lambda: sps.permutation_test(
        (small,), mean, permutation_type="samples", n_resamples=np.inf, vectorized=True))
    log(f"stats over {tasks} tasks: bootstrap {timings['bootstrap']:.3f} s, "
        f"permutation {timings['permutation']:.3f} s")
    data = {"tasks": tasks, "resamples": resamples, "seconds": timings,
            "ci": [ci.low, ci.high], "p_value": test.p_value,
            "compare_paired_p": both.test.p_value if both.test else None}
    return [Figure(f"bootstrap CI, {resamples:,} resamples over {tasks:,} tasks",
                   timings["bootstrap"], "s"),
            Figure(f"permutation test, {resamples:,} permutations over {tasks:,} tasks",
                   timings["permutation"], "s"),
            Figure("paired comparison (both, as the report runs them)",
                   timings["compare_paired"], "s"),
            Figure("scipy.stats.bootstrap, same job", timings["scipy_bootstrap"], "s",
                   ratio=ratio(timings["scipy_bootstrap"], timings["bootstrap"]),
                   reference="evalq's bootstrap"),
            Figure("scipy.stats.permutation_test, same job", timings["scipy_permutation"], "s",
                   ratio=ratio(timings["scipy_permutation"], timings["permutation"]),
                   reference="evalq's permutation test"),
            Figure("scipy.stats.permutation_test exact, 16 tasks", timings["scipy_exact16"], "s",
                   ratio=ratio(timings["scipy_exact16"], timings["exact16"]),
                   reference="evalq's exact sign-flip test")], data
