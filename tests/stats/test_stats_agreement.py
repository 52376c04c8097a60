"""Agreement statistics checked against published worked examples and independent closed forms."""

import numpy as np
import pytest

from evalq.stats import (
    category_counts,
    cohen_kappa,
    fleiss_kappa,
    low_reliability,
    positive_rate,
    raw_agreement,
)

# Fleiss (1971) as worked in Wikipedia's "Fleiss' kappa" article: 10 subjects, 14 raters, 5 categories.
FLEISS_TABLE = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]


def two_by_two(a, b, c, d):
    """Label lists for a 2x2 table: a = both yes, b = A yes/B no, c = A no/B yes, d = both no."""
    rater_a = [True] * a + [True] * b + [False] * c + [False] * d
    rater_b = [True] * a + [False] * b + [True] * c + [False] * d
    return rater_a, rater_b


def kappa_2x2(a, b, c, d):
    """Closed form for binary Cohen's kappa: 2(ad - bc) / ((a+b)(b+d) + (a+c)(c+d))."""
    return 2 * (a * d - b * c) / ((a + b) * (b + d) + (a + c) * (c + d))


def test_fleiss_wikipedia_example():
    assert fleiss_kappa(FLEISS_TABLE) == pytest.approx(0.210, abs=5e-4)


def test_fleiss_wikipedia_intermediate_values():
    # p_j and P-bar printed in the worked example
    m = np.array(FLEISS_TABLE, dtype=float)
    assert (m.sum(axis=0) / 140).round(3).tolist() == [0.143, 0.200, 0.279, 0.150, 0.229]
    p_i = ((m ** 2).sum(axis=1) - 14) / (14 * 13)
    assert p_i.mean() == pytest.approx(0.378, abs=5e-4)
    assert np.sum((m.sum(axis=0) / 140) ** 2) == pytest.approx(0.213, abs=5e-4)
    assert p_i.round(3).tolist() == [1.0, 0.253, 0.308, 0.440, 0.330, 0.462, 0.242, 0.176, 0.286, 0.286]


def test_fleiss_with_two_raters_equals_scotts_pi():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 3, size=80)
    b = np.where(rng.random(80) < 0.7, a, rng.integers(0, 3, size=80))
    counts, _ = category_counts([[x, y] for x, y in zip(a, b)], categories=[0, 1, 2])
    # Scott's pi: expected agreement from the pooled label shares of both raters
    observed = np.mean(a == b)
    pooled = np.bincount(np.concatenate([a, b]), minlength=3) / 160
    pi = (observed - np.sum(pooled ** 2)) / (1 - np.sum(pooled ** 2))
    assert fleiss_kappa(counts) == pytest.approx(pi, abs=1e-12)


def test_fleiss_drops_items_with_fewer_ratings():
    short_row = [[0, 0, 1, 0, 0]]
    assert fleiss_kappa(FLEISS_TABLE + short_row) == pytest.approx(fleiss_kappa(FLEISS_TABLE))
    with pytest.raises(ValueError, match="raters_per_item"):
        fleiss_kappa(FLEISS_TABLE, raters_per_item=13)


def test_fleiss_undefined_or_empty_gives_none():
    assert fleiss_kappa([[3, 0], [3, 0]]) is None  # one category only: chance agreement 1
    assert fleiss_kappa(np.zeros((0, 2))) is None
    assert fleiss_kappa([[1, 0], [0, 1]]) is None  # one rating per item
    with pytest.raises(ValueError):
        fleiss_kappa([[1, -1]])


def test_cohen_wikipedia_example():
    a, b = two_by_two(20, 5, 10, 15)
    assert len(a) == 50
    assert cohen_kappa(a, b) == pytest.approx(0.4, abs=1e-12)


@pytest.mark.parametrize("table,published", [((45, 15, 25, 15), 0.1304), ((25, 35, 5, 35), 0.2593)])
def test_cohen_wikipedia_same_agreement_different_kappa(table, published):
    a, b = two_by_two(*table)
    assert cohen_kappa(a, b) == pytest.approx(published, abs=5e-5)


@pytest.mark.parametrize("seed", range(10))
def test_cohen_matches_closed_form(seed):
    rng = np.random.default_rng(seed)
    table = tuple(int(x) for x in rng.integers(0, 30, size=4))
    if (table[0] + table[1]) * (table[1] + table[3]) + (table[0] + table[2]) * (table[2] + table[3]) == 0:
        pytest.skip("degenerate table")
    a, b = two_by_two(*table)
    assert cohen_kappa(a, b) == pytest.approx(kappa_2x2(*table), abs=1e-12)


def test_cohen_categorical_against_confusion_matrix():
    a = ["x", "y", "z", "x", "x", "y", "z", "z", "y", "x"]
    b = ["x", "y", "y", "x", "z", "y", "z", "x", "y", "x"]
    cats = ["x", "y", "z"]
    conf = np.array([[sum(p == r and q == s for p, q in zip(a, b)) for s in cats] for r in cats], dtype=float)
    n = conf.sum()
    po = np.trace(conf) / n
    pe = float(conf.sum(axis=1) @ conf.sum(axis=0)) / n ** 2
    assert cohen_kappa(a, b) == pytest.approx((po - pe) / (1 - pe), abs=1e-12)


def test_cohen_missing_and_undefined():
    a, b = two_by_two(20, 5, 10, 15)
    assert cohen_kappa(a + [None, True], b + [False, None]) == pytest.approx(0.4)
    assert cohen_kappa([True, True], [True, True]) is None
    assert cohen_kappa([], []) is None
    assert cohen_kappa([None], [True]) is None
    with pytest.raises(ValueError, match="length"):
        cohen_kappa([True], [True, False])


def test_cohen_perfect_and_opposite():
    assert cohen_kappa([True, False, True, False], [True, False, True, False]) == pytest.approx(1.0)
    assert cohen_kappa([True, False, True, False], [False, True, False, True]) == pytest.approx(-1.0)


def test_raw_agreement():
    ratings = [[True, True], [True, False], [False, False, False], [False, None], [True, True, False]]
    # the 4th item has a single rating and is dropped: 2 of 4 agree
    assert raw_agreement(ratings) == pytest.approx(0.5)
    assert raw_agreement([[None, True]]) is None
    a, b = two_by_two(20, 5, 10, 15)
    assert raw_agreement(list(zip(a, b))) == pytest.approx(0.7)


def test_positive_rate():
    assert positive_rate([True, False, None, True]) == pytest.approx(2 / 3)
    assert positive_rate([None]) is None


def test_category_counts_builds_fleiss_input():
    counts, cats = category_counts([["a", "b", "a"], ["b", None, "b"]])
    assert cats == ["a", "b"]
    assert counts.tolist() == [[2, 1], [0, 2]]
    with pytest.raises(ValueError, match="not among"):
        category_counts([["c"]], categories=["a", "b"])


def test_low_reliability_flag():
    flagged, reasons = low_reliability({"passed": 0.72, "regression": 0.55, "rework_required": None})
    assert flagged is True
    assert any("regression" in r and "0.550" in r for r in reasons)
    assert any(r.startswith("note:") and "rework_required" in r for r in reasons)
    assert low_reliability({"passed": 0.6, "regression": None})[0] is False
