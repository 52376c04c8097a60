"""The shipped suite's self-check in the docker sandbox, with each toolchain's grader image.

Against the real engine and the local images: when either is missing the test fails (never
skips) and says how to get them, like tests/sandbox_docker.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from conftest import FIXTURES
from evalq.cli.fixtures_cmd import fixtures
from evalq.fixtures.fixture import load_fixture
from evalq.graders.sandbox.docker import DockerSandbox
from evalq.fixtures.suite import find_fixtures

HOW = "bash scripts/ensure-docker.sh && bash scripts/build-grader-images.sh"


def require_images(images: set[str]) -> None:
    ok, why = DockerSandbox.available()
    if not ok:
        pytest.fail(f"docker sandbox not usable: {why}; {HOW}", pytrace=False)
    import docker

    client = docker.from_env()
    try:
        missing = []
        for image in sorted(images):
            try:
                client.images.get(image)
            except docker.errors.ImageNotFound:
                missing.append(image)
    finally:
        client.close()
    if missing:
        pytest.fail(f"grader image(s) missing: {', '.join(missing)}; build them with: {HOW}",
                    pytrace=False)


def test_shipped_suite_self_check_in_docker():
    paths = find_fixtures(FIXTURES)
    require_images({load_fixture(p).spec.image for p in paths})
    result = CliRunner().invoke(fixtures, ["check", str(FIXTURES), "--json",
                                           "--sandbox", "docker"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert len(rows) == len(paths)
    for row in rows:
        assert (row["initial"], row["correct"], row["incorrect"], row["ok"]) == \
            ("incorrect", "correct", "incorrect", True), row
