"""The door as an agent finds it, in both sandboxes: its listener is out of reach, the channel
that carried it is gone, and the sandbox's guarantees hold without a process of evalq's in it.

The agent (a real sandbox, bwrap and docker, the real gateway) looks for any socket it holds or
could open to the worker, tries to take over or share 127.0.0.1:DOOR_PORT, then calls its door,
which still answers. Exit status, the stdin file, pid 1's environment and the end of every
leftover process are checked as they were with the relay launcher.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from evalq.errors import InfrastructureError
from evalq.modelserver import ModelServer
from evalq.modelserver.script import parse_script
from evalq.workers.gateway import Gateway, Upstream
from evalq.workers.profile import new_profile
from evalq.workers.sandbox import DOOR_PORT, AgentJob, get_agent_sandbox
from evalq.workers.sandbox.bwrap import BwrapAgentSandbox
from probe_limits import PROBE_LIMITS

#: bwrap as root opens the door from outside (netns_door.py); "bwrap-prelude" is the same
#: sandbox with the door opened from inside by the prelude, as without CAP_SYS_ADMIN
BACKENDS = ["bwrap", "bwrap-prelude", "docker"]


@pytest.fixture(autouse=True)
def _prelude_in_bwrap(request, monkeypatch):
    backend = request.node.callspec.params.get("backend") if hasattr(request.node, "callspec") \
        else None
    if backend == "bwrap-prelude":
        monkeypatch.setattr(BwrapAgentSandbox, "door_from_outside", lambda self: False)


def _box(backend: str):
    return get_agent_sandbox("bwrap" if backend == "bwrap-prelude" else backend)

AGENT = r"""
import http.client, json, os, socket, sys
port = int(sys.argv[1])
said = {}
def links(pid):
    found = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            found.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass  # (listdir's own descriptor, closed by now)
    return found
# every descriptor it holds: none may be a socket (neither the listener nor the channel)
said["sockets"] = [link for link in links("self") if link.startswith("socket:")]
# the channel's path (Docker's): refused; under bwrap there is none
try:
    chan = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    chan.connect("/run/evalq/door.sock")
    said["channel"] = "connected"
except OSError as exc:
    said["channel"] = type(exc).__name__
# pid 1's descriptors (the sandbox's init)
try:
    said["pid1_fds"] = links(1)
except OSError as exc:
    said["pid1_fds"] = type(exc).__name__
# take over or share the door's port
binds = {}
for host in ("127.0.0.1", "0.0.0.0"):
    for reuse in (False, True):
        s = socket.socket()
        if reuse:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            s.bind((host, port))
            s.listen(1)
            binds[f"{host}/{reuse}"] = "bound"
        except OSError as exc:
            binds[f"{host}/{reuse}"] = type(exc).__name__
said["binds"] = binds
said["stdin"] = sys.stdin.read()
try:  # bwrap's init, as root, is not the agent's to read; docker's init is the agent user
    said["pid1_environ"] = open("/proc/1/environ", "rb").read().decode(errors="replace")
except OSError as exc:
    said["pid1_environ"] = "unreadable: " + type(exc).__name__
c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
c.request("POST", "/v1/messages/count_tokens", body=b"{}",
          headers={"Content-Type": "application/json"})
said["door"] = c.getresponse().status
print("SAID" + json.dumps(said), flush=True)
"""


@pytest.fixture
def door():
    gateway = Gateway()
    script = parse_script({"fallback": {"text": "ok", "usage": {"input_tokens": 1,
                                                                "output_tokens": 1}}})
    with ModelServer(script) as server:
        yield gateway, gateway.open_run("inside", None, [Upstream(server.url)])
    gateway.close()


def _job(tmp_path: Path, argv: list[str], run, **extra) -> AgentJob:
    profile = new_profile(tmp_path / "runs")
    profile.workspace.mkdir()
    return AgentJob(argv=argv, env=profile.env, workspace=profile.workspace,
                    profile_root=profile.root, limits=PROBE_LIMITS, door=run, label="inside",
                    **extra)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_agent_can_neither_reach_nor_replace_the_doors_listener(tmp_path, backend, door,
                                                                     monkeypatch):
    gateway, run = door
    monkeypatch.setenv("EVALQ_DOOR_CANARY", "worker-env-canary-5150")
    done = _box(backend).run(_job(
        tmp_path, ["/usr/bin/python3", "-c", AGENT, str(DOOR_PORT)], run,
        stdin=b"the task on stdin"))
    assert done.exit_code == 0, done.stderr
    said = json.loads(done.stdout.decode().split("SAID", 1)[1])
    assert said["sockets"] == [], said
    assert said["channel"] in ("FileNotFoundError", "ConnectionRefusedError"), said
    if isinstance(said["pid1_fds"], list):  # readable (docker's init runs as the agent user)
        assert not any(link.startswith("socket:") for link in said["pid1_fds"]), said
    assert len(said["binds"]) == 4 and "bound" not in said["binds"].values(), said
    assert said["door"] == 200  # and the door still answers
    assert said["stdin"] == "the task on stdin"
    pid1 = said["pid1_environ"]
    assert pid1 == "unreadable: PermissionError" or "HOME=" in pid1, pid1
    assert "worker-env-canary" not in pid1 and "EVALQ_" not in pid1, pid1
    assert len(gateway.handed[run.run_id]) == 1  # one listener, the prelude's
    assert [r["path"] for r in run.records()] == ["/v1/messages/count_tokens"]
    run.close()
    assert run.run_id not in gateway.handed


EXITS = r"""
import os, signal, subprocess, sys
# a process that leaves the agent's session and outlives it, marked for the test to find
subprocess.Popen(["/bin/sh", "-c", "exec -a evalq-door-leftover-" + sys.argv[2] + " sleep 300"],
                 start_new_session=True)
