"""Holm-Bonferroni checked by hand and against the closed-testing definition enumerated by brute force."""

import itertools

import numpy as np
import pytest

from evalq.stats import holm_adjust, holm_reject


def closed_testing_holm(p):
    """Holm = closed testing with Bonferroni local tests: adjusted p_i is the largest
    Bonferroni p of any intersection hypothesis containing i, max over S of min(1, |S| * min_{j in S} p_j)."""
    m = len(p)
    out = []
    for i in range(m):
        worst = 0.0
        others = [j for j in range(m) if j != i]
        for r in range(m):
            for rest in itertools.combinations(others, r):
                s = (i, *rest)
                worst = max(worst, min(1.0, len(s) * min(p[j] for j in s)))
        out.append(worst)
    return out


def test_hand_worked_example():
    # sorted: 0.005*4=0.02, 0.01*3=0.03, 0.03*2=0.06, 0.04*1=0.04 -> monotone 0.06
    assert holm_adjust([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_caps_at_one_and_keeps_order_monotone():
    adjusted = holm_adjust([0.4, 0.5, 0.02])
    assert adjusted == pytest.approx([0.8, 0.8, 0.06])
    assert holm_adjust([0.9, 0.8]) == pytest.approx([1.0, 1.0])


@pytest.mark.parametrize("seed", range(20))
def test_matches_closed_testing_brute_force(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 8))
    p = list(rng.uniform(0, 0.3, size=m) ** 2)
    if m > 2:
        p[1] = p[0]  # a tie
    assert holm_adjust(p) == pytest.approx(closed_testing_holm(p), abs=1e-12)


def test_none_passes_through_and_is_not_in_the_family():
    out = holm_adjust([0.01, None, 0.04])
    assert out[1] is None
    assert out[0] == pytest.approx(0.02) and out[2] == pytest.approx(0.04)
    assert holm_adjust([None, None]) == [None, None]
    assert holm_adjust([]) == []


def test_single_p_value_is_unchanged():
    assert holm_adjust([0.037]) == pytest.approx([0.037])


def test_reject_at_alpha():
    assert holm_reject([0.01, 0.04, 0.03, 0.005, None], alpha=0.05) == [True, False, False, True, None]


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), "0.1"])
def test_invalid_p_values_are_refused(bad):
    with pytest.raises(ValueError, match="probability"):
        holm_adjust([0.1, bad])
