"""A wrong answer shaped against pytest's assertion explanation is `incorrect`, explained short.

When a hidden check's `==` fails, pytest explains it in the judge's process from the subject's
answer: it NFD-normalises strings (quadratic in a run of combining marks), line-diffs them with
ndiff, pretty-prints and diffs containers (at -v). Each answer below costs that explanation
tens of seconds or the judge's whole memory; the judge (evalq/graders/judge/bounds.py) explains
such comparisons in a few lines of its own, so each grading ends `incorrect`, the failed check
says where the answer differs, and the judge finished well inside its time limit. Every answer
stays under the judge's caps on one answer (16 MB, 200,000 values), near them for the last ones.
"""

from __future__ import annotations

import pytest
from hostile_backend import backend, traversable_tempdir  # noqa: F401 (the fixture)

from evalq.models import Outcome
from test_judge_split import JUDGED
from test_subject_cannot_fail_the_grader import RAW_CHANNEL, fast, graded

TIMEOUT = 20  # the judge's time limit in these fixtures (its deadline for answers is 14 s)
#: the hidden checks: each compares one answer with its expected value by `==`
CHECKS = JUDGED + '''

def test_name():
    assert load_subject("app").name() == "forty-two"


def test_table():
    assert load_subject("app").table() == {f"key-{i:06d}": i for i in range(60_000)}


def test_items():
    assert load_subject("app").items() == [f"item-{i}" for i in range(190_000)]
'''
#: agent code answering one check with a hostile value (and answer() wrongly with 41)
ATTACKS = {
    # 240 KB: two base letters, each with a run of 60,000 combining marks of two classes
    "combining marks": ("test_name", "def name():\n"
                        "    return ''.join(c + '\\u0301\\u0316' * 30_000 for c in 'ab')\n"),
    # 2.2 million short lines, 11 MB (13 MB as JSON)
    "millions of lines": ("test_name", "def name():\n    return 'abcd\\n' * 2_200_000\n"),
    # 60,000 keys, each one space longer than expected: 180,000 values on the wire
    "near-equal dict": ("test_table", "def table():\n"
                        "    return {f'key-{i:06d} ': i for i in range(60_000)}\n"),
    # 190,000 items, each one space longer than expected
    "near-equal list": ("test_items", "def items():\n"
                        "    return [f'item-{i} ' for i in range(190_000)]\n"),
}
#: what each explanation must say: where the answer differs
SAYS = {"combining marks": "first difference at index 0",
        "millions of lines": "first difference at index 0",
        "near-equal dict": "60000 keys only on the left",
        "near-equal list": "first difference at index 0"}


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    """The same checks run by pytest as the fixtures usually do, and at -v, where pytest also
    pretty-prints and line-diffs whole containers (the judge's boot passes -q before the
    fixture's arguments, so the fixture says -vv)."""
    root = tmp_path_factory.mktemp("explained-in-bounds")
    quiet = fast(root / "quiet", CHECKS, timeout=TIMEOUT)
    verbose = root / "verbose"
    fast(verbose, CHECKS, timeout=TIMEOUT)
    spec = verbose / "fixture.toml"
    spec.write_text(spec.read_text().replace('["pytest", "hidden_tests"]',
                                             '["pytest", "-vv", "hidden_tests"]'))
    from evalq.fixtures.fixture import freeze_fixture, load_fixture

    freeze_fixture(verbose)
    return {"quiet": quiet, "verbose": load_fixture(verbose)}


@pytest.fixture(autouse=True)
def grading_tmp(tmp_path, monkeypatch):  # tmp_path first: its base dir is made before the patch
    with traversable_tempdir("evalq-bounds-", monkeypatch) as folder:
        yield folder


@pytest.mark.parametrize("mode", ["quiet", "verbose"])
@pytest.mark.parametrize("attack", list(ATTACKS))
def test_hostile_answer_is_incorrect_with_a_short_explanation(fixtures, backend, tmp_path,
                                                              attack, mode):
    check, code = ATTACKS[attack]
    result = graded(fixtures[mode], backend, tmp_path,
                    {"app.py": "def answer():\n    return 41\n\n" + code})
    assert result.outcome == Outcome.incorrect and result.tampered is False, result
    failed = {c.name.rsplit(".", 1)[-1].split("::")[-1]: c for c in result.criteria}
    assert failed[check].passed is False, result.criteria
    # the evidence is the failure text's first 600 characters: where the answer differs is there
    evidence = failed[check].evidence
    assert "the judge explains it in short" in evidence and SAYS[attack] in evidence, evidence
    assert "deadline" not in evidence and "did not answer" not in evidence, evidence
    # every check ran to its own verdict, the judge ended inside its time limit, and its whole
    # output stayed under its cap (nothing was cut from it)
    assert all(c.passed is not None for c in result.criteria), result.criteria
    assert result.duration_seconds is not None and result.duration_seconds < TIMEOUT, result
    assert "[judge output:" not in result.output_tail, result.output_tail


def test_answer_of_colliding_hashes_is_refused_in_bounds(fixtures, backend, tmp_path):
    """Ints hash by value: 30,000 distinct multiples of 2**61 - 1 all hash to 0, and a dict of
    them takes the judge quadratic time to build (about 10 s). The judge refuses such an
    answer as not data before building anything of it: the check fails, the grade is
    `incorrect`, in seconds."""
    # building such a dict is as slow in the subject: it writes the answer's JSON itself, for
    # each request id the call may have
    code = RAW_CHANNEL + """
def table():
    pairs = ",".join(f"[{k * (2**61 - 1)},{k}]" for k in range(30_000))
    out = channel()
    for n in range(1, 40):
        out.write(b'{"id": %d, "ok": {"$d": [%s]}}\\n' % (n, pairs.encode()))
        out.flush()
    return {}
"""
    result = graded(fixtures["quiet"], backend, tmp_path,
                    {"app.py": "def answer():\n    return 41\n\n" + code})
    assert result.outcome == Outcome.incorrect and result.tampered is False, result
    table = next(c for c in result.criteria if c.name.endswith("test_table"))
    assert table.passed is False and "share one hash" in table.evidence, table
    assert result.duration_seconds is not None and result.duration_seconds < TIMEOUT, result
