"""Ways out of an agent sandbox that are not files or TCP on 127.0.0.1 (those are in
test_hostile_agent.py): an abstract unix socket of the host's network namespace, IPv6 and UDP
loopback listeners on the host, the Docker engine's socket, the host's root through
/proc/PID/root and /proc/PID/cwd of every process the agent can see, and file descriptors the
agent was handed. Each is checked from outside (what the listeners accepted, what the agent
printed); the `none` backend is the control, where every one of them works.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from pathlib import Path

import pytest

from evalq.workers.profile import new_profile
from evalq.workers.sandbox import AgentJob
from no_sys_admin import NO_SYS_ADMIN, run_job
from probe_limits import PROBE_LIMITS

AGENT = r'''
import json, os, socket, sys
targets = json.loads(sys.argv[1])
said = {}
def attempt(name, family, kind, address, payload=b"evalq"):
    try:
        s = socket.socket(family, kind)
        s.settimeout(3)
        if kind == socket.SOCK_DGRAM:
            s.sendto(payload, address)
        else:
            s.connect(address)
            s.sendall(payload)
        said[name] = "GOT"
    except OSError as exc:
        said[name] = f"blocked: {exc}"
attempt("abstract", socket.AF_UNIX, socket.SOCK_STREAM, "\0" + targets["abstract"])
attempt("ipv6", socket.AF_INET6, socket.SOCK_STREAM, ("::1", targets["ipv6"]))
attempt("udp", socket.AF_INET, socket.SOCK_DGRAM, ("127.0.0.1", targets["udp"]))
said["docker_socket"] = [p for p in ("/var/run/docker.sock", "/run/docker.sock",
                                     "/run/containerd/containerd.sock") if os.path.exists(p)]
found = []
for pid in [p for p in os.listdir("/proc") if p.isdigit()] + ["self"]:
    for link in ("root", "cwd"):
        try:
            with open(f"/proc/{pid}/{link}{targets['canary_file']}") as handle:
                found.append(f"/proc/{pid}/{link}: {handle.read()}")
        except OSError:
            pass
said["proc_root"] = found
said["fds"] = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
etc = ""
for name in ("resolv.conf", "hosts", "hostname", "passwd", "group"):
    try:
        with open("/etc/" + name) as handle:
            etc += handle.read()
    except OSError:
        pass
said["etc"] = etc
print(json.dumps(said))
'''


class Listeners:
    """An abstract unix socket, a TCP listener on ::1 and a UDP socket on 127.0.0.1. Nothing
    is accepted while the agent runs: what reached each is what waits in its queue after."""

    def __init__(self, token: str):
        self.abstract_name = f"evalq-test-{token}"
        self.abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.abstract.bind("\0" + self.abstract_name)
        self.abstract.listen(8)
        self.ipv6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        self.ipv6.bind(("::1", 0))
        self.ipv6.listen(8)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))

    def targets(self, canary_file: Path) -> dict:
        return {"abstract": self.abstract_name, "ipv6": self.ipv6.getsockname()[1],
                "udp": self.udp.getsockname()[1], "canary_file": str(canary_file)}

    def close(self) -> dict:
        """How many connections or datagrams reached each; then close them."""
        hits = {}
        for name, sock in (("abstract", self.abstract), ("ipv6", self.ipv6), ("udp", self.udp)):
            sock.setblocking(False)
            hits[name] = 0
            while True:
                try:
                    if sock.type == socket.SOCK_DGRAM:
                        sock.recv(100)
                    else:
                        sock.accept()[0].close()
                except BlockingIOError:
                    break
                hits[name] += 1
            sock.close()
        return hits


@pytest.mark.parametrize("backend", ["bwrap", NO_SYS_ADMIN, "docker", "none"])
def test_no_way_out_but_the_door(tmp_path, backend):
    token = uuid.uuid4().hex[:12]
    canary = tmp_path / "host-only" / "canary.txt"
    canary.parent.mkdir()
    canary.write_text(f"evalq-canary-proc-root-{token}")
    listeners = Listeners(token)
    profile = new_profile(tmp_path / "runs")
    profile.workspace.mkdir()
    try:
        done = run_job(backend, AgentJob(
            argv=["/usr/bin/python3", "-c", AGENT, json.dumps(listeners.targets(canary))],
            env=profile.env, workspace=profile.workspace, profile_root=profile.root,
            limits=PROBE_LIMITS, label="ways-out"), tmp_path)
    finally:
        hits = listeners.close()
        profile.cleanup()
    assert done.exit_code == 0, done.stderr.decode()
    said = json.loads(done.stdout.decode().strip().splitlines()[-1])
    if backend == "none":  # the control: unsealed, every way works
        assert hits == {"abstract": 1, "ipv6": 1, "udp": 1}, (hits, said)
        assert any(canary.read_text() in f for f in said["proc_root"]), said
        return
    assert hits == {"abstract": 0, "ipv6": 0, "udp": 0}, (hits, said)
    # (a datagram "sent" inside goes to the sandbox's own loopback: only `hits` tells)
    assert all(said[k].startswith("blocked") for k in ("abstract", "ipv6")), said
    assert said["docker_socket"] == [] and said["proc_root"] == [], said
    assert said["fds"] == [0, 1, 2, 3], said  # stdio, and the listing of /proc/self/fd itself
    # the host's name servers, search domains, users and host names are not the agent's
    host_lines = [l.strip() for name in ("resolv.conf", "hosts", "passwd")
                  for l in Path("/etc", name).read_text().splitlines()
                  if l.strip() and not l.startswith("#") and "localhost" not in l
                  and not l.startswith(("root:", "nobody:"))]
    assert host_lines and not [l for l in host_lines if l in said["etc"]], said["etc"]


READ_PREFIX = r'''
import json, os, sys
prefix = sys.argv[1]
said = {}
for name in ("bin/agent-tool", ".npmrc"):
    try:
        with open(os.path.join(prefix, name)) as handle:
            said[name] = handle.read()
    except OSError as exc:
        said[name] = f"blocked: {exc}"
with open("made-by-agent", "w") as handle:
    handle.write("x")
print(json.dumps(said))
'''


@pytest.mark.parametrize("backend", ["bwrap", NO_SYS_ADMIN, "docker", "none"])
def test_root_only_files_in_what_the_agent_is_shown_stay_unreadable(tmp_path, backend):
    """The agent sees its install folders read-only; a root-only file there (an npm prefix's
    .npmrc with a registry token, a venv's pip.conf with index credentials) is the host's, not
    the agent's: the agent is the host's uid 65534 in both backends, never root (also when
    bwrap itself runs as uid 65534, the worker being root without CAP_SYS_ADMIN)."""
    token = f"npm-canary-token-{uuid.uuid4().hex[:12]}"
    prefix = tmp_path / "agent-install"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "agent-tool").write_text("tool")
    (prefix / ".npmrc").write_text(f"//registry.example/:_authToken={token}\n")
    os.chmod(prefix / ".npmrc", 0o600)
    profile = new_profile(tmp_path / "runs")
    profile.workspace.mkdir()
    try:
        done = run_job(backend, AgentJob(
            argv=["/usr/bin/python3", "-c", READ_PREFIX, str(prefix)], env=profile.env,
            workspace=profile.workspace, profile_root=profile.root, limits=PROBE_LIMITS,
            readonly=[prefix], label="prefix"), tmp_path)
        assert done.exit_code == 0, done.stderr.decode()
        said = json.loads(done.stdout.decode().strip().splitlines()[-1])
        made = (profile.workspace / "made-by-agent").stat().st_uid
    finally:
        profile.cleanup()
    assert said["bin/agent-tool"] == "tool", said  # the folder is really shown
    if backend == "none":  # the control: unsealed, the agent is the worker (root)
        assert token in said[".npmrc"] and made == 0
        return
    assert said[".npmrc"].startswith("blocked"), said
    assert made == 65534  # on the host too, what it writes is uid 65534's, not root's


SCRATCH = r'''
import json, multiprocessing, os
said = {}
for path in ("/tmp", "/dev/shm"):
    stats = os.statvfs(path)
    with open(os.path.join(path, "x"), "w") as handle:
        handle.write("x")
    said[path] = stats.f_blocks * stats.f_frsize
multiprocessing.Lock()  # a POSIX semaphore: a file in /dev/shm
print(json.dumps(said))
'''


def _python_said(backend: str, tmp_path: Path, code: str) -> dict:
    """What Python `code` run as an agent in a fresh profile printed last, as JSON."""
    profile = new_profile(tmp_path / "runs")
    profile.workspace.mkdir()
    try:
        done = run_job(backend, AgentJob(
            argv=["/usr/bin/python3", "-c", code], env=profile.env,
            workspace=profile.workspace, profile_root=profile.root, limits=PROBE_LIMITS,
            label="probe"), tmp_path)
    finally:
        profile.cleanup()
    assert done.exit_code == 0, done.stderr.decode()
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


@pytest.mark.parametrize("backend", ["bwrap", NO_SYS_ADMIN, "docker"])
def test_scratch_folders_are_the_agents_and_bounded(tmp_path, backend):
    """/tmp and /dev/shm are writable by the agent (uid 65534: a POSIX semaphore works) and
    no larger than its disk allowance, not half the host's memory."""
    said = _python_said(backend, tmp_path, SCRATCH)
    assert all(size <= 64 * 1024 * 1024 for size in said.values()), said


IDENTITY = r'''
import ctypes, json, os
said = {"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups()}
with open("/proc/self/status") as handle:
    for line in handle:
        key, _, value = line.partition(":")
        if key in ("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"):
            said[key] = value.strip()
said["ns"] = {n: os.readlink(f"/proc/self/ns/{n}")
              for n in ("pid", "net", "ipc", "uts", "cgroup", "mnt")}
libc = ctypes.CDLL(None, use_errno=True)
said["unshare"] = libc.unshare(0x10000000) == 0  # CLONE_NEWUSER
print(json.dumps(said))
'''


@pytest.mark.parametrize("backend", ["bwrap", NO_SYS_ADMIN, "docker"])
def test_the_agent_holds_nothing_and_shares_no_namespace(tmp_path, backend):
    """uid and gid 65534 with no other group, no capability (none left to gain either),
    no_new_privs, a seccomp filter that refuses a new namespace, and none of the worker's pid,
    network, ipc, uts and mount namespaces (nor, in bwrap, its cgroup namespace)."""
    said = _python_said(backend, tmp_path, IDENTITY)
    none = "0000000000000000"
    assert said["uid"] == said["gid"] == 65534 and set(said["groups"]) <= {65534}, said
    assert {k: said[k] for k in ("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb")} == \
        dict.fromkeys(("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb"), none), said
    assert said["NoNewPrivs"] == "1" and said["Seccomp"] == "2" and not said["unshare"], said
    shared = {n for n, link in said["ns"].items() if os.readlink(f"/proc/self/ns/{n}") == link}
    assert shared <= ({"cgroup"} if backend == "docker" else set()), said["ns"]