if sys.argv[1] == "signal":
    os.kill(os.getpid(), signal.SIGKILL)
sys.exit(int(sys.argv[1]))
"""


def _leftovers(mark: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if mark.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("ending", ["7", "signal"])
def test_exit_status_is_the_agents_and_nothing_outlives_it(tmp_path, backend, ending, door):
    _, run = door
    mark = f"{backend}-{ending}-{os.getpid()}"
    started = time.monotonic()
    done = _box(backend).run(_job(
        tmp_path, ["/usr/bin/python3", "-c", EXITS, ending, mark], run))
    expected = 7 if ending == "7" else 128 + signal.SIGKILL
    assert done.exit_code == expected, (done.exit_code, done.stderr)
    assert time.monotonic() - started < 60  # not held open by the sleeper (300 s)
    deadline = time.monotonic() + 10
    while _leftovers(f"evalq-door-leftover-{mark}"):
        assert time.monotonic() < deadline, "a process outlived the agent"
        time.sleep(0.05)


@pytest.mark.parametrize("backend", ["bwrap-prelude", "docker"])
def test_a_refused_listener_fails_the_run_as_evalqs_before_the_agent_starts(tmp_path, backend,
                                                                          door, monkeypatch):
    """The worker waits for another port than the prelude listens on: the listener is refused,
    the prelude exits without starting the agent, and the run is an infrastructure failure."""
    _, run = door
    module = "docker" if backend == "docker" else "bwrap"
    monkeypatch.setattr(f"evalq.workers.sandbox.{module}.DOOR_PORT", DOOR_PORT + 1)
    job = _job(tmp_path, ["/bin/sh", "-c", "echo started > ran"], run)
    with pytest.raises(InfrastructureError) as failed:
        _box(backend).run(job)
    assert f"not 127.0.0.1:{DOOR_PORT + 1}" in str(failed.value), failed.value
    assert "the agent was not started" in str(failed.value)
    assert not (job.workspace / "ran").exists()


def test_a_door_the_worker_cannot_open_stops_bwrap_before_the_agent(tmp_path, door,
                                                                     monkeypatch):
    """From outside: if the worker cannot make the listener in the sandbox's namespace (here
    setns is refused), bubblewrap is stopped while it waits, the agent never runs, and the run
    is evalq's failure."""
    _, run = door

    def refused(pid, netns, port):
        raise PermissionError(1, "setns: Operation not permitted")

    monkeypatch.setattr("evalq.workers.sandbox.netns_door.listen_in", refused)
    job = _job(tmp_path, ["/bin/sh", "-c", "echo started > ran"], run)
    with pytest.raises(InfrastructureError) as failed:
        _box("bwrap").run(job)
    assert "could not listen in the sandbox" in str(failed.value), failed.value
    assert not (job.workspace / "ran").exists()
    assert run.run_id not in door[0].handed


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_door_opens_in_a_worker_holding_over_a_thousand_descriptors(tmp_path, backend,
                                                                        door):
    """A worker with hundreds of trials in flight holds thousands of descriptors: the door's
    own (pipes, channel, listener) are numbered past 1024, where select() cannot go."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2048:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(2048, hard), hard))
    held = [os.open("/dev/null", os.O_RDONLY) for _ in range(1100)]
    try:
        done = _box(backend).run(_job(tmp_path, ["/usr/bin/python3", "-c", (
            "import socket; socket.create_connection(('127.0.0.1', %d), timeout=20).close(); "
            "print('REACHED')" % DOOR_PORT)], door[1]))
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert done.exit_code == 0 and b"REACHED" in done.stdout, done.stderr
