"""The same fixture graded in both backends gives the same outcome and the same failed checks."""

from __future__ import annotations

import pytest

from conftest import FIXTURES
from evalq.fixtures.fixture import load_fixture
from evalq.graders.grade import grade_workspace, prepare_reference
from evalq.graders.sandbox import get_sandbox
from evalq.fixtures.suite import find_fixtures


@pytest.mark.parametrize("path", find_fixtures(FIXTURES), ids=lambda p: p.name)
def test_bwrap_and_docker_agree(tmp_path, path):
    docker = get_sandbox("docker")
    ok, why = docker.available()
    if not ok:
        pytest.fail(f"docker sandbox not available: {why}", pytrace=False)
    fixture = load_fixture(path)
    for solution in (None, "correct", "incorrect"):
        workspace = prepare_reference(fixture, solution, tmp_path / f"ws-{solution}")
        by_backend = {}
        for backend in ("bwrap", docker):
            graded = grade_workspace(fixture, workspace, sandbox=backend)
            failed = sorted(c.name for c in graded.criteria if c.passed is False)
            by_backend[graded.sandbox] = (graded.outcome.value, failed)
        assert by_backend["bwrap"] == by_backend["docker"], (solution, by_backend)
