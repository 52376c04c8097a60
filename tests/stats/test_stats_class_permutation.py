"""The sign-flip test over many tasks in few classes of |difference| draws, per class, how many
tasks keep their sign: checked against the same draws summed in plain loops, and against the
test that flips each task's sign (another draw of the same distribution)."""

from __future__ import annotations

import numpy as np
import pytest

from evalq.stats import paired_permutation_test


def _loop_p(d: list[float], n_permutations: int, seed: int) -> float:
    observed = sum(d)
    threshold = abs(observed) - 1e-9 * max(1.0, sum(abs(v) for v in d))
    magnitudes = sorted({abs(v) for v in d if v != 0})
    sizes = [sum(1 for v in d if v != 0 and abs(v) == m) for m in magnitudes]
    kept = np.random.default_rng(seed).binomial(sizes, 0.5, size=(n_permutations, len(sizes)))
    hits = 0
    for row in kept.tolist():
        total = sum(m * (2 * b - s) for m, b, s in zip(magnitudes, row, sizes))
        hits += abs(total) >= threshold
    return (hits + 1) / (n_permutations + 1)


@pytest.mark.parametrize("seed, shift", [(1, 0.0), (2, 0.05), (3, 0.2)])
def test_class_draws_equal_a_plain_loop(seed, shift):
    rng = np.random.default_rng(seed)
    d = (rng.integers(0, 4, 400) - rng.integers(0, 4, 400)) / 3 + shift
    got = paired_permutation_test(d, n_permutations=3000, seed=seed)
    assert got.method == "monte_carlo"
    assert got.p_value == pytest.approx(_loop_p(d.tolist(), 3000, seed), abs=1e-12)


def test_class_draws_agree_with_flipping_every_task():
    rng = np.random.default_rng(7)
    d = (rng.integers(0, 4, 600) - rng.integers(0, 4, 600)) / 3 + 0.03
    got = paired_permutation_test(d, n_permutations=20_000, seed=1).p_value
    signs = 1 - 2 * np.random.default_rng(2).integers(0, 2, size=(20_000, 600))
    threshold = abs(d.sum()) - 1e-9 * max(1.0, np.abs(d).sum())
    flipped = (np.count_nonzero(np.abs(signs @ d) >= threshold) + 1) / 20_001
    assert 0.01 < flipped < 0.99  # a p-value where the two can be told apart
    assert got == pytest.approx(flipped, abs=4 * np.sqrt(flipped * (1 - flipped) / 20_000))
