"""Both backends grade in one toolchain: the same rootfs digest, the same versions,
and so the same outcome and the same failed checks for every fixture."""

from __future__ import annotations

import pytest

from conftest import FIXTURES
from evalq.fixtures.fixture import load_fixture
from evalq.graders.grade import grade_workspace, prepare_reference
from evalq.graders.sandbox import SandboxLimits, get_sandbox
from evalq.graders.sandbox.scratch import grading_folder
from evalq.graders.sandbox.toolchain import rootfs_dir
from evalq.fixtures.suite import find_fixtures

VERSIONS = "node --version 2>&1; python3 --version; python3 -m pytest --version 2>&1; " \
           "gcc --version 2>&1 | head -n1; make --version 2>&1 | head -n1"


def _docker():
    docker = get_sandbox("docker")
    ok, why = docker.available()
    if not ok:
        pytest.fail(f"docker sandbox not available: {why}", pytrace=False)
    return docker


@pytest.mark.parametrize("path", find_fixtures(FIXTURES), ids=lambda p: p.name)
def test_bwrap_and_docker_agree(tmp_path, path):
    docker = _docker()
    fixture = load_fixture(path)
    name = fixture.spec.image.split(":")[0].removeprefix("evalq-grader-")
    digest = (rootfs_dir() / f"{name}.digest").read_text().strip()
    for solution in (None, "correct", "incorrect"):
        workspace = prepare_reference(fixture, solution, tmp_path / f"ws-{solution}")
        by_backend = {}
        for backend in ("bwrap", docker):
            graded = grade_workspace(fixture, workspace, sandbox=backend)
            failed = sorted(c.name for c in graded.criteria if c.passed is False)
            by_backend[graded.sandbox] = (graded.outcome.value, failed, graded.toolchain)
        assert by_backend["bwrap"] == by_backend["docker"], (solution, by_backend)
        assert by_backend["bwrap"][2] == {"image": fixture.spec.image, "toolchain": name,
                                          "rootfs_digest": digest}


def _shell(backend, script: str, image: str | None = None):
    """`sh -c script` graded-style in `backend`: an empty workspace and report folder, 30 s."""
    with grading_folder() as tmp:
        ws, rep = tmp / "ws", tmp / "rep"
        ws.mkdir()
        rep.mkdir()
        return backend.run(["sh", "-c", script], workspace=ws, report_dir=rep,
                           limits=SandboxLimits(timeout_seconds=30),
                           env={"PATH": "/usr/bin:/bin"}, image=image)


@pytest.mark.parametrize("image", ["evalq-grader-python:local", "evalq-grader-node:local",
                                   "evalq-grader-make:local"])
def test_same_versions_in_both_backends(image):
    """Not the host's /usr in bwrap: the tools the grader sees are the image's, byte for byte."""
    seen = {}
    for backend in (get_sandbox("bwrap"), _docker()):
        result = _shell(backend, VERSIONS, image=image)
        assert result.exit_code == 0, result
        seen[backend.name] = (result.stdout, result.toolchain.digest)
    assert seen["bwrap"] == seen["docker"]
    assert "Python 3" in seen["bwrap"][0] and "pytest" in seen["bwrap"][0]
    if "node" in image:
        assert seen["bwrap"][0].startswith("v18.")  # the image's Node, not the host's (v20)


def test_missing_rootfs_is_a_grading_failure_naming_the_build(tmp_path, monkeypatch):
    """No silent fallback to the host's toolchain: the grade says how to build the rootfs."""
    monkeypatch.setenv("EVALQ_GRADER_CACHE", str(tmp_path / "empty-cache"))
    fixture = load_fixture(FIXTURES / "node-csv-quotes-bugfix")
    workspace = prepare_reference(fixture, "correct", tmp_path / "ws")
    graded = grade_workspace(fixture, workspace, sandbox="bwrap")
    assert graded.outcome.value == "grading_failure"
    assert "not built" in graded.reason and "build-grader-images.sh node" in graded.reason
    assert "make docker" in graded.reason


#: what graded code can tell about its sandbox that could make it behave differently
SCRATCH_SPACE = ("for d in /tmp /dev/shm; do dd if=/dev/zero of=$d/big bs=1M count=100 "
                 "2>/dev/null && echo $d:100MB || echo $d:full; rm -f $d/big; done")


def test_same_scratch_space_in_both_backends():
    """/tmp (a tmpfs of the disk allowance) and /dev/shm (64 MB) are the same size in both:
    bwrap's /tmp was 64 MB and its /dev/shm unbounded, so code needing 100 MB of either got
    one verdict in one backend and the other in the other."""
    seen = {}
    for backend in (get_sandbox("bwrap"), _docker()):
        seen[backend.name] = _shell(backend, SCRATCH_SPACE).stdout.split()
    assert seen["bwrap"] == seen["docker"] == ["/tmp:100MB", "/dev/shm:full"], seen
