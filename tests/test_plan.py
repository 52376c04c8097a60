"""Blocked randomization."""

from __future__ import annotations

from collections import Counter

from evalq.study.order import plan_trials

FIXTURES = [f"task-{i}" for i in range(7)]
CONDITIONS = ["baseline", "candidate", "third"]


def test_same_seed_same_order():
    a = plan_trials("s", FIXTURES, CONDITIONS, 4, seed=123)
    b = plan_trials("s", list(FIXTURES), list(CONDITIONS), 4, seed=123)
    assert [t.trial_id for t in a] == [t.trial_id for t in b]


def test_different_seed_different_order():
    a = plan_trials("s", FIXTURES, CONDITIONS, 4, seed=1)
    b = plan_trials("s", FIXTURES, CONDITIONS, 4, seed=2)
    assert [t.trial_id for t in a] != [t.trial_id for t in b]
    assert sorted(t.trial_id for t in a) == sorted(t.trial_id for t in b)


def test_blocks_are_balanced_and_complete():
    trials = plan_trials("s", FIXTURES, CONDITIONS, 5, seed=99)
    assert len(trials) == len(FIXTURES) * len(CONDITIONS) * 5
    assert len({t.trial_id for t in trials}) == len(trials)
    cells = len(FIXTURES) * len(CONDITIONS)
    for block in range(5):
        chunk = trials[block * cells:(block + 1) * cells]
        assert {t.block for t in chunk} == {block}
        assert Counter((t.fixture_id, t.condition) for t in chunk) == Counter(
            {(f, c): 1 for f in FIXTURES for c in CONDITIONS})
        assert Counter(t.condition for t in chunk) == {c: len(FIXTURES) for c in CONDITIONS}
    assert [t.order_index for t in trials] == list(range(len(trials)))


def test_order_within_blocks_is_actually_shuffled():
    trials = plan_trials("s", FIXTURES, CONDITIONS, 3, seed=5)
    cells = len(FIXTURES) * len(CONDITIONS)
    blocks = [[(t.fixture_id, t.condition) for t in trials[b * cells:(b + 1) * cells]]
              for b in range(3)]
    natural = [(f, c) for f in FIXTURES for c in CONDITIONS]
    assert all(block != natural for block in blocks)
    assert len({tuple(block) for block in blocks}) == 3, "two blocks share one order"


def test_order_is_the_documented_sort_on_sha256_hex():
    """The order is part of a frozen study (a resumed study must find the same trials in the
    same places): it is the sort of each block's cells on sha256(seed, block, fixture,
    condition) as hex text, computed here without evalq's code."""
    import hashlib

    trials = plan_trials("s", FIXTURES, CONDITIONS, 3, seed=41)
    expected = []
    for block in range(3):
        cells = sorted(((f, c) for f in FIXTURES for c in CONDITIONS), key=lambda cell: hashlib.sha256(
            f"41\0{block}\0{cell[0]}\0{cell[1]}".encode()).hexdigest())
        expected += [f"s/{f}/{c}/r{block + 1}" for f, c in cells]
    assert [t.trial_id for t in trials] == expected
    assert trials[5].repetition == 1 and trials[-1].block == 2
