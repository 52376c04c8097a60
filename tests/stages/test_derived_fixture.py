"""A task derived from a run's final workspace: its references reproduce the baseline task's,
whatever the baseline agent left, so the graders' self-check of it judges what it judges
for the baseline task; and its workspace is the agent's, judged as it stands."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from conftest import copy_fixture
from evalq.errors import UserError
from evalq.fixtures.archive import pack_workspace
from evalq.fixtures.derived import build_derived_fixture
from evalq.fixtures.fixture import DERIVED_FROM, check_contract, load_fixture
from evalq.fixtures.overlay import DELETE_LIST, apply_overlay
from evalq.fixtures.selfcheck import check_fixture
from evalq.graders.grade import grade_workspace


def _derived(tmp_path, edit):
    base = load_fixture(copy_fixture("py-slugify-bugfix", tmp_path / "fixtures"))
    left = tmp_path / "left"  # what a baseline agent left: the fix, and then some
    shutil.copytree(base.workspace_dir, left)
    apply_overlay(base.solution_dir("correct"), left)
    edit(left)
    derived = build_derived_fixture(base, pack_workspace(left), tmp_path / "derived",
                                    new_id="py-slugify-bugfix.good.r1",
                                    updates={"track": "upgrade"}, change=b"true\n",
                                    origin={"baseline_trial": "s/py-slugify-bugfix/good/r1"})
    return base, derived


def _break_excerpt_and_pad(left):
    (left / "textutil" / "excerpt.py").write_text("raise ImportError('the agent broke this')\n")
    (left / "textutil" / "helper_extra.py").write_text("HELPER = 1\n")
    os.mkdir(left / "many")
    for i in range(80):  # more than an authored fixture may hold
        (left / "many" / f"f{i}.txt").write_text(f"{i}\n")


def test_references_reproduce_the_baseline_tasks(tmp_path):
    base, derived = _derived(tmp_path, _break_excerpt_and_pad)
    assert json.loads((derived.path / DERIVED_FROM).read_text())["baseline_trial"] == \
        "s/py-slugify-bugfix/good/r1"
    deleted = (derived.solution_dir("correct") / DELETE_LIST).read_text().splitlines()
    assert "textutil/helper_extra.py" in deleted and "many/f0.txt" in deleted
    assert "textutil/slug.py" not in deleted
    check = check_fixture(derived, sandbox="bwrap", references=("correct", "incorrect"))
    assert check.ok, check.failures
    assert check.verdicts == {"correct": "correct", "incorrect": "incorrect"}
    # the task's own starting state is the agent's: its broken module fails the hidden checks
    start = tmp_path / "start"
    shutil.copytree(derived.workspace_dir, start)
    assert grade_workspace(derived, start, sandbox="bwrap").outcome.value == "incorrect"


def test_only_the_derived_parts_are_exempt_from_the_fixture_limits(tmp_path):
    _, derived = _derived(tmp_path, _break_excerpt_and_pad)
    check_contract(derived.path)  # 80 files in the workspace: the archive's limits applied
    for i in range(70):
        (derived.path / "hidden" / f"pad{i}.txt").write_text("x\n")
    with pytest.raises(UserError, match="over the limit of 64"):  # the authored parts keep it
        check_contract(derived.path)


def test_a_derived_spec_reads_back_as_written(tmp_path):
    """fixture.toml of a derived task is written by evalq: every shipped fixture's spec, with
    named criteria and a prompt that needs escapes, reads back equal."""
    import sys
    import tomllib
    from pathlib import Path

    from conftest import FIXTURES
    from evalq.fixtures.derived import spec_toml
    from evalq.fixtures.fixture import read_spec
    from evalq.models import FixtureSpec

    sys.path.insert(0, str(Path(__file__).parents[1] / "criteria"))
    from criteria_study import CRITERIA

    specs = [read_spec(p.parent) for p in sorted(FIXTURES.glob("*/fixture.toml"))]
    assert len(specs) >= 5
    for spec in specs:
        for extra in ({}, {"criteria": tomllib.loads(CRITERIA)["criteria"],
                           "prompt": 'say "hi"\n\tthen \\ é'}):
            written = FixtureSpec.model_validate(dict(spec.model_dump(mode="json"), **extra))
            text = spec_toml(written.model_dump(mode="json"))
            assert FixtureSpec.model_validate(tomllib.loads(text)) == written
