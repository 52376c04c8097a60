"""The docker sandbox against the real engine and the real local grader image.

Nothing here is a double: every test starts a container of evalq-grader-python:local. When the
engine or the image is missing the tests fail (never skip) and say how to get them.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from pathlib import Path

import pytest

from evalq.errors import SandboxError
from evalq.graders.sandbox.base import SandboxLimits
from evalq.graders.sandbox.docker import (
    LABEL_CREATED,
    LABEL_LABEL,
    LABEL_SANDBOX,
    DockerSandbox,
)

IMAGE = "evalq-grader-python:local"
HOW = "bash scripts/ensure-docker.sh && bash scripts/build-grader-images.sh"
#: Seconds a killed run may take beyond its limit (kill, wait, remove).
MARGIN = 15.0  # a loaded machine stops a container slowly; a limit not enforced overruns it by far more

_engine_problem: list[str] = []


def _check_engine() -> str:
    """'' when the engine answers and the image exists, else what is wrong (checked once)."""
    if not _engine_problem:
        ok, why = DockerSandbox.available()
        if not ok:
            _engine_problem.append(why.split("; how to start it")[0])
        else:
            import docker

            client = docker.from_env()
            try:
                client.images.get(IMAGE)
                _engine_problem.append("")
            except docker.errors.ImageNotFound:
                _engine_problem.append(f"image {IMAGE} is missing")
            finally:
                client.close()
    return _engine_problem[0]


def require_engine() -> None:
    problem = _check_engine()
    if problem:
        pytest.fail(f"docker sandbox not usable: {problem}; start the engine and build the "
                    f"images with: {HOW}", pytrace=False)


@pytest.fixture
def label() -> str:
    """A label of this test's own, and afterwards: no container of it is left."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    yield name
    if _check_engine():
        return  # the test itself already failed and said why
    import docker

    client = docker.from_env()
    try:
        left = client.containers.list(
            all=True, filters={"label": [f"{LABEL_SANDBOX}=1", f"{LABEL_LABEL}={name}"]},
            ignore_removed=True)
        for c in left:
            c.remove(force=True)
    finally:
        client.close()
    assert not left, f"containers left behind: {[c.short_id for c in left]}"


@pytest.fixture
def dirs(tmp_path) -> tuple[Path, Path]:
    ws, rep = tmp_path / "workspace", tmp_path / "report"
    ws.mkdir()
    rep.mkdir()
    return ws, rep


@pytest.fixture
def run(dirs, label):
    """run(argv, **limits, env=...) -> ExecResult, plus the wall time seen by the test."""
    sandbox = DockerSandbox(default_image=IMAGE)

    def _run(argv, env=None, **limits):
        require_engine()
        ws, rep = dirs
        start = time.monotonic()
        result = sandbox.run(argv, workspace=ws, report_dir=rep,
                             limits=SandboxLimits(**limits), env=env or {}, label=label)
        result.wall = time.monotonic() - start  # type: ignore[attr-defined]
        return result

    return _run


def sh(script: str) -> list[str]:
    return ["sh", "-c", script]


def py(code: str) -> list[str]:
    return ["python3", "-c", code]


# ---- ordinary runs ------------------------------------------------------------------------------

def test_passing_command_and_writable_dirs(run, dirs):
    ws, rep = dirs
    (ws / "given.txt").write_text("from the host\n")
    r = run(sh("cat given.txt; echo out-ok; echo err-ok >&2; pwd; "
               "echo w > /workspace/made.txt; echo r > /report/report.txt"))
    assert r.exit_code == 0, r
    assert r.stdout == "from the host\nout-ok\n/workspace\n"
    assert r.stderr == "err-ok\n"
    assert not r.timed_out and r.limit_hit is None
    assert (ws / "made.txt").read_text() == "w\n"
    assert (rep / "report.txt").read_text() == "r\n"


def test_failing_command_keeps_exit_code(run):
    r = run(sh("echo no >&2; exit 3"))
    assert r.exit_code == 3
    assert r.stderr == "no\n"
    assert not r.timed_out and r.limit_hit is None


def test_pytest_runs_in_the_image(run, dirs):
    ws, rep = dirs
    (ws / "test_x.py").write_text("def test_ok():\n    assert 1\n\ndef test_bad():\n    assert 0\n")
    r = run(["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider",
             "--junitxml=/report/junit.xml"])
    assert r.exit_code == 1, r
    assert "1 failed, 1 passed" in r.stdout
    assert (rep / "junit.xml").exists()


# ---- isolation ----------------------------------------------------------------------------------

def test_no_network_and_host_loopback_service_sees_nothing(run):
    # A service on the host's loopback; the sandbox tries it. Nothing leaves this machine.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        port = server.getsockname()[1]
        r = run(py(
            "import socket, os\n"
            f"s = socket.socket(); s.settimeout(3)\n"
            f"rc = s.connect_ex(('127.0.0.1', {port}))\n"
            "print('connect', rc)\n"
            "print('ifaces', sorted(os.listdir('/sys/class/net')))\n"
            "raise SystemExit(0 if rc else 9)\n"))
        server.setblocking(False)
        with pytest.raises(BlockingIOError):
            server.accept()  # a connection that got through would be queued here
    assert r.exit_code == 0, r
    assert "connect 0" not in r.stdout
    assert "ifaces ['lo']" in r.stdout


