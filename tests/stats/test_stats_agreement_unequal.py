"""Fleiss' kappa with unequal ratings per item, and Krippendorff's alpha, against independent
computations: a brute-force enumeration of rating pairs, and the `krippendorff` package."""

from __future__ import annotations

from itertools import permutations

import krippendorff
import numpy as np
import pytest

from evalq.stats import category_counts, fleiss_kappa, krippendorff_alpha_nominal


def _brute_fleiss(items):
    """Per item: share of agreeing ordered pairs of distinct ratings; chance from pooled shares."""
    used = [[x for x in labels if x is not None] for labels in items]
    used = [labels for labels in used if len(labels) >= 2]
    per_item = []
    for labels in used:
        pairs = list(permutations(range(len(labels)), 2))
        per_item.append(sum(labels[i] == labels[j] for i, j in pairs) / len(pairs))
    pooled = [x for labels in used for x in labels]
    expected = sum((pooled.count(c) / len(pooled)) ** 2 for c in set(pooled))
    return (np.mean(per_item) - expected) / (1 - expected)


def _random_items(rng, n_items, raters, categories, missing):
    """A raters x items matrix (nan = missing) and the same as per-item label lists."""
    data = rng.integers(0, categories, size=(raters, n_items)).astype(float)
    truth = rng.integers(0, categories, size=n_items)
    agree = rng.random((raters, n_items)) < 0.6
    data[agree] = np.broadcast_to(truth, data.shape)[agree]
    data[rng.random((raters, n_items)) < missing] = np.nan
    items = [[None if np.isnan(v) else int(v) for v in data[:, j]] for j in range(n_items)]
    return data, items


@pytest.mark.parametrize("seed", range(6))
def test_fleiss_unequal_ratings_matches_pair_enumeration(seed):
    rng = np.random.default_rng(seed)
    _, items = _random_items(rng, 40, 5, 2 + seed % 3, missing=0.35)
    counts, _ = category_counts(items)
    assert fleiss_kappa(counts) == pytest.approx(_brute_fleiss(items), abs=1e-12)


def test_fleiss_unequal_reduces_to_fixed_n_when_every_item_has_n():
    rng = np.random.default_rng(9)
    _, items = _random_items(rng, 30, 4, 3, missing=0.0)
    counts, _ = category_counts(items)
    assert fleiss_kappa(counts) == pytest.approx(fleiss_kappa(counts, raters_per_item=4))


def test_three_ratings_on_a_two_rating_study_no_longer_raise():
    counts = [[2, 0], [1, 1], [3, 0], [0, 3], [1, 2]]
    items = [[0, 0], [0, 1], [0, 0, 0], [1, 1, 1], [0, 1, 1]]
    assert fleiss_kappa(counts) == pytest.approx(_brute_fleiss(items))


@pytest.mark.parametrize("seed", range(6))
def test_krippendorff_alpha_matches_the_krippendorff_package(seed):
    rng = np.random.default_rng(100 + seed)
    data, items = _random_items(rng, 50, 2 + seed, 2 + seed % 2, missing=0.3)
    counts, _ = category_counts(items)
    expected = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    assert krippendorff_alpha_nominal(counts) == pytest.approx(expected, abs=1e-12)


def test_krippendorff_alpha_undefined_or_empty_is_none():
    assert krippendorff_alpha_nominal([[3, 0], [2, 0]]) is None  # one category
    assert krippendorff_alpha_nominal([[1, 0], [0, 1]]) is None  # no item with two ratings
    assert krippendorff_alpha_nominal(np.zeros((0, 2))) is None
