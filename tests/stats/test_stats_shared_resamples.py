"""Reusing resample indices within a report changes no interval: the kept draws are the very
numbers a fresh generator draws, in chunks or all at once (checked here against a draw made
directly with numpy)."""

from __future__ import annotations

import numpy as np
import pytest

from evalq.analysis.condition_metrics import pooled_ratio_ci
from evalq.stats.bootstrap import bootstrap_ci, bootstrap_ci_columns, resample_chunks, shared_resamples


def test_chunks_are_one_direct_draw_split_up():
    n, resamples = 3000, 1500  # several chunks
    direct = np.random.default_rng(7).integers(0, n, size=(resamples, n))
    with shared_resamples():
        first = np.concatenate(list(resample_chunks(7, n, resamples)))
        again = np.concatenate(list(resample_chunks(7, n, resamples)))  # the kept copy
    assert first.shape[0] > np.concatenate(list(resample_chunks(7, n, 1))).shape[0]
    assert np.array_equal(first, direct) and np.array_equal(again, direct)


def test_intervals_inside_and_outside_the_shared_scope_are_equal():
    rng = np.random.default_rng(1)
    values = list(rng.random(2500))
    columns = [list(rng.integers(0, 3, 2500) / 2) for _ in range(3)]
    correct, valid = rng.integers(0, 5, 2500).astype(float), np.full(2500, 5.0)
    plain = (bootstrap_ci(values, n_resamples=3000, seed=4),
             bootstrap_ci_columns(columns, n_resamples=3000, seed=4),
             pooled_ratio_ci(correct, valid, n_resamples=3000, seed=4))
    with shared_resamples():
        shared = [(bootstrap_ci(values, n_resamples=3000, seed=4),
                   bootstrap_ci_columns(columns, n_resamples=3000, seed=4),
                   pooled_ratio_ci(correct, valid, n_resamples=3000, seed=4))
                  for _ in range(2)]
    assert shared[0] == plain and shared[1] == plain
    # pooled, by hand: five classes of (correct, valid), so each resample is five class counts
    sizes = [int(np.sum(correct == c)) for c in range(5)]
    counts = np.random.default_rng(4).multinomial(2500, np.asarray(sizes) / 2500, size=3000)
    ratios = [sum(int(m) * c for c, m in enumerate(row)) / (5 * 2500) for row in counts]
    assert plain[2] == pytest.approx(tuple(np.quantile(ratios, [0.025, 0.975])), abs=1e-12)