def test_environment_is_not_inherited(run, monkeypatch):
    monkeypatch.setenv("EVALQ_TEST_CANARY_SECRET", "leak-me")
    r = run(sh("env"), env={"GIVEN": "yes"})
    assert r.exit_code == 0
    assert "GIVEN=yes" in r.stdout
    assert "EVALQ_TEST_CANARY_SECRET" not in r.stdout and "leak-me" not in r.stdout
    assert os.environ.get("HOME", "\0") not in r.stdout.splitlines()


def test_read_only_root_and_unprivileged_user(run):
    r = run(sh("id -u; id -g; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status; "
               "if echo x > /etc/evalq-probe; then echo WROTE-ETC; fi; "
               "if touch /usr/evalq-probe; then echo WROTE-USR; fi; "
               "echo t > /tmp/ok && cat /tmp/ok"))
    lines = r.stdout.split()
    assert lines[:2] == ["65534", "65534"], r
    assert "WROTE-ETC" not in r.stdout and "WROTE-USR" not in r.stdout
    assert "Read-only file system" in r.stderr
    assert "0000000000000000" in r.stdout  # CapEff: no capability at all
    assert "NoNewPrivs:\t1" in r.stdout
    assert r.stdout.rstrip().endswith("t")


# ---- limits -------------------------------------------------------------------------------------

def test_memory_hog_is_stopped(run):
    r = run(py("x = bytearray(1024 * 1024 * 1024); print('survived')"), memory_mb=128)
    assert "survived" not in r.stdout
    assert r.limit_hit == "memory" or (r.exit_code not in (0, None)), r


def test_fork_bomb_is_bounded_by_pids(run):
    bomb = ("import os\n"
            "while True:\n"
            "    try:\n"
            "        os.fork()\n"
            "    except OSError:\n"
            "        pass\n")
    r = run(py(bomb), pids=32, timeout_seconds=5)
    assert r.wall < 5 + MARGIN, r
    assert r.exit_code != 0
    assert r.limit_hit in ("pids", "time"), r
    assert r.timed_out


def test_sleep_is_killed_at_the_timeout(run):
    r = run(["sleep", "1000"], timeout_seconds=3)
    assert r.timed_out and r.limit_hit == "time", r
    assert r.exit_code is None
    assert 3 <= r.wall < 3 + MARGIN


def _host_processes_with(marker: str) -> list[str]:
    """Command lines of processes on the host (containers' included) that contain `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue  # exited while we looked
            if marker in cmdline:
                found.append(cmdline)
    return found


def test_process_ignoring_sigterm_and_detached_child_are_killed(run):
    # a unique duration marks the children, so the host's process table can be searched for them
    marker = f"1000.{uuid.uuid4().int % 10**9:09d}"
    r = run(sh(f"trap '' TERM; (trap '' TERM; sleep {marker}) & "
               f"setsid sh -c 'trap \"\" TERM; sleep {marker}' & sleep {marker}"),
            timeout_seconds=2)
    assert r.timed_out and r.wall < 2 + MARGIN, r
    assert _host_processes_with(f"sleep {marker}") == [], "a child outlived its container"


def test_output_is_capped(run):
    r = run(sh("head -c 100000000 /dev/zero | tr '\\0' y"), output_limit_bytes=1_000_000)
    assert r.limit_hit == "output", r
    assert len(r.stdout) + len(r.stderr) <= 1_000_000
    assert r.wall < 30


def test_large_file_write_is_bounded(run, dirs):
    ws, _ = dirs
    r = run(sh("head -c 100000000 /dev/zero > /workspace/big; echo rc=$?"), disk_mb=16)
    assert (ws / "big").stat().st_size <= 16 * 1024 * 1024
    assert "rc=0" not in r.stdout


# ---- errors, availability and the sweep -----------------------------------------------------------

def test_missing_image_raises_sandbox_error(dirs, label):
    require_engine()
    ws, rep = dirs
    with pytest.raises(SandboxError, match="not found.*build-grader-images"):
        DockerSandbox().run(["true"], workspace=ws, report_dir=rep, limits=SandboxLimits(),
                            env={}, image="evalq-no-such-image:never", label=label)


def test_unreachable_engine_is_reported(monkeypatch, dirs):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/evalq-docker.sock")
    ok, why = DockerSandbox.available()
    assert not ok and "scripts/ensure-docker.sh" in why
    ws, rep = dirs
    with pytest.raises(SandboxError, match="ensure-docker.sh"):
        DockerSandbox().run(["true"], workspace=ws, report_dir=rep, limits=SandboxLimits(),
                            env={})


def test_sweep_removes_only_old_containers(label):
    require_engine()
    import docker

    client = docker.from_env()
    labels = {LABEL_SANDBOX: "1", LABEL_LABEL: label}
    old = client.containers.create(IMAGE, ["true"], network_mode="none",
                                   labels={**labels, LABEL_CREATED: str(int(time.time()) - 3600)})
    new = client.containers.create(IMAGE, ["true"], network_mode="none",
                                   labels={**labels, LABEL_CREATED: str(int(time.time()))})
    try:
        removed = DockerSandbox().sweep(max_age_seconds=600)
        assert removed >= 1
        ids = {c.id for c in client.containers.list(
            all=True, filters={"label": f"{LABEL_LABEL}={label}"}, ignore_removed=True)}
        assert old.id not in ids and new.id in ids
    finally:
        new.remove(force=True)
        client.close()
